"""The simulator fitted to a measured record: the software cost of a message and the share of a link's rate.

`linear` posts all its p-1 receives and p-1 sends at once and then waits. Its messages are in
flight together, so at a few bytes per peer the network latency overlaps; what grows with
each extra peer is the time one more send and one more receive take in the MPI library and
its caller. The slope of its measured time over p-1, fitted across process counts at the
smallest size measured (1 KiB per peer or less), is that cost per peer. Half of it is
charged to each send and half to each receive.

At its largest size (64 KiB per peer or more) and fewest ranks, the bytes dominate. The bandwidth
factor is the one with which the simulated `linear` there takes the measured time: a simulated
time is a part that does not depend on the factor plus the bytes' part over the factor, so two
replays of that point (factors 1 and 1/2) give both parts.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from a2a.errors import BadConfig
from a2a.record.results import Row, load
from a2a.schedules.events import Schedule
from a2a.simulate import platforms, replay, simgrid
from a2a.simulate.capture import capture_unit
from a2a.simulate.machine import Machine

ALGORITHM = "linear"
LARGEST_BYTES = 1024  # above this, the bytes begin to count in the slope
BANDWIDTH_BYTES = 65536  # from here up, the bytes dominate


def calibrated(machine: Machine, directory: Path) -> Machine:
    """The machine with the message cost and the bandwidth factor that linear's measured times in DIR show."""
    machine = replace(machine, message_cost=message_cost(directory))
    return replace(machine, bandwidth=bandwidth_factor(directory, machine))


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
    rows = [r for r in _linear_rows(directory) if r.bytes_per_peer >= BANDWIDTH_BYTES and r.nprocs >= 2]
    if not rows:
        return platforms.BandwidthFactor(0.0, f"none: {directory} has no linear at {BANDWIDTH_BYTES} bytes per peer "
                                            "or more on 2 ranks or more")
    fewest = min(r.nprocs for r in rows)
    row = max((r for r in rows if r.nprocs == fewest), key=lambda r: r.bytes_per_peer)
    schedule = capture_unit(ALGORITHM, {}, row.nprocs, "uint8", nodes=machine.node_ranks(row.nprocs))
    at_one, at_half = (_simulated_us(machine, schedule.scaled(row.bytes_per_peer), f) for f in (1.0, 0.5))
    bytes_part = at_half - at_one
    rest = at_one - bytes_part
    where = f"linear at {row.nprocs} ranks and {row.bytes_per_peer} B per peer"
    if bytes_part <= 0 or row.t_p50_us <= rest:
        raise BadConfig(f"{directory}: {where} took {row.t_p50_us:.1f} us, no more than the simulation puts on the "
                        f"latencies and message costs alone ({rest:.1f} us): no bandwidth factor fits it")
    factor = bytes_part / (row.t_p50_us - rest)
    return platforms.BandwidthFactor(factor, f"{directory}: {where} took {row.t_p50_us:.1f} us measured "
                                           f"({row.nnodes} node(s)); simulated at factor 1: {at_one:.1f} us")


def _linear_rows(directory: Path) -> list[Row]:
    return [r for r in load(directory).rows if r.measured and r.timing == "sync" and r.algorithm == ALGORITHM
            and not r.mesh and r.collective == "alltoall"]


def _simulated_us(machine: Machine, schedule: Schedule, factor: float) -> float:
    """The schedule's simulated time (us) on the machine, with the given bandwidth factor."""
    s4u = simgrid.s4u_replayer() if machine.replayer == "s4u" else None
    fabric = machine.placement(schedule.nprocs)[0]
    job = replay.ReplayJob(schedule, fabric, machine.link, machine.copy_bandwidth, None, s4u)
    config = replace(machine, bandwidth=platforms.BandwidthFactor(factor)).config()
    return job.start(config).result().seconds * 1e6


def _listed(points: dict[int, float]) -> str:
    return ", ".join(f"{n} ranks {us:.1f} us" for n, us in points.items())
