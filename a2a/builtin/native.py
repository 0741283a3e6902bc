"""The MPI library's own MPI_Alltoall."""
from ..registry import register


@register("native", mirrors="MPI_Alltoall as the library chooses (Open MPI tuned, MPICH's selection)")
def native(comm, sendbuf, recvbuf):
    """Call the MPI library's MPI_Alltoall."""
    alltoall = comm.Alltoall
    return lambda: alltoall(sendbuf, recvbuf)
