"""Grading a whole class: a queue of submissions, warm slot processes that grade them, the class summary."""

from grader.batch.jobs import Entry, Isolation, Result, Status
from grader.batch.plan import Plan
from grader.batch.schedule import discover, run
from grader.batch.summary import ClassSummary, summarise, write_grades_csv

__all__ = ["ClassSummary", "Entry", "Isolation", "Plan", "Result", "Status", "discover", "run", "summarise",
           "write_grades_csv"]
