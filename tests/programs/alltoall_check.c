/* An MPI program that knows nothing of the testbed: it calls MPI_Alltoall and MPI_Alltoallv on MPI_COMM_WORLD at
   each size given (ints per peer, argv[1..]) and checks every element received; then the calls a deploy file must
   pass through: a communicator of another size, an intercommunicator, a derived datatype, MPI_IN_PLACE.
   Prints "ok" on rank 0, or what was wrong and exits 1. Run under liba2a (LD_PRELOAD) or without it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int from, int to, int i) { return from * 1000003 + to * 1009 + i; }

/* alltoall of `count` ints per peer on comm; 0 if every element is right */
static int alltoall(MPI_Comm comm, int count, int in_place, int derived) {
    int rank, size, wrong = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *send = malloc(sizeof(int) * ((size_t)size * count + 1)), *recv = malloc(sizeof(int) * ((size_t)size * count + 1));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) send[j * count + i] = value(rank, j, i);
    if (in_place) memcpy(recv, send, sizeof(int) * (size_t)size * count);
    MPI_Datatype type = MPI_INT;
    if (derived) {
        MPI_Type_contiguous(count, MPI_INT, &type);
        MPI_Type_commit(&type);
    }
    int n = derived ? 1 : count;
    MPI_Alltoall(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) wrong |= recv[j * count + i] != value(j, rank, i);
    if (derived) MPI_Type_free(&type);
    free(send);
    free(recv);
    return wrong;
}

/* alltoallv of uneven counts (rank r sends (r + j) % 3 + base ints to j) with gaps between the blocks */
static int alltoallv(MPI_Comm comm, int base) {
    int rank, size, wrong = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size), st = 0, rt = 0;
    for (int j = 0; j < size; j++) {
        sc[j] = (rank + j) % 3 + base, rc[j] = (j + rank) % 3 + base;
        sd[j] = st, rd[j] = rt;
        st += sc[j] + 1, rt += rc[j] + 2;
    }
    int *send = malloc(sizeof(int) * (st + 1)), *recv = malloc(sizeof(int) * (rt + 1));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < sc[j]; i++) send[sd[j] + i] = value(rank, j, i);
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
    for (int j = 0; j < size; j++)
        for (int i = 0; i < rc[j]; i++) wrong |= recv[rd[j] + i] != value(j, rank, i);
    free(send), free(recv), free(sc), free(sd), free(rc), free(rd);
    return wrong;
}

static int intercomm(void) {
    int rank, size, wrong = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) return 0;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
    int remote, send[64], recv[64];
    MPI_Comm_remote_size(inter, &remote);
    for (int j = 0; j < remote; j++) send[j] = value(rank, j, 0);
    MPI_Alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, inter);
    int local;
    MPI_Comm_rank(inter, &local);
    for (int j = 0; j < remote; j++) wrong |= recv[j] != value(2 * j + (rank % 2 ? 0 : 1), local, 0);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, wrong = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int k = 1; k < argc; k++) {
        int count = atoi(argv[k]);
        for (int repeat = 0; repeat < 2; repeat++) /* the second call finds its plan prepared */
            if (alltoall(MPI_COMM_WORLD, count, 0, 0)) wrong |= 1, fprintf(stderr, "alltoall %d wrong\n", count);
    }
    for (int repeat = 0; repeat < 2; repeat++)
        if (alltoallv(MPI_COMM_WORLD, 1)) wrong |= 2, fprintf(stderr, "alltoallv wrong\n");
    if (getenv("CHECK_PASS_THROUGH")) {
        MPI_Comm part;
        MPI_Comm_split(MPI_COMM_WORLD, rank < size - 1, rank, &part);
        if (alltoall(part, 3, 0, 0)) wrong |= 4, fprintf(stderr, "alltoall on a part wrong\n");
        MPI_Comm_free(&part);
        if (intercomm()) wrong |= 8, fprintf(stderr, "intercommunicator alltoall wrong\n");
        if (alltoall(MPI_COMM_WORLD, 5, 0, 1)) wrong |= 16, fprintf(stderr, "derived datatype alltoall wrong\n");
        if (alltoall(MPI_COMM_WORLD, 2, 1, 0)) wrong |= 32, fprintf(stderr, "in-place alltoall wrong\n");
    }
    int any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
    if (rank == 0) printf(any ? "wrong (%d)\n" : "ok\n", any);
    MPI_Finalize();
    return any != 0;
}
