"""Import every subcommand module so that each registers itself on `main`."""
from . import cluster, decide, overhead, run, show  # noqa: F401
