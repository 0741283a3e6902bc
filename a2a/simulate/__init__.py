"""Simulating on SimGrid: schedules read or captured from the real plans, platforms, traces and replays.

It walks the sweep wing's grid through its session, as the MPI driver does, and never imports it. Imports: sweep,
analysis, algos, record and the ground.
"""
