"""Where the packaged configs live (``conf/`` beside the packages in a checkout or editable install)."""
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = PROJECT_ROOT / "conf"
