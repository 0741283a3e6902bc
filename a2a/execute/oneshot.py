"""The one-shot calls' machinery: per caller communicator, a cache of plans and an agreement that never blocks the
call, so that `a2a.alltoall` and `a2a.ialltoall` in a loop cost what the plan costs, and `a2a.ialltoall` returns
at once, as MPI_Ialltoall does.

Each communicator a one-shot call is given gets, at its first call, two duplicates made by MPI_Comm_idup (which
does not block): one carries the agreements, the other the preparation of plans. Both, and the plans, hang on the
communicator as an MPI attribute: freed with it, or at MPI_Finalize (an attribute of MPI.COMM_SELF lists every
one), or by `free_cache()`.

The cache is keyed by what every rank gives alike (collective, algorithm, options, dtype, count, in place), and
its keys are kept, least recently used first, at call time in call order: so in a program whose ranks make the
same calls, a hit or a miss is the same on every rank by construction, whatever each rank's buffers. A call:

1. checks itself on this rank (a2a.execute.planning.checked; a call made before with arrays alike skips that) and looks
   its key up. An alltoall that hits takes the cached plan: no message beyond the exchange's own. An alltoall
   that misses, a call with a problem, and every alltoallv (whose counts are each rank's own, so a rank cannot
   tell alone whether its peers' plans still fit) post one MPI_Iallreduce of four integers on the agreeing
   duplicate: a digest of the key, whether this rank has a problem, whether its plan misses. Started in call
   order, as MPI orders collectives on a communicator, so it never waits for a peer.
2. once the digests are in (a test() or wait()): a problem or a difference anywhere sends each rank's problem
   and call to every rank (point to point, tagged by the call's number) and is one BadInput on every rank. A miss
   makes every rank prepare the plan anew (its own collective preparation, in call order on a duplicate of the
   preparing one).
3. runs the plan: blocking, or started and driven by test() and wait() (behind the calls made before it on the
   same plan, in call order: one exchange in flight per plan). An alltoall's plan has buffers of its own, and the
   buffers may change from call to call on any rank without a message: a pair of arrays given the first time goes
   through the plan's buffers (a copy in, a copy out); given again (the same memory: address, dtype and count), it
   runs on a plan of its own bound to them, which this rank alone makes from the cached one (Plan.rebound: the C
   executor's schedule bound again, or a factory that prepares without a message run again) on the same private
   communicator, so its messages are the plan's whichever route each rank takes. A plan that cannot be rebound
   keeps the copies. An alltoallv's plan is bound to the buffers and counts it was made for (a change on any rank
   is a miss).
"""
from __future__ import annotations

import atexit
import hashlib
import pickle
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Hashable

import numpy as np

from a2a.algos.buffers import VBuffer, alltoall_call, is_inter
from a2a.algos.plan import Plan
from a2a.algos.prebuilt import copier
from a2a.algos.registry import get
from a2a.errors import BadInput
from a2a.execute.agreement import Verdict, judged, matched_counts, told
from a2a.execute.planning import Checked, checked, planned, prepared_on

CACHE_PLANS = 16  # plans kept per communicator; the least recently used is freed first
TOLD_BYTES = 4096  # what a rank tells the others of its call when the ranks do not agree (cut to fit)
SEEN_CALLS = 64  # alltoall calls (by dtypes and shapes) remembered per communicator: one made again skips its checks
BOUND_ARRAYS = 8  # pairs of arrays with a plan of their own, per cached alltoall plan and per communicator (held)
# (plan, copy in, copy out): what an alltoall's exchange runs on, the copies None on a plan of its arrays' own
Route = tuple[Plan, Callable[[], Any] | None, Callable[[], Any] | None]
MET_ARRAYS = 64  # addresses of pairs given once, per cached alltoall plan: given again, they get a plan of their own


@dataclass
class Cached:
    """A cached plan and what it works on. An alltoall's plan has buffers of its own; a pair of arrays given the first
    time goes through them (a copy in, a copy out), and from its second call on runs on a plan of its own bound to
    the arrays (`direct`: the plan rebound on this rank alone, on the same communicator, so its messages are the
    plan's), where the plan can be rebound. An alltoallv's plan is the one made for its `binding`."""

    plan: Plan
    binding: Hashable = None
    send: Any = None
    recv: Any = None
    bound: dict = field(default_factory=dict)  # by the ids of (sendbuf, recvbuf): them, and their route
    direct: OrderedDict = field(default_factory=OrderedDict)  # by the arrays' addresses: their plan, least recent first
    met: OrderedDict = field(default_factory=OrderedDict)  # the addresses given once so far (keys only)
    rebinds: bool = True  # until a rebinding fails: then every pair goes through the plan's own buffers
    known: dict = field(default_factory=dict)  # the communicator's routes by the arrays' ids (Caller.known)
    queue: list = field(default_factory=list)  # the calls that took it, not complete: the first runs, in call order

    def route(self, sendbuf: Any, recvbuf: Any, send: Any, recv: Any, busy: set) -> tuple[Any, Any, Route, bool]:
        """(sendbuf, recvbuf, route, lasting) for the call's arrays (`send`, `recv`: as checked): route is (plan,
        copy in, copy out), the copies None on a plan of the arrays' own; lasting: whether the next call with these
        objects takes the same route (then it is kept by their ids; the objects are held, so their ids stay theirs).
        `busy`: the ids of the plans exchanges in flight hold, which stay."""
        ids = (id(sendbuf), id(recvbuf))
        found = self.bound.get(ids)
        if found is not None and found[0] is sendbuf and found[1] is recvbuf:
            return found
        flat = recv.reshape(-1)  # a view: the call's arrays are C-contiguous
        flat_send = None if send is None else send.reshape(-1)
        where = (None if send is None else send.__array_interface__["data"][0], flat.__array_interface__["data"][0])
        plan = self.direct.get(where)
        if plan is None and self.rebinds and where in self.met:
            plan = self._rebound(where, flat_send, flat, busy)
        entry: tuple[Any, Any, Route, bool]
        if plan is not None:
            self.direct.move_to_end(where)
            entry = (sendbuf, recvbuf, (plan, None, None), True)
        else:
            self.met[where] = None
            self.met.move_to_end(where)
            if len(self.met) > MET_ARRAYS:
                self.met.popitem(last=False)
            copy_in = copier(self.recv, flat) if flat_send is None else copier(self.send, flat_send)
            entry = (sendbuf, recvbuf, (self.plan, copy_in, copier(flat, self.recv)), not self.rebinds)
        if entry[3]:
            if len(self.bound) >= BOUND_ARRAYS:
                self.bound.clear()
            self.bound[ids] = entry
        return entry

    def _rebound(self, where: tuple, send: Any, recv: Any, busy: set) -> Plan | None:
        """The plan rebound to the arrays at `where`, the least recent one idle freed past BOUND_ARRAYS; None (and no
        more tries) where it cannot be: a failure here is this rank's alone, and its peers expect the plan's
        messages, which the plan's own buffers still give."""
        try:
            plan = self.plan.rebound(send, recv)
        except Exception:  # whatever the rebinding met, the call goes through the copies
            plan = None
        if plan is None:
            self.rebinds = False
            return None
        self.direct[where] = plan
        idle = [w for w, p in self.direct.items() if id(p) not in busy and w != where]
        for old in idle[:max(0, len(self.direct) - BOUND_ARRAYS)]:
            self.direct.pop(old).free()
            self.bound.clear()  # routes by ids may name it
            self.known.clear()
        return plan

    def free(self) -> None:
        """Free the plans bound to arrays, then the plan."""
        for plan in self.direct.values():
            plan.free()
        self.direct.clear()
        self.bound.clear()
        self.plan.free()


class Caller:
    """What the one-shot calls keep for one communicator: its duplicates, its cached plans, its calls in flight."""

    def __init__(self, comm: Any, everyone: list["Caller"]):
        self.comm, self.everyone = comm, everyone  # every communicator's Caller in this process (this one too)
        self.agreeing, agreeing = comm.Idup()
        self.preparing, preparing = comm.Idup()
        self.making = [agreeing, preparing]  # the duplicates' requests, until complete
        self.keys: OrderedDict[Hashable, None] = OrderedDict()  # the cache's keys at call time, least recent first
        self.plans: dict[Hashable, Cached] = {}  # the plans, once the calls that made them settle
        self.seen: dict[Hashable, Hashable] = {}  # an alltoall's key by its arrays' dtypes and shapes (_seen)
        self.known: dict[int, tuple] = {}  # calls made again (by their arrays' ids): see alltoall_shot
        self.bindings: dict[Hashable, Hashable] = {}  # per alltoallv key, its binding once calls started settle
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

    def kept(self, key: Hashable) -> tuple[bool, list[Hashable]]:
        """Whether `key` is cached now (a hit), and the keys it pushes out: the cache's keys in call order."""
        hit = key in self.keys
        self.keys[key] = None
        self.keys.move_to_end(key)
        pushed = []
        while len(self.keys) > CACHE_PLANS:
            pushed.append(self.keys.popitem(last=False)[0])
        return hit, pushed

    def settle(self, upto: "Handle", block: bool = False) -> bool:
        """Give every call up to `upto` its plan, in call order, as far as it goes without blocking on a peer (to
        the end when `block`)."""
        while upto in self.unsettled:
            first = self.unsettled[0]
            if not first.settled(block):
                return False
            self.unsettled.pop(0)
        return True

    def advance(self) -> None:
        """Advance every call in flight here, as any MPI call advances every request (so waits in any order end)."""
        self.ready()
        if self.unsettled:
            self.settle(self.unsettled[-1])
        for handle in list(self.running):
            handle._step()

    def plan_for(self, handle: "Handle", private: Any) -> Cached:
        """The handle's plan, made anew on `private` (a duplicate made for it), else the cached one."""
        key = handle.key
        for pushed in handle.pushed:  # as the keys were at its call
            if pushed in self.plans:
                self._drop(pushed)
        if private is not None:
            if key in self.plans:
                self._drop(key)
            self.plans[key] = self._made(handle, private)
        if key not in self.plans:
            raise BadInput("an earlier one-shot call on this communicator failed and emptied its cache, so this "
                           "call, started before that failure was known, has no plan; make it again")
        cached = self.plans[key]
        if not handle.blocking:
            cached.plan.ready_to_start()
        return cached

    @staticmethod
    def _made(handle: "Handle", private: Any) -> Cached:
        """A plan made anew on `private`: an alltoall's on buffers of its own, an alltoallv's on the call's."""
        call = handle.call
        assert call is not None  # a hit makes no plan
        if handle.collective == "alltoallv":
            matched_counts(private, call.send, call.recv)
            plan = prepared_on(private, call.algorithm, call.kind, call.resolved, call.send, call.recv,
                               not handle.blocking)
            return Cached(plan, handle.binding)
        send = None if call.send is None else np.empty(call.send.size, call.send.dtype)
        recv = np.empty(call.recv.size, call.recv.dtype)
        plan = prepared_on(private, call.algorithm, call.kind, call.resolved, send, recv, not handle.blocking)
        return Cached(plan, None, send, recv, known=handle.caller.known)

    def _drop(self, key: Hashable) -> None:
        cached = self.plans.pop(key)
        while cached.queue:  # its exchanges complete first: freeing them in flight would leak their requests
            cached.queue[0].finish()
        cached.free()
        self.known.clear()

    def busy(self) -> set[int]:
        """The ids of the plans the exchanges in flight here run on."""
        return {id(handle.route[0]) for handle in self.running if handle.route is not None}  # each has its route

    def forget(self) -> None:
        """Free every cached plan (alike on every rank): after an error, or free_cache()."""
        for key in list(self.plans):
            self._drop(key)
        self.keys.clear()
        self.bindings.clear()
        self.seen.clear()
        self.known.clear()

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
        if self in self.everyone:
            self.everyone.remove(self)


class Handle:
    """One one-shot call on its way: agreed, given its plan, run. As a handle (ialltoall): test() and wait()."""

    __slots__ = ("caller", "call", "collective", "blocking", "number", "key", "binding", "digest", "request",
                 "cached", "route", "running", "done", "error", "private", "duplicating", "making", "pushed")

    def __init__(self, caller: Caller, call: Checked, collective: str, blocking: bool):
        self.call: Checked | None  # None on a hit (Handle.hit): it skips the checks and the agreement
        self.digest: np.ndarray | None  # ... and posts no digest
        self.caller, self.call, self.collective, self.blocking = caller, call, collective, blocking
        self.number = caller.calls
        caller.calls += 1
        self.key = repr((collective, call.signature))  # a str: its hash is computed once, not per call
        self.binding = binding_of(call) if call.problem is None and collective == "alltoallv" else None
        self.digest = np.zeros(4, np.int64)
        self.request: Any = None
        self.cached: Cached | None = None
        self.route: Route | None = None  # (plan, copy in, copy out): what the exchange runs on (Cached.route)
        self.running = self.done = False
        self.error: BaseException | None = None
        self.private: Any = None  # the duplicate a plan made anew is prepared on, once MPI_Comm_idup is done
        self.duplicating: Any = None  # its MPI_Comm_idup's request
        self.making: bool | None = None  # None until the digest is posted; then whether the plan is made anew
        hit, self.pushed = caller.kept(self.key) if call.problem is None else (False, [])
        caller.unsettled.append(self)
        if hit and collective == "alltoall":  # alike on every rank: no agreement
            self.making = False
        elif caller.ready():
            self.post()
        else:
            caller.undigested.append(self)
        if not blocking:
            self._step(poll=False)  # start it now where nothing is to wait for

    @classmethod
    def hit(cls, caller: Caller, key: str, cached: Cached, route: Route, blocking: bool) -> "Handle":
        """An alltoall made before with arrays alike whose plan is cached and idle: checks skipped, started now."""
        handle = cls.__new__(cls)
        handle.caller, handle.collective, handle.blocking, handle.key = caller, "alltoall", blocking, key
        handle.number, handle.pushed, handle.cached, handle.route = caller.calls, [], cached, route
        caller.calls += 1
        caller.keys.move_to_end(key)
        handle.running = handle.done = False
        handle.call = handle.binding = handle.digest = None
        handle.error = handle.private = handle.request = handle.duplicating = None
        handle.making = False
        caller.running.append(handle)
        cached.queue.append(handle)
        handle._step(poll=False)
        return handle

    def post(self) -> None:
        """Post this call's digest: what every rank must give alike, a problem, a miss (call order)."""
        from mpi4py import MPI

        caller, mine = self.caller, self.digest
        assert self.call is not None and mine is not None  # a hit posts no digest
        if self.call.problem is None:
            mine[0] = digest_of((self.key, self.blocking))
            mine[1] = -mine[0]
            if self.collective == "alltoallv":  # hit or miss, as the cache will be by then
                mine[3] = caller.bindings.get(self.key) != self.binding
                caller.bindings[self.key] = self.binding
            else:
                mine[3] = 1  # an alltoall posts its digest on a miss only
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
                if not completed(self.request, block):
                    return False
                self.request = None
                assert self.digest is not None  # posted
                high, low, problem, missed = self.digest
                if problem or high != -low:
                    told_all = self._told()
                    self.caller.forget()  # no rank keeps a plan that another drops
                    judged(told_all)
                if missed or self.key not in self.caller.plans:
                    self.private, self.duplicating = self.caller.preparing.Idup()
                    self.making = True
            if self.duplicating is not None:
                if not completed(self.duplicating, block):
                    return False
                self.duplicating = None
            private, self.private = (self.private if self.making else None), None  # the plan owns it now
            self.cached = self.caller.plan_for(self, private)
            if self.collective == "alltoall":
                call = self.call
                assert call is not None  # a hit is settled already
                self.route = self.cached.route(call.send, call.recv, call.send, call.recv, self.caller.busy())[2]
            else:
                self.route = (self.cached.plan, None, None)
            self.caller.running.append(self)
            self.cached.queue.append(self)
        except BaseException as error:
            self.error, self.done = error, True
            if self.private is not None and self.cached is None:
                self.private.Free()
            self.caller.forget()  # every rank failed alike, or the job ends: no key kept without its plan
        self.private = None
        return True

    def _told(self) -> list[Verdict]:
        """Every rank's told problem and signature, sent point to point on the agreeing duplicate."""
        from mpi4py import MPI

        assert self.call is not None  # a hit tells nothing
        comm, tag = self.caller.agreeing, self.number % 32767
        problem = told(self.call.problem)
        text = pickle.dumps((problem, self.call.signature))
        if len(text) > TOLD_BYTES:
            text = pickle.dumps((problem and (problem[0], "a problem too long to tell"), None))
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
        if not self.done:
            self.caller.advance()
        return self._raised(self._step())

    def wait(self) -> None:
        """Complete the exchange, advancing every other one in flight meanwhile (waits may come in any order)."""
        self.finish()
        self._raised(True)

    def finish(self) -> None:
        """Complete the exchange, what it raised kept for its test() or wait()."""
        while not self._step(block=self._alone()):
            for caller in self.caller.everyone:
                caller.advance()

    def _alone(self) -> bool:
        """Whether nothing else of the one-shot calls is in flight in this process: then MPI's own waits block."""
        caller = self.caller
        if caller.making or len(caller.unsettled) + len(caller.running) > 1:
            return False
        return len(caller.everyone) == 1 or idle(caller)

    def _raised(self, complete: bool) -> bool:
        """`complete`, or what the exchange raised (once)."""
        error, self.error = self.error, None
        if error is not None:
            raise error
        return complete

    def _step(self, block: bool = False, poll: bool = True) -> bool:
        """Go as far as it goes without blocking on a peer (to the end when `block`; not past a start when not
        `poll`); whether complete. What it raised waits in self.error."""
        if self.done:
            return True
        if self.cached is None and not self.caller.settle(self, block):
            return False
        if self.done:  # its agreement or its plan failed
            return True
        cached = self.cached
        assert cached is not None and self.route is not None  # settled (or a hit)
        plan, copy_in, copy_out = self.route
        try:
            if not self.running:
                queue = cached.queue
                while queue[0] is not self:  # the calls made before it on this plan go first, in call order
                    if not queue[0]._step():
                        return False
                if copy_in is not None:
                    copy_in()
                if self.blocking:
                    self._ended()
                    plan()
                    if copy_out is not None:
                        copy_out()
                    return True
                self.running = True
                plan.start()
            if block:
                plan.wait()
                complete = True
            else:
                complete = poll and plan.test()
            if complete and copy_out is not None:
                copy_out()
        except BaseException as error:
            self.error, complete = error, True
        if complete:
            self._ended()
        return complete

    def _ended(self) -> None:
        self.done, self.running = True, False
        assert self.cached is not None  # _step ends a settled call
        for waiting in (self.cached.queue, self.caller.running):
            try:
                waiting.remove(self)
            except ValueError:
                pass


def completed(request: Any, block: bool) -> bool:
    """Whether an MPI request is complete: waited for (block), else tested."""
    if block:
        request.Wait()
        return True
    return request.Test()


def binding_of(call: Checked) -> Hashable:
    """What an alltoallv's plan is bound to on this rank: the buffers' addresses and sizes, the counts."""
    return tuple(_bound(side) for side in (call.send, call.recv))


def _bound(side: Any) -> tuple[Any, ...] | None:
    if side is None:
        return None
    if isinstance(side, VBuffer):
        return (*_where(side.array), side.counts.tobytes(), side.displs.tobytes())
    return _where(side)


def _where(array: np.ndarray) -> tuple[int, int]:
    return array.__array_interface__["data"][0], array.nbytes


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

    def free_all() -> None:
        if not MPI.Is_finalized():
            for c in callers():
                c.free()

    atexit.register(free_all)
    return MPI.Comm.Create_keyval()


def callers() -> list[Caller]:
    """Every communicator's Caller in this process."""
    from mpi4py import MPI

    everyone = MPI.COMM_SELF.Get_attr(_finalize_keyval())
    return everyone if isinstance(everyone, list) else []  # None before the first Caller


def caller_of(comm: Any) -> Caller:
    """The communicator's Caller, made at its first one-shot call."""
    from mpi4py import MPI

    found = comm.Get_attr(_keyval())
    if found is None:
        everyone = MPI.COMM_SELF.Get_attr(_finalize_keyval())
        if not isinstance(everyone, list):  # None: the first Caller
            everyone = []
            MPI.COMM_SELF.Set_attr(_finalize_keyval(), everyone)
        found = Caller(comm, everyone)
        comm.Set_attr(_keyval(), found)
        everyone.append(found)
    return found


def idle(caller: Caller) -> bool:
    """Whether no other communicator's one-shot call is in flight in this process."""
    return all(c is caller or not (c.unsettled or c.running) for c in caller.everyone)


def one_shot(comm: Any, find: Callable[[], Any], collective: str, options: dict[str, Any],
             call: Callable[[], tuple[Any, Any, tuple]], blocking: bool) -> Handle | Plan:
    """One call, through the communicator's cache; an intercommunicator plans each call, agreeing at call time."""
    if is_inter(comm):
        return planned(comm, find, collective, options, call, nonblocking=not blocking)
    return Handle(caller_of(comm), checked(comm, find, collective, options, call), collective, blocking)


def alltoall_shot(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str, options: dict[str, Any],
                  blocking: bool) -> Handle | Plan | None:
    """One alltoall: a call made before with these arrays, or arrays alike (dtypes, shapes), whose plan is cached
    and idle skips the checks and starts at once (None: a blocking one done already); any other goes through
    `one_shot` (and is remembered if it checks)."""
    caller = comm.Get_attr(_keyval())
    if caller is not None and not caller.unsettled:
        known = caller.known.get(3 * id(sendbuf) + id(recvbuf))  # emptied whenever a plan it names is freed
        try:
            again = known is not None and known[0] is sendbuf and known[1] is recvbuf and known[2] == algorithm \
                and known[3] == options and not known[5].queue
        except ValueError:  # an option's value that == cannot compare (an array)
            again = False
        if again:
            return _hit(caller, known, blocking)
    seen = _seen(algorithm, options, sendbuf, recvbuf)
    if caller is not None and seen is not None and not caller.unsettled:
        key = caller.seen.get(seen)
        cached = caller.plans.get(key)
        if cached is not None and not cached.queue:
            try:
                send, recv, _ = alltoall_call(comm, sendbuf, recvbuf)  # new arrays: their checks, once
            except BadInput:
                cached = None
            if cached is not None:
                *_, route, lasting = cached.route(sendbuf, recvbuf, send, recv, caller.busy())
                known = (sendbuf, recvbuf, algorithm, dict(options), key, cached, route, _runner(*route))
                if lasting:  # the next call with these arrays goes this way too
                    if len(caller.known) >= BOUND_ARRAYS:
                        caller.known.clear()
                    caller.known[3 * id(sendbuf) + id(recvbuf)] = known
                return _hit(caller, known, blocking)
    made = one_shot(comm, lambda: get(algorithm), "alltoall", options, lambda: alltoall_call(comm, sendbuf, recvbuf),
                    blocking)
    if isinstance(made, Handle) and made.call is not None and made.call.problem is None and seen is not None:
        if len(made.caller.seen) >= SEEN_CALLS:
            made.caller.seen.clear()
        made.caller.seen[seen] = made.key
    return made


def _runner(plan: Plan, copy_in: Callable[[], Any] | None, copy_out: Callable[[], Any] | None) -> Callable[[], Any]:
    """One blocking exchange on a route: the plan's own run on a plan of the arrays' own, else through the copies."""
    if copy_in is None or copy_out is None:  # a route has both copies or neither
        return plan if plan.run is None else plan.run

    def through() -> None:
        copy_in()
        plan()
        copy_out()
    return through


def _hit(caller: Caller, known: tuple, blocking: bool) -> Handle | None:
    """A hit (`known`: the arrays, algorithm, options, key, Cached, route, runner): blocking with nothing else in
    flight, run here; else a Handle started."""
    if blocking and not caller.running and (len(caller.everyone) == 1 or idle(caller)):
        caller.calls += 1
        caller.keys.move_to_end(known[4])
        known[7]()
        return None
    return Handle.hit(caller, known[4], known[5], known[6], blocking)


def _seen(algorithm: str, options: dict[str, Any], sendbuf: Any, recvbuf: Any) -> Hashable | None:
    """What makes an alltoall call's checks come out alike: the algorithm, options, arrays' dtypes and shapes (None
    unless both are NumPy arrays, or sendbuf MPI.IN_PLACE, and the options hashable)."""
    if type(recvbuf) is not np.ndarray:
        return None
    if type(sendbuf) is np.ndarray:  # checked first: the MPI module is not looked up on the way
        send: Any = (sendbuf.dtype, sendbuf.shape)
    elif _in_place(sendbuf):
        send = "in place"
    else:
        return None
    try:
        shown = tuple(options.items())
        hash(shown)
    except TypeError:
        return None
    return algorithm, shown, send, recvbuf.dtype, recvbuf.shape


def _in_place(buf: Any) -> bool:
    from mpi4py import MPI

    return buf is MPI.IN_PLACE


def free_cache(comm: Any = None) -> None:
    """Free the plans the one-shot calls keep for `comm` (every communicator when None); collective on it."""

    for caller in [comm.Get_attr(_keyval())] if comm is not None else callers():
        if caller is not None:
            caller.forget()
