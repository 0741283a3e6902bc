"""An algorithm's schedule as exact data (a2a.schedules.program), from its own code: its plan run on stand-in ranks
whose blocks carry their names.

Every rank's plan runs once against the stand-in MPI (a2a.schedules.standin), the blocks of its send
buffer filled with their own names (source and destination rank), so each message's bytes say
which blocks it carries, whatever datatypes, copies and temporary buffers the algorithm uses. A
rank's program follows the blocks: a send reads each block where it is held (its send buffer, or
where a receive put it), a receive puts each block in its place in the receive buffer if it is
for this rank, else in a free row of the temporary buffer (free again once every send of the
block completed); the algorithm's waits end the rounds. Collectives among members become the
point-to-point messages of the same bytes on the parent communicator. The algorithm's own
copies disappear (blocks are received where they belong); the own block is copied once.

What does not move whole, named blocks (headers, split blocks, data the schedule computes) is
not exact data: NotExact says why, and the plan runs the algorithm's Python.
"""
from __future__ import annotations

import functools
from contextvars import copy_context
from typing import Any

import numpy as np

from a2a.algos.options import EXECUTOR
from a2a.errors import A2AError
from a2a.schedules.events import Irecv, Isend, RankLog, Wait
from a2a.schedules.mpi_module import replaced_mpi
from a2a.schedules.program import RECV, SEND, TEMP, Message, Program, Region, Round, ScheduleData
from a2a.schedules.standin import StandInComm, standin_module
from a2a.schedules.world import Aborted, World

WORDS = 2  # a block, as traced: its name and its name ^ MARK, two int64
MARK = 0x5A17_C0DE_2A2A_0001


class NotExact(A2AError):
    """The algorithm's run is not a schedule of whole blocks: it cannot run as exact data."""


class Recorder(RankLog):
    """A rank's log that also keeps the bytes of each message, in the order the rank posted and waited."""

    follows = True

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[tuple] = []  # ("isend"|"irecv", peer, ident) | ("wait", idents) | ("coll", members, ...)
        self.bytes: dict[int, bytes] = {}
        self.racing = False

    def add(self, event: Any) -> None:
        if not self.recording:
            return
        super().add(event)  # a blocking call replaces its event (the stand-in's _blocking)
        if isinstance(event, (Isend, Irecv)):
            self.steps.append(("isend" if isinstance(event, Isend) else "irecv", event.peer, event.request))
        elif isinstance(event, Wait):
            self.steps.append(("wait", tuple(event.requests)))

    def copied(self, nbytes: int) -> None:
        pass

    def carried(self, ident: int, data: bytes) -> None:
        if self.recording:
            self.bytes[ident] = bytes(data)

    def blocked(self, ident: int) -> None:
        if self.recording:
            self.steps.append(("wait", (ident,)))

    def raced(self) -> None:
        self.racing = self.racing or self.recording

    def collected(self, members: tuple[int, ...], sent: list, received: list) -> None:
        if self.recording:
            self.steps.append(("coll", members, [None if s is None else bytes(np.asarray(s)) for s in sent],
                               [None if r is None else bytes(np.asarray(r)) for r in received]))


def named_blocks(nprocs: int, rank: int) -> np.ndarray:
    """Rank `rank`'s send buffer as traced: block d holds the name rank * nprocs + d."""
    names = rank * nprocs + np.arange(nprocs, dtype=np.int64)
    return np.stack([names, names ^ MARK], axis=1).reshape(-1)


def names_in(data: bytes, nprocs: int) -> list[int]:
    """The block names a message carries, in order; NotExact if its bytes are not whole named blocks."""
    if len(data) % (8 * WORDS):
        raise NotExact(f"a message of {len(data)} bytes at {8 * WORDS} bytes per block carries part of a block")
    words = np.frombuffer(data, np.int64).reshape(-1, WORDS)
    if ((words[:, 1] != words[:, 0] ^ MARK) | (words[:, 0] < 0) | (words[:, 0] >= nprocs * nprocs)).any():
        raise NotExact("a message carries bytes that are no block of the call (a header, or data it computed)")
    return words[:, 0].tolist()


class _Key:
    """An algorithm as a cache key: by its name and factories (the Algorithm itself holds dicts)."""

    def __init__(self, algorithm: Any):
        self.algorithm = algorithm
        self.key = (algorithm.name, tuple((c, k.factory) for c, k in algorithm.kinds.items()))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.key == other.key


def traced(algorithm: Any, options: tuple[tuple[str, Any], ...], nprocs: int, nodes: tuple[tuple[int, ...], ...],
           collective: str = "alltoall") -> ScheduleData:
    """The schedule of an Algorithm with `options` on `nprocs` ranks placed on `nodes`, as exact data."""
    return _traced(_Key(algorithm), options, nprocs, nodes, collective)


@functools.lru_cache(maxsize=64)  # one trace per job shape: every plan of a sweep's point asks again
def _traced(key: _Key, options: tuple[tuple[str, Any], ...], nprocs: int, nodes: tuple[tuple[int, ...], ...],
            collective: str) -> ScheduleData:
    algorithm, name = key.algorithm, key.algorithm.name
    world = World(nprocs, [list(n) for n in nodes])
    logs = [Recorder() for _ in range(nprocs)]
    failures: list[tuple[int, BaseException]] = []
    notes: set[str] = set()
    chosen = dict(options)
    text = ";".join(f"{k}={v}" for k, v in sorted(chosen.items()))
    if EXECUTOR in algorithm.options:
        chosen[EXECUTOR] = "python"  # its own code is what is traced

    def rank_main(rank: int) -> None:
        log = logs[rank]
        try:
            comm = StandInComm(world, tuple(range(nprocs)), rank, ("world",), log)
            send = named_blocks(nprocs, rank)
            recv = np.full(nprocs * WORDS, -1, np.int64)
            if collective == "alltoall":
                plan = algorithm.plan(comm, send, recv, **chosen)
            else:
                counts = np.full(nprocs, WORDS)
                plan = algorithm.plan_v(comm, send, counts, recv, counts, **chosen)
            log.recording = True
            plan()
            log.recording = False
            notes.add(plan.note)
            plan.free()
            expected = np.stack([np.arange(nprocs) * nprocs + rank] * 2, axis=1)
            expected[:, 1] ^= MARK
            if not np.array_equal(recv.reshape(-1, WORDS), expected):
                raise NotExact("its traced run left a wrong result")
        except Aborted:
            pass
        except Exception as problem:  # noqa: BLE001  (raised below, naming the rank)
            failures.append((rank, problem))
            world.failed = True

    with replaced_mpi(standin_module()):
        world.run(rank_main, [copy_context() for _ in range(nprocs)])
    if failures:
        rank, problem = failures[0]
        raise NotExact(f"{name} on rank {rank} of {nprocs}: {type(problem).__name__}: {problem}") from problem
    programs = tuple(_Follower(rank, nprocs, log).program() for rank, log in enumerate(logs))
    _check_pairs(programs)
    return ScheduleData(name, text, nprocs, programs, "; ".join(sorted(n for n in notes if n)))


class _Follower:
    """A rank's recorded run turned into its program (see the module's docstring)."""

    def __init__(self, rank: int, nprocs: int, log: Recorder):
        self.rank, self.nprocs, self.log = rank, nprocs, log
        self.held: dict[int, tuple[int, int]] = {rank * nprocs + d: (SEND, d) for d in range(nprocs)}
        self.placed: set[int] = set()  # blocks for this rank already given their place in the receive buffer
        self.rounds: list[dict] = []
        self.round = self._new_round()
        self.index: dict[int, int] = {}  # request ident -> message index
        self.arriving: dict[int, list[tuple[int, tuple[int, int]]]] = {}  # message -> (block, where) on completion
        self.tags = {"send": [0] * nprocs, "recv": [0] * nprocs}
        self.messages: list[dict] = []
        self.slots = 0  # temporary placeholders: a slot per block received to forward, rows given later

    def _new_round(self) -> dict:
        return {"receives": [], "sends": [], "waits": []}

    def _post(self, kind: str, peer: int, data: bytes, ident: int | None) -> int:
        names = names_in(data, self.nprocs)
        if kind == "send":
            missing = [b for b in names if b not in self.held]
            if missing:
                raise NotExact(f"rank {self.rank} sends block {divmod(missing[0], self.nprocs)} before it holds it")
            where = [self.held[b] for b in names]
        else:
            where = []
            for block in names:
                source, dest = divmod(block, self.nprocs)
                if dest == self.rank and block not in self.placed:
                    self.placed.add(block)
                    where.append((RECV, source))
                else:
                    where.append((TEMP, self.slots))
                    self.slots += 1
        number = len(self.messages)
        self.messages.append({"kind": kind, "peer": peer, "tag": self.tags[kind][peer], "where": where,
                              "round": len(self.rounds), "waited": None})
        self.tags[kind][peer] += 1
        self.round["receives" if kind == "recv" else "sends"].append(number)
        if kind == "recv":
            self.arriving[number] = list(zip(names, where))
        if ident is not None:
            self.index[ident] = number
        return number

    def _wait(self, numbers: list[int]) -> None:
        self.round["waits"] = [n for n in numbers if self.messages[n]["waited"] is None]
        for n in self.round["waits"]:
            self.messages[n]["waited"] = len(self.rounds)
            for block, where in self.arriving.pop(n, []):
                self.held[block] = where
        self.rounds.append(self.round)
        self.round = self._new_round()

    def program(self) -> Program:
        log = self.log
        if log.racing:
            raise NotExact(f"rank {self.rank} waits for whichever of several requests completes first (Waitany): "
                           "what it posts next follows the network's order, not a fixed schedule")
        for step in log.steps:
            if step[0] in ("isend", "irecv"):
                kind, peer, ident = step
                if ident not in log.bytes:
                    raise NotExact(f"rank {self.rank}: a receive from {peer} that never completed")
                self._post(kind[1:], peer, log.bytes[ident], ident)
            elif step[0] == "wait":
                self._wait([self.index[i] for i in step[1] if i in self.index])
            else:
                _, members, sent, received = step
                numbers = [self._post("recv", m, r, None) for m, r in zip(members, received)
                           if r is not None and len(r) and m != self.rank]
                numbers += [self._post("send", m, s, None) for m, s in zip(members, sent)
                            if s is not None and len(s) and m != self.rank]
                self._wait(numbers)
        outstanding = [i for i, m in enumerate(self.messages) if m["waited"] is None]
        if outstanding or self.round["receives"] or self.round["sends"]:
            self._wait(outstanding)
        return self._laid_out()

    def _laid_out(self) -> Program:
        """Rows for the temporary slots (a row is free again after the round that waits for its block's last
        send), the own block's copy, and the regions of each message."""
        last: dict[int, int] = {}  # slot -> the round after which it is free
        for posted in self.messages:
            for buffer, slot in posted["where"]:
                if buffer == TEMP:
                    last[slot] = max(last.get(slot, -1), posted["waited"])
        rows: dict[int, int] = {}  # slot -> its row
        taken: dict[int, int] = {}  # row -> the round after which it is free
        free: list[int] = []
        used = 0
        for posted in self.messages:  # in posting order: rounds ascending
            for row in [row for row, until in taken.items() if until < posted["round"]]:
                free.append(row)
                del taken[row]
            for buffer, slot in posted["where"]:
                if buffer == TEMP and slot not in rows:
                    free.sort()
                    row = free.pop(0) if free else used
                    used += row == used
                    rows[slot], taken[row] = row, last[slot]
        copies = []
        for source in range(self.nprocs):
            block = source * self.nprocs + self.rank
            if block in self.placed:
                continue
            if block not in self.held or self.held[block][0] != SEND:
                raise NotExact(f"rank {self.rank} never receives block {(source, self.rank)} where it belongs")
            copies.append((Region(SEND, self.rank, 1), Region(RECV, source, 1)))

        def regions(where: list[tuple[int, int]]) -> tuple[Region, ...]:
            found: list[list[int]] = []
            for buffer, at in where:
                at = rows[at] if buffer == TEMP else at
                if found and found[-1][0] == buffer and found[-1][1] + found[-1][2] == at:
                    found[-1][2] += 1
                else:
                    found.append([buffer, at, 1])
            return tuple(Region(*r) for r in found)

        def message(number: int) -> Message:
            m = self.messages[number]
            return Message(m["peer"], m["tag"], regions(m["where"]))

        rounds = [Round(tuple(copies) if k == 0 else (), tuple(map(message, r["receives"])),
                        tuple(map(message, r["sends"])), tuple(r["waits"])) for k, r in enumerate(self.rounds)]
        if not rounds and copies:
            rounds = [Round(tuple(copies), (), (), ())]
        order = [n for r in self.rounds for n in r["receives"] + r["sends"]]  # the file numbers them in this order
        renumber = {n: i for i, n in enumerate(order)}
        rounds = [Round(r.copies, r.receives, r.sends, tuple(renumber[w] for w in r.waits)) for r in rounds]
        return Program(self.rank, used, tuple(rounds))


def _check_pairs(programs: tuple[Program, ...]) -> None:
    """Message k from a rank to a peer must be the peer's receive k from it, of as many blocks (tags match them)."""
    sizes: dict[tuple[str, int, int, int], int] = {}
    for program in programs:
        for round_ in program.rounds:
            for kind, messages in (("send", round_.sends), ("recv", round_.receives)):
                for m in messages:
                    pair = (program.rank, m.peer) if kind == "send" else (m.peer, program.rank)
                    sizes[(kind, *pair, m.tag)] = sum(r.blocks for r in m.regions)
    for (kind, source, dest, tag), blocks in sizes.items():
        if kind == "send" and sizes.get(("recv", source, dest, tag)) != blocks:
            raise NotExact(f"message {tag} from rank {source} to {dest} is not the receive {tag} there: the ranks "
                           "post their messages to each other in different orders")
