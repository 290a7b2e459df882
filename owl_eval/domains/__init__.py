"""Domains: where samples come from. A domain knows nothing about agents or metrics."""
