"""sources of the ond protocol."""
