/* An MPI program that knows nothing of the testbed and leans on what MPI promises of non-blocking all-to-alls: once
   every rank has started one, a rank waiting for it completes while the others are inside any MPI call. Each round,
   at `count` ints per peer (argv[1], default 3), `rounds` times (argv[2], default 4):
     - MPI_Ialltoall: rank 0 waits for it, then sends rank 1 a message; rank 1 first blocks in MPI_Recv for that
       message, then waits (so rank 0's exchange must complete while rank 1 sits in MPI_Recv);
     - MPI_Ialltoallv of uneven blocks, the same way round, rank 1 waiting with an MPI_Test loop;
     - a persistent MPI_Alltoall_init request, MPI_Start then the same pattern, and MPI_Startall once;
     - MPI_Ialltoall never tested: every rank only probes another communicator (MPI_Iprobe, nothing there) for a
       second, then MPI_Test must find it complete at once (in the last round; printed as "complete unasked: N of M").
   With "pass" (argv[3]), then the calls a deploy file must pass through: MPI_IN_PLACE, a derived datatype (also
   persistent), a communicator of another size, an intercommunicator; and persistent point-to-point requests, which
   MPI_Start, MPI_Startall and MPI_Request_free must leave to the library.
   With "together" (argv[3]), then two exchanges of different sizes in flight at once on one communicator: two
   MPI_Ialltoall completed by one MPI_Waitall, and two persistent requests started by one MPI_Startall.
   Every element is checked. Prints "ok" (and the count above) on rank 0, or what was wrong and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int from, int to, int i) { return from * 1000003 + to * 1009 + i; }

/* rank 0 completes `request` then sends; rank 1 receives that first, then completes it (testing when `poll`) */
static void completed_around_a_recv(MPI_Request *request, int rank, int poll) {
    int token = 7, flag = 0;
    if (rank == 0) {
        MPI_Wait(request, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        while (poll && !flag) MPI_Test(request, &flag, MPI_STATUS_IGNORE);
        if (!flag) MPI_Wait(request, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(request, MPI_STATUS_IGNORE);
    }
}

/* an MPI_Ialltoall (or a persistent one) of `count` ints per peer on comm, in place or of a derived type; 0 if right */
static int passed_through(MPI_Comm comm, int count, int in_place, int derived, int persistent) {
    int rank, size, inter, wrong = 0;
    MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_rank(comm, &rank);
    if (inter) MPI_Comm_remote_size(comm, &size);
    else MPI_Comm_size(comm, &size);
    int *send = malloc(sizeof(int) * (size * count + 1)), *recv = malloc(sizeof(int) * (size * count + 1));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) send[j * count + i] = recv[j * count + i] = value(inter ? 0 : rank, j, i);
    MPI_Datatype type = MPI_INT;
    if (derived) {
        MPI_Type_contiguous(count, MPI_INT, &type);
        MPI_Type_commit(&type);
    }
    int n = derived ? 1 : count;
    MPI_Request request;
    if (persistent) {
        MPI_Alltoall_init(send, n, type, recv, n, type, comm, MPI_INFO_NULL, &request);
        MPI_Start(&request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        MPI_Request_free(&request);
    } else {
        if (in_place) /* the send count and type mean nothing in place: a null type is allowed */
            MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, type, comm, &request);
        else
            MPI_Ialltoall(send, n, type, recv, n, type, comm, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) wrong |= recv[j * count + i] != value(inter ? 0 : j, rank, i);
    if (derived) MPI_Type_free(&type);
    free(send), free(recv);
    return wrong;
}

/* persistent point-to-point requests around the ring, started one by one and all at once, then freed */
static int ring(int rank, int size) {
    int out = rank, in = -1, wrong = 0;
    MPI_Request both[2];
    MPI_Send_init(&out, 1, MPI_INT, (rank + 1) % size, 3, MPI_COMM_WORLD, &both[0]);
    MPI_Recv_init(&in, 1, MPI_INT, (rank + size - 1) % size, 3, MPI_COMM_WORLD, &both[1]);
    for (int all = 0; all < 2; all++) {
        in = -1;
        if (all) MPI_Startall(2, both);
        else MPI_Start(&both[1]), MPI_Start(&both[0]);
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        wrong |= in != (rank + size - 1) % size;
    }
    MPI_Request_free(&both[0]);
    MPI_Request_free(&both[1]);
    return wrong;
}

/* the calls a deploy file for this job's size passes through */
static int pass_throughs(int rank, int size, int count) {
    int wrong = passed_through(MPI_COMM_WORLD, count, 1, 0, 0) | passed_through(MPI_COMM_WORLD, count, 0, 1, 0) |
                passed_through(MPI_COMM_WORLD, count, 0, 1, 1) | ring(rank, size);
    MPI_Comm part, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1, rank, &part);
    if (rank < size - 1) wrong |= passed_through(part, count, 0, 0, 0);
    if (size > 1) {
        MPI_Intercomm_create(part, 0, MPI_COMM_WORLD, rank < size - 1 ? size - 1 : 0, 9, &inter);
        wrong |= passed_through(inter, count, 0, 0, 0);
        MPI_Comm_free(&inter);
    }
    MPI_Comm_free(&part);
    return wrong;
}

/* two exchanges in flight together on MPI_COMM_WORLD, `big` and `small` ints per peer: non-blocking, then persistent */
static int together(int rank, int size, int small, int big) {
    int counts[2] = {big, small}, wrong = 0, *send[2], *recv[2];
    MPI_Request requests[2];
    for (int k = 0; k < 2; k++)
        send[k] = malloc(sizeof(int) * size * counts[k]), recv[k] = malloc(sizeof(int) * size * counts[k]);
    for (int persistent = 0; persistent < 2; persistent++) {
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < size; j++)
                for (int i = 0; i < counts[k]; i++) send[k][j * counts[k] + i] = value(rank, j, i + k);
            memset(recv[k], 0xff, sizeof(int) * size * counts[k]);
            if (persistent)
                MPI_Alltoall_init(send[k], counts[k], MPI_INT, recv[k], counts[k], MPI_INT, MPI_COMM_WORLD,
                                  MPI_INFO_NULL, &requests[k]);
            else
                MPI_Ialltoall(send[k], counts[k], MPI_INT, recv[k], counts[k], MPI_INT, MPI_COMM_WORLD, &requests[k]);
        }
        if (persistent) MPI_Startall(2, requests);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < size; j++)
                for (int i = 0; i < counts[k]; i++) wrong |= recv[k][j * counts[k] + i] != value(j, rank, i + k);
            if (persistent) MPI_Request_free(&requests[k]);
        }
    }
    for (int k = 0; k < 2; k++) free(send[k]), free(recv[k]);
    return wrong;
}

static int check(const int *recv, int rank, int size, const int *counts, const int *displs) {
    int wrong = 0;
    for (int j = 0; j < size; j++)
        for (int i = 0; i < counts[j]; i++) wrong |= recv[displs[j] + i] != value(j, rank, i);
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, count = argc > 1 ? atoi(argv[1]) : 3, rounds = argc > 2 ? atoi(argv[2]) : 4, wrong = 0;
    int unasked = 0, tried = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    int n = size * (count + 2), *send = malloc(sizeof(int) * n), *recv = malloc(sizeof(int) * n);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size), *even = malloc(sizeof(int) * size), *at = malloc(sizeof(int) * size);
    for (int j = 0; j < size; j++) {
        sc[j] = count + (rank + j) % 3, rc[j] = count + (j + rank) % 3, even[j] = count;
        sd[j] = j ? sd[j - 1] + sc[j - 1] : 0, rd[j] = j ? rd[j - 1] + rc[j - 1] : 0, at[j] = j * count;
    }
    MPI_Request request, persistent;
    for (int round = 0; round < rounds; round++) {
        for (int j = 0; j < size; j++)
            for (int i = 0; i < count; i++) send[j * count + i] = value(rank, j, i);
        memset(recv, 0xff, sizeof(int) * n);
        MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, &request);
        completed_around_a_recv(&request, rank, 0);
        wrong |= check(recv, rank, size, even, at);

        for (int j = 0; j < size; j++)
            for (int i = 0; i < sc[j]; i++) send[sd[j] + i] = value(rank, j, i);
        memset(recv, 0xff, sizeof(int) * n);
        MPI_Ialltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD, &request);
        completed_around_a_recv(&request, rank, 1);
        wrong |= check(recv, rank, size, rc, rd);

        for (int j = 0; j < size; j++)
            for (int i = 0; i < count; i++) send[j * count + i] = value(rank, j, i);
        memset(recv, 0xff, sizeof(int) * n);
        MPI_Alltoall_init(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &persistent);
        for (int again = 0; again < 2; again++) {
            memset(recv, 0xff, sizeof(int) * n);
            if (again) MPI_Startall(1, &persistent);
            else MPI_Start(&persistent);
            completed_around_a_recv(&persistent, rank, again);
            wrong |= check(recv, rank, size, even, at);
        }
        MPI_Request_free(&persistent);

        if (round == rounds - 1) {
            memset(recv, 0xff, sizeof(int) * n);
            MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, MPI_COMM_WORLD, &request);
            int flag = 0;
            for (double end = MPI_Wtime() + 1.0; MPI_Wtime() < end;)
                MPI_Iprobe(MPI_ANY_SOURCE, 99, other, &flag, MPI_STATUS_IGNORE);
            MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
            unasked += flag, tried++;
            if (!flag) MPI_Wait(&request, MPI_STATUS_IGNORE);
            wrong |= check(recv, rank, size, even, at);
        }
    }
    if (argc > 3 && strcmp(argv[3], "pass") == 0) wrong |= pass_throughs(rank, size, count);
    if (argc > 3 && strcmp(argv[3], "together") == 0) wrong |= together(rank, size, count, 65536);
    int any, complete;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    MPI_Reduce(&unasked, &complete, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && any) printf("wrong result\n");
    if (rank == 0 && !any) printf("ok\ncomplete unasked: %d of %d\n", complete, tried * size);
    MPI_Comm_free(&other);
    free(send), free(recv), free(sc), free(sd), free(rc), free(rd), free(even), free(at);
    MPI_Finalize();
    return any;
}
