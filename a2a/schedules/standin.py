"""The capture's stand-in for mpi4py.MPI: communicators, requests, datatypes and reductions of stand-in ranks.

Collective set-up calls (Dup, Split, Split_type, Create_cart/Sub, allgather, allreduce, bcast,
...) really meet across the ranks, so every rank learns what it would learn under MPI; the
ranks' placement on nodes comes from the world's layout. Point-to-point calls log what they
send and receive, and when they are waited for, and their data really moves. Collectives on
sub-communicators log their member ranks and per-member byte counts. Anything the stand-in
does not answer raises CaptureError naming the call, so a plug-in that needs more fails
clearly instead of producing a wrong schedule.
"""
from __future__ import annotations

import functools
import itertools
import math
import types
from typing import Any, Callable

import numpy as np

from a2a.errors import CaptureError
from a2a.schedules.bytemaps import (
    BOTTOM,
    Datatype,
    Null,
    address,
    byte_map,
    covered,
    is_count,
    nbytes_of,
    pack,
    place,
    read,
    split,
    unpack,
    vector_bytes,
    whole_blocks,
    write,
)
from a2a.schedules.events import Collective, Irecv, Isend, RankLog, Recv, Send, Wait
from a2a.schedules.world import World

# A receive's (world, box key, buffer, offsets, the text that names it for a deadlock), while it waits for its data
Receipt = tuple[World, tuple, Any, Any, Callable[[], str]]


class Request:
    """A stand-in request: the logged message it stands for, and for a receive where it lands."""

    __slots__ = ("log", "ident", "receive", "active")  # a capture holds one per message of every rank

    def __init__(self, log: RankLog, ident: int | None, receive: Receipt | None = None):
        self.log, self.ident, self.receive, self.active = log, ident, receive, True

    def _complete(self) -> None:
        if self.receive:
            world, key, buf, offsets, what = self.receive
            data = world.collect(key, what)
            write(buf, offsets, data)
            assert self.ident is not None  # a receive is a logged message
            self.log.carried(self.ident, data)
            self.receive = None
        self.active = False

    def _ready(self) -> bool:
        return not self.receive or self.receive[0].has(self.receive[1])

    @staticmethod
    def Waitany(requests: list["Request"], status: Any = None) -> int:
        """The first active request that can complete (sends always can); UNDEFINED if none is active.

        Under MPI the order is the network's; here it is the lowest such index, and the trace
        waits for that request.
        """
        live = [i for i, q in enumerate(requests) if q.active and q.ident is not None]
        if not live:
            return UNDEFINED
        if len(live) > 1:
            requests[live[0]].log.raced()
        while True:
            ready = next((i for i in live if requests[i]._ready()), None)
            if ready is not None:
                requests[ready].Wait()
                return ready
            # none ready: every live one is a receive (a send always is)
            receipts = [receipt for receipt in (requests[i].receive for i in live) if receipt is not None]
            receipts[0][0].wait_any([receipt[1] for receipt in receipts], "any of several messages (Waitany)")

    def Wait(self, status: Any = None) -> None:
        self._complete()
        if self.ident is not None:
            self.log.add(Wait((self.ident,)))

    def Free(self) -> None:
        pass

    def Test(self, status: Any = None) -> bool:
        raise CaptureError("the capture's stand-in MPI does not answer Request.Test (polling has no "
                           "fixed schedule); use Wait or Waitall")

    @staticmethod
    def Waitall(requests: list["Request"], statuses: Any = None) -> None:
        for q in requests:
            q._complete()
        idents = tuple(q.ident for q in requests if q.ident is not None)
        if requests and idents:
            requests[0].log.add(Wait(idents))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in MPI does not answer Request.{name}")


class Prequest(Request):
    """A persistent request: every Start logs (and for a send, delivers) a new message."""

    __slots__ = ("comm", "kind", "peer", "spec", "tag")

    def __init__(self, comm: "StandInComm", kind: type[Isend] | type[Irecv], peer: int, spec: Any, tag: int):
        super().__init__(comm.log, None)
        self.comm, self.kind, self.peer, self.spec, self.tag = comm, kind, peer, spec, tag

    def Start(self) -> None:
        started = self.comm._post(self.kind, self.peer, self.spec, self.tag)
        self.ident, self.receive, self.active = started.ident, started.receive, True

    @staticmethod
    def Startall(requests: list["Prequest"]) -> None:
        for q in requests:
            q.Start()

COMM_NULL = Null("COMM_NULL")
UNDEFINED = -32766
COMM_TYPE_SHARED = 1
_OPS = {"SUM": np.add, "MIN": np.minimum, "MAX": np.maximum, "PROD": np.multiply,
        "LOR": np.logical_or, "LAND": np.logical_and, "BOR": np.bitwise_or, "BAND": np.bitwise_and}


def _split_groups(values: list[tuple[int, int]], members: tuple[int, ...]) -> dict[int, tuple[list[int], tuple]]:
    """Comm.Split's ranks per color, from every rank's (color, key): ordered by key, then rank; and the world ranks
    they are (`members`: the split communicator's). Made once, for all ranks."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for rank, (color, key) in enumerate(values):
        groups.setdefault(color, []).append((key, rank))
    ordered = {color: [rank for _, rank in sorted(keyed)] for color, keyed in groups.items()}
    return {color: (ranks, tuple(members[i] for i in ranks)) for color, ranks in ordered.items()}


def _fold(values: list[Any], f: Callable[[Any, Any], Any]) -> Any:
    result = values[0]
    for v in values[1:]:
        result = f(result, v)
    return result


class Op:
    """A stand-in reduction operation."""

    def __init__(self, name: str):
        self.name, self.ufunc = name, _OPS[name]

    def reduce(self, values: list[Any]) -> Any:
        """Fold values in member order (Python objects stay Python objects where they can)."""
        result = _fold(values, self.ufunc)
        return result.item() if isinstance(result, np.generic) else result

    def __repr__(self) -> str:
        return f"MPI.{self.name}"

Blocking = type[Send] | type[Recv]  # the event a blocking call logs (StandInComm's own Send and Recv hide them)


class StandInComm:
    """A rank's view of a communicator of the captured job: group (world ranks), own index."""

    def __init__(self, world: World, members: tuple[int, ...], rank: int, key: tuple, log: RankLog,
                 dims: tuple[int, ...] = ()):
        self.world, self.members, self.rank, self.key, self.log, self.dims = world, members, rank, key, log, dims
        self._calls = itertools.count()

    size = property(lambda self: len(self.members))

    def Get_size(self) -> int:
        return self.size

    def Get_rank(self) -> int:
        return self.rank

    def Is_inter(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<stand-in communicator of {self.size} ranks, rank {self.rank}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in communicator does not answer Comm.{name}; "
                           "it answers Dup, Split, Split_type, Create_cart/Sub, Free, the lowercase "
                           "collectives, point-to-point calls and Alltoall(v)/Gather(v)/Scatter(v)/"
                           "Allgather/Bcast/Barrier")

    # -- meeting the other members ------------------------------------------------------------

    def _meet(self, what: str, value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        key = (self.key, next(self._calls), what)
        return self.world.meet(key, self.size, self.rank, value, combine)

    def _world_rank(self, rank: int) -> int:
        if not 0 <= rank < self.size:
            raise CaptureError(f"rank {rank} is outside this communicator of {self.size} ranks")
        return self.members[rank]

    # -- set-up ---------------------------------------------------------------------------------

    def Dup(self) -> "StandInComm":
        call = next(self._calls)
        self.world.meet((self.key, call, "Dup"), self.size, self.rank, None, lambda v: None)
        return StandInComm(self.world, self.members, self.rank, (self.key, call, "dup"), self.log, self.dims)

    Clone = Dup

    def Split(self, color: int = 0, key: int = 0) -> Any:
        call = next(self._calls)
        groups = self.world.meet((self.key, call, "Split"), self.size, self.rank, (color, key),
                                 functools.partial(_split_groups, members=self.members))
        if color == UNDEFINED:
            return COMM_NULL
        ranks, members = groups[color]
        return StandInComm(self.world, members, ranks.index(self.rank), (self.key, call, "split", color), self.log)

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Any:
        if split_type != COMM_TYPE_SHARED:
            raise CaptureError(f"Comm.Split_type({split_type}): the stand-in answers COMM_TYPE_SHARED only")
        return self.Split(self.world.node_of[self.members[self.rank]], key)

    def Create_cart(self, dims: Any, periods: Any = None, reorder: bool = False) -> "StandInComm":
        dims = tuple(int(d) for d in dims)
        if math.prod(dims) > self.size:
            raise CaptureError(f"Create_cart({list(dims)}) needs {math.prod(dims)} ranks; "
                               f"the communicator has {self.size}")
        inside = self.rank < math.prod(dims)
        cart = self.Split(0 if inside else UNDEFINED, self.rank)
        if cart is COMM_NULL:
            return COMM_NULL
        cart.dims = dims
        return cart

    def Get_coords(self, rank: int) -> list[int]:
        return [int(c) for c in np.unravel_index(rank, self.dims)] if self.dims else []

    def Sub(self, remain_dims: Any) -> "StandInComm":
        coords = self.Get_coords(self.rank)
        color = 0
        for c, d, keep in zip(coords, self.dims, remain_dims):
            color = color if keep else color * d + int(c)
        sub = self.Split(color, self.rank)
        sub.dims = tuple(d for d, keep in zip(self.dims, remain_dims) if keep)
        return sub

    def Free(self) -> None:
        pass

    Disconnect = Free

    # -- lowercase (object) collectives: really computed -----------------------------------------

    def allgather(self, value: Any) -> list[Any]:
        return self._meet("allgather", value, list)

    def allreduce(self, value: Any, op: Any = None) -> Any:
        return self._meet("allreduce", value, (op if isinstance(op, Op) else Op("SUM")).reduce)

    def bcast(self, value: Any = None, root: int = 0) -> Any:
        return self._meet("bcast", value, lambda v: v[root])

    def gather(self, value: Any, root: int = 0) -> Any:
        everyone = self._meet("gather", value, list)
        return everyone if self.rank == root else None

    def scatter(self, values: Any, root: int = 0) -> Any:
        return self._meet("scatter", values, lambda v: v[root])[self.rank]

    def alltoall(self, values: Any) -> list[Any]:
        everyone = self._meet("alltoall", values, list)
        return [everyone[i][self.rank] for i in range(self.size)]

    def barrier(self) -> None:
        self._meet("barrier", None, lambda v: None)

    # -- point to point: logged, and the data really moves (a schedule may depend on it) ---------

    def _post(self, kind: type[Isend] | type[Irecv], peer: int, spec: Any, tag: int) -> Request:
        """Log a message; a send delivers its bytes now, a receive collects them when completed."""
        if not is_count(tag) or tag < 0:
            raise CaptureError(f"tag {tag!r}: the stand-in matches messages by explicit tags only (no ANY_TAG)")
        log = self.log
        ident = next(log.requests)
        buf, offsets = byte_map(spec)
        log.add(kind(self._world_rank(peer), covered(buf, offsets), ident))
        if kind is Isend:
            data = read(buf, offsets)
            self.world.deposit((self.key, self.rank, peer, tag), data)
            log.carried(ident, data)
            return Request(log, ident)
        what = lambda: f"a message from rank {peer} (tag {tag}) on {self!r}"  # noqa: E731  (text when needed)
        return Request(log, ident, (self.world, (self.key, peer, self.rank, tag), buf, offsets, what))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        return self._post(Isend, dest, buf, tag)

    Issend = Irsend = Isend

    def Irecv(self, buf: Any, source: int, tag: int = 0) -> Request:
        return self._post(Irecv, source, buf, tag)

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._blocking(self._post(Isend, dest, buf, tag), Send)

    Ssend = Rsend = Send

    def Recv(self, buf: Any, source: int, tag: int = 0, status: Any = None) -> None:
        self._blocking(self._post(Irecv, source, buf, tag), Recv)

    def _blocking(self, request: Request, kind: Blocking) -> None:
        """A blocking call logs as itself, not as a request and a wait."""
        request._complete()
        log = request.log
        assert request.ident is not None  # _post logged it
        log.blocked(request.ident)
        if log.recording:
            event = log.events.pop()
            assert isinstance(event, (Isend, Irecv))  # the one _post logged
            log.events.append(kind(event.peer, event.nbytes))

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        self._world_rank(dest)
        return Prequest(self, Isend, dest, buf, tag)

    Ssend_init = Send_init

    def Recv_init(self, buf: Any, source: int, tag: int = 0) -> Prequest:
        self._world_rank(source)
        return Prequest(self, Irecv, source, buf, tag)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = 0,
                 recvtag: int = 0, status: Any = None) -> None:
        Request.Waitall([self._post(Isend, dest, sendbuf, sendtag), self._post(Irecv, source, recvbuf, recvtag)])

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = 0, recvtag: int = 0,
                         status: Any = None) -> None:
        self.Sendrecv(buf, dest, sendtag, buf, source, recvtag)  # the send's bytes are copied when posted

    # -- buffer collectives: logged, and the data really moves -------------------------------------

    def _collective(self, name: str, root: int | None, sends: tuple[int, ...], recvs: tuple[int, ...],
                    value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        self.log.add(Collective(name, self.members, None if root is None else self._world_rank(root), sends, recvs))
        return self._meet(name, value, combine)

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        self._exchange("alltoall", sendbuf, recvbuf)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        self._exchange("alltoallv", sendbuf, recvbuf)

    def _exchange(self, name: str, sendbuf: Any, recvbuf: Any) -> None:
        """Every member's blocks for every member; a rank whose blocks are even sends them as one (n, bytes) array.
        (An alltoallv's blocks may be even on some members only: each reads its own row of what each member gave.)"""
        n = self.size
        outgoing, incoming = whole_blocks(sendbuf, n), whole_blocks(recvbuf, n)
        if outgoing is not None and incoming is not None and outgoing.shape == incoming.shape:
            width = (outgoing.shape[1],) * n
            sent = outgoing.copy() if self.log.follows else outgoing  # in place, the receive overwrites it
            everyone = self._collective(name, None, width, width, outgoing, list)
            incoming[...] = np.stack([given[self.rank] for given in everyone])
            self.log.collected(self.members, list(sent), list(incoming))
            return
        pieces = split(sendbuf, n)
        everyone = self._collective(name, None, tuple(map(len, pieces)), vector_bytes(recvbuf, n), pieces, list)
        received = [everyone[i][self.rank] for i in range(n)]
        place(recvbuf, received)
        self.log.collected(self.members, pieces, received)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        raise CaptureError("Comm.Alltoallw: the stand-in does not answer it")

    def _gather(self, name: str, sendbuf: Any, recvbuf: Any, root: int) -> None:
        n, mine = self.size, pack(sendbuf)
        sends = tuple(len(mine) if i == root else 0 for i in range(n))
        recvs = vector_bytes(recvbuf, n) if self.rank == root else (0,) * n
        everyone = self._collective(name, root, sends, recvs, mine, list)
        if self.rank == root:
            place(recvbuf, everyone)
        self.log.collected(self.members, [mine if i == root else None for i in range(n)],
                           everyone if self.rank == root else [None] * n)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gather("gather", sendbuf, recvbuf, root)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._gather("gatherv", sendbuf, recvbuf, root)

    def _scatter(self, name: str, sendbuf: Any, recvbuf: Any, root: int) -> None:
        n = self.size
        pieces = split(sendbuf, n) if self.rank == root else None
        sends = tuple(map(len, pieces)) if pieces else (0,) * n
        recvs = tuple(nbytes_of(recvbuf) if i == root else 0 for i in range(n))
        everyone = self._collective(name, root, sends, recvs, pieces, lambda v: v[root])
        unpack(recvbuf, everyone[self.rank])
        nothing: list[np.ndarray | None] = [None] * n
        self.log.collected(self.members, pieces or nothing,
                           [everyone[self.rank] if i == root else None for i in range(n)])

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatter("scatter", sendbuf, recvbuf, root)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        self._scatter("scatterv", sendbuf, recvbuf, root)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        n, mine = self.size, pack(sendbuf)
        everyone = self._collective("allgather", None, (len(mine),) * n, vector_bytes(recvbuf, n), mine, list)
        place(recvbuf, everyone)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        n, mine = self.size, nbytes_of(buf)
        sends = (mine,) * n if self.rank == root else (0,) * n
        recvs = tuple(mine if i == root else 0 for i in range(n))
        data = self._collective("bcast", root, sends, recvs, pack(buf), lambda v: v[root])
        if self.rank != root:
            unpack(buf, data)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = None) -> None:
        n, mine = self.size, nbytes_of(recvbuf)
        reduce = (op if isinstance(op, Op) else Op("SUM")).reduce
        values = np.array(byte_map(sendbuf)[0], copy=True)
        total = self._collective("allreduce", None, (mine,) * n, (mine,) * n, values, reduce)
        np.asarray(byte_map(recvbuf)[0])[...] = total

    def Barrier(self) -> None:
        self._collective("barrier", None, (0,) * self.size, (0,) * self.size, None, lambda v: None)

    def Ibarrier(self) -> Request:
        raise CaptureError("Comm.Ibarrier: the stand-in does not answer non-blocking collectives")

def standin_module() -> types.ModuleType:
    """A module that answers what algorithms read from `mpi4py.MPI`; anything else is a CaptureError."""
    module = types.ModuleType("mpi4py.MPI", "the capture's stand-in MPI (a2a.simulate)")
    datatypes = {"BYTE": 1, "CHAR": 1, "INT": 4, "LONG": 8, "FLOAT": 4, "DOUBLE": 8, "INT8_T": 1, "INT16_T": 2,
                 "INT32_T": 4, "INT64_T": 8, "UINT8_T": 1, "C_FLOAT_COMPLEX": 8, "C_DOUBLE_COMPLEX": 16}
    for name, size in datatypes.items():
        setattr(module, name, Datatype.basic(size, name))
    for name in _OPS:
        setattr(module, name, Op(name))
    vars(module).update(  # a module filled in here: its names are not known to the type checker
        Datatype=Datatype, Request=Request, Prequest=Prequest, Comm=StandInComm, Intracomm=StandInComm,
        COMM_NULL=COMM_NULL, REQUEST_NULL=Null("REQUEST_NULL"),
        UNDEFINED=UNDEFINED, COMM_TYPE_SHARED=COMM_TYPE_SHARED, PROC_NULL=-1, ANY_TAG=-1,
        IN_PLACE="MPI.IN_PLACE", BOTTOM=BOTTOM, Get_address=address, buffer=lambda obj: obj)

    def unknown(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise CaptureError(f"the capture's stand-in MPI does not answer MPI.{name}")

    vars(module)["__getattr__"] = unknown  # PEP 562: names the stand-in does not answer
    return module
