"""Where a submission enters: its exercise files found in a folder or zip, and staged for the sandbox."""
