"""The MPI library's own MPI_Alltoall and MPI_Alltoallv: the baseline every other algorithm is set against.

Its twin in each library is the library's own decision (Open MPI's rule 0, MPICH's built-in
subtree, Intel's default), so a tuning file leaves such ranges to the library.
"""
from a2a.algos.cost import DIRECT, GENERIC
from a2a.algos.registry import register

TWINS = {"Open MPI": lambda options, p: ("ignore", 0), "MPICH": lambda options, p: ("native",),
         "Intel MPI": lambda options, p: "native"}


@register("native", mirrors="MPI_Alltoall as the library chooses (Open MPI tuned, MPICH's selection)",
          cost=GENERIC, twins=TWINS, simplicity=0)
def native(comm, sendbuf, recvbuf):
    """Call the MPI library's MPI_Alltoall on message specs built once, not parsed again per call."""
    from mpi4py import MPI

    # (buffer, count, datatype) tuples skip numpy's buffer export and the type lookup that
    # mpi4py does for bare arrays: about 0.4 us per call (docs/harness.md)
    count, datatype = sendbuf.size // comm.size, MPI.Datatype.fromcode(sendbuf.dtype.char)
    send, recv = (MPI.buffer(sendbuf), count, datatype), (MPI.buffer(recvbuf), count, datatype)
    alltoall = comm.Alltoall
    return lambda: alltoall(send, recv)


@register("native", collective="alltoallv", mirrors="MPI_Alltoallv as the library chooses", cost=DIRECT,
          twins={"Open MPI": TWINS["Open MPI"], "MPICH": TWINS["MPICH"]})
def native_v(comm, send, recv):
    """Call the MPI library's MPI_Alltoallv on message specs built once."""
    outgoing, incoming, alltoallv = send.spec(), recv.spec(), comm.Alltoallv
    return lambda: alltoallv(outgoing, incoming)
