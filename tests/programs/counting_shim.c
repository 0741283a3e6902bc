/* Another PMPI tool, for tests of liba2a beside one: it counts MPI_Init(_thread), MPI_Alltoall, MPI_Alltoallv and
   MPI_Isend calls and at MPI_Finalize prints on stderr "shim: rank R: init I alltoall A alltoallv V isend S". It
   forwards as a classic PMPI tool does, to PMPI_X (A2A_TEST_SHIM_FORWARD unset or "pmpi"), or to the next
   definition of MPI_X in the preload order (A2A_TEST_SHIM_FORWARD=next: dlsym(RTLD_NEXT), as a tool built to stack
   does), PMPI_X where there is none. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long inits, alltoalls, alltoallvs, isends;

/* the next MPI_X after this tool where it forwards so (A2A_TEST_SHIM_FORWARD=next), else NULL: PMPI_X */
static void *next(const char *name) {
    const char *forward = getenv("A2A_TEST_SHIM_FORWARD");
    return forward && strcmp(forward, "next") == 0 ? dlsym(RTLD_NEXT, name) : NULL;
}

int MPI_Init(int *argc, char ***argv) {
    int (*init)(int *, char ***) = next("MPI_Init");
    __atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED);
    return init ? init(argc, argv) : PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int (*init)(int *, char ***, int, int *) = next("MPI_Init_thread");
    __atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED);
    return init ? init(argc, argv, required, provided) : PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm) {
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm) = next("MPI_Alltoall");
    __atomic_add_fetch(&alltoalls, 1, __ATOMIC_RELAXED);
    return alltoall ? alltoall(sb, sc, st, rb, rc, rt, comm) : PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm);
}

int MPI_Alltoallv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb, const int *rc,
                  const int *rd, MPI_Datatype rt, MPI_Comm comm) {
    int (*alltoallv)(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *,
                     MPI_Datatype, MPI_Comm) = next("MPI_Alltoallv");
    __atomic_add_fetch(&alltoallvs, 1, __ATOMIC_RELAXED);
    return alltoallv ? alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm)
                     : PMPI_Alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
    int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *) = next("MPI_Isend");
    __atomic_add_fetch(&isends, 1, __ATOMIC_RELAXED);
    return isend ? isend(buf, count, type, dest, tag, comm, request) : PMPI_Isend(buf, count, type, dest, tag, comm,
                                                                                 request);
}

int MPI_Finalize(void) {
    int (*finalize)(void) = next("MPI_Finalize"), rank;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) rank = -1;
    fprintf(stderr, "shim: rank %d: init %ld alltoall %ld alltoallv %ld isend %ld\n", rank, inits, alltoalls,
            alltoallvs, isends);
    return finalize ? finalize() : PMPI_Finalize();
}
