"""Record an algorithm's messages without launching it: every rank's real plan against a stand-in MPI.

Each rank runs `a2a.get(name).plan(...)` and one call of the plan in a greenlet of its own
(a2a.schedules.world: one rank runs at a time, until it must wait), with `mpi4py.MPI` replaced
by the stand-in (a2a.schedules.standin) for the duration. The ranks' placement on nodes comes
from the given layout. Local copies reach the rank's log through the algorithms' copy seam
(a2a.algos.prebuilt.WATCHER, set in each rank's context), and through the buffers the capture
hands the plan (Tracked arrays, which report what is assigned or copied into them). The
events (a2a.schedules.events) are the schedule SimGrid replays.
"""
from __future__ import annotations

import gc
import hashlib
import os
import pickle
import signal
from contextlib import contextmanager
from contextvars import copy_context
from typing import Any, Callable, Iterator

import numpy as np

from a2a.algos.facts import steps_for
from a2a.algos.nodes import one_per_node
from a2a.algos.options import EXECUTOR
from a2a.algos.prebuilt import WATCHER
from a2a.algos.registry import get
from a2a.algos.schedule import Among, Batches, Copied, Exchanges, Phases, Posted, Rounds
from a2a.errors import A2AError, CaptureError, CaptureOutgrew, PlanFailed
from a2a.schedules.events import Burst, Collective, Copy, Event, Irecv, Isend, Posts, RankLog, Schedule, Sendrecvs, Wait
from a2a.schedules.mpi_module import replaced_mpi
from a2a.schedules.standin import StandInComm, standin_module
from a2a.schedules.world import Aborted, World, memory_limit, resident_bytes
from a2a.sweep.pattern import expected_pattern, expected_pattern_v, send_pattern, send_pattern_v


class Tracked(np.ndarray):
    """The buffers a capture hands a plan: an assignment into them, or an np.copyto or np.take into or out of
    them, counts as a local copy (a plug-in's own copies; the built-ins copy through the seam)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        _report(np.asarray(self)[key].nbytes)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        done = super().__array_function__(func, types, args, kwargs)
        target = args[0] if func is np.copyto else kwargs.get("out") if func is np.take else None
        if target is not None:
            _report(np.asarray(target).nbytes)
        return done


def _report(nbytes: int) -> None:
    watcher = WATCHER.get()
    if watcher is not None:
        watcher.copied(nbytes)


def tracked(shape: Any, dtype: Any) -> Tracked:
    """An uninitialised Tracked array."""
    return np.empty(shape, dtype).view(Tracked)


def capture(name: str, options: dict[str, Any], nprocs: int, count: int, dtype: str = "float32",
            nodes: list[list[int]] | None = None, group: Callable[[Any], Any] | None = None,
            matrix: np.ndarray | None = None, memory: int | None = None) -> Schedule:
    """Run `name`'s plan on `nprocs` stand-in ranks at `count` elements per peer; return the schedule.

    `nodes` lists the ranks of each node (default: one rank per node); `group(world)` turns
    the stand-in world into the communicator the algorithm runs on (a replica group). With
    `matrix` (p x p elements, row = sender) the algorithm's alltoallv plan runs instead. A capture
    that grows past `memory` bytes resident (default: three quarters of what is available) is
    stopped with a CaptureError.
    """
    algorithm, kind = get(name), np.dtype(dtype)
    if EXECUTOR in algorithm.options:  # the algorithm's own code sends what is captured (executor=c sends the same)
        options = {**options, EXECUTOR: "python"}
    world = World(nprocs, nodes or one_per_node(nprocs), memory or memory_limit())
    logs = [RankLog() for _ in range(nprocs)]
    failures: list[tuple[int, Exception]] = []

    def rank_main(rank: int) -> None:
        log = logs[rank]
        WATCHER.set(log)
        try:
            comm = StandInComm(world, tuple(range(nprocs)), rank, ("world",), log)
            comm = group(comm) if group else comm
            if matrix is None:
                send = send_pattern(kind, comm.size, comm.rank, count).view(Tracked)
                recv = tracked((comm.size * count,), kind)
                plan = algorithm.plan(comm, send, recv, **options)
                want = expected_pattern(kind, comm.size, comm.rank, count)
            else:
                sends, recvs = matrix[comm.rank], matrix[:, comm.rank]
                send, recv = send_pattern_v(kind, matrix, comm.rank).view(Tracked), tracked((int(recvs.sum()),), kind)
                plan = algorithm.plan_v(comm, send, sends, recv, recvs, **options)
                want = expected_pattern_v(kind, matrix, comm.rank)
            log.recording = True
            plan()
            log.recording = False
            plan.free()
            if not np.array_equal(recv, want):
                raise CaptureError("the captured call left a wrong result (a broken algorithm, or a call "
                                   "the stand-in answers unlike MPI)")
        except Aborted:
            pass
        except Exception as problem:  # noqa: BLE001  (reported below; KeyboardInterrupt goes through)
            failures.append((rank, problem))
            world.failed = True

    with replaced_mpi(standin_module()), _no_cycle_collection():
        world.run(rank_main, [copy_context() for _ in range(nprocs)])
    if world.overflow:
        raise CaptureOutgrew(f"{name}: {world.overflow}")
    if failures:
        rank, problem = failures[0]
        if isinstance(problem, PlanFailed):  # raised alike on every rank, naming the ranks that failed and why
            raise CaptureError(f"{name} failed during capture: {problem}") from problem
        if isinstance(problem, CaptureError):
            raise CaptureError(f"{name} on rank {rank} of {nprocs}: {problem}") from problem
        if isinstance(problem, A2AError):
            raise problem
        raise CaptureError(f"{name} failed on rank {rank} of {nprocs} during capture: "
                           f"{type(problem).__name__}: {problem}") from problem
    return Schedule(nprocs, count, kind.itemsize, [log.events for log in logs])


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off: at thousands of ranks the plans hold millions of objects, all live until the
    call ends, which each full collection would walk again (docs/simulation-replay.md has the times)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def stepped(name: str, options: dict[str, Any], nprocs: int, dtype: str = "float32",
            nodes: list[list[int]] | None = None) -> Schedule | None:
    """The schedule at one element per peer read from the steps the algorithm registered, without running any
    plan; None if it registered none for nprocs. `nodes`: the ranks of each node (default: one rank per node).

    The factory copies its own block (its whole buffer for Exchanges that say so), then makes one Sendrecv per
    Step of the step's blocks (zero_copy_plan, or pairwise's contiguous blocks), or starts each Batch's requests
    at once and waits for all (batch_plan). The stand-in logs a Sendrecv as an Isend, an Irecv and one Wait for
    both; Batches are one Burst event, and Exchanges and Rounds one Sendrecvs event, for what it logs one by one
    (test_capture holds the two equal). Phases are the whole call, own copy included where it is (phase_events).
    """
    steps_of = steps_for(name, options, nodes or one_per_node(nprocs))
    if steps_of is None:
        return None
    width = np.dtype(dtype).itemsize
    events: list[list[Event]] = []
    for rank in range(nprocs):
        steps = steps_of(nprocs, rank)
        if steps is None:
            return None
        events.append(rank_events(steps, width))
    return Schedule(nprocs, 1, width, events)


def rank_events(steps: Any, width: int) -> list[Event]:
    """One rank's events from its steps (Phases, Exchanges, Rounds, Batches or Steps), blocks of `width` bytes: what
    `stepped` writes for that rank (the analytical backend reads them rank by rank, never all at once)."""
    if isinstance(steps, Phases):
        return list(phase_events(steps, width))
    if isinstance(steps, Exchanges):
        return [Copy(width * steps.copied), Sendrecvs(steps.sources, steps.dests, width, 0)]
    if isinstance(steps, Rounds):
        return [Copy(width), Sendrecvs(steps.sources, steps.dests, width, 0, steps.sent, steps.received)]
    mine: list[Event] = [Copy(width)]
    if isinstance(steps, Batches):
        return [*mine, Burst(steps.sources, steps.dests, width, 0, steps.source_ends, steps.dest_ends)]
    request = 0
    for step in steps:
        sent, received = len(step.sent) * width, len(step.received) * width
        mine += [Isend(step.dest, sent, request), Irecv(step.source, received, request + 1),
                 Wait((request, request + 1))]
        request += 2
    return mine


def phase_events(phases: Phases, width: int) -> Iterator[Event]:
    """The events a capture logs for a rank's Phases, blocks of `width` bytes: each Posted's receives and sends as
    one Posts, its copy, and a Wait for them all; Rounds as one Sendrecvs; each collective as a Collective."""
    request = 0
    for phase in phases.phases:
        if isinstance(phase, Copied):
            yield Copy(phase.blocks * width)
        elif isinstance(phase, Among):
            blocks = Collective(phase.name, phase.members, phase.root, tuple(phase.sent), tuple(phase.received))
            yield blocks.scaled(width)
        elif isinstance(phase, Rounds):
            yield Sendrecvs(phase.sources, phase.dests, width, request, phase.sent, phase.received)
            request += 2 * len(phase.dests)
        else:
            yield from _posted_events(phase, width, request)
            request += len(phase.sources) + len(phase.dests)


def _posted_events(phase: Posted, width: int, first: int) -> Iterator[Event]:
    posts = len(phase.sources) + len(phase.dests)
    if posts:
        yield Posts(np.repeat([False, True], [len(phase.sources), len(phase.dests)]),
                    np.concatenate([phase.sources, phase.dests]).astype(np.int32),
                    np.concatenate([phase.received, phase.sent]).astype(np.int64) * width,
                    np.arange(first, first + posts, dtype=np.int64))
    if phase.meanwhile:
        yield Copy(phase.meanwhile * width)
    if posts:
        yield Wait(range(first, first + posts))


def capture_unit(name: str, options: dict[str, Any], nprocs: int, dtype: str = "float32",
                 room: int | None = None, **layout: Any) -> Schedule:
    """The schedule at one element per peer: read from the algorithm's Steps if it registered them (and runs on
    the whole job), else captured at 1 and 2 elements, packed (`Schedule.packed`) and checked to scale; where this
    process may use two cores, each capture runs in a forked process of its own.

    Buffers of p ranks x p peers do not fit at large p and sizes; schedules whose byte
    counts grow in proportion to the count (every built-in) are captured small and scaled
    (`Schedule.scaled`). A schedule that is not proportional is refused, naming the rank. In a process of its
    own, what a capture leaves of the heap (most of it, at thousands of ranks) is given back when it ends.
    `room`: the bytes the captures may hold together beyond this process, and never more than three quarters of
    the memory available (None: that); one that grows past it raises CaptureOutgrew.
    """
    read = None if layout.get("group") else stepped(name, options, nprocs, dtype, layout.get("nodes"))
    if read is not None:
        return read
    parallel = len(os.sched_getaffinity(0)) >= 2
    share = 2 if parallel else 1
    limit = memory_limit(share)
    memory = limit if room is None else min(resident_bytes() + room // share, limit or 1 << 62)

    def at(count: int) -> Schedule:
        return capture(name, options, nprocs, count, dtype, memory=memory, **layout).packed()

    def at_two() -> list[bytes]:
        return digests(at(2).events)

    if parallel:
        first, second = Forked(lambda: at(1)), Forked(at_two)
        try:
            one, expected = first.result(), second.result()
        finally:
            first.stop()
            second.stop()
    else:
        one, expected = at(1), at_two()
    doubled = digests(one.scaled(2).events)
    if doubled != expected:
        rank = next(r for r in range(nprocs) if doubled[r] != expected[r])
        raise CaptureError(f"{name}'s schedule on rank {rank} is not proportional to the message size "
                           "(it changes between 1 and 2 elements per peer), so it cannot be scaled; "
                           "capture it at its real size instead")
    return one


def digests(events: list[list[Any]]) -> list[bytes]:
    """Each rank's events, as the SHA-256 of their text (equal events, equal text)."""
    return [hashlib.sha256(repr(rank).encode()).digest() for rank in events]


class Forked:
    """`work()` in a forked process; its result, or its error, is pickled back through a pipe (an A2AError as itself,
    any other as its text)."""

    def __init__(self, work: Callable[[], Any]):
        reader, writer = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: work, answer, and leave without running the parent's clean-ups
            os.close(reader)
            try:
                answer = (True, work())
            except BaseException as problem:  # noqa: BLE001  (told to the parent, which raises it)
                answer = (False, problem if _travels(problem) else str(problem) if isinstance(problem, A2AError)
                          else f"{type(problem).__name__}: {problem}")
            with os.fdopen(writer, "wb") as out:
                pickle.dump(answer, out)
            os._exit(0)
        os.close(writer)
        self.reader = os.fdopen(reader, "rb")

    def result(self) -> Any:
        """Wait for the child's answer; raise its error."""
        data = self.reader.read()
        self.stop()
        if not data:
            raise CaptureError(f"a capture's process ended without an answer (status {self.status})")
        done, value = pickle.loads(data)
        if not done:
            raise value if isinstance(value, A2AError) else CaptureError(value)
        return value

    def stop(self) -> None:
        """End the child if it still runs, and reap it."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, self.status = os.waitpid(self.pid, 0)
            self.pid = 0
            self.reader.close()


def _travels(problem: BaseException) -> bool:
    """Whether an error is ours and comes back from a pickle as itself."""
    try:
        return isinstance(problem, A2AError) and isinstance(pickle.loads(pickle.dumps(problem)), type(problem))
    except Exception:  # noqa: BLE001  (an exception whose arguments do not rebuild it)
        return False


def capture_scaled(name: str, options: dict[str, Any], nprocs: int, count: int, dtype: str = "float32",
                   **layout: Any) -> Schedule:
    """The schedule at `count` elements per peer, from the unit capture."""
    return capture_unit(name, options, nprocs, dtype, **layout).scaled(count)
