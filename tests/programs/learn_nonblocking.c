/* An MPI program for liba2a's learning and the non-blocking and persistent forms (tests/test_learn_nonblocking.py),
   at `count` ints per peer (argv[1]) on MPI_COMM_WORLD:
     1. before any blocking all-to-all: two MPI_Ialltoall (the first makes liba2a's private copy for them) and one
        MPI_Alltoall_init (no class has chosen yet: they go to the library, and so does that request ever after);
     2. `blocking` MPI_Alltoall (argv[2]): the size class learns, or goes on from a learned line;
     3. `nonblocking` rounds (argv[3]) of two MPI_Ialltoall in flight at once, completed by one MPI_Waitall; then a
        new MPI_Alltoall_init request and the one of step 1, each started `starts` times (argv[4]) by MPI_Startall.
   Every element of every call is checked (the buffers refilled before each). Prints "ok" on rank 0, or what was
   wrong and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, count, wrong;

static int value(int from, int to, int i, int call) { return from * 1000003 + to * 1009 + i + call * 7; }

/* the send buffer of call number `call`, and the receive buffer spoiled */
static void filled(int *send, int *recv, int call) {
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) send[j * count + i] = value(rank, j, i, call), recv[j * count + i] = -1;
}

static void checked(const int *recv, int call, const char *what) {
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++)
            if (recv[j * count + i] != value(j, rank, i, call)) {
                if (!wrong++)
                    fprintf(stderr, "rank %d: %s (call %d): element %d from rank %d is %d, not %d\n", rank, what, call,
                            i, j, recv[j * count + i], value(j, rank, i, call));
                return;
            }
}

static void ialltoall(int *send, int *recv, int call) {
    filled(send, recv, call);
    MPI_Request request;
    MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    checked(recv, call, "MPI_Ialltoall");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: learn_nonblocking COUNT BLOCKING NONBLOCKING STARTS\n");
        MPI_Finalize();
        return 2;
    }
    count = atoi(argv[1]);
    int blocking = atoi(argv[2]), nonblocking = atoi(argv[3]), starts = atoi(argv[4]), call = 0;
    size_t room = sizeof(int) * (size_t)size * (size_t)count;
    int *send[2] = {malloc(room), malloc(room)}, *recv[2] = {malloc(room), malloc(room)};
    ialltoall(send[0], recv[0], call++);
    ialltoall(send[0], recv[0], call++);
    MPI_Request early, late, both[2];
    MPI_Alltoall_init(send[1], count, MPI_INT, recv[1], count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &early);
    for (int b = 0; b < blocking; b++, call++) {
        filled(send[0], recv[0], call);
        MPI_Alltoall(send[0], count, MPI_INT, recv[0], count, MPI_INT, MPI_COMM_WORLD);
        checked(recv[0], call, "MPI_Alltoall");
    }
    for (int n = 0; n < nonblocking; n++, call += 2) {
        for (int k = 0; k < 2; k++) {
            filled(send[k], recv[k], call + k);
            MPI_Ialltoall(send[k], count, MPI_INT, recv[k], count, MPI_INT, MPI_COMM_WORLD, &both[k]);
        }
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        for (int k = 0; k < 2; k++) checked(recv[k], call + k, "MPI_Ialltoall, two in flight");
    }
    MPI_Alltoall_init(send[0], count, MPI_INT, recv[0], count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &late);
    for (int s = 0; s < starts; s++, call += 2) {
        filled(send[0], recv[0], call), filled(send[1], recv[1], call + 1);
        both[0] = late, both[1] = early;
        MPI_Startall(2, both);
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        checked(recv[0], call, "MPI_Alltoall_init made after the blocking calls");
        checked(recv[1], call + 1, "MPI_Alltoall_init made before them");
    }
    MPI_Request_free(&late);
    MPI_Request_free(&early);
    int any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("ok\n");
    for (int k = 0; k < 2; k++) free(send[k]), free(recv[k]);
    MPI_Finalize();
    return any ? 1 : 0;
}
