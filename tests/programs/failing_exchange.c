/* An all-to-all whose exchange fails (tests/programs/failing_isend.c makes an MPI_Isend fail under liba2a): with
   HANDLER "fatal" every communicator keeps MPI_ERRORS_ARE_FATAL, with "return" the one called on gets
   MPI_ERRORS_RETURN (and MPI_COMM_SELF, but for persistent-wait and persistent-test). It calls COLLECTIVE with COUNT
   ints per peer on MPI_COMM_WORLD (the persistent forms: on a copy of it, so that MPI_COMM_WORLD stays fatal):
     alltoall, alltoallv, ialltoall   (ialltoall: after one call that liba2a passes on, its private copy made then)
     persistent-wait, persistent-test, persistent-waitall: MPI_Alltoall_init (after one that liba2a passes on),
                                      MPI_Start, then MPI_Wait, MPI_Test until done, or MPI_Waitall with a status
   Each rank prints "rank R: COLLECTIVE returned class C" (C: the error class; 0: MPI_SUCCESS; MPI_Waitall adds
   "(status class S)", its status's MPI_ERROR), then makes the same call again (the persistent forms: start the same
   request again), which no shim fails, and checks every element. Rank 0 prints "ok" where every rank got an error
   from the first call (and from MPI_Waitall's status) and every element of the second right; else what was wrong,
   and it exits 1.
   Usage: failing_exchange HANDLER COLLECTIVE COUNT */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { /* one rank's buffers for a call: per peer counts and displacements in ints */
    int size, rank, *sc, *sd, *rc, *rd, *send, *recv;
} buffers;

static int value(int from, int to, int i) { return from * 1000003 + to * 1009 + i; }

/* buffers for `count` ints per peer (alltoallv: count + the peer's rank % 2), the send one filled */
static buffers made(int count, int v) {
    buffers b;
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.size);
    b.sc = malloc(sizeof(int) * b.size), b.sd = malloc(sizeof(int) * b.size);
    b.rc = malloc(sizeof(int) * b.size), b.rd = malloc(sizeof(int) * b.size);
    int st = 0, rt = 0;
    for (int j = 0; j < b.size; j++) {
        b.sc[j] = count + (v ? j % 2 : 0), b.rc[j] = count + (v ? b.rank % 2 : 0);
        b.sd[j] = st, b.rd[j] = rt, st += b.sc[j], rt += b.rc[j];
    }
    b.send = malloc(sizeof(int) * (st + 1)), b.recv = calloc((size_t)rt + 1, sizeof(int));
    for (int j = 0; j < b.size; j++)
        for (int i = 0; i < b.sc[j]; i++) b.send[b.sd[j] + i] = value(b.rank, j, i);
    return b;
}

/* the elements received wrong; the receive buffer cleared for the next call */
static int wrong_in(const buffers *b) {
    int wrong = 0;
    for (int j = 0; j < b->size; j++)
        for (int i = 0; i < b->rc[j]; i++) {
            wrong += b->recv[b->rd[j] + i] != value(j, b->rank, i);
            b->recv[b->rd[j] + i] = 0;
        }
    return wrong;
}

static void freed(buffers *b) { free(b->send), free(b->recv), free(b->sc), free(b->sd), free(b->rc), free(b->rd); }

/* a started persistent request completed as `how` says (wait, test, waitall); its result, and *status_error the
   MPI_ERROR of MPI_Waitall's status (MPI_SUCCESS for the others) */
static int completed(const char *how, MPI_Request *request, int *status_error) {
    MPI_Status status;
    int result, done = 0;
    *status_error = MPI_SUCCESS;
    if (strcmp(how, "wait") == 0) return MPI_Wait(request, MPI_STATUS_IGNORE);
    if (strcmp(how, "test") == 0) {
        do result = MPI_Test(request, &done, MPI_STATUS_IGNORE);
        while (result == MPI_SUCCESS && !done);
        return result;
    }
    status.MPI_ERROR = MPI_SUCCESS;
    result = MPI_Waitall(1, request, &status);
    *status_error = result == MPI_ERR_IN_STATUS ? status.MPI_ERROR : result;
    return result;
}

/* one call of `collective` on b (a persistent form: MPI_Start of *request, then its completion); its result */
static int exchange(const char *collective, int count, buffers *b, MPI_Request *request, int *status_error) {
    *status_error = MPI_SUCCESS;
    if (strcmp(collective, "alltoallv") == 0)
        return MPI_Alltoallv(b->send, b->sc, b->sd, MPI_INT, b->recv, b->rc, b->rd, MPI_INT, MPI_COMM_WORLD);
    if (strcmp(collective, "alltoall") == 0)
        return MPI_Alltoall(b->send, count, MPI_INT, b->recv, count, MPI_INT, MPI_COMM_WORLD);
    if (strcmp(collective, "ialltoall") == 0) {
        int result = MPI_Ialltoall(b->send, count, MPI_INT, b->recv, count, MPI_INT, MPI_COMM_WORLD, request);
        return result == MPI_SUCCESS ? MPI_Wait(request, MPI_STATUS_IGNORE) : result;
    }
    int result = MPI_Start(request);
    return result == MPI_SUCCESS ? completed(collective + strlen("persistent-"), request, status_error) : result;
}

/* the error class of an MPI result (0: MPI_SUCCESS) */
static int class_of(int result) {
    int class = MPI_SUCCESS;
    if (result != MPI_SUCCESS) MPI_Error_class(result, &class);
    return class;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, status_error, all[2], mine[2];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *forms[] = {"alltoall", "alltoallv", "ialltoall", "persistent-wait", "persistent-test",
                           "persistent-waitall"};
    int known = 0;
    for (int i = 0; argc == 4 && i < (int)(sizeof forms / sizeof *forms); i++) known |= strcmp(argv[2], forms[i]) == 0;
    if (!known || (strcmp(argv[1], "fatal") != 0 && strcmp(argv[1], "return") != 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: failing_exchange fatal|return alltoall|alltoallv|ialltoall|persistent-wait|"
                            "persistent-test|persistent-waitall COUNT\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *collective = argv[2];
    int count = atoi(argv[3]), persistent = strncmp(collective, "persistent-", strlen("persistent-")) == 0;
    int waitall = strcmp(collective, "persistent-waitall") == 0;
    MPI_Comm comm = MPI_COMM_WORLD; /* the persistent forms': a copy, whose handler alone the program sets */
    if (persistent) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (strcmp(argv[1], "return") == 0) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        if (!persistent || waitall) /* MPICH raises MPI_Waitall's error there, its own requests' too, not on comm */
            MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    }
    buffers b = made(count, strcmp(collective, "alltoallv") == 0);
    MPI_Request request = MPI_REQUEST_NULL;
    if (strcmp(collective, "ialltoall") == 0) /* liba2a passes a communicator's first on (its private copy is made) */
        exchange(collective, count, &b, &request, &status_error);
    if (persistent) { /* the same: the first request passes through, the second is liba2a's */
        MPI_Alltoall_init(b.send, count, MPI_INT, b.recv, count, MPI_INT, comm, MPI_INFO_NULL, &request);
        MPI_Request_free(&request);
        MPI_Alltoall_init(b.send, count, MPI_INT, b.recv, count, MPI_INT, comm, MPI_INFO_NULL, &request);
    }
    int class = class_of(exchange(collective, count, &b, &request, &status_error)), first_status = status_error;
    if (waitall)
        printf("rank %d: %s returned class %d (status class %d)\n", rank, collective, class, class_of(first_status));
    else
        printf("rank %d: %s returned class %d\n", rank, collective, class);
    fflush(stdout);
    wrong_in(&b);
    int failed = exchange(collective, count, &b, &request, &status_error) != MPI_SUCCESS;
    mine[0] = class == MPI_SUCCESS || (waitall && first_status == MPI_SUCCESS);
    mine[1] = wrong_in(&b) + failed;
    if (persistent) MPI_Request_free(&request), MPI_Comm_free(&comm);
    freed(&b);
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && (all[0] || all[1]))
        printf("WRONG: %d ranks got MPI_SUCCESS from the failed exchange; the next call: %d wrong or failed\n", all[0],
               all[1]);
    else if (rank == 0)
        printf("ok\n");
    MPI_Finalize();
    return all[0] || all[1];
}
