"""Grading one submission in the trusted process: which tests run, pytest over them, points, reports."""
