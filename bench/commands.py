"""Import every subcommand module so that each registers itself on `main`."""
from . import model, plot, run, show  # noqa: F401
