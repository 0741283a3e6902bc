"""`python -m bench`: the command line of the a2a testbed."""
import os

# One BLAS thread per rank unless told otherwise: the ranks are the job's parallelism and nothing timed does linear
# algebra, so OpenBLAS's thread per core in every rank would only crowd the cores (and slow each rank's start).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
