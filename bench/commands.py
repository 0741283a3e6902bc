"""Import every subcommand module so that each registers itself on `main`."""
from . import run  # noqa: F401
