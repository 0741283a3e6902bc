/* All-to-alls from several threads at once under MPI_THREAD_MULTIPLE: THREADS threads, each with COMMS duplicates of
   MPI_COMM_WORLD of its own, call MPI_Alltoall (at 1, 40 and 600 ints per peer, in turn) and MPI_Alltoallv (uneven
   counts) on each, ROUNDS times, every element checked; the threads start together, so the communicators' first
   calls (where liba2a makes their state) meet. Rank 0 prints "calls alltoall A alltoallv V" (the calls this rank
   made of each), then "ok" where every element on every rank was right, else "WRONG" and how many; "no
   MPI_THREAD_MULTIPLE" (exit 0) where the library does not give it. Usage: threads_alltoall THREADS COMMS ROUNDS */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int value(int from, int to, int i, int round) { return from * 1000003 + to * 1009 + i + 7 * round; }

typedef struct {
    MPI_Comm *comms;
    int ncomms, rounds, wrong, failed;
    long alltoalls, alltoallvs;
    pthread_barrier_t *start;
} work;

static void alltoall(work *w, MPI_Comm comm, int count, int round) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *send = malloc(sizeof(int) * (size_t)(size * count)), *recv = calloc((size_t)(size * count), sizeof(int));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) send[j * count + i] = value(rank, j, i, round);
    w->failed += MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm) != MPI_SUCCESS;
    w->alltoalls++;
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) w->wrong += recv[j * count + i] != value(j, rank, i, round);
    free(send), free(recv);
}

static void alltoallv(work *w, MPI_Comm comm, int round) {
    int rank, size, st = 0, rt = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size);
    for (int j = 0; j < size; j++) {
        sc[j] = (rank + j + round) % 5 + 1, rc[j] = (j + rank + round) % 5 + 1;
        sd[j] = st, rd[j] = rt, st += sc[j], rt += rc[j];
    }
    int *send = malloc(sizeof(int) * (size_t)st), *recv = calloc((size_t)rt, sizeof(int));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < sc[j]; i++) send[sd[j] + i] = value(rank, j, i, round);
    w->failed += MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm) != MPI_SUCCESS;
    w->alltoallvs++;
    for (int j = 0; j < size; j++)
        for (int i = 0; i < rc[j]; i++) w->wrong += recv[rd[j] + i] != value(j, rank, i, round);
    free(send), free(recv), free(sc), free(sd), free(rc), free(rd);
}

static void *thread(void *arg) {
    static const int counts[] = {1, 40, 600};
    work *w = arg;
    pthread_barrier_wait(w->start);
    for (int round = 0; round < w->rounds; round++)
        for (int c = 0; c < w->ncomms; c++) {
            alltoall(w, w->comms[c], counts[round % 3], round);
            alltoallv(w, w->comms[c], round);
        }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: threads_alltoall THREADS COMMS ROUNDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("no MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 0;
    }
    int nthreads = atoi(argv[1]), ncomms = atoi(argv[2]), rounds = atoi(argv[3]), sums[2], local[2] = {0, 0};
    pthread_t *threads = malloc(sizeof(pthread_t) * nthreads);
    work *works = calloc((size_t)nthreads, sizeof(work));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int t = 0; t < nthreads; t++) { /* made here, in one order on every rank: a thread's comms are the same */
        works[t] = (work){malloc(sizeof(MPI_Comm) * ncomms), ncomms, rounds, 0, 0, 0, 0, &start};
        for (int c = 0; c < ncomms; c++) MPI_Comm_dup(MPI_COMM_WORLD, &works[t].comms[c]);
    }
    for (int t = 0; t < nthreads; t++) pthread_create(&threads[t], NULL, thread, &works[t]);
    long alltoalls = 0, alltoallvs = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t], NULL);
        local[0] += works[t].wrong, local[1] += works[t].failed;
        alltoalls += works[t].alltoalls, alltoallvs += works[t].alltoallvs;
        for (int c = 0; c < ncomms; c++) MPI_Comm_free(&works[t].comms[c]);
        free(works[t].comms);
    }
    MPI_Allreduce(local, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("calls alltoall %ld alltoallv %ld\n", alltoalls, alltoallvs);
        if (sums[0] || sums[1]) printf("WRONG: %d elements, %d calls failed\n", sums[0], sums[1]);
        else printf("ok\n");
    }
    pthread_barrier_destroy(&start);
    free(threads), free(works);
    MPI_Finalize();
    return sums[0] || sums[1];
}
