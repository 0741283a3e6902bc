"""Turn a decision table into the tuning files that Open MPI, MPICH and Intel MPI read.

common.py translates a table into each library's choices; one module per format writes them;
formats.py names the formats and exports a table in one.
"""
