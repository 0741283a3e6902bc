"""Reading records: decide (decision tables), compare and revert (a library before and after tuning), model and
model_report (the cost model), contention (link contention), study (the topology study's tables), plot (figures),
validate (a simulation against a measurement), export (Open MPI, MPICH and Intel MPI tuning files), aa (the A/A
self-check: one schedule under several names must not be called different).

Never touches MPI, the simulator or the cluster. Imports: algos, record and the ground.
"""
