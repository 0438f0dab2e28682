"""Grading a whole class: a queue of submissions, warm slot processes that grade them, the class summary."""
