"""File formats users already have, read and written with clear errors: l2logger logs, CSV tables, npz arrays."""
