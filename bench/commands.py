"""Import every subcommand module so that each registers itself on `main`."""
from . import cluster, run, show  # noqa: F401
