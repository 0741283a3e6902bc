"""Import every subcommand module so that each registers itself on `main`."""
from . import run, show  # noqa: F401
