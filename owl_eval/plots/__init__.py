"""Figures: matplotlib with the Agg backend, one function per figure."""

import matplotlib

matplotlib.use("Agg")
