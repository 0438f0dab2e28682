"""The attention kit's autograder: student code runs in a sandboxed worker, never in the judging process."""

__version__ = "0.1.0"
