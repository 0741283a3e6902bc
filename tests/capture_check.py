"""What an algorithm really sends under MPI, counted by wrapping the real communicator, against its capture.

Under MPI every rank runs the plan on a counting proxy of its communicator (and of
`mpi4py.MPI`, so persistent requests count when started); the proxy logs point-to-point
sends (peer, bytes from the real datatypes) and collectives (name, members) during one
call. Then every rank captures the same algorithm on stand-in ranks, reads the schedule of its
registered Steps where it has them (what the simulator uses instead of a capture), and compares
its own rank's record with each. Run as a program (`mpiexec -n N python tests/capture_check.py`) it checks
every registered algorithm and prints the mismatches.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import a2a  # noqa: E402
from a2a.algos.nodes import node_groups  # noqa: E402
from a2a.errors import A2AError  # noqa: E402
from a2a.schedules.events import Collective, Send, collectives, traffic  # noqa: E402
from a2a.schedules.mpi_module import replaced_mpi  # noqa: E402
from a2a.simulate.capture import capture, stepped  # noqa: E402


class Tally:
    """The events one rank logs while recording."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.recording = False

    def add(self, event: Any) -> None:
        if self.recording:
            self.events.append(event)


def real_nbytes(spec: Any) -> int:
    """Bytes a real mpi4py buffer spec carries, sized by the real MPI datatypes."""
    if isinstance(spec, np.ndarray):
        return spec.nbytes
    if len(spec) == 3:
        return int(spec[1]) * spec[2].Get_size()
    buf, datatype = spec
    return (np.asarray(buf).nbytes // datatype.Get_extent()[1]) * datatype.Get_size()


class CountedRequest:
    """A real request that logs its message when started."""

    def __init__(self, real: Any, tally: Tally, event: Any):
        self.real, self.tally, self.event = real, tally, event

    def Start(self) -> None:
        if self.event:
            self.tally.add(self.event)
        self.real.Start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def counting_module(real_mpi: Any) -> types.ModuleType:
    """`mpi4py.MPI` with Prequest.Startall and Request.Waitall that accept counted requests."""
    module = types.ModuleType("mpi4py.MPI")

    class CountingPrequest:
        @staticmethod
        def Startall(requests: list[CountedRequest]) -> None:
            for q in requests:
                if q.event:
                    q.tally.add(q.event)
            real_mpi.Prequest.Startall([q.real for q in requests])

    class CountingRequests:
        @staticmethod
        def Waitall(requests: list[Any], statuses: Any = None) -> None:
            real_mpi.Request.Waitall([getattr(q, "real", q) for q in requests])

        @staticmethod
        def Waitany(requests: list[Any], status: Any = None) -> int:
            return real_mpi.Request.Waitany([getattr(q, "real", q) for q in requests])

    vars(module).update(__getattr__=lambda name: getattr(real_mpi, name), Prequest=CountingPrequest,
                        Request=CountingRequests)
    return module


COLLECTIVES = ("Alltoall", "Alltoallv", "Alltoallw", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
               "Allgatherv", "Bcast", "Allreduce", "Reduce", "Barrier")


class CountingComm:
    """A real communicator that logs what passes through it."""

    def __init__(self, real: Any, tally: Tally, real_mpi: Any):
        self.real, self.tally, self.mpi = real, tally, real_mpi
        self.members = tuple(real.allgather(real_mpi.COMM_WORLD.rank))

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.real, name)
        if name in COLLECTIVES:
            def collective(*args: Any, **kwargs: Any) -> Any:
                self.tally.add(Collective(name.lower(), self.members, None, (), ()))
                return attribute(*args, **kwargs)
            return collective
        return attribute

    def _wrap(self, comm: Any) -> Any:
        return comm if comm == self.mpi.COMM_NULL else CountingComm(comm, self.tally, self.mpi)

    def Dup(self) -> Any:
        return self._wrap(self.real.Dup())

    def Split(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.real.Split(*args, **kwargs))

    def Split_type(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.real.Split_type(*args, **kwargs))

    def Create_cart(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.real.Create_cart(*args, **kwargs))

    def Sub(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.real.Sub(*args, **kwargs))

    def _send(self, buf: Any, dest: int) -> None:
        self.tally.add(Send(self.members[dest], real_nbytes(buf)))

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        self._send(buf, dest)
        self.real.Send(buf, dest, tag)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        self._send(buf, dest)
        return self.real.Isend(buf, dest, tag)

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> CountedRequest:
        return CountedRequest(self.real.Send_init(buf, dest, tag), self.tally,
                              Send(self.members[dest], real_nbytes(buf)))

    def Recv_init(self, buf: Any, source: int, tag: int = 0) -> CountedRequest:
        return CountedRequest(self.real.Recv_init(buf, source, tag), self.tally, None)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None, source: int = 0,
                 recvtag: int = 0, status: Any = None) -> None:
        self._send(sendbuf, dest)
        self.real.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag, status)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = 0, recvtag: int = 0,
                         status: Any = None) -> None:
        self._send(buf, dest)
        self.real.Sendrecv_replace(buf, dest, sendtag, source, recvtag, status)


def uneven(p: int, count: int) -> np.ndarray:
    """An alltoallv count matrix (row = sender) with zeros and unequal blocks."""
    return np.array([[(3 * i + j) % 4 * count for j in range(p)] for i in range(p)])


def real_record(comm: Any, name: str, options: dict[str, Any], count: int, collective: str) -> list[Any]:
    """This rank's sends and collectives during one call of the plan under MPI."""
    from mpi4py import MPI

    tally = Tally()
    counting = CountingComm(comm, tally, MPI)
    if "executor" in a2a.get(name).options:  # the algorithm's own code: what the capture follows
        options = {**options, "executor": "python"}
    with replaced_mpi(counting_module(MPI)):
        if collective == "alltoall":
            send = np.arange(comm.size * count, dtype=np.float32)
            plan = a2a.get(name).plan(counting, send, np.zeros_like(send), **options)
        else:
            matrix = uneven(comm.size, count)
            send = np.arange(matrix[comm.rank].sum(), dtype=np.float32)
            recv = np.zeros(matrix[:, comm.rank].sum(), dtype=np.float32)
            plan = a2a.get(name).plan_v(counting, send, matrix[comm.rank], recv, matrix[:, comm.rank], **options)
        tally.recording = True
        plan()
        tally.recording = False
        plan.free()
    return tally.events


# One-sided (RMA) schedules: the stand-in has no windows, so it refuses them, naming MPI.Win.
ONE_SIDED = ("onesided",)


# Option sets that change an alltoall schedule, checked beside each algorithm's defaults
OPTION_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("bruck", {"radix": 3}), ("throttled", {"window": 2}), ("node_aware", {"ppn": 2}),
    ("node_aware", {"ppn": 2, "placement": "cyclic"}), ("hierarchical", {"ppn": 2}),
    ("hierarchical", {"ppn": 2, "placement": "cyclic"}), ("linear_sync", {"window": 1}),
    ("linear_sync", {"window": 2}), ("bruck_zero_copy", {"radix": 3}), ("multileader", {"ppn": 2, "leaders": 2}),
    ("locality_aware", {"ppn": 2, "placement": "cyclic"}), ("parallel_split", {"factor": 4}))


def variants(p: int) -> list[tuple[str, dict[str, Any], str]]:
    """Every registered algorithm (not auto) of each collective at its defaults, and option variants."""
    chosen: list[tuple[str, dict[str, Any], str]] = [(name, {}, collective) for collective in ("alltoall", "alltoallv")
              for name in a2a.algorithms(collective) if name != "auto"]
    chosen += [(name, options, "alltoall") for name, options in OPTION_VARIANTS if name in a2a.algorithms()]
    if p & (p - 1) == 0:
        chosen.append(("pairwise", {"schedule": "xor"}, "alltoall"))
    return chosen


def mismatches(comm: Any, count: int = 3) -> list[str]:
    """Every variant's real record against its capture, on this rank; what differs, as text."""
    nodes = node_groups(comm)  # the real layout (ppn=0 algorithms ask MPI for it)
    found = []
    for name, options, collective in variants(comm.size):
        matrix = uneven(comm.size, count) if collective == "alltoallv" else None
        if name in ONE_SIDED:
            try:
                capture(name, options, comm.size, count, "float32", nodes=nodes, matrix=matrix)
                found.append(f"{name}: captured, so take it off ONE_SIDED and compare it")
            except A2AError as problem:
                if "does not answer MPI.Win" not in str(problem):
                    found.append(f"{name}: refused without naming MPI.Win: {problem}")
            continue
        real = real_record(comm, name, options, count, collective)
        try:
            captured = capture(name, options, comm.size, count, "float32", nodes=nodes,
                               matrix=matrix).events[comm.rank]
        except A2AError as problem:
            found.append(f"{collective} {name} {options}: capture failed: {problem}")
            continue
        records = {"the capture": captured}
        read = stepped(name, options, comm.size, nodes=nodes) if matrix is None else None
        if read is not None:  # the schedule the simulator reads instead of capturing
            records["its steps"] = read.scaled(count).events[comm.rank]
        want = (traffic(real), collectives(real))
        for source, events in records.items():
            got = (traffic(events), collectives(events))
            if want != got:
                found.append(f"rank {comm.rank} {collective} {name} {options}: MPI sends {want}, {source} logs {got}")
    return found


if __name__ == "__main__":
    from mpi4py import MPI

    problems = MPI.COMM_WORLD.gather(mismatches(MPI.COMM_WORLD), root=0)
    if problems is not None:  # rank 0's
        lines = [line for rank in problems for line in rank]
        print("\n".join(lines) or f"every algorithm matches at p={MPI.COMM_WORLD.size}")
        sys.exit(1 if lines else 0)
