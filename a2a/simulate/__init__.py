"""Simulating on SimGrid: schedules captured from the real plans, platforms, traces and replays.

Walks the measure wing's grid through its session, never its MPI driver. Imports any wing but emulate.
"""
