"""sources of the lifelong_rl protocol."""
