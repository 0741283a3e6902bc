/* An MPI program for liba2a's learning and the non-blocking and persistent forms (tests/test_learn_nonblocking.py),
   at `count` ints per peer (argv[1]) on MPI_COMM_WORLD:
     1. before any blocking all-to-all: two MPI_Ialltoall (the first makes liba2a's private copy for them) and one
        MPI_Alltoall_init (no class has chosen yet: they go to the library, and so does that request ever after);
     2. `blocking` MPI_Alltoall (argv[2]): the size class learns, or goes on from a learned line;
     3. `nonblocking` rounds (argv[3]) of two MPI_Ialltoall in flight at once, completed by one MPI_Waitall; then a
        new MPI_Alltoall_init request and the one of step 1, each started `starts` times (argv[4]) by MPI_Startall.
   With "v" (argv[5]), the same with MPI_Alltoallv and MPI_Ialltoallv (no persistent requests), rank r sending rank j
   count + (r + j) % 2 ints.
   Every element of every call is checked (the buffers refilled before each). Prints "ok" on rank 0, or what was
   wrong and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, count, wrong, *counts, *displs; /* alltoallv's, from this rank and to it alike */

static int value(int from, int to, int i, int call) { return from * 1000003 + to * 1009 + i + call * 7; }

/* the send buffer of call number `call`, and the receive buffer spoiled */
static void filled(int *send, int *recv, int call) {
    for (int j = 0; j < size; j++)
        for (int i = 0; i < counts[j]; i++) send[displs[j] + i] = value(rank, j, i, call), recv[displs[j] + i] = -1;
}

static void checked(const int *recv, int call, const char *what) {
    for (int j = 0; j < size; j++)
        for (int i = 0; i < counts[j]; i++)
            if (recv[displs[j] + i] != value(j, rank, i, call)) {
                if (!wrong++)
                    fprintf(stderr, "rank %d: %s (call %d): element %d from rank %d is %d, not %d\n", rank, what, call,
                            i, j, recv[displs[j] + i], value(j, rank, i, call));
                return;
            }
}

/* a non-blocking all-to-all of call number `call` started: MPI_Ialltoall, or MPI_Ialltoallv where `v` */
static void started(int v, int *send, int *recv, int call, MPI_Request *request) {
    filled(send, recv, call);
    if (v)
        MPI_Ialltoallv(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD, request);
    else
        MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, request);
}

static void waited(int v, int *send, int *recv, int call) {
    MPI_Request request;
    started(v, send, recv, call, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    checked(recv, call, "a non-blocking all-to-all");
}

/* the persistent requests' part: one made before the blocking calls (early) and one after (late), each started
   `starts` times; call numbers from *call */
static void persistent_starts(MPI_Request early, int *send[2], int *recv[2], int starts, int *call) {
    MPI_Request late, both[2];
    MPI_Alltoall_init(send[0], count, MPI_INT, recv[0], count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &late);
    for (int s = 0; s < starts; s++, *call += 2) {
        filled(send[0], recv[0], *call), filled(send[1], recv[1], *call + 1);
        both[0] = late, both[1] = early;
        MPI_Startall(2, both);
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        checked(recv[0], *call, "MPI_Alltoall_init made after the blocking calls");
        checked(recv[1], *call + 1, "MPI_Alltoall_init made before them");
    }
    MPI_Request_free(&late);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5 && argc != 6) {
        if (rank == 0) fprintf(stderr, "usage: learn_nonblocking COUNT BLOCKING NONBLOCKING STARTS [v]\n");
        MPI_Finalize();
        return 2;
    }
    count = atoi(argv[1]);
    int blocking = atoi(argv[2]), nonblocking = atoi(argv[3]), starts = atoi(argv[4]), call = 0, v = argc == 6;
    counts = malloc(sizeof(int) * (size_t)size), displs = malloc(sizeof(int) * (size_t)size);
    for (int j = 0, at = 0; j < size; at += counts[j++]) counts[j] = count + (v ? (rank + j) % 2 : 0), displs[j] = at;
    size_t room = sizeof(int) * (size_t)size * (size_t)(count + 1);
    int *send[2] = {malloc(room), malloc(room)}, *recv[2] = {malloc(room), malloc(room)};
    waited(v, send[0], recv[0], call++);
    waited(v, send[0], recv[0], call++);
    MPI_Request early = MPI_REQUEST_NULL, both[2];
    if (!v)
        MPI_Alltoall_init(send[1], count, MPI_INT, recv[1], count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &early);
    for (int b = 0; b < blocking; b++, call++) {
        filled(send[0], recv[0], call);
        if (v)
            MPI_Alltoallv(send[0], counts, displs, MPI_INT, recv[0], counts, displs, MPI_INT, MPI_COMM_WORLD);
        else
            MPI_Alltoall(send[0], count, MPI_INT, recv[0], count, MPI_INT, MPI_COMM_WORLD);
        checked(recv[0], call, "a blocking all-to-all");
    }
    for (int n = 0; n < nonblocking; n++, call += 2) {
        for (int k = 0; k < 2; k++) started(v, send[k], recv[k], call + k, &both[k]);
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        for (int k = 0; k < 2; k++) checked(recv[k], call + k, "a non-blocking all-to-all, two in flight");
    }
    if (!v) {
        persistent_starts(early, send, recv, starts, &call);
        MPI_Request_free(&early);
    }
    int any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("ok\n");
    for (int k = 0; k < 2; k++) free(send[k]), free(recv[k]);
    free(counts), free(displs);
    MPI_Finalize();
    return any ? 1 : 0;
}
