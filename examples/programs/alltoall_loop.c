/* An IMB-style loop over MPI_Alltoall, for timing a library (or liba2a in front of it) from C.
 *
 *   mpiexec -n 4 ./alltoall_loop [calls] [rounds] SIZE...     (SIZE: bytes per peer)
 *
 * For each size: 10 calls of warm-up, then `rounds` rounds of `calls` back-to-back calls (default 200 x 15); a
 * round's time per call is the slowest rank's. Rank 0 prints one line per size: the bytes per peer, then the
 * median, minimum and maximum over rounds of the time per call, in microseconds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int calls = argc > 1 ? atoi(argv[1]) : 200, rounds = argc > 2 ? atoi(argv[2]) : 15;
    if (rank == 0) printf("# bytes_per_peer median_us min_us max_us (%d rounds of %d calls, %d ranks)\n", rounds, calls,
                          size);
    for (int k = 3; k < argc; k++) {
        long bytes = atol(argv[k]);
        char *send = calloc((size_t)(bytes * size) + 1, 1), *recv = calloc((size_t)(bytes * size) + 1, 1);
        double *per_call = malloc(sizeof(double) * (size_t)rounds);
        for (int i = 0; i < 10; i++) MPI_Alltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        for (int r = 0; r < rounds; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (int i = 0; i < calls; i++)
                MPI_Alltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
            double mine = (MPI_Wtime() - start) / calls * 1e6;
            MPI_Allreduce(&mine, &per_call[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        qsort(per_call, (size_t)rounds, sizeof(double), ascending);
        if (rank == 0) printf("%ld %.3f %.3f %.3f\n", bytes, per_call[rounds / 2], per_call[0], per_call[rounds - 1]);
        free(send), free(recv), free(per_call);
    }
    MPI_Finalize();
    return 0;
}
