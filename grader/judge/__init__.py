"""What graded tests stand on, in the trusted process: the pytest plugin, the checks, the diagnosis of mistakes."""
