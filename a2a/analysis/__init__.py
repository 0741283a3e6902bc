"""Reading records: decisions, comparisons, the cost model and link contention, figures, exports.

Never touches MPI, the simulator or the cluster. Imports: algos, record and the ground.
"""
