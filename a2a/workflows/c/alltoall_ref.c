/* C reference for the Python harness: time MPI_Alltoall in two protocols.
 *
 *   alltoall_ref [-i ITERATIONS] [-w WARMUP] [-m sync|pipelined|imb|all] SIZE...
 *
 * SIZE is bytes per peer (suffix K or M for powers of 1024). Rank 0 prints a CSV header, then
 * per size and mode: mode,nprocs,bytes_per_peer,iterations,t_min_us,t_p50_us,t_mean_us,t_max_us
 *   sync:      per iteration an untimed barrier, then one timed call; a sample is the max
 *              over ranks of one iteration; min/median/mean/max over the samples.
 *   pipelined: a barrier, then ITERATIONS calls back to back; each rank's mean per call;
 *              min/mean/max of those means over ranks (IMB's -sync off); t_p50_us is empty.
 *   imb:       IMB-MPI1's default loop (and OSU's): two barriers, then per iteration one timed
 *              call and an untimed barrier; each rank's mean per call; min/mean/max of those
 *              means over ranks are IMB's t_min/t_avg/t_max; t_p50_us is empty.
 * Warm-up calls (untimed) precede each mode. Errors in the arguments exit 2 on every rank.
 */
#define _POSIX_C_SOURCE 200809L /* getopt */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "64K" -> 65536; -1 when the text is not a byte count. */
static long parse_size(const char *text)
{
    char *end;
    long value = strtol(text, &end, 10);
    long unit = !*end ? 1 : !strcmp(end, "K") ? 1024 : !strcmp(end, "M") ? 1048576 : -1;
    return end == text || value < 0 || unit < 0 || value > (1L << 40) ? -1 : value * unit;
}

static void time_sync(char *send, char *recv, int bytes, int iterations, int nprocs, int rank)
{
    double *local = malloc(iterations * sizeof *local), *samples = malloc(iterations * sizeof *samples);
    if (!local || !samples) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < iterations; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        MPI_Alltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD);
        local[i] = MPI_Wtime() - start;
    }
    MPI_Reduce(local, samples, iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double sum = 0;
        qsort(samples, iterations, sizeof *samples, compare);
        for (int i = 0; i < iterations; i++) sum += samples[i];
        double median = iterations % 2 ? samples[iterations / 2]
                                       : (samples[iterations / 2 - 1] + samples[iterations / 2]) / 2;
        printf("sync,%d,%d,%d,", nprocs, bytes, iterations);
        printf("%.3f,%.3f,%.3f,%.3f\n", samples[0] * 1e6, median * 1e6, sum / iterations * 1e6,
               samples[iterations - 1] * 1e6);
    }
    free(local);
    free(samples);
}

/* Rank 0 prints the min, mean and max over ranks of each rank's mean time per call. */
static void print_means(const char *mode, double mean, int bytes, int iterations, int nprocs, int rank)
{
    double least, most, sum;
    MPI_Reduce(&mean, &least, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s,%d,%d,%d,%.3f,,%.3f,%.3f\n", mode, nprocs, bytes, iterations, least * 1e6,
               sum / nprocs * 1e6, most * 1e6);
}

static void time_pipelined(char *send, char *recv, int bytes, int iterations, int nprocs, int rank)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++)
        MPI_Alltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD);
    print_means("pipelined", (MPI_Wtime() - start) / iterations, bytes, iterations, nprocs, rank);
}

static void time_imb(char *send, char *recv, int bytes, int iterations, int nprocs, int rank)
{
    double total = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iterations; i++) {
        double start = MPI_Wtime();
        MPI_Alltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD);
        total += MPI_Wtime() - start;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    print_means("imb", total / iterations, bytes, iterations, nprocs, rank);
}

static const char *const MODES[] = {"sync", "pipelined", "imb"};
static void (*const TIMERS[])(char *, char *, int, int, int, int) = {time_sync, time_pipelined, time_imb};

int main(int argc, char **argv)
{
    long iterations = 100, warmup = 10;
    int nprocs, rank, option;
    const char *mode = "all", *problem = NULL;
    char why[200];
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    opterr = 0; /* report bad options once, from rank 0, below */
    while (!problem && (option = getopt(argc, argv, "i:w:m:")) != -1) {
        if (option == 'i') iterations = parse_size(optarg);
        else if (option == 'w') warmup = parse_size(optarg);
        else if (option == 'm') mode = optarg;
        else problem = "unknown option or missing value (options: -i, -w, -m)";
    }
    if (!problem && (iterations < 1 || warmup < 0 || iterations > 100000000 || warmup > 100000000))
        problem = "-i takes a count from 1 and -w one from 0 (up to 100000000)";
    if (!problem && strcmp(mode, "sync") && strcmp(mode, "pipelined") && strcmp(mode, "imb") && strcmp(mode, "all"))
        problem = "-m accepts sync, pipelined, imb or all";
    if (!problem && optind == argc) problem = "no sizes given";
    for (int a = optind; !problem && a < argc; a++) {
        long bytes = parse_size(argv[a]);
        if (bytes < 0 || bytes * nprocs > 2147483647L) {
            snprintf(why, sizeof why, "size '%s' is not a byte count (8, 1K, 64K, 1M) or times the "
                     "process count exceeds 2^31-1 bytes", argv[a]);
            problem = why;
        }
    }
    if (problem) {
        if (rank == 0)
            fprintf(stderr, "alltoall_ref: %s\nusage: alltoall_ref [-i ITERATIONS] [-w WARMUP] "
                            "[-m sync|pipelined|imb|all] SIZE...\n", problem);
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) printf("mode,nprocs,bytes_per_peer,iterations,t_min_us,t_p50_us,t_mean_us,t_max_us\n");
    for (int a = optind; a < argc; a++) {
        int bytes = (int)parse_size(argv[a]);
        size_t total = (size_t)bytes * nprocs;
        char *send = malloc(total + 1), *recv = malloc(total + 1);
        if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(send, rank, total + 1);
        for (int pass = 0; pass < 3; pass++) {
            const char *which = MODES[pass];
            if (strcmp(mode, "all") && strcmp(mode, which)) continue;
            for (int i = 0; i < warmup; i++)
                MPI_Alltoall(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, MPI_COMM_WORLD);
            TIMERS[pass](send, recv, bytes, (int)iterations, nprocs, rank);
        }
        fflush(stdout);
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return 0;
}
