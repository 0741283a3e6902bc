"""The MPI library's own MPI_Alltoall and MPI_Alltoallv: the baseline every other algorithm is set against.

Its twin in each library is the library's own decision (Open MPI's rule 0, MPICH's built-in
subtree, Intel's default), so a tuning file leaves such ranges to the library.
"""
import functools

from a2a.algos.buffers import mpi_type, peers
from a2a.algos.cost import DIRECT, GENERIC
from a2a.algos.registry import register
from a2a.algos.schedule import Among, Phases

TWINS = {"Open MPI": lambda options, p: ("ignore", 0), "MPICH": lambda options, p: ("native",),
         "Intel MPI": lambda options, p: "native"}


def steps(p: int, r: int) -> Phases:
    """What the factory runs, as data: one MPI_Alltoall of the whole job, a block to and from each rank."""
    return _whole_job(p)


@functools.lru_cache(maxsize=2)  # the same on every rank: a schedule read at p ranks asks p times
def _whole_job(p: int) -> Phases:
    everyone = (1,) * p
    return Phases((Among("alltoall", tuple(range(p)), None, everyone, everyone),))


@register("native", mirrors="MPI_Alltoall as the library chooses (Open MPI tuned, MPICH's selection)",
          cost=GENERIC, steps=steps, twins=TWINS, simplicity=0, intercomm=True, in_place=True)
def native(comm, sendbuf, recvbuf):
    """Call the MPI library's MPI_Alltoall on message specs built once, not parsed again per call."""
    from mpi4py import MPI

    # (buffer, count, datatype) tuples skip numpy's buffer export and the type lookup that
    # mpi4py does for bare arrays (docs/harness.md); strings and records travel as bytes
    datatype, scale = mpi_type(recvbuf.dtype)
    count = recvbuf.size // peers(comm) * scale
    recv = (MPI.buffer(recvbuf), count, datatype)
    send = MPI.IN_PLACE if sendbuf is None else (MPI.buffer(sendbuf), count, datatype)
    alltoall = comm.Alltoall
    return lambda: alltoall(send, recv)


@register("native", collective="alltoallv", mirrors="MPI_Alltoallv as the library chooses", cost=DIRECT,
          twins={"Open MPI": TWINS["Open MPI"], "MPICH": TWINS["MPICH"]}, intercomm=True, in_place=True)
def native_v(comm, send, recv):
    """Call the MPI library's MPI_Alltoallv on message specs built once."""
    from mpi4py import MPI

    outgoing, incoming, alltoallv = MPI.IN_PLACE if send is None else send.spec(), recv.spec(), comm.Alltoallv
    return lambda: alltoallv(outgoing, incoming)
