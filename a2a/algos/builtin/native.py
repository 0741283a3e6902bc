"""The MPI library's own MPI_Alltoall and MPI_Alltoallv: the baseline every other algorithm is set against.

`form` picks the library's call: `blocking` MPI_Alltoall(v); `nonblocking` MPI_Ialltoall(v), then
MPI_Wait; `persistent` MPI_Alltoall(v)_init once per plan, then MPI_Start and MPI_Wait per call
(MPI-4). Run non-blocking (a plan's start, test, wait), the last two are the library's own
request: start() starts it, each test() is an MPI_Test of it, wait() its MPI_Wait; the blocking
form runs whole inside wait().

Its twin in each library is the library's own decision (Open MPI's rule 0, MPICH's built-in
subtree, Intel's default), so a tuning file leaves such ranges to the library.
"""
import functools
from typing import Any, Callable

from a2a.algos.buffers import mpi_type, peers
from a2a.algos.cost import DIRECT, GENERIC
from a2a.algos.plan import Prepared
from a2a.algos.registry import Twin, register
from a2a.algos.schedule import Among, Phases
from a2a.errors import BadOption

TWINS: dict[str, Twin] = {
    "Open MPI": lambda options, p: ("ignore", 0), "MPICH": lambda options, p: ("native",),
    "Intel MPI": lambda options, p: "native", "MPICH Ialltoall": lambda options, p: ("native",)}
FORMS = ("blocking", "nonblocking", "persistent")
LIMITS = {"form": (lambda form: form in FORMS, ", ".join(FORMS))}


def steps(p: int, r: int, form: str) -> Phases:
    """What the factory runs, as data: one MPI_Alltoall of the whole job, a block to and from each rank."""
    return _whole_job(p)


@functools.lru_cache(maxsize=2)  # the same on every rank: a schedule read at p ranks asks p times
def _whole_job(p: int) -> Phases:
    everyone = (1,) * p
    return Phases((Among("alltoall", tuple(range(p)), None, everyone, everyone),))


def called(comm: Any, name: str, form: str, send: Any, recv: Any) -> Prepared:
    """The library's `name` (Alltoall or Alltoallv) in `form`, on message specs built once."""
    if form == "blocking":
        blocking = getattr(comm, name)
        return Prepared(lambda: blocking(send, recv), in_wait=True)
    if form == "nonblocking":
        start = getattr(comm, f"I{name.lower()}")
        return requested(lambda: start(send, recv))
    try:
        request = getattr(comm, f"{name}_init")(send, recv)
    except (AttributeError, NotImplementedError):
        raise BadOption(f"native: form=persistent needs MPI_{name}_init (MPI-4), which this MPI library or mpi4py "
                        "lacks; accepted here: blocking, nonblocking") from None

    def started() -> Any:
        request.Start()
        return request
    return requested(started, request.Free)


def requested(begin: Callable[[], Any], free: Callable[[], Any] | None = None) -> Prepared:
    """A run that is one library request `begin` starts: waited for at once, or tested and waited by the caller."""
    return Prepared(lambda: begin().Wait(), free, request=begin)


@register("native", mirrors="MPI_Alltoall as the library chooses (Open MPI tuned, MPICH's selection); form=nonblocking "
          "MPI_Ialltoall, form=persistent MPI_Alltoall_init", limits=LIMITS, cost=GENERIC, steps=steps, twins=TWINS,
          simplicity=0, intercomm=True, in_place=True, exact=False)
def native(comm, sendbuf, recvbuf, *, form: str = "blocking"):
    """Call the MPI library's MPI_Alltoall (or its non-blocking or persistent form) on message specs built once."""
    from mpi4py import MPI

    # (buffer, count, datatype) tuples skip numpy's buffer export and the type lookup that
    # mpi4py does for bare arrays (docs/harness.md); strings and records travel as bytes
    datatype, scale = mpi_type(recvbuf.dtype)
    count = recvbuf.size // peers(comm) * scale
    recv = (MPI.buffer(recvbuf), count, datatype)
    send = MPI.IN_PLACE if sendbuf is None else (MPI.buffer(sendbuf), count, datatype)
    return called(comm, "Alltoall", form, send, recv)


@register("native", collective="alltoallv", mirrors="MPI_Alltoallv as the library chooses (or MPI_Ialltoallv, "
          "MPI_Alltoallv_init)", limits=LIMITS, cost=DIRECT, twins={"Open MPI": TWINS["Open MPI"],
                                                                     "MPICH": TWINS["MPICH"]},
          intercomm=True, in_place=True)
def native_v(comm, send, recv, *, form: str = "blocking"):
    """Call the MPI library's MPI_Alltoallv (or its non-blocking or persistent form) on message specs built once."""
    from mpi4py import MPI

    return called(comm, "Alltoallv", form, MPI.IN_PLACE if send is None else send.spec(), recv.spec())
