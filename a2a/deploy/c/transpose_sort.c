/* A program that lives on all-to-all, with its own result check: the transpose step of a 2-D FFT and a sample sort.
 *
 *   transpose_sort [--n N] [--keys K] [--skew S] [--iterations R] [--seed SEED] [--break transpose|sort]
 *
 * transpose: the global N x N matrix of doubles A[i][j] = i * N + j, distributed by rows (N / p rows a rank), is
 *   transposed with MPI_Alltoall (N/p x N/p doubles to every peer) and a local transpose; every element is checked.
 * sample sort: each rank draws K * (1 + S * rank / (p - 1)) seeded int keys (S > 0 makes the count matrix uneven),
 *   sorts them, picks splitters from regular samples (MPI_Allgather), exchanges the bucket counts with MPI_Alltoall
 *   (one int a peer) and the keys with MPI_Alltoallv, and sorts what it received; checked: every rank's keys in
 *   order, each rank's below the next's, the global key count and a hash of the keys unchanged.
 * Rank 0 prints one line per phase: the median over R iterations of the slowest rank's time per iteration (the
 * whole phase, and the all-to-all calls in it), then "check ok". A failed check prints what was wrong (each rank
 * that saw it) and every rank exits 1; --break plants one wrong value after the exchange, to prove the check.
 * Bad arguments exit 2. Defaults: --n 64 x p, --keys 10000, --skew 0, --iterations 10, --seed 1.
 */
#include <mpi.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long n, keys, iterations;
    double skew;
    unsigned long long seed;
    const char *broken; /* "transpose", "sort" or "" */
} options;

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *allocated(size_t bytes)
{
    void *memory = malloc(bytes ? bytes : 1);
    if (!memory) {
        fprintf(stderr, "transpose_sort: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return memory;
}

/* The median over ranks' iterations of the slowest rank: `local` holds this rank's seconds per iteration. */
static double median_of_slowest(double *local, long iterations)
{
    double *slowest = allocated(iterations * sizeof *slowest);
    MPI_Allreduce(local, slowest, (int)iterations, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(slowest, iterations, sizeof *slowest, by_double);
    double median = iterations % 2 ? slowest[iterations / 2]
                                   : (slowest[iterations / 2 - 1] + slowest[iterations / 2]) / 2;
    free(slowest);
    return median;
}

/* Whether any rank failed its check (each failing rank has printed what was wrong). */
static int any_failed(int failed)
{
    int any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return any;
}

static int transpose(const options *o, int rank, int p)
{
    long n = o->n, b = n / p, block = b * b;
    double *rows = allocated(b * n * sizeof *rows), *send = allocated(b * n * sizeof *send),
           *recv = allocated(b * n * sizeof *recv), *columns = allocated(b * n * sizeof *columns),
           *phase = allocated(o->iterations * sizeof *phase), *exchange = allocated(o->iterations * sizeof *phase);
    for (long i = 0; i < b; i++)
        for (long j = 0; j < n; j++) rows[i * n + j] = (double)((rank * b + i) * n + j);
    int failed = 0;
    for (long iteration = 0; iteration < o->iterations && !failed; iteration++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (long d = 0; d < p; d++) /* block d: my rows, the columns of rank d's rows of the transpose */
            for (long i = 0; i < b; i++) memcpy(send + d * block + i * b, rows + i * n + d * b, b * sizeof *send);
        double sent = MPI_Wtime();
        MPI_Alltoall(send, (int)block, MPI_DOUBLE, recv, (int)block, MPI_DOUBLE, MPI_COMM_WORLD);
        double received = MPI_Wtime();
        for (long s = 0; s < p; s++) /* recv block s holds A[s*b + i][rank*b + j]: row j of mine, column s*b + i */
            for (long i = 0; i < b; i++)
                for (long j = 0; j < b; j++) columns[j * n + s * b + i] = recv[s * block + i * b + j];
        phase[iteration] = MPI_Wtime() - start;
        exchange[iteration] = received - sent;
        if (*o->broken == 't' && iteration == o->iterations - 1 && rank == p - 1) columns[b * n - 1] += 1;
        for (long j = 0; j < b && !failed; j++)
            for (long c = 0; c < n && !failed; c++) {
                double want = (double)(c * n + rank * b + j);
                if (columns[j * n + c] != want) {
                    fprintf(stderr, "transpose check failed on rank %d: element (%ld, %ld) of the transpose is "
                            "%.17g, expected %.17g\n", rank, rank * b + j, c, columns[j * n + c], want);
                    failed = 1;
                }
            }
        failed = any_failed(failed);
    }
    if (!failed) {
        double whole = median_of_slowest(phase, o->iterations), alltoall = median_of_slowest(exchange, o->iterations);
        if (rank == 0)
            printf("transpose: N=%ld on %d rank%s, %ld B per peer: %.1f us per iteration (MPI_Alltoall %.1f us), "
                   "median of %ld, slowest rank; check ok\n", n, p, p > 1 ? "s" : "", block * (long)sizeof(double),
                   whole * 1e6,
                   alltoall * 1e6, o->iterations);
    }
    free(rows), free(send), free(recv), free(columns), free(phase), free(exchange);
    return failed;
}

/* A hash of a multiset of keys, the same in any order. */
static uint64_t hashed(const int *keys, long count)
{
    uint64_t sum = 0;
    for (long i = 0; i < count; i++) {
        uint64_t state = (uint64_t)(uint32_t)keys[i];
        sum += splitmix(&state);
    }
    return sum;
}

/* This rank's sorted keys are in order, below the next non-empty rank's, and as many with the same hash as drawn. */
static int sort_checked(const int *sorted, long count, long drawn, uint64_t drawn_hash, int rank, int p)
{
    for (long i = 1; i < count; i++)
        if (sorted[i - 1] > sorted[i]) {
            fprintf(stderr, "sample sort check failed on rank %d: key %ld (%d) is above key %ld (%d)\n", rank, i - 1,
                    sorted[i - 1], i, sorted[i]);
            return 1;
        }
    long ends[3] = {count, count ? sorted[0] : 0, count ? sorted[count - 1] : 0}, *all = allocated(3 * p * sizeof *all);
    MPI_Allgather(ends, 3, MPI_LONG, all, 3, MPI_LONG, MPI_COMM_WORLD);
    int failed = 0;
    for (int r = rank + 1; r < p && count; r++)
        if (all[3 * r]) { /* the next rank with keys */
            if (all[3 * r + 1] < ends[2]) {
                fprintf(stderr, "sample sort check failed on rank %d: its last key %ld is above rank %d's first %ld\n",
                        rank, ends[2], r, all[3 * r + 1]);
                failed = 1;
            }
            break;
        }
    free(all);
    uint64_t totals[2] = {(uint64_t)drawn, drawn_hash}, mine[2] = {(uint64_t)count, hashed(sorted, count)}, sums[4];
    MPI_Allreduce(totals, sums, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine, sums + 2, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && (sums[0] != sums[2] || sums[1] != sums[3])) {
        fprintf(stderr, "sample sort check failed: %llu keys drawn, %llu sorted; the keys' hash %s\n",
                (unsigned long long)sums[0], (unsigned long long)sums[2], sums[1] == sums[3] ? "agrees" : "differs");
        failed = 1;
    }
    return failed;
}

static int sample_sort(const options *o, int rank, int p)
{
    long drawn = (long)(o->keys * (1 + (p > 1 ? o->skew * rank / (p - 1) : 0)));
    int *keys = allocated(drawn * sizeof *keys), *local = allocated(drawn * sizeof *keys), *sorted = NULL,
        *samples = allocated(p * sizeof *samples), *gathered = allocated(p * p * sizeof *gathered),
        *counts = allocated(4 * p * sizeof *counts);
    int *sendcounts = counts, *recvcounts = counts + p, *sdispls = counts + 2 * p, *rdispls = counts + 3 * p;
    double *phase = allocated(o->iterations * sizeof *phase), *exchange = allocated(o->iterations * sizeof *phase);
    uint64_t state = o->seed * 1000003ULL + (uint64_t)rank;
    for (long i = 0; i < drawn; i++) keys[i] = (int)(splitmix(&state) >> 33); /* 0 .. 2^31 - 1 */
    uint64_t drawn_hash = hashed(keys, drawn);
    int failed = 0;
    for (long iteration = 0; iteration < o->iterations && !failed; iteration++) {
        memcpy(local, keys, drawn * sizeof *keys);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        qsort(local, drawn, sizeof *local, by_value);
        for (int k = 0; k < p - 1; k++) samples[k] = drawn ? local[(k + 1) * drawn / p] : 0;
        MPI_Allgather(samples, p - 1, MPI_INT, gathered, p - 1, MPI_INT, MPI_COMM_WORLD);
        qsort(gathered, (size_t)p * (p - 1), sizeof *gathered, by_value);
        long at = 0; /* bucket d: keys up to splitter d = gathered[(d + 1) * (p - 1)], the last bucket the rest */
        for (int d = 0; d < p; d++) {
            long from = at;
            while (at < drawn && (d == p - 1 || local[at] <= gathered[(d + 1) * (p - 1)])) at++;
            sendcounts[d] = (int)(at - from);
            sdispls[d] = (int)from;
        }
        double exchanged = MPI_Wtime();
        MPI_Alltoall(sendcounts, 1, MPI_INT, recvcounts, 1, MPI_INT, MPI_COMM_WORLD);
        long count = 0;
        for (int s = 0; s < p; s++) rdispls[s] = (int)count, count += recvcounts[s];
        free(sorted);
        sorted = allocated(count * sizeof *sorted);
        MPI_Alltoallv(local, sendcounts, sdispls, MPI_INT, sorted, recvcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
        exchange[iteration] = MPI_Wtime() - exchanged;
        qsort(sorted, count, sizeof *sorted, by_value);
        phase[iteration] = MPI_Wtime() - start;
        if (*o->broken == 's' && iteration == o->iterations - 1 && count) sorted[count / 2] += 1;
        failed = any_failed(sort_checked(sorted, count, drawn, drawn_hash, rank, p));
    }
    if (!failed) {
        double whole = median_of_slowest(phase, o->iterations), alltoall = median_of_slowest(exchange, o->iterations);
        if (rank == 0)
            printf("sample sort: %ld keys a rank (skew %g) on %d rank%s: %.1f us per iteration (MPI_Alltoall and "
                   "MPI_Alltoallv %.1f us), median of %ld, slowest rank; check ok\n", o->keys, o->skew, p,
                   p > 1 ? "s" : "", whole * 1e6, alltoall * 1e6, o->iterations);
    }
    free(keys), free(local), free(sorted), free(samples), free(gathered), free(counts), free(phase), free(exchange);
    return failed;
}

/* The options, or a message on rank 0 and 0 returned. */
static int parsed(int argc, char **argv, int rank, int p, options *o)
{
    *o = (options){64L * p, 10000, 10, 0.0, 1, ""};
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long number = value ? strtol(value, &end, 10) : -1;
        double real = value ? strtod(value, &end) : -1;
        int whole = value && *value && !*end && number >= 0 && real == (double)number;
        long b = whole && number % p == 0 ? number / p : 0;
        if (!strcmp(name, "--n") && b > 0 && b * b <= INT_MAX && number <= 1L << 15) o->n = number;
        else if (!strcmp(name, "--keys") && whole && number > 0 && number <= 1L << 20) o->keys = number;
        else if (!strcmp(name, "--iterations") && whole && number > 0 && number <= 1L << 20) o->iterations = number;
        else if (!strcmp(name, "--seed") && whole) o->seed = (unsigned long long)number;
        else if (!strcmp(name, "--skew") && value && *value && !*end && real >= 0 && real <= 10) o->skew = real;
        else if (!strcmp(name, "--break") && value && (!strcmp(value, "transpose") || !strcmp(value, "sort")))
            o->broken = value;
        else {
            if (rank == 0)
                fprintf(stderr, "transpose_sort: %s %s: accepted: --n N (a multiple of the %d ranks), --keys K >= 1, "
                        "--skew S in [0, 10], --iterations R >= 1, --seed SEED >= 0, --break transpose|sort\n",
                        name, value ? value : "(no value)", p);
            return 0;
        }
        i++;
    }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    options o;
    int code = 2;
    if (parsed(argc, argv, rank, p, &o)) {
        code = transpose(&o, rank, p);
        if (!code) code = sample_sort(&o, rank, p);
    }
    MPI_Finalize();
    return code;
}
