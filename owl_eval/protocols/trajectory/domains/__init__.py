"""domains of the trajectory protocol."""
