"""Winners inside unmodified programs.

file (the deploy file: a decision's schedules for liba2a), learn (a file of candidates that liba2a explores against
the library's own inside the program, c/learn.c, and keeps what it learned), library (liba2a.so built from
c/liba2a_*.c over the executor: a PMPI library that serves MPI_Alltoall(v) from the file and records what a program
exchanges), recorded (the reader of those recordings: the workloads `recorded:DIR` replays), store (a folder of
learning evidence many jobs share, A2A_LEARN_DIR: read, merged and compacted as c/liba2a_store.c does),
transpose_sort (the project's own program that lives on all-to-all, c/transpose_sort.c), verify (a file verified
with and without it on an IMB-style loop, c/verify_loop.c, or on the user's program).

Imports: a2a.execute, a2a.schedules, a2a.analysis (a decision is what it deploys), a2a.algos, a2a.record, the ground.
"""
