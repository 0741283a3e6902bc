/* An exchange like NPB IS's key exchange, every key checked.
 *
 *   is_like [--keys K] [--iterations R] [--seed SEED] [--vary N] [--break]
 *
 * Each iteration every rank draws K keys in [0, 2^20) (the mean of four uniform draws, as IS's generator makes them:
 * the middle ranks' buckets are the largest), seeded by the seed, the iteration and the rank, so every rank can draw
 * every other rank's keys too. Rank r owns the keys of [r 2^20 / p, (r + 1) 2^20 / p); each rank sends every rank
 * its keys of that range in the order drawn: the bucket sizes with MPI_Alltoall (one int a peer), then the keys with
 * MPI_Alltoallv. Each rank then draws every sender's keys itself and checks every key it received, in place and
 * order. Rank 0 prints "is_like: ... check ok" with the median over the iterations of the slowest rank's
 * MPI_Alltoallv; a wrong key prints the first one wrong on each rank that saw it, and every rank exits 1. --break
 * changes one received key on the last iteration (on the last rank) to prove the check. --vary N: every N
 * iterations the ranks draw K / 4 keys instead of K, then K again (the exchange's size changes as a program's phases
 * change it). Bad arguments exit 2. Defaults: --keys 4096, --iterations 10, --seed 1, --vary 0 (never).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_RANGE (1 << 20)

typedef struct {
    long keys, iterations, vary;
    unsigned long long seed;
    int broken;
} options;

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void *allocated(size_t bytes)
{
    void *memory = malloc(bytes ? bytes : 1);
    if (!memory) {
        fprintf(stderr, "is_like: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return memory;
}

/* the keys each rank draws in an iteration */
static long drawn_count(const options *o, long iteration)
{
    return o->vary && iteration / o->vary % 2 ? (o->keys + 3) / 4 : o->keys;
}

/* rank `r`'s keys of one iteration, as every rank draws them */
static void drawn(const options *o, long iteration, int r, int *keys)
{
    uint64_t state = o->seed * 1000003ULL + (uint64_t)iteration * 7919ULL + (uint64_t)r * 104729ULL;
    for (long i = 0; i < drawn_count(o, iteration); i++) {
        uint64_t sum = 0;
        for (int j = 0; j < 4; j++) sum += splitmix(&state) % KEY_RANGE;
        keys[i] = (int)(sum / 4);
    }
}

static int owner(int key, int p)
{
    return (int)((long long)key * p / KEY_RANGE);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the keys received from every sender, checked against the keys drawn for it: the first wrong one said, else 0 */
static int checked(const options *o, long iteration, int rank, int p, const int *received, const int *recvcounts,
                   const int *rdispls, int *theirs)
{
    for (int s = 0; s < p; s++) {
        drawn(o, iteration, s, theirs);
        long at = 0;
        for (long i = 0; i < drawn_count(o, iteration); i++) {
            if (owner(theirs[i], p) != rank) continue;
            if (at >= recvcounts[s] || received[rdispls[s] + at] != theirs[i]) {
                fprintf(stderr, "is_like: WRONG on rank %d, iteration %ld: key %ld from rank %d is %d, expected %d "
                        "(%d received from it)\n", rank, iteration, at, s,
                        at < recvcounts[s] ? received[rdispls[s] + at] : -1, theirs[i], recvcounts[s]);
                return 1;
            }
            at++;
        }
        if (at != recvcounts[s]) {
            fprintf(stderr, "is_like: WRONG on rank %d, iteration %ld: %d keys from rank %d, expected %ld\n", rank,
                    iteration, recvcounts[s], s, at);
            return 1;
        }
    }
    return 0;
}

static int exchanged(const options *o, int rank, int p)
{
    int *keys = allocated(o->keys * sizeof *keys), *bucketed = allocated(o->keys * sizeof *keys),
        *theirs = allocated(o->keys * sizeof *keys), *received = NULL, *counts = allocated(4 * p * sizeof *counts);
    int *sendcounts = counts, *recvcounts = counts + p, *sdispls = counts + 2 * p, *rdispls = counts + 3 * p;
    double *seconds = allocated(o->iterations * sizeof *seconds), *slowest = allocated(o->iterations * sizeof *seconds);
    int failed = 0;
    for (long iteration = 0; iteration < o->iterations && !failed; iteration++) {
        long mine = drawn_count(o, iteration);
        drawn(o, iteration, rank, keys);
        memset(sendcounts, 0, p * sizeof *sendcounts);
        for (long i = 0; i < mine; i++) sendcounts[owner(keys[i], p)]++;
        for (int d = 0, at = 0; d < p; d++) sdispls[d] = at, at += sendcounts[d];
        for (int d = 0; d < p; d++) sendcounts[d] = 0; /* counted again as they are placed */
        for (long i = 0; i < mine; i++) {
            int d = owner(keys[i], p);
            bucketed[sdispls[d] + sendcounts[d]++] = keys[i];
        }
        MPI_Alltoall(sendcounts, 1, MPI_INT, recvcounts, 1, MPI_INT, MPI_COMM_WORLD);
        long count = 0;
        for (int s = 0; s < p; s++) rdispls[s] = (int)count, count += recvcounts[s];
        free(received);
        received = allocated(count * sizeof *received);
        double start = MPI_Wtime();
        MPI_Alltoallv(bucketed, sendcounts, sdispls, MPI_INT, received, recvcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
        seconds[iteration] = MPI_Wtime() - start;
        if (o->broken && iteration == o->iterations - 1 && rank == p - 1 && count) received[count / 2] ^= 1;
        int wrong = checked(o, iteration, rank, p, received, recvcounts, rdispls, theirs);
        MPI_Allreduce(&wrong, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    if (!failed) {
        MPI_Allreduce(seconds, slowest, (int)o->iterations, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(slowest, o->iterations, sizeof *slowest, by_double);
        double median = o->iterations % 2 ? slowest[o->iterations / 2]
                                          : (slowest[o->iterations / 2 - 1] + slowest[o->iterations / 2]) / 2;
        if (rank == 0)
            printf("is_like: %ld keys a rank on %d rank%s, %ld iterations: MPI_Alltoallv %.1f us (median, slowest "
                   "rank); check ok\n", o->keys, p, p > 1 ? "s" : "", o->iterations, median * 1e6);
    }
    free(keys), free(bucketed), free(theirs), free(received), free(counts), free(seconds), free(slowest);
    return failed;
}

/* The options, or a message on rank 0 and 0 returned. */
static int parsed(int argc, char **argv, int rank, options *o)
{
    *o = (options){4096, 10, 0, 1, 0};
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long number = value ? strtol(value, &end, 10) : -1;
        int whole = value && *value && !*end && number >= 0;
        if (!strcmp(name, "--break")) {
            o->broken = 1;
            continue;
        }
        if (!strcmp(name, "--keys") && whole && number > 0 && number <= 1L << 24) o->keys = number;
        else if (!strcmp(name, "--iterations") && whole && number > 0 && number <= 1L << 20) o->iterations = number;
        else if (!strcmp(name, "--seed") && whole) o->seed = (unsigned long long)number;
        else if (!strcmp(name, "--vary") && whole) o->vary = number;
        else {
            if (rank == 0)
                fprintf(stderr, "is_like: %s %s: accepted: --keys 1..16777216, --iterations 1..1048576, --seed N, "
                        "--vary N (whole numbers), --break\n", name, value ? value : "(no value)");
            return 0;
        }
        i++;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int rank, p;
    options o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (!parsed(argc, argv, rank, &o)) {
        MPI_Finalize();
        return 2;
    }
    int failed = exchanged(&o, rank, p);
    MPI_Finalize();
    return failed ? 1 : 0;
}
