"""Evaluation protocols: each drives agents over a domain and returns a Record of plain arrays."""
