"""Measuring with MPI: the grid, the session that walks it, the driver, timing, clocks, caches, traffic.

The grid and the session serve the simulator too; the driver, timing, clock and cache are MPI's
alone. Imports: analysis, algos, record and the ground.
"""
