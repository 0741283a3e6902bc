"""The one-shot calls' machinery: per caller communicator, an agreement that never blocks the call and a cache of
plans, so that `a2a.alltoall` and `a2a.ialltoall` in a loop cost what the plan costs, and `a2a.ialltoall` returns
at once, as MPI_Ialltoall does.

Each communicator a one-shot call is given gets, at its first call, two duplicates made by MPI_Comm_idup (which
does not block): one carries each call's agreement, the other the preparation of its plans. Both, and the plans,
hang on the communicator as an MPI attribute: freed with it, or at MPI_Finalize (an attribute of MPI.COMM_SELF
lists every one), or by `free_cache()`. A call then:

1. checks itself on this rank (a2a.algos.plan.checked) and posts one MPI_Iallreduce of four integers: a digest of
   what every rank must give alike (algorithm, options, dtype, count, in place, blocking or not), whether this
   rank has a problem, and whether its cached plan misses (none for this key, or one bound to other buffers or
   counts). Started in call order, as MPI orders collectives on a communicator, so it never waits for a peer.
2. once the digests are in (a test() or wait()): a problem or a difference anywhere sends each rank's problem
   and call to every rank (point to point, tagged by the call's number) and is one BadInput on every rank. Then
   the calls take their plans in call order: a miss on any rank makes every rank prepare the plan anew (the
   plan's own collective preparation, blocking, in call order on the preparing duplicate), a hit takes the
   cached one.
3. runs the plan: blocking, or started and driven by test() and wait() (behind an earlier exchange still in flight
   on the same plan: one exchange in flight per plan).
"""
from __future__ import annotations

import atexit
import hashlib
import pickle
from collections import OrderedDict
from functools import cache
from typing import Any, Callable, Hashable

import numpy as np

from a2a.algos.agreement import judged, matched_counts, told
from a2a.algos.buffers import VBuffer, is_inter
from a2a.algos.plan import Checked, Plan, checked, planned, prepared_on

CACHE_PLANS = 16  # plans kept per communicator; the least recently used is freed first
TOLD_BYTES = 4096  # what a rank tells the others of its call when the ranks do not agree (cut to fit)


class Caller:
    """What the one-shot calls keep for one communicator: its duplicates, its cached plans, its calls in flight."""

    def __init__(self, comm: Any):
        self.comm = comm
        self.agreeing, agreeing = comm.Idup()
        self.preparing, preparing = comm.Idup()
        self.making = [agreeing, preparing]  # the duplicates' requests, until complete
        self.plans: OrderedDict[Hashable, Plan] = OrderedDict()
        self.bindings: dict[Hashable, Hashable] = {}  # per key, what its plan is bound to once calls started settle
        self.unsettled: list[Handle] = []  # started, no plan taken yet (call order)
        self.running: list[Handle] = []  # with their plan, not complete yet
        self.undigested: list[Handle] = []  # started, digest not posted yet (the duplicates are not ready)
        self.calls = 0

    def ready(self) -> bool:
        """Whether the duplicates are made; once they are, post the digests held back."""
        if self.making:
            from mpi4py import MPI

            if not MPI.Request.Testall(self.making):
                return False
            self.making = []
            for exchange in self.undigested:
                exchange.post()
            self.undigested = []
        return True

    def settle(self, upto: "Handle", block: bool = False) -> bool:
        """Give every call up to `upto` its plan, in call order, as far as it goes without blocking on a peer (to
        the end when `block`)."""
        while upto in self.unsettled:
            first = self.unsettled[0]
            if not first.settled(block):
                return False
            self.unsettled.pop(0)
        return True

    def progress(self) -> None:
        """Advance every call in flight here, as any MPI call advances every request (so waits in any order end)."""
        self.ready()
        if self.unsettled:
            self.settle(self.unsettled[-1])
        for handle in list(self.running):
            handle._step()

    def plan_for(self, handle: "Handle", private: Any) -> Plan:
        """The handle's plan, made anew on `private` (a duplicate made for it), else the cached one."""
        call, key = handle.call, handle.key
        if private is not None:
            if key in self.plans:
                self._drop(key)
            if handle.collective == "alltoallv":
                matched_counts(private, call.send, call.recv)
            plan = prepared_on(private, call.algorithm, call.kind, call.resolved, call.send, call.recv,
                               not handle.blocking)
            plan.binding = handle.binding
            self.plans[key] = plan
            while len(self.plans) > CACHE_PLANS:
                self._drop(next(iter(self.plans)))
        plan = self.plans[key]
        self.plans.move_to_end(key)
        if not handle.blocking:
            plan.ready_to_start()
        return plan

    def remade(self, handle: "Handle", missed: bool) -> bool:
        """Whether the handle's plan is to be made anew: a miss on any rank, or none cached (alike on every rank)."""
        plan = self.plans.get(handle.key)
        return missed or plan is None or plan.binding != handle.binding

    def _drop(self, key: Hashable) -> None:
        plan = self.plans.pop(key)
        if plan.holder is not None:  # its exchange completes first: freeing it in flight would leak its requests
            plan.holder.wait()
        plan.free()

    def forget(self) -> None:
        """Free every cached plan (alike on every rank): after an error, or free_cache()."""
        for key in list(self.plans):
            self._drop(key)
        self.bindings.clear()

    def free(self) -> None:
        """Free the cached plans and the duplicates (collective: every rank, same communicator)."""
        if self.agreeing is None:
            return
        self.forget()
        while not self.ready():
            pass
        for dup in (self.agreeing, self.preparing):
            dup.Free()
        self.agreeing = self.preparing = None
        if self in callers():
            callers().remove(self)


class Handle:
    """One one-shot call on its way: agreed, given its plan, run. As a handle (ialltoall): test() and wait()."""

    def __init__(self, caller: Caller, call: Checked, collective: str, blocking: bool):
        self.caller, self.call, self.collective, self.blocking = caller, call, collective, blocking
        self.number = caller.calls
        caller.calls += 1
        self.key = (collective, call.signature)
        self.binding = binding_of(call) if call.problem is None else None
        self.digest = np.zeros(4, np.int64)
        self.request: Any = None
        self.plan: Plan | None = None
        self.running = self.done = False
        self.error: BaseException | None = None
        self.private: Any = None  # the duplicate a plan made anew is prepared on, once MPI_Comm_idup is done
        self.duplicating: Any = None  # its MPI_Comm_idup's request
        self.making: bool | None = None  # None until the digest is posted; then whether the plan is made anew
        caller.unsettled.append(self)
        if caller.ready():
            self.post()
        else:
            caller.undigested.append(self)

    def post(self) -> None:
        """Post this call's digest: what every rank must give alike, a problem, a miss (call order)."""
        from mpi4py import MPI

        caller, mine = self.caller, self.digest
        if self.call.problem is None:
            mine[0] = digest_of((self.key, self.blocking))
            mine[1] = -mine[0]
            mine[3] = caller.bindings.get(self.key) != self.binding  # hit or miss, as the cache will be by then
            caller.bindings[self.key] = self.binding
        else:
            mine[2] = 1
        self.request = caller.agreeing.Iallreduce(MPI.IN_PLACE, mine, MPI.MAX)
        self.making = False

    def settled(self, block: bool = False) -> bool:
        """Take the plan once the digests are in: an error on every rank if the calls differ, else the cached plan
        or one made anew (its duplicate made by MPI_Comm_idup first); whether done."""
        try:
            if self.making is None:
                return False  # digest not posted yet: the duplicates are not made
            if self.request is not None:
                if block:
                    self.request.Wait()
                elif not self.request.Test():
                    return False
                self.request = None
                high, low, problem, missed = self.digest
                if problem or high != -low:
                    told_all = self._told()
                    self.caller.forget()  # no rank keeps a plan that another drops
                    judged(told_all)
                if self.caller.remade(self, bool(missed)):
                    self.private, self.duplicating = self.caller.preparing.Idup()
                    self.making = True
            if self.duplicating is not None:
                if block:
                    self.duplicating.Wait()
                elif not self.duplicating.Test():
                    return False
                self.duplicating = None
            private, self.private = (self.private if self.making else None), None  # the plan owns it now
            self.plan = self.caller.plan_for(self, private)
            self.caller.running.append(self)
        except BaseException as error:
            self.error, self.done = error, True
            if self.private is not None and self.plan is None:
                self.private.Free()
        self.private = None
        return True

    def _told(self) -> list[tuple[Any, Hashable]]:
        """Every rank's told problem and signature, sent point to point on the agreeing duplicate."""
        from mpi4py import MPI

        comm, tag = self.caller.agreeing, self.number % 32767
        text = pickle.dumps((told(self.call.problem), self.call.signature))
        if len(text) > TOLD_BYTES:
            text = pickle.dumps((told(self.call.problem) and (told(self.call.problem)[0], "a problem too long to "
                                                                                         "tell"), None))
        mine = np.zeros(TOLD_BYTES, np.uint8)
        mine[:len(text)] = np.frombuffer(text, np.uint8)
        theirs = np.zeros((comm.size, TOLD_BYTES), np.uint8)
        others = [q for q in range(comm.size) if q != comm.rank]
        requests = [comm.Irecv(theirs[q], q, tag) for q in others] + [comm.Isend(mine, q, tag) for q in others]
        MPI.Request.Waitall(requests)
        theirs[comm.rank] = mine
        return [pickle.loads(row.tobytes()) for row in theirs]

    def test(self) -> bool:
        """Advance the exchange without blocking on a peer; whether it is complete."""
        self.caller.progress()
        return self._raised(self._step())

    def wait(self) -> None:
        """Complete the exchange, advancing every other one in flight meanwhile (waits may come in any order)."""
        while not self._step(block=self._alone()):
            for caller in callers():
                caller.progress()
        self._raised(True)

    def _alone(self) -> bool:
        """Whether nothing else of the one-shot calls is in flight in this process: then MPI's own waits block."""
        return not self.caller.making and sum(len(c.unsettled) + len(c.running) for c in callers()) <= 1

    def _raised(self, complete: bool) -> bool:
        """`complete`, or what the exchange raised (once)."""
        error, self.error = self.error, None
        if error is not None:
            raise error
        return complete

    def _step(self, block: bool = False) -> bool:
        """Go as far as it goes without blocking on a peer (to the end when `block`); whether complete. What it
        raised waits in self.error."""
        if self.done:
            return True
        if self.plan is None and not self.caller.settle(self, block):
            return False
        if self.done:  # its agreement or its plan failed
            return True
        plan = self.plan
        try:
            if not self.running:
                holder = plan.holder
                if holder is not None and holder is not self and not holder._step():
                    return False
                if self.blocking:
                    self._ended()
                    plan()
                    return True
                plan.holder, self.running = self, True
                plan.start()
            complete = plan.wait() is None if block else plan.test()
        except BaseException as error:
            self.error, complete = error, True
        if complete:
            self._ended()
        return complete

    def _ended(self) -> None:
        self.done, self.running = True, False
        if self.plan.holder is self:
            self.plan.holder = None
        if self in self.caller.running:
            self.caller.running.remove(self)


def binding_of(call: Checked) -> Hashable:
    """What a plan is bound to on this rank: the buffers' addresses and sizes, an alltoallv's counts."""
    return tuple(_bound(side) for side in (call.send, call.recv))


def _bound(side: Any) -> Hashable:
    if side is None:
        return None
    if isinstance(side, VBuffer):
        return (*_bound(side.array), side.counts.tobytes(), side.displs.tobytes())
    return side.__array_interface__["data"][0], side.nbytes


@cache
def digest_of(agreed: Hashable) -> int:
    """A number every rank computes alike from what they must agree on (Python's hash() differs per process)."""
    return int.from_bytes(hashlib.blake2b(repr(agreed).encode(), digest_size=7).digest(), "little")


@cache
def _keyval() -> int:
    """The attribute key a communicator's Caller hangs on (freed with the communicator)."""
    from mpi4py import MPI

    return MPI.Comm.Create_keyval(delete_fn=lambda comm, key, caller: caller.free())


@cache
def _finalize_keyval() -> int:
    """The attribute of MPI.COMM_SELF that lists every Caller; they are freed before MPI_Finalize (mpi4py's own
    exit hook, registered at its import, runs after this one)."""
    from mpi4py import MPI

    atexit.register(lambda: [c.free() for c in callers()] if not MPI.Is_finalized() else None)
    return MPI.Comm.Create_keyval()


def callers() -> list[Caller]:
    """Every communicator's Caller in this process."""
    from mpi4py import MPI

    return MPI.COMM_SELF.Get_attr(_finalize_keyval()) or []


def caller_of(comm: Any) -> Caller:
    """The communicator's Caller, made at its first one-shot call."""
    from mpi4py import MPI

    found = comm.Get_attr(_keyval())
    if found is None:
        found = Caller(comm)
        comm.Set_attr(_keyval(), found)
        everyone = MPI.COMM_SELF.Get_attr(_finalize_keyval())
        if everyone is None:
            everyone = []
            MPI.COMM_SELF.Set_attr(_finalize_keyval(), everyone)
        everyone.append(found)
    return found


def one_shot(comm: Any, find: Callable[[], Any], collective: str, options: dict[str, Any],
             call: Callable[[], tuple[Any, Any, tuple]], blocking: bool) -> Handle | Plan:
    """One call, through the communicator's cache; an intercommunicator plans each call, agreeing at call time."""
    if is_inter(comm):
        return planned(comm, find, collective, options, call, nonblocking=not blocking)
    return Handle(caller_of(comm), checked(comm, find, collective, options, call), collective, blocking)


def free_cache(comm: Any = None) -> None:
    """Free the plans the one-shot calls keep for `comm` (every communicator when None); collective on it."""

    for caller in [comm.Get_attr(_keyval())] if comm is not None else callers():
        if caller is not None:
            caller.forget()
