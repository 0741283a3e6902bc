"""Import every subcommand module so that each registers itself on `main`."""
from . import decide, harness, overhead, run, show  # noqa: F401
