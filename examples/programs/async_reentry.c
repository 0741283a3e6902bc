/* Does MPICH call a poll function (MPIX_Async_start) again from inside itself when the poll enters MPI's progress?
 * (docs/executor.md: why the executor's poll function never does.)
 *
 *   mpiexec -n 2 ./async_reentry [probe]
 *
 * A poll function is registered; the main loop drives MPI's progress (MPIX_Stream_progress) until it has run 1000
 * times. With `probe`, each outermost call of the poll makes an MPI_Iprobe on MPI_COMM_WORLD, which finds nothing and
 * so polls progress. Rank 0 prints the deepest nesting of the poll seen: 1 when MPI never calls it from inside itself.
 * (On one rank MPI_COMM_WORLD is a self communicator, whose MPI_Iprobe polls nothing: run it on two.) MPICH only. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
static int depth, deepest, calls, probe_inside;
static int poll(MPIX_Async_thing thing) {
    (void)thing;
    depth++, calls++;
    deepest = depth > deepest ? depth : deepest;
    if (probe_inside && depth == 1) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    depth--;
    return depth == 0 && calls >= 1000 ? MPIX_ASYNC_DONE : MPIX_ASYNC_NOPROGRESS;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    probe_inside = argc > 1 && strcmp(argv[1], "probe") == 0;
    MPIX_Async_start(poll, NULL, MPIX_STREAM_NULL);
    while (calls < 1000) MPIX_Stream_progress(MPIX_STREAM_NULL);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!rank) printf("poll %s MPI_Iprobe: %d calls, deepest nesting %d\n", probe_inside ? "making" : "not making", calls, deepest);
    MPI_Finalize();
}
