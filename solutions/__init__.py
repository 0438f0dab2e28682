"""Reference implementations of the exercises, for the grader and instructors; never shipped to students."""
