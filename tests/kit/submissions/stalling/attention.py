"""Stalling: every call sleeps 4 s, under the per-call limit, then returns nothing like attention's output.

Graded with a small `grader check --timeout`, it must use up that budget, not an hour of the grader's time.
"""

import time


def attention(query, key, value, dropout=None, mask=None):
    time.sleep(4)
    return query.new_zeros(1), query.new_zeros(1)
