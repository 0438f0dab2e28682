"""What a student uses between gradings: hints, remembered state, the watch loop, the worked example."""
