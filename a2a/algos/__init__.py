"""The algorithms: the registry and its plug-in loading, the buffer rules, and one file per algorithm.

builtin/NAME.py holds everything about the algorithm NAME: its schedule, options, cost terms,
contention rounds and twins in the MPI libraries. Imports: record and the ground.
"""
