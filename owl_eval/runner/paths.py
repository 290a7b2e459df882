"""Where the packaged configs live: ``owl_eval/conf/``, package data, so a wheel works outside the checkout."""
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CONFIG_DIR = PACKAGE_DIR / "conf"
