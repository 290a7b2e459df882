"""sources of the trajectory protocol."""
