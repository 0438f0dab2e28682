"""The trusted side of the sandbox boundary: isolation tiers, starting, bounding, talking to and killing sandboxes."""
