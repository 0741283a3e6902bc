"""Import every subcommand module so that each registers itself on `main`."""
from . import model, overhead, plot, run, show  # noqa: F401
