"""Import every subcommand module so that each registers itself on `main`."""
from . import cluster, decide, harness, model, overhead, plot, run, show, simulate, slurm_cmd, topology, tune  # noqa: F401
