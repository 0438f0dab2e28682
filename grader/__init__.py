"""The attention kit's autograder: student code runs in a sandboxed worker, never in the judging process.

From Python or a notebook: `grader.check("attention")`, or `%load_ext grader` then `%grader check attention`.
"""

__version__ = "0.1.0"

from grader.student.jupyter import CheckError, check, load_ipython_extension

__all__ = ["CheckError", "__version__", "check", "load_ipython_extension"]
