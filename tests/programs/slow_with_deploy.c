/* A program that runs 1 s slower when a deploy file is set (A2A_DEPLOY): a verifier must refuse such a file (a
   slowdown every pair of launches shows beside their start-up times on a loaded machine). It makes a few
   MPI_Alltoall calls first, so that liba2a has calls to serve; written in C so that a launch costs no interpreter's
   start-up. */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    int size, send[64 * 16], recv[64 * 16];
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < size * 16; i++) send[i] = i;
    for (int k = 0; k < 3; k++) MPI_Alltoall(send, 16, MPI_INT, recv, 16, MPI_INT, MPI_COMM_WORLD);
    const char *file = getenv("A2A_DEPLOY");
    if (file && *file) {
        struct timespec second = {1, 0};
        nanosleep(&second, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
