"""Hostile: a pytest plugin that marks every test as passed and deselects everything it can."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_collection_modifyitems(session, config, items):
    config.hook.pytest_deselected(items=list(items))
    items[:] = []
