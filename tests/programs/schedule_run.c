/* A C program with no Python: loads a schedule file (argv[1]), runs it with the executor on MPI_COMM_WORLD at
   `count` ints per peer (argv[2]), blocking and then started and tested, and checks both against MPI_Alltoall.
   Prints "ok" on rank 0, or the executor's one line and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../a2a/execute/c/executor.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, count = argc > 2 ? atoi(argv[2]) : 3;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char error[512];
    a2ax_schedule *schedule;
    if (a2ax_load(argv[1], &schedule, error, sizeof error)) {
        if (rank == 0) fprintf(stderr, "%s\n", error);
        MPI_Finalize();
        return 1;
    }
    int n = size * count, *send = malloc(sizeof(int) * (n + 1)), *recv = malloc(sizeof(int) * (n + 1)),
        *want = malloc(sizeof(int) * (n + 1));
    for (int i = 0; i < n; i++) send[i] = rank * 1000 + i;
    MPI_Alltoall(send, count, MPI_INT, want, count, MPI_INT, MPI_COMM_WORLD);
    a2ax_plan *plan;
    if (a2ax_prepare_alltoall(schedule, MPI_COMM_WORLD, send, recv, (MPI_Aint)(count * sizeof(int)), &plan, error,
                              sizeof error)) {
        if (rank == 0) fprintf(stderr, "%s\n", error);
        MPI_Finalize();
        return 1;
    }
    int wrong = 0, done = 0;
    memset(recv, 0xff, sizeof(int) * n);
    a2ax_run(plan);
    wrong |= memcmp(recv, want, sizeof(int) * n) != 0;
    memset(recv, 0xff, sizeof(int) * n);
    a2ax_start(plan);
    while (!done) a2ax_test(plan, &done);
    wrong |= memcmp(recv, want, sizeof(int) * n) != 0;
    a2ax_free(plan);
    a2ax_schedule_free(schedule);
    int any;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0) printf(any ? "wrong result\n" : "ok\n");
    free(send);
    free(recv);
    free(want);
    MPI_Finalize();
    return any;
}
