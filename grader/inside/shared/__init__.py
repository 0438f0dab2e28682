"""What runs on both sides of the boundary: the protocol, process controls, probes, instruments, the capstones' tasks.

The trusted side imports these as ordinary libraries (to run the reference the way the worker runs the
submission); inside the sandbox they are part of the staged copy.
"""

TEST_MODULES = ("probes", "capstone", "induction")  # the modules a graded test may import by name on either side
