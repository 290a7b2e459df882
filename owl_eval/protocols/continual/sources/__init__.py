"""sources of the continual protocol."""
