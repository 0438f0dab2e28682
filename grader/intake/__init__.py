"""Where a submission enters: its exercise files found in a folder, a zip or notebooks, and staged for the sandbox."""
