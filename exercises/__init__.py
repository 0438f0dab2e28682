"""The exercises you fill in: one module per step from attention to a full Transformer."""
