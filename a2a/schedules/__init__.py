"""Schedules as exact data, and how they are obtained.

standin (the stand-in mpi4py.MPI) and bytemaps (which bytes a buffer spec covers) run an algorithm's own code on
stand-in ranks, greenlets of one world (world; mpi_module answers `from mpi4py import MPI` meanwhile); events (what
a captured call did); tracer (each block followed through the code into a program); program (the one file format,
its reader and writer).

Imports: a2a.algos (the interface), a2a.record and the ground; never what runs plans (a2a.execute) or above.
"""
