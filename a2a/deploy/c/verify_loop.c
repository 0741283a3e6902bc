/* An IMB-style loop over MPI_Alltoall or MPI_Alltoallv (even blocks, bytes), to verify a deploy file on a machine:
 *
 *   mpiexec -n P ./verify_loop alltoall|alltoallv ROUNDS SIZE...        (SIZE: bytes per peer, 0 allowed)
 *
 * Per size: 5 calls of warm-up; then ROUNDS rounds of back-to-back calls, as many as take about a millisecond
 * (rank 0's estimate, the same on every rank); a round's time per call is the slowest rank's. Rank 0 prints one
 * line per size, `COLLECTIVE SIZE T1 ... TROUNDS` in microseconds per call. Every byte received is checked after
 * the rounds (each names its source, destination and place): a wrong one prints `WRONG ...` and exits 1. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5
#define ROUND_SECONDS 1e-3
#define MOST_CALLS 1000

static unsigned char expected(int source, int destination, long i) {
    return (unsigned char)(source * 31 + destination * 7 + i * 13);
}

static int exchange(int v, const unsigned char *send, unsigned char *recv, long bytes, const int *counts,
                    const int *displs) {
    if (v) return MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    return MPI_Alltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
}

/* the calls a round makes: about ROUND_SECONDS of them, by rank 0's timing of a few (every rank the same) */
static int calls_per_round(int v, const unsigned char *send, unsigned char *recv, long bytes, const int *counts,
                           const int *displs) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < 3; i++) exchange(v, send, recv, bytes, counts, displs);
    double each = (MPI_Wtime() - start) / 3;
    int calls = each > 0 ? (int)(ROUND_SECONDS / each) : MOST_CALLS;
    calls = calls < 1 ? 1 : calls > MOST_CALLS ? MOST_CALLS : calls;
    MPI_Bcast(&calls, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return calls;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, v = argc > 1 && strcmp(argv[1], "alltoallv") == 0, rounds = argc > 2 ? atoi(argv[2]) : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || rounds < 1 || (!v && strcmp(argv[1], "alltoall") != 0)) {
        if (rank == 0) fprintf(stderr, "usage: verify_loop alltoall|alltoallv ROUNDS SIZE...\n");
        MPI_Finalize();
        return 2;
    }
    for (int k = 3; k < argc; k++) {  /* every rank reads the same sizes, so every rank refuses alike */
        char *end;
        long bytes = strtol(argv[k], &end, 10);
        if (*end || end == argv[k] || bytes < 0 || bytes > INT_MAX / size) {
            if (rank == 0)
                fprintf(stderr, "verify_loop: size %s; accepted: bytes per peer from 0 to %d on %d ranks\n", argv[k],
                        INT_MAX / size, size);
            MPI_Finalize();
            return 2;
        }
    }
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size), wrong = 0;
    double *per_call = malloc(sizeof(double) * (size_t)rounds);
    for (int k = 3; k < argc && !wrong; k++) {
        long bytes = atol(argv[k]);
        unsigned char *send = malloc((size_t)(bytes * size) + 1), *recv = malloc((size_t)(bytes * size) + 1);
        if (!send || !recv) {
            fprintf(stderr, "verify_loop: rank %d: no memory for %ld B per peer\n", rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (int d = 0; d < size; d++) {
            counts[d] = (int)bytes, displs[d] = (int)(d * bytes);
            for (long i = 0; i < bytes; i++) send[d * bytes + i] = expected(rank, d, i);
        }
        for (int i = 0; i < WARMUP; i++) exchange(v, send, recv, bytes, counts, displs);
        int calls = calls_per_round(v, send, recv, bytes, counts, displs);
        for (int r = 0; r < rounds; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (int i = 0; i < calls; i++) exchange(v, send, recv, bytes, counts, displs);
            double mine = (MPI_Wtime() - start) / calls * 1e6;
            MPI_Allreduce(&mine, &per_call[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        memset(recv, 0xff, (size_t)(bytes * size) + 1);
        exchange(v, send, recv, bytes, counts, displs);
        for (int s = 0; s < size && !wrong; s++)
            for (long i = 0; i < bytes && !wrong; i++)
                if (recv[s * bytes + i] != expected(s, rank, i)) {
                    fprintf(stderr, "WRONG %s %ld B per peer: rank %d's byte %ld from rank %d\n", argv[1], bytes, rank,
                            i, s);
                    wrong = 1;
                }
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0 && !wrong) {
            printf("%s %ld", argv[1], bytes);
            for (int r = 0; r < rounds; r++) printf(" %.4f", per_call[r]);
            printf("\n");
        }
        free(send), free(recv);
    }
    free(counts), free(displs), free(per_call);
    MPI_Finalize();
    return wrong;
}
