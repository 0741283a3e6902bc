"""Workflows: what chains wings or launches whole jobs (bench run's summary, tune, the harness and its overhead
race, the seed reproduction, the topology study, Slurm batch scripts). Each `bench` command calls one of these, or
one function of a wing. Imports: every wing."""
