/* A PMPI shim for tests: preloaded (after liba2a, or alone), it makes the n-th MPI_Isend of the process fail with
   MPI_ERR_OTHER (A2A_TEST_FAIL_ISEND=n, counting from 1; unset: none fails) and passes every other one to the MPI
   library's PMPI_Isend. The executor's sends are MPI_Isend calls, so they meet it; MPI's own collectives do not. */
#include <mpi.h>
#include <stdlib.h>

static long isends; /* this process's MPI_Isend calls so far */

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
    const char *failing = getenv("A2A_TEST_FAIL_ISEND");
    if (failing && __atomic_add_fetch(&isends, 1, __ATOMIC_RELAXED) == atol(failing)) return MPI_ERR_OTHER;
    return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}
