"""Baseline agents, one subpackage per protocol. User agents live anywhere importable."""
