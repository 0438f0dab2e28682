"""Grading a whole class: a queue of submissions, warm slot processes that grade them, the class summary."""

from grader.batch.jobs import Isolation, Status
from grader.batch.schedule import Entry, Result, discover, run
from grader.batch.summary import ClassSummary, summarise, write_grades_csv

__all__ = ["ClassSummary", "Entry", "Isolation", "Result", "Status", "discover", "run", "summarise",
           "write_grades_csv"]
