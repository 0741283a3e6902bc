"""The simulator fitted to a measured record: the software cost of a message, the share of a link's rate, and the
memory bandwidth the ranks of a node share.

`linear` posts all its p-1 receives and p-1 sends at once and then waits. Its messages are in
flight together, so at a few bytes per peer the network latency overlaps; what grows with
each extra peer is the time one more send and one more receive take in the MPI library and
its caller. The slope of its measured time over p-1, fitted across process counts at the
smallest size measured (1 KiB per peer or less), is that cost per peer. Half of it is
charged to each send and half to each receive.

At its largest size (64 KiB per peer or more) and fewest ranks, the bytes dominate. The bandwidth
factor is the one with which the simulated `linear` there takes the measured time: a simulated
time is a part that does not depend on the factor plus the bytes' part over the factor, so two
replays of that point (factors 1 and 1/2) give both parts and the factor; a third checks it, and
where a node's memory holds the bytes back a few more find it (regula falsi on its inverse).

At its largest size with the most ranks on one node (on the fewest nodes), the ranks copy at
once and share the node's memory. The node's memory bandwidth is the one with which the
simulated `linear` there takes the measured time. The simulated time only grows as the bandwidth
falls, so a few replays find it (regula falsi on its inverse, from the time with no shared memory).

Every point is replayed with the ranks per node it was measured with. The memory is fitted on a
switch only, the one platform whose nodes have a memory link (a2a.simulate.platforms.NodeMemory);
elsewhere the factor alone, on the ranks' loopback.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np

from a2a.errors import BadConfig
from a2a.record.results import Row, load
from a2a.simulate import platforms, replay, simgrid
from a2a.simulate.capture import capture_unit
from a2a.simulate.machine import Machine

ALGORITHM = "linear"
LARGEST_BYTES = 1024  # above this, the bytes begin to count in the slope
BANDWIDTH_BYTES = 65536  # from here up, the bytes dominate
FIT_TOLERANCE = 1e-3  # of the measured time: how close a fitted factor or memory brings the simulated one
FIT_REPLAYS = 40  # at most, to fit one factor or one memory
FIT_ROUNDS = 10  # at most, of fitting the factor and the memory in turn


def calibrated(machine: Machine, directory: Path) -> Machine:
    """The machine with the message cost, the bandwidth factor and the node memory that linear's measured times in
    DIR show. On a switch the factor and the memory are fitted in turn, each with the other's last value (the memory
    unbounded at first), until neither moves; elsewhere the factor alone."""
    machine = replace(machine, message_cost=message_cost(directory))
    if machine.placement(1)[0].kind != "switch":
        return replace(machine, bandwidth=bandwidth_factor(directory, machine), memory=platforms.NodeMemory(
            source=f"none: the memory a node's ranks share is modelled on a switch only, not on {machine.platform}"))
    machine = replace(machine, memory=_memory(platforms.UNBOUNDED, machine.bandwidth, "unbounded"))
    for _ in range(FIT_ROUNDS):
        fitted = replace(machine, bandwidth=bandwidth_factor(directory, machine))
        fitted = replace(fitted, memory=node_memory(directory, fitted))
        if _settled(machine, fitted):
            return fitted
        machine = fitted
    raise BadConfig(f"{directory}: the bandwidth factor and the node memory did not settle in {FIT_ROUNDS} rounds "
                    f"(last {machine.bandwidth.factor:.4g} and {machine.memory.bytes_per_second / 1e9:.4g} GB/s)")


def _settled(before: Machine, after: Machine) -> bool:
    pairs = ((before.bandwidth.factor, after.bandwidth.factor),
             (before.memory.bytes_per_second, after.memory.bytes_per_second))
    return all(abs(b - a) <= FIT_TOLERANCE * max(abs(a), 1e-300) for a, b in pairs)


def message_cost(directory: Path) -> platforms.MessageCost:
    """The per-message cost that `linear`'s measured times in DIR show, fitted over its process counts."""
    points = linear_points(directory)
    x = np.array([p - 1 for p in points], dtype=float)
    y = np.array(list(points.values())) * 1e-6
    slope, _ = np.polyfit(x, y, 1)
    if slope <= 0:
        raise BadConfig(f"{directory}: linear took no longer on more ranks ({_listed(points)}); there is no "
                        "per-message cost to learn from it")
    counts = ", ".join(map(str, points))
    source = (f"{directory}: linear at {counts} ranks grew by {slope * 1e6:.3g} us per extra peer "
              f"({_listed(points)})")
    return platforms.MessageCost(slope / 2, slope / 2, source)


def linear_points(directory: Path) -> dict[int, float]:
    """Per process count, linear's sync-timed p50 (us) at its smallest size of at most LARGEST_BYTES per peer."""
    smallest: dict[int, tuple[int, float]] = {}
    for row in _linear_rows(directory):
        if row.bytes_per_peer <= LARGEST_BYTES and (row.nprocs not in smallest
                                                    or row.bytes_per_peer < smallest[row.nprocs][0]):
            smallest[row.nprocs] = (row.bytes_per_peer, row.t_p50_us)
    if len(smallest) < 2:
        raise BadConfig(f"{directory} has linear (sync timing) at {len(smallest)} process count(s) at {LARGEST_BYTES} "
                        "bytes per peer or less; calibration needs two or more, e.g. `mpirun -n 16 python -m bench run "
                        "--nprocs 2,4,8,16 --sizes 8,1M --algorithms linear`")
    return {n: smallest[n][1] for n in sorted(smallest)}


def bandwidth_factor(directory: Path, machine: Machine) -> platforms.BandwidthFactor:
    """The bandwidth factor with which the simulated linear takes its measured time at its largest size of at least
    BANDWIDTH_BYTES per peer, at its fewest ranks (2 or more); none without such a point."""
    rows = _large_rows(directory)
    if not rows:
        return platforms.BandwidthFactor(0.0, f"none: {directory} has no linear at {BANDWIDTH_BYTES} bytes per peer "
                                              "or more on 2 ranks or more")
    fewest = min(r.nprocs for r in rows)
    row = max((r for r in rows if r.nprocs == fewest), key=lambda r: r.bytes_per_peer)
    run = _replayer(replace(machine, ppn=row.ppn), row)

    def at(factor: float) -> float:
        return run(replace(machine.bandwidth, factor=factor), machine.memory.bytes_per_second)

    at_one, at_half = at(1.0), at(0.5)
    bytes_part = at_half - at_one
    rest = at_one - bytes_part
    where = _where(row)
    if bytes_part <= 0 or row.t_p50_us <= rest:
        raise BadConfig(f"{directory}: {where} took {row.t_p50_us:.1f} us, no more than the simulation puts on the "
                        f"latencies and message costs alone ({rest:.1f} us): no bandwidth factor fits it")
    # the factor if the bytes' part stays in proportion to its inverse (it does unless a node's memory holds it back)
    guess = bytes_part / (row.t_p50_us - rest)
    inverse = _solved(lambda x: at(1 / x), row.t_p50_us, 1 / guess, rest,
                      f"{directory}: no bandwidth factor makes the simulated {where} take its {row.t_p50_us:.1f} us "
                      "measured (the node memory fitted at the most ranks per node holds it back)")
    return platforms.BandwidthFactor(1 / inverse, f"{directory}: {where} took {row.t_p50_us:.1f} us measured; "
                                                  f"simulated at factor 1: {at_one:.1f} us")


def node_memory(directory: Path, machine: Machine) -> platforms.NodeMemory:
    """The memory bandwidth with which the simulated linear, its ranks sharing their node's memory (on a switch),
    takes its measured time at its largest size of at least BANDWIDTH_BYTES per peer with the most ranks on a node
    (of the fewest nodes); none where no node held two ranks; unbounded where the simulation is that slow without
    sharing."""
    rows = [r for r in _large_rows(directory) if r.ppn >= 2]
    if not rows:
        return platforms.NodeMemory(source=f"none: {directory} has no linear at {BANDWIDTH_BYTES} bytes per peer or "
                                           "more with 2 ranks or more on a node")
    most = max(r.ppn for r in rows)
    row = min((r for r in rows if r.ppn == most), key=lambda r: (r.nnodes, -r.bytes_per_peer))
    run = _replayer(replace(machine, ppn=row.ppn), row)

    def simulated(inverse: float) -> float:  # at a memory bandwidth of 1 / inverse bytes/s (0: unbounded)
        return run(machine.bandwidth, 1 / inverse if inverse else platforms.UNBOUNDED)

    alone = simulated(0.0)
    where = _where(row)
    said = (f"{directory}: {where} took {row.t_p50_us:.1f} us measured; simulated with the memory unbounded: "
            f"{alone:.1f} us")
    if alone >= row.t_p50_us * (1 - FIT_TOLERANCE):
        return _memory(platforms.UNBOUNDED, machine.bandwidth, f"unbounded: {said}")
    start = (row.t_p50_us - alone) * 1e-6 / (row.ppn * row.nprocs * row.bytes_per_peer)  # a node's bytes, about
    inverse = _solved(simulated, row.t_p50_us, start, alone, f"{directory}: no node memory makes the simulated "
                      f"{where} take its {row.t_p50_us:.1f} us measured")
    return _memory(1 / inverse, machine.bandwidth, said)


def _solved(simulated: Callable[[float], float], target: float, start: float, at_zero: float, failed: str) -> float:
    """The x at which the increasing simulated(x) takes `target` (within FIT_TOLERANCE of it), by regula falsi
    (Illinois) from `start`, in the bracket [0 (where it takes `at_zero`), the first of start, 4 start, 16 start...
    that reaches it]; BadConfig saying `failed` when FIT_REPLAYS replays do not find it."""
    low, low_us, high, high_us = 0.0, at_zero, start, simulated(start)
    replays, side = 1, 0
    while high_us < target * (1 - FIT_TOLERANCE) and replays < FIT_REPLAYS:
        low, low_us, high, high_us = high, high_us, high * 4, simulated(high * 4)
        replays += 1
    x, us = high, high_us
    while abs(us - target) > FIT_TOLERANCE * target:
        if replays >= FIT_REPLAYS or high_us < target:
            raise BadConfig(f"{failed} (the simulation reached {us:.1f} us in {replays} replays)")
        x = high - (high_us - target) * (high - low) / (high_us - low_us)
        us = simulated(x)
        replays += 1
        if us < target:
            low, low_us = x, us
            high_us = (high_us - target) / 2 + target if side == -1 else high_us  # Illinois: halve the stale end
            side = -1
        else:
            high, high_us = x, us
            low_us = (low_us - target) / 2 + target if side == 1 else low_us
            side = 1
    return x


def _large_rows(directory: Path) -> list[Row]:
    return [r for r in _linear_rows(directory) if r.bytes_per_peer >= BANDWIDTH_BYTES and r.nprocs >= 2]


def _linear_rows(directory: Path) -> list[Row]:
    return [r for r in load(directory).rows if r.measured and r.timing == "sync" and r.algorithm == ALGORITHM
            and not r.mesh and r.collective == "alltoall"]


def _where(row: Row) -> str:
    return (f"linear at {row.nprocs} ranks ({row.nnodes} node(s) of {row.ppn}) and {row.bytes_per_peer} B "
            "per peer")


def _memory(rate: float, factor: platforms.BandwidthFactor, source: str = "none") -> platforms.NodeMemory:
    """A node memory of `rate` bytes/s as the messages get it: SMPI multiplies every link's rate by the factor."""
    return platforms.NodeMemory(rate, rate / (factor.factor or 1.0), source) if rate else platforms.NodeMemory()


def _replayer(machine: Machine, row: Row) -> Callable[[platforms.BandwidthFactor, float], float]:
    """A function of (bandwidth factor, node memory in bytes/s, 0 for none) that gives linear's simulated time (us)
    at the row's size and process count on the machine."""
    schedule = capture_unit(ALGORITHM, {}, row.nprocs, "uint8", nodes=machine.node_ranks(row.nprocs))
    scaled = schedule.scaled(row.bytes_per_peer)
    s4u = simgrid.s4u_replayer() if machine.replayer == "s4u" else None
    fabric = machine.placement(row.nprocs)[0]

    def run(factor: platforms.BandwidthFactor, memory: float) -> float:
        job = replay.ReplayJob(scaled, fabric, machine.link, machine.copy_bandwidth, None, s4u,
                               memory=_memory(memory, factor))
        return job.start(replace(machine, bandwidth=factor).config()).result().seconds * 1e6

    return run


def _listed(points: dict[int, float]) -> str:
    return ", ".join(f"{n} ranks {us:.1f} us" for n, us in points.items())
