"""Workflows: what chains wings or launches whole jobs: run (bench run's summary), tune (the library's own tables),
tune_deploy (a verified deploy file for liba2a) and what both tunes share (tuning), compare_launches (bench
compare's pairs of launches with and without a tuning), harness (against the C reference
of c/) and overhead (against the library's C twins), seed_repro (the seed's stalls), topology_study, slurm (batch
scripts from slurm/). Each `bench` command calls one of these, or one function of a wing. Imports: every wing."""
