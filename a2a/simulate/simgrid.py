"""Replay captured schedules on SimGrid: platform files, SMPI time-independent traces, two replayers.

We write SMPI time-independent traces (one file per rank) and replay them in C++, from any
Python (SimGrid's Python bindings serve only Debian's system Python and have no MPI layer):
with `smpirun -replay ... smpireplaymain`, SMPI's own MPI model (eager and rendezvous
protocols, its calibrated network factors, its MPI_Alltoall implementations and selectors for
`native`), or with our S4U replayer (s4u_replay.cpp, built here against the same SimGrid),
which models the same point-to-point protocol but matches each message in a mailbox of its
own (source, destination) pair instead of scanning the receiver's one mailbox.

The replay knows collectives only on MPI_COMM_WORLD, so collectives on sub-communicators
are lowered here to linear point-to-point exchanges (isend/irecv to every member, then a
wait), and messages to oneself to local copies. Local copies cost time at a measured
memory bandwidth: `compute` events on hosts of speed 1 Gflop/s.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from a2a.errors import BadConfig, BadOption, CaptureError
from a2a.simulate.events import (
    Burst,
    Collective,
    Copy,
    Event,
    Irecv,
    Isend,
    Messages,
    Posts,
    Recv,
    Schedule,
    Send,
    Sendrecvs,
    Wait,
)

HOST_SPEED = 1e9  # flop/s of every simulated host; a copy of B bytes is B / bandwidth * HOST_SPEED flops
# SMPI prints the simulated time in whole microseconds. Every latency times TIME_SCALE and
# every rate over it (copies too) stretch the simulation exactly TIME_SCALE-fold (the model
# is linear in both, and its factors depend on message sizes only), so the printed time
# divided by TIME_SCALE has nanosecond resolution.
TIME_SCALE = 1000
SELECTORS = ("mpich", "ompi", "default")
# SMPI's named MPI_Alltoall algorithms (smpi_coll.cpp; each is in SimGrid 3.32 and 4.1)
SMPI_ALLTOALL = ("2dmesh", "3dmesh", "basic_linear", "bruck", "pair", "pair_rma", "pair_light_barrier",
                 "pair_mpi_barrier", "pair_one_barrier", "ring", "ring_light_barrier", "ring_mpi_barrier",
                 "ring_one_barrier", "mvapich2", "mvapich2_scatter_dest", "ompi", "mpich", "impi")
FAST_SINCE = (3, 34)  # before 3.34 every finished eager send is removed from one list of all of them


def smpirun() -> str | None:
    """The smpirun program first on PATH, or None."""
    return shutil.which("smpirun")


def replayer() -> str | None:
    """SMPI's trace replayer (smpireplaymain) of the SimGrid that smpirun belongs to, or None."""
    runner = smpirun()
    if not runner:
        return None
    prefix = Path(runner).resolve().parent.parent  # Debian puts it under lib/<multiarch>/simgrid
    found = [*(prefix / "lib" / "simgrid").glob("smpireplaymain"), *prefix.glob("lib/*/simgrid/smpireplaymain")]
    return str(found[0]) if found else shutil.which("smpireplaymain")


REPLAYERS = ("s4u", "smpi")
S4U_SOURCE = Path(__file__).with_name("s4u_replay.cpp")


def cache_home() -> Path:
    """$XDG_CACHE_HOME/a2a-testbed (~/.cache when unset): what the testbed keeps between runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "a2a-testbed"


def s4u_replayer() -> str:
    """Our S4U replayer, compiled against smpirun's SimGrid once per source and library, then kept."""
    prefix = Path(smpirun() or "/nonexistent").resolve().parent.parent
    libraries = sorted([*prefix.glob("lib/libsimgrid.so*"), *prefix.glob("lib/*/libsimgrid.so*")])
    if not smpirun() or not libraries:
        raise BadConfig(f"the S4U replayer is built against SimGrid's library beside smpirun ({missing() or prefix}); "
                        "--replayer smpi replays with smpirun alone")
    library = libraries[0].resolve()
    key = hashlib.sha256(S4U_SOURCE.read_bytes() + f"{library}:{library.stat().st_mtime_ns}".encode())
    program = cache_home() / "s4u-replay" / key.hexdigest()[:16] / "s4u_replay"
    if not program.exists():
        if not shutil.which("c++"):
            raise BadConfig("building the S4U replayer needs a C++ compiler (c++; Debian: apt-get install g++); "
                            "--replayer smpi replays with smpirun alone")
        program.parent.mkdir(parents=True, exist_ok=True)
        building = program.with_name(f"s4u_replay.{os.getpid()}")  # then renamed: another process may build it
        command = ["c++", "-O2", "-std=c++17", str(S4U_SOURCE), "-o", str(building), f"-I{prefix / 'include'}",
                   f"-L{library.parent}", f"-Wl,-rpath,{library.parent}", "-lsimgrid"]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join(done.stderr.strip().splitlines()[-12:])
            raise BadConfig(f"building the S4U replayer failed ({' '.join(command)}):\n{tail}\n"
                            "--replayer smpi replays with smpirun alone")
        os.replace(building, program)
    return str(program)


def missing() -> str | None:
    """What is missing for simulation, with how to get it; None when SimGrid is ready."""
    if smpirun() and replayer():
        return None
    return (f"SimGrid's SMPI is not installed (no {'smpirun' if not smpirun() else 'smpireplaymain'}); "
            "`bench simulate` needs it: `make simgrid` builds SimGrid 4.1 into /usr/local (about 12 minutes; "
            "`bash mk/simgrid.sh PREFIX` elsewhere, then PREFIX/bin first on PATH), or on Debian "
            "`apt-get install libsimgrid-dev` (3.32: slow past 256 ranks)")


def slow_version(text: str) -> bool:
    """Whether SimGrid `text` (3.32, 4.1) predates the fix that makes many eager sends in flight cheap."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", text)[:2])
    return len(numbers) == 2 and numbers < FAST_SINCE


def version() -> str:
    """SimGrid's version as smpirun reports it."""
    done = subprocess.run([smpirun() or "smpirun", "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"SimGrid version (\S+)", done.stdout + done.stderr)
    return match.group(1) if match else "unknown"


# --- links and platforms -------------------------------------------------------------------------

RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKMGT]?)(bps|Bps)\s*$")
DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us|ns)\s*$")


@dataclass(frozen=True)
class Link:
    """One link's rate (bytes/s) and latency (s), as `100Gbps,1us` spells them."""

    bytes_per_second: float
    latency: float
    text: str

    @classmethod
    def parse(cls, text: str) -> "Link":
        rate, _, delay = str(text).partition(",")
        r, d = RATE.match(rate), DELAY.match(delay)
        if not r or not d:
            raise BadOption(f"--link {text!r}; accepted: RATE,LATENCY such as 100Gbps,1us or 125MBps,50us "
                            "(rates in bps or Bps with k, M, G, T; latencies in s, ms, us, ns)")
        scale = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[r.group(2)]
        per_second = float(r.group(1)) * scale / (8 if r.group(3) == "bps" else 1)
        seconds = float(d.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[d.group(2)]
        if per_second <= 0:
            raise BadOption(f"--link {text!r}: the rate must be above 0")
        return cls(per_second, seconds, f"{rate.strip()},{delay.strip()}")


@dataclass(frozen=True)
class MessageCost:
    """The software time of one eager message, which SMPI charges only when told (smpi/os, ois and or).

    `send` is what a rank spends in one MPI_Send or MPI_Isend, `recv` in taking in one message:
    the cost of the MPI library and of its caller (here mpi4py), which SMPI's network model
    leaves out. SMPI charges `send` to every MPI_Isend and to each MPI_Send below
    smpi/send-is-detached-thresh (64 KiB), and `recv` to each message sent below that
    threshold: it weighs in the latency regime.
    """

    send: float = 0.0  # seconds
    recv: float = 0.0  # seconds
    source: str = "none"

    def config(self) -> list[str]:
        """The SMPI options that charge it, in the simulation's stretched time (TIME_SCALE)."""
        if not (self.send or self.recv):
            return []
        send, recv = self.send * TIME_SCALE, self.recv * TIME_SCALE
        return [f"--cfg=smpi/os:{send:.9g}", f"--cfg=smpi/ois:{send:.9g}", f"--cfg=smpi/or:{recv:.9g}"]

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of it."""
        return {"send_us": self.send * 1e6, "recv_us": self.recv * 1e6, "source": self.source}

    @classmethod
    def of(cls, facts: dict[str, Any] | None) -> "MessageCost":
        """The cost a meta.json records (none in records made before it was)."""
        facts = facts or {}
        return cls(facts.get("send_us", 0.0) / 1e6, facts.get("recv_us", 0.0) / 1e6, facts.get("source", "none"))

    @classmethod
    def parse(cls, text: str) -> "MessageCost":
        """--message-cost SEND[,RECV] in microseconds."""
        parts = [part.strip() for part in str(text).split(",")]
        try:
            values = [float(part) for part in parts]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or min(values, default=-1) < 0:
            raise BadOption(f"--message-cost {text!r}; accepted: microseconds per send and per receive, "
                            "SEND[,RECV] at 0 or more, e.g. 0.85 or 0.6,1.1")
        send, recv = values[0], values[-1]
        return cls(send / 1e6, recv / 1e6, f"--message-cost {text}")


@dataclass(frozen=True)
class BandwidthFactor:
    """The share of a link's rate a message gets (SMPI's smpi/bw-factor, one for every size), fitted to a measured
    record; 0 keeps the network's own factors."""

    factor: float = 0.0
    source: str = "none"

    def config(self) -> list[str]:
        """The SMPI option that applies it (after the network's, which it replaces)."""
        return [f"--cfg=smpi/bw-factor:0:{self.factor:.9g}"] if self.factor else []

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of it."""
        return {"factor": self.factor, "source": self.source}

    @classmethod
    def of(cls, facts: dict[str, Any] | None) -> "BandwidthFactor":
        """The factor a meta.json records (none in records made before it was)."""
        facts = facts or {}
        return cls(facts.get("factor", 0.0), facts.get("source", "none"))


def platform_xml(fabric: Any, link: Link, copy_bandwidth: float) -> str:
    """A SimGrid platform of `fabric` (a2a.fabric), every link `link`, full duplex; hosts n0..n{N-1}."""
    rate, delay = link.bytes_per_second / TIME_SCALE, link.latency * TIME_SCALE
    attributes = {"id": "a2a", "prefix": "n", "suffix": "", "radical": f"0-{fabric.nodes - 1}",
                  "speed": f"{HOST_SPEED:.0f}f", "bw": f"{rate:.9g}Bps", "lat": f"{delay * 1e6:.9g}us",
                  "sharing_policy": "SPLITDUPLEX", "loopback_bw": f"{copy_bandwidth / TIME_SCALE:.9g}Bps",
                  "loopback_lat": f"{0.1 * TIME_SCALE:.9g}us"}
    kind = fabric.kind
    if kind == "switch":  # a non-blocking switch: a backbone as fast as all node links together
        attributes.update(bb_bw=f"{rate * fabric.nodes:.9g}Bps", bb_lat="0us",
                          bb_sharing_policy="SHARED")
    elif kind in ("ring", "torus"):
        attributes.update(topology="TORUS", topo_parameters=",".join(map(str, fabric.dims)))
    elif kind == "fattree":
        uplinks = max(1, round(fabric.per_leaf / fabric.oversub))
        attributes.update(topology="FAT_TREE", topo_parameters=f"2;{fabric.per_leaf},{fabric.leaves};1,1;1,{uplinks}")
    elif kind == "dragonfly":
        g, c, r, n = routable(fabric).shape
        attributes.update(topology="DRAGONFLY", topo_parameters=f"{g},1;{c},1;{r},1;{n}")
    else:
        raise BadOption(f"the simulator has no platform for topology {fabric.spec!r}")
    cluster = " ".join(f'{k}="{v}"' for k, v in attributes.items())
    return ("<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            '<platform version="4.1">\n'
            # in a zone of its own: SimGrid 4.1 crashes on a torus or fat tree cluster at the top level
            '  <zone id="world" routing="Full">\n'
            f"    <cluster {cluster}/>\n"
            "  </zone>\n"
            "</platform>\n")


def routable(fabric: Any) -> Any:
    """`fabric`, if SimGrid can route it: its dragonfly links group g to router g of a chassis."""
    if fabric.kind == "dragonfly" and fabric.shape[2] < fabric.shape[0]:
        g, _, r, _ = fabric.shape
        raise BadOption(f"--platform {fabric.spec}: SimGrid's dragonfly reaches group g through router g of each "
                        f"chassis, so ROUTERS ({r}) must be at least GROUPS ({g})")
    return fabric


def hosts_of(nprocs: int, nodes: int) -> list[int]:
    """Block placement: rank r on node r // ppn, ppn = ceil(nprocs / nodes)."""
    return [r // ppn_of(nprocs, nodes) for r in range(nprocs)]


# --- traces --------------------------------------------------------------------------------------

def trace_lines(events: list[Event], rank: int, nprocs: int, copy_bandwidth: float,
                exact: bool = False) -> Iterator[str]:
    """One rank's events as SMPI time-independent trace lines (bytes as MPI_BYTE counts); `exact` leaves compute
    amounts unrounded, for a replayer that scales them."""
    sent: Counter = Counter()  # messages to each peer so far: the tag pairs them with the receives
    received: Counter = Counter()
    pending: dict[Any, tuple[int, int, int]] = {}
    posts: list[tuple[str, int, str]] = []  # non-blocking posts since the last line that takes time
    copy = 0

    def flush() -> Iterator[str]:
        nonlocal copy
        # The posts start at one simulated instant, so their order changes no time. Receives
        # first and each kind by peer is the order in which SMPI finds every match at the head
        # of a mailbox; in a rotated order (r+1, r+2, ...) it scans, O(p^3) for linear.
        posts.sort(key=lambda post: post[:2])
        yield from (line for *_, line in posts)
        posts.clear()
        if copy:
            flops = copy / copy_bandwidth * HOST_SPEED * TIME_SCALE
            yield f"{rank} compute {flops!r}" if exact else f"{rank} compute {flops:.0f}"
            copy = 0

    yield f"{rank} init"
    for e in _lowered(events, rank, nprocs):
        if isinstance(e, Copy):
            copy += e.nbytes
            continue
        if not isinstance(e, (Isend, Irecv)) or copy:
            yield from flush()
        if isinstance(e, Burst):
            yield from _burst_lines(e, rank, sent, received)
        elif isinstance(e, Sendrecvs):
            yield from _sendrecv_lines(e, rank, sent, received)
        elif isinstance(e, (Isend, Irecv, Send, Recv)):
            outgoing = isinstance(e, (Isend, Send))
            counter = sent if outgoing else received
            tag = counter[e.peer]
            counter[e.peer] += 1
            line = f"{rank} {e.kind} {e.peer} {tag} {_count(e.nbytes)}"
            if isinstance(e, (Isend, Irecv)):
                posts.append((e.kind, e.peer, line))
                pending[e.request] = (rank, e.peer, tag) if outgoing else (e.peer, rank, tag)
            else:
                yield line
        elif isinstance(e, Wait):  # one wait per request: SMPI 3.32's waitall is a waitany per request, O(n^2)
            yield from (f"{rank} wait {src} {dst} {tag}" for src, dst, tag in
                        (pending.pop(i) for i in e.requests if i in pending))
        elif isinstance(e, WholeAlltoall):  # SMPI's algorithms send up to p/2 blocks in one message
            doubles = e.nbytes * nprocs >= INT_LIMIT and e.nbytes % 8 == 0
            count = f"{e.nbytes // 8} " * 2 + "0 0" if doubles else f"{e.nbytes} {e.nbytes}"
            yield f"{rank} alltoall {count}"
    yield from flush()
    yield f"{rank} finalize"


def _burst_lines(e: Burst, rank: int, sent: Counter, received: Counter) -> list[str]:
    """A Burst's lines as its expanded events give them, without an event per message: per batch its receives,
    then its sends, each kind by peer (as flush orders posts), then a wait for each in request order."""
    count, lines = _count(e.nbytes), []
    for sources, dests in e.batches():
        heard, told = [received[q] for q in sources], [sent[q] for q in dests]  # each peer once per kind (Batch)
        for q, tag in zip(sources, heard):
            received[q] = tag + 1
        for q, tag in zip(dests, told):
            sent[q] = tag + 1
        lines += ([f"{rank} irecv {q} {tag} {count}" for q, tag in sorted(zip(sources, heard))]
                  + [f"{rank} isend {q} {tag} {count}" for q, tag in sorted(zip(dests, told))]
                  + [f"{rank} wait {q} {rank} {tag}" for q, tag in zip(sources, heard)]
                  + [f"{rank} wait {rank} {q} {tag}" for q, tag in zip(dests, told)])
    return lines


def _sendrecv_lines(e: Sendrecvs, rank: int, sent: Counter, received: Counter) -> list[str]:
    """Sendrecvs' lines as its expanded events give them: per Sendrecv its receive and its send (as flush orders
    posts), then a wait for each in request order."""
    lines = []
    for d, outgoing, q, incoming in e.rounds():
        told, heard = sent[d], received[q]
        sent[d], received[q] = told + 1, heard + 1
        lines += [f"{rank} irecv {q} {heard} {_count(incoming)}", f"{rank} isend {d} {told} {_count(outgoing)}",
                  f"{rank} wait {rank} {d} {told}", f"{rank} wait {q} {rank} {heard}"]
    return lines


@dataclass(slots=True)
class WholeAlltoall:
    """A lowered event: an MPI_Alltoall of the whole job, `nbytes` per peer, left to SMPI's own algorithms."""

    nbytes: int


INT_LIMIT = 1 << 31  # SMPI passes a trace's counts to its MPI calls as int


def _count(nbytes: int) -> str:
    """A message's size as a trace count: MPI_BYTEs, or from 2 GiB on MPI_DOUBLEs (datatype 0 in SMPI's traces)."""
    if nbytes < INT_LIMIT:
        return str(nbytes)
    if nbytes % 8 or nbytes // 8 >= INT_LIMIT:
        raise CaptureError(f"a message of {nbytes} bytes: SMPI's counts are int, and it is no whole count of "
                           "8-byte items below 2^31")
    return f"{nbytes // 8} 0"


def _lowered(events: list[Event], rank: int, nprocs: int) -> Iterator[Event | WholeAlltoall]:
    """Self messages become copies; sub-communicator collectives become linear point-to-point."""
    selfish: set[Any] = set()
    fresh = iter(range(-1, -(1 << 62), -1))  # request ids of our own, below the capture's
    for e in events:
        if isinstance(e, (Isend, Irecv, Send, Recv)) and e.peer == rank:
            if isinstance(e, (Isend, Send)):
                yield Copy(e.nbytes)
            if isinstance(e, (Isend, Irecv)):
                selfish.add(e.request)
        elif isinstance(e, Wait):
            yield Wait(tuple(i for i in e.requests if i not in selfish))
        elif isinstance(e, Posts) or (isinstance(e, Messages) and ((e.sources == rank).any()
                                                                 or (e.dests == rank).any())):
            yield from _lowered(e.expanded(), rank, nprocs)
        elif isinstance(e, Collective):
            yield from _collective(e, rank, nprocs, fresh)
        else:
            yield e


def _collective(e: Collective, rank: int, nprocs: int, fresh: Iterator[int]) -> Iterator[Event | WholeAlltoall]:
    members, sends, recvs = e.members, e.sends, e.recvs
    if e.name == "alltoall" and members == tuple(range(nprocs)) and len(set(sends)) == 1:
        yield WholeAlltoall(sends[0])  # the whole job: SMPI's own MPI_Alltoall
        return
    me = members.index(rank)
    if e.name == "barrier":  # everyone tells member 0, member 0 releases everyone
        sends = tuple(1 if (me != 0 and i == 0) or (me == 0 and i != 0) else 0 for i in range(len(members)))
        recvs = sends
    ids = []
    for i, peer in enumerate(members):
        if i != me and recvs[i]:
            ids.append(next(fresh))
            yield Irecv(peer, recvs[i], ids[-1])
    for i, peer in enumerate(members):
        if i != me and sends[i]:
            ids.append(next(fresh))
            yield Isend(peer, sends[i], ids[-1])
    if sends[me]:
        yield Copy(sends[me])
    if ids:
        yield Wait(tuple(ids))


@dataclass(frozen=True)
class Traces:
    """A schedule's traces on disk: the list of them, their ranks, whether a line is SMPI's own MPI_Alltoall (which
    only smpirun replays), the SHA-256 of every rank's trace, their lines, and the most requests each rank has
    posted and not yet waited for, summed over the ranks. `scratch`: their temporary directory, removed once no
    one holds them."""

    listing: Path
    nprocs: int
    collective: bool
    digest: str
    lines: int = 0
    pending: int = 0
    scratch: Any = None

    def memory(self) -> int:
        """The bytes a replay of them holds at most, about: each request in flight and each line read.

        Measured with the S4U replayer (linear on a fat tree, 256 to 1,024 ranks, docs/simulation.md); smpirun
        holds about as much. SMPI's own MPI_Alltoall is taken to post every message at once, as a send and a
        receive (its basic_linear, which SMPI's Open MPI selection runs at 1,024 ranks and 1 KiB, posts 2(p-1) a rank).
        """
        pending = 2 * self.nprocs * (self.nprocs - 1) if self.collective else self.pending
        return REPLAY_BASE_BYTES + REPLAY_REQUEST_BYTES * pending + REPLAY_LINE_BYTES * self.lines


REPLAY_BASE_BYTES, REPLAY_REQUEST_BYTES, REPLAY_LINE_BYTES = 32 << 20, 1300, 24
POSTS_AND_WAITS = re.compile(r"^\d+ (i(?=send|recv)|w(?=ait))", re.MULTILINE)  # an i per post, a w per wait


def most_pending(text: str) -> int:
    """The most requests one rank's trace lines have posted (isend, irecv) and not yet waited for."""
    posted = np.frombuffer("".join(POSTS_AND_WAITS.findall(text)).encode(), np.uint8) == ord("i")
    return int(np.cumsum(np.where(posted, 1, -1)).max(initial=0))


def write_traces(schedule: Schedule, directory: Path, copy_bandwidth: float, exact: bool = False,
                 scratch: Any = None) -> Traces:
    """One trace file per rank in `directory`, and the list of them (`exact`: see trace_lines)."""
    directory.mkdir(parents=True, exist_ok=True)
    listing, collective, digest, lines, pending = directory / "traces.txt", False, hashlib.sha256(), 0, 0
    with open(listing, "w") as names:
        for rank, events in enumerate(schedule.events):
            path = directory / f"rank{rank}.txt"
            text = "\n".join(trace_lines(events, rank, schedule.nprocs, copy_bandwidth, exact)) + "\n"
            collective = collective or f"{rank} alltoall " in text
            lines, pending = lines + text.count("\n"), pending + most_pending(text)
            path.write_text(text)
            digest.update(text.encode())
            names.write(f"{path}\n")
    return Traces(listing, schedule.nprocs, collective, digest.hexdigest(), lines, pending, scratch)


def unit_traces(schedule: Schedule, copy_bandwidth: float) -> Traces:
    """The traces of `schedule` in a temporary directory, compute amounts unrounded: the S4U replayer scales them
    to every size (--scale), so they are written once for all sizes."""
    scratch = tempfile.TemporaryDirectory(prefix="a2a-traces-")
    return write_traces(schedule, Path(scratch.name), copy_bandwidth, exact=True, scratch=scratch)


# --- replay --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Replay:
    """One simulated call: its time, the replay's wall time until collected, and its CPU time."""

    seconds: float
    wall_seconds: float
    cpu_seconds: float


class ReplayJob:
    """A schedule's platform, hostfile and traces on disk; its replay runs in the background once started.

    The simulator is a process of its own, so the next schedule can be captured meanwhile:
    `s4u` (our S4U replayer's program) unless it is None or the traces hold SMPI's own
    MPI_Alltoall, else smpirun. A Schedule's traces are written in the job's directory; given
    Traces (unit_traces) are replayed at `scale` times their bytes, by the S4U replayer only.
    """

    def __init__(self, traces: Schedule | Traces, fabric: Any, link: Link, copy_bandwidth: float,
                 keep: Path | None = None, s4u: str | None = None, scale: int = 1):
        self._scratch = None if keep else tempfile.TemporaryDirectory(prefix="a2a-smpi-")
        self.where = Path(keep or self._scratch.name)
        self.where.mkdir(parents=True, exist_ok=True)
        if isinstance(traces, Schedule):
            traces = write_traces(traces, self.where / "traces", copy_bandwidth)
        self.platform, self.hostfile = self.where / "platform.xml", self.where / "hostfile"
        platform = platform_xml(fabric, link, copy_bandwidth)
        hosts = "".join(f"n{h}\n" for h in hosts_of(traces.nprocs, fabric.nodes))
        self.platform.write_text(platform)
        self.hostfile.write_text(hosts)
        self.traces, self.listing, self.scale, self.nprocs = traces, traces.listing, scale, traces.nprocs
        # what decides the simulated time, but for the configuration start() is given
        self.digest = hashlib.sha256(f"{platform}\0{hosts}\0{traces.digest}\0{scale}".encode()).hexdigest()
        self.s4u = None if traces.collective else s4u  # the S4U replayer's program; it has no MPI_Alltoall
        if scale != 1 and not self.s4u:
            raise ValueError("only the S4U replayer scales traces; smpirun replays them as written")
        self.running: subprocess.Popen | None = None

    def identity(self, config: list[str]) -> str:
        """What decides the simulated time: the platform, the placement, the traces, and which replayer runs them
        with what configuration (equal identities, equal times: the simulator is deterministic)."""
        return hashlib.sha256(f"{self.digest}\0{self.s4u is None}\0{chr(0).join(config)}".encode()).hexdigest()

    def memory(self) -> int:
        """About the bytes its replay holds at most."""
        return self.traces.memory()

    def start(self, config: list[str], timeout: float = 3600) -> "ReplayJob":
        """Run the replayer on the traces (output to a file: a full pipe would stall it)."""
        self.config = config
        if self.s4u:
            command = [self.s4u, str(self.platform), str(self.hostfile), str(self.listing), f"--scale={self.scale}",
                       "--log=root.thres:warning", *config]
        else:
            command = [smpirun(), "-np", str(self.nprocs), "-platform", str(self.platform), "-hostfile",
                       str(self.hostfile), "-replay", str(self.listing), replayer(),
                       f"--cfg=smpi/host-speed:{HOST_SPEED:.0f}f", "--log=root.thres:warning",
                       "--log=smpi_replay.thres:info", *config]
        self.began, self.timeout, self.expired = time.monotonic(), timeout, False
        with open(self.where / "replay.log", "w") as log:
            # a session of its own: smpirun is a script, and a stopped replay must not leave its simulator running
            self.running = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "LC_ALL": "C"}, start_new_session=True)
        # the limit holds while this process captures the next point, not only once it waits
        self._limit = threading.Timer(timeout, self._expire)
        self._limit.daemon = True
        self._limit.start()
        return self

    def _expire(self) -> None:
        if self.running.poll() is None:
            self.expired = True
            self._kill()

    def result(self) -> Replay:
        """Wait for the replay; the simulated time of the call. The files go unless kept."""
        reaped = _children_cpu()
        try:
            self.running.wait()
            wall, cpu = time.monotonic() - self.began, _children_cpu() - reaped
            output = (self.where / "replay.log").read_text(errors="replace")
        finally:
            self.stop()
        if self.expired:
            raise CaptureError(f"the replay took more than {self.timeout:g} s of wall time; stopped")
        match = re.search(r"Simulation time ([0-9.eE+-]+)", output)
        if self.running.returncode or not match:
            tail = "\n".join(output.strip().splitlines()[-8:])
            raise CaptureError(f"{'s4u_replay' if self.s4u else 'smpirun'} failed (exit {self.running.returncode}) on "
                               f"{self.listing.parent}:\n{tail}")
        return Replay(float(match.group(1)) / TIME_SCALE, wall, cpu)

    def stop(self) -> None:
        """End the replay if it still runs, and remove its files unless kept."""
        if self.running:
            self._limit.cancel()
            if self.running.poll() is None:
                self._kill()
        if self._scratch:
            self._scratch.cleanup()

    def _kill(self) -> None:
        try:
            os.killpg(self.running.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended meanwhile
            pass
        self.running.wait()


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (smpirun and its simulator, once waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def copy_bandwidth(nbytes: int = 8 << 20, repeats: int = 20) -> float:
    """This machine's memory copy rate (bytes/s): the best of `repeats` np.copyto of `nbytes`."""
    source, target = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    np.copyto(target, source)
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        np.copyto(target, source)
        rates.append(nbytes / (time.perf_counter() - began))
    return float(max(rates))  # the least disturbed copy: the machine is shared


# SMPI's network model by default scales each message's latency and bandwidth by factors that
# depend on its size (calibrated on a real cluster: latency x11.6 from 64 KiB up, for one);
# It also loads the reverse path of every flow with 5 % for TCP acknowledgements. `ideal` sets
# the factors to 1 and drops the acks: a message costs latency x hops + bytes / rate, links
# shared max-min.
NETWORKS = {"calibrated": [], "ideal": ["--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
                                        "--cfg=network/crosstraffic:0"]}


def native_config(selector: str, algorithm: str) -> list[str]:
    """SMPI options that make MPI_Alltoall use a selector or one named algorithm."""
    if algorithm:
        return [f"--cfg=smpi/alltoall:{algorithm}"]
    return [] if selector == "default" else [f"--cfg=smpi/coll-selector:{selector}"]


def ppn_of(nprocs: int, nodes: int) -> int:
    """Ranks per node of the block placement."""
    return math.ceil(nprocs / nodes)
