/* A program shaped like NPB 3.3 FT's all-to-all traffic: a few large MPI_Alltoall calls a run, every element checked.
   FT (NPB3.3-MPI/FT/ft.f) on a 1-D layout makes one transpose per 3-D FFT, `mpi_alltoall(xin, ntdivnp/np,
   dc_type, ...)` with ntdivnp = nx*ny*nz/np double complex, and 8 FFTs a run at class A (one at initialisation, one
   forward, niter = 6 inverse); class A's grid is 256x256x128, so on 2 ranks each call sends 32 MiB to each peer.

   Usage: ft_like [CALLS [BYTES]]   CALLS all-to-alls (default 8), BYTES per peer, a multiple of 16 with an optional
   K, M or G suffix (default: class A's at this process count, 128 MiB / p^2 rounded down to 16 B).
   Each call sends MPI_C_DOUBLE_COMPLEX elements that say their sender, receiver, call and index; between calls
   every element received is checked and the next call's are written (the work FT does between its transposes is
   FFTs; this is of the same order: every element touched). Prints on rank 0
   "ft_like: CALLS calls of BYTES B per peer on P ranks: time T s, alltoall A s, ok" (the slowest rank's wall time
   from after MPI_Init to before MPI_Finalize, and its time inside MPI_Alltoall), or what was wrong and exits 1. */
#include <complex.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_A_BYTES (256.0 * 256 * 128 * 16) /* FT class A's grid of double complex */

/* BYTES as a count, K/M/G accepted; -1 where it is not a positive multiple of 16 */
static long long bytes_of(const char *text) {
    char *end;
    long long value = strtoll(text, &end, 10), unit = 1;
    if (end == text) return -1;
    if (*end == 'K') unit = 1LL << 10, end++;
    else if (*end == 'M') unit = 1LL << 20, end++;
    else if (*end == 'G') unit = 1LL << 30, end++;
    if (*end || value <= 0 || value > (1LL << 40) / unit || value * unit % 16) return -1;
    return value * unit;
}

static double complex element(int from, int to, int call, MPI_Count i) {
    return (double)i + I * (double)(((long long)from * 65536 + to) * 1024 + call % 1024);
}

static void fill(double complex *send, MPI_Count count, int rank, int size, int call) {
    for (int to = 0; to < size; to++)
        for (MPI_Count i = 0; i < count; i++) send[to * count + i] = element(rank, to, call, i);
}

/* the first wrong element's index, or -1 */
static MPI_Count first_wrong(const double complex *recv, MPI_Count count, int rank, int size, int call) {
    for (int from = 0; from < size; from++)
        for (MPI_Count i = 0; i < count; i++)
            if (recv[from * count + i] != element(from, rank, call, i)) return from * count + i;
    return -1;
}

/* 0 where every call's every element was right; the times through `times` (wall, inside MPI_Alltoall) */
static int run(int calls, MPI_Count count, double times[2]) {
    int rank, size, wrong = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double complex *send = malloc(sizeof *send * count * size), *recv = malloc(sizeof *recv * count * size);
    if (!send || !recv) {
        fprintf(stderr, "ft_like: rank %d could not allocate 2 x %lld B\n", rank, (long long)(sizeof *send * count * size));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(recv, 0, sizeof *recv * count * size);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime(), inside = 0;
    for (int call = 0; call < calls; call++) {
        fill(send, count, rank, size, call);
        double before = MPI_Wtime();
        MPI_Alltoall(send, (int)count, MPI_C_DOUBLE_COMPLEX, recv, (int)count, MPI_C_DOUBLE_COMPLEX, MPI_COMM_WORLD);
        inside += MPI_Wtime() - before;
        MPI_Count at = first_wrong(recv, count, rank, size, call);
        if (at >= 0 && !wrong) {
            double complex got = recv[at];
            fprintf(stderr, "ft_like: rank %d call %d element %lld (from rank %lld) is %g%+gi\n", rank, call,
                    (long long)at, (long long)(at / count), creal(got), cimag(got));
            wrong = 1;
        }
    }
    double mine[2] = {MPI_Wtime() - start, inside};
    MPI_Allreduce(mine, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(send);
    free(recv);
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *end = "";
    long calls = argc > 1 ? strtol(argv[1], &end, 10) : 8;
    long long bytes = argc > 2 ? bytes_of(argv[2]) : (long long)(CLASS_A_BYTES / size / size) / 16 * 16;
    const char *what = argc > 3 ? "arguments" : *end || calls < 1 || calls > 1000000 ? "CALLS"
                     : bytes < 16 || bytes / 16 > 2147483647 ? "BYTES" : NULL;
    if (what) {
        if (rank == 0)
            fprintf(stderr, "ft_like: %s %s: accepted: [CALLS [BYTES]], CALLS 1 to 1000000, BYTES per peer a multiple "
                    "of 16 up to 32 GiB (K, M or G suffix accepted)\n", what,
                    argc > 3 ? "more than 2" : what[0] == 'C' ? argv[1] : argv[2]);
        MPI_Finalize();
        return 2;
    }
    double times[2];
    int wrong = run((int)calls, bytes / 16, times), any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ft_like: %ld calls of %lld B per peer on %d ranks: time %.3f s, alltoall %.3f s, %s\n", calls, bytes,
               size, times[0], times[1], any ? "WRONG" : "ok");
    MPI_Finalize();
    return any;
}
