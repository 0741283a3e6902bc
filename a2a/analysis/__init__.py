"""Reading records: decide (decision tables), compare and revert (a library before and after tuning), model and
model_report (the cost model), contention (link contention), study (the topology study's tables), plot (figures),
validate (a simulation against a measurement), export (Open MPI, MPICH and Intel MPI tuning files).

Never touches MPI, the simulator or the cluster. Imports: algos, record and the ground.
"""
