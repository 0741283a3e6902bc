"""Entry point: `python -m bench` (same as `python -m bench run`)."""
from .cli import entry

entry()
