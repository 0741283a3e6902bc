/* What an idle MPI_Test of an MPI_Ialltoall costs a C program: the library's own, or one liba2a serves.
 *
 *   mpiexec -n P ./ialltoall_test_cost [tests] [rounds] SIZE...     (SIZE: bytes per peer)
 *
 * For each size, `rounds` times (default 2000 tests x 15): rank 0 starts MPI_Ialltoall and times `tests` MPI_Test
 * calls in a row while every other rank waits in MPI_Recv (on a duplicate of MPI_COMM_WORLD) before it starts its own,
 * so nothing can arrive and each test finds nothing to do; then rank 0 lets them go and every rank waits. The first
 * round warms up (under liba2a, a communicator's first MPI_Ialltoall passes through). Rank 0 prints one line per size:
 * the bytes per peer, the median and the fastest round's microseconds per MPI_Test, and how many tests found the
 * exchange complete (0 when each was idle). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm side;
    MPI_Comm_dup(MPI_COMM_WORLD, &side);
    int tests = argc > 1 ? atoi(argv[1]) : 2000, rounds = argc > 2 ? atoi(argv[2]) : 15;
    if (rank == 0) printf("# bytes_per_peer median_us fastest_us complete_found (%d rounds of %d MPI_Test, %d ranks)\n",
                          rounds, tests, size);
    for (int k = 3; k < argc; k++) {
        long bytes = atol(argv[k]);
        char *send = calloc((size_t)(bytes * size) + 1, 1), *recv = calloc((size_t)(bytes * size) + 1, 1);
        double *per_test = malloc(sizeof(double) * (size_t)(rounds + 1));
        long found = 0;
        for (int r = 0; r <= rounds; r++) {
            MPI_Request request;
            int flag = 0;
            if (rank == 0) {
                MPI_Ialltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &request);
                double began = MPI_Wtime();
                for (int t = 0; t < tests && !flag; t++) MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
                per_test[r] = (MPI_Wtime() - began) / tests;
                found += r > 0 && flag;
                for (int peer = 1; peer < size; peer++) MPI_Send(&token, 1, MPI_INT, peer, 0, side);
            } else {
                MPI_Recv(&token, 1, MPI_INT, 0, 0, side, MPI_STATUS_IGNORE);
                MPI_Ialltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &request);
            }
            if (!flag) MPI_Wait(&request, MPI_STATUS_IGNORE);
        }
        qsort(per_test + 1, (size_t)rounds, sizeof(double), ascending);
        if (rank == 0) printf("%ld %.3f %.3f %ld\n", bytes, per_test[1 + rounds / 2] * 1e6, per_test[1] * 1e6, found);
        free(send), free(recv), free(per_test);
    }
    MPI_Comm_free(&side);
    MPI_Finalize();
    return 0;
}
