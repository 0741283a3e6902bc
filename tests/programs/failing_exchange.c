/* An all-to-all whose exchange fails (tests/programs/failing_isend.c makes an MPI_Isend fail under liba2a): with
   HANDLER "fatal" MPI_COMM_WORLD keeps MPI_ERRORS_ARE_FATAL, with "return" it (and MPI_COMM_SELF) get
   MPI_ERRORS_RETURN. It calls COLLECTIVE (alltoall, alltoallv or ialltoall) on MPI_COMM_WORLD with COUNT ints per
   peer (ialltoall: after one call that liba2a passes on); each rank prints "rank R: COLLECTIVE returned class C" (C: the error class; 0: MPI_SUCCESS), then makes the
   same call again, which no shim fails, and checks every element. Rank 0 prints "ok" where every rank got an error
   from the first call and every element of the second right; else what was wrong, and it exits 1.
   Usage: failing_exchange HANDLER COLLECTIVE COUNT */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int from, int to, int i) { return from * 1000003 + to * 1009 + i; }

/* one call of `collective` with `count` ints per peer (alltoallv: count + the peer's rank % 2); its result, and
   *wrong the elements received wrong */
static int exchange(const char *collective, int count, int *wrong) {
    int rank, size, result;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size), st = 0, rt = 0, v = strcmp(collective, "alltoallv") == 0;
    for (int j = 0; j < size; j++) {
        sc[j] = count + (v ? j % 2 : 0), rc[j] = count + (v ? rank % 2 : 0);
        sd[j] = st, rd[j] = rt, st += sc[j], rt += rc[j];
    }
    int *send = malloc(sizeof(int) * (st + 1)), *recv = calloc((size_t)rt + 1, sizeof(int));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < sc[j]; i++) send[sd[j] + i] = value(rank, j, i);
    if (v) {
        result = MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD);
    } else if (strcmp(collective, "ialltoall") == 0) {
        MPI_Request request;
        result = MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, &request);
        if (result == MPI_SUCCESS) result = MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
        result = MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD);
    }
    *wrong = 0;
    for (int j = 0; j < size; j++)
        for (int i = 0; i < rc[j]; i++) *wrong += recv[rd[j] + i] != value(j, rank, i);
    free(send), free(recv), free(sc), free(sd), free(rc), free(rd);
    return result;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, wrong, failed, class = MPI_SUCCESS, all[2], mine[2];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: failing_exchange fatal|return alltoall|alltoallv|ialltoall COUNT\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(argv[1], "return") == 0) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    }
    if (strcmp(argv[2], "ialltoall") == 0) /* liba2a passes a communicator's first on (its private copy is made) */
        exchange(argv[2], atoi(argv[3]), &wrong);
    int result = exchange(argv[2], atoi(argv[3]), &wrong);
    if (result != MPI_SUCCESS) MPI_Error_class(result, &class);
    printf("rank %d: %s returned class %d\n", rank, argv[2], class);
    fflush(stdout);
    failed = exchange(argv[2], atoi(argv[3]), &wrong) != MPI_SUCCESS;
    mine[0] = class == MPI_SUCCESS, mine[1] = wrong + failed;
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && (all[0] || all[1]))
        printf("WRONG: %d ranks got MPI_SUCCESS from the failed exchange; the next call: %d wrong or failed\n", all[0],
               all[1]);
    else if (rank == 0)
        printf("ok\n");
    MPI_Finalize();
    return all[0] || all[1];
}
