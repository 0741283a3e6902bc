"""The software cost of a message, learnt from a measured record: what SMPI needs in the latency regime.

`linear` posts all its p-1 receives and p-1 sends at once and then waits. Its messages are in
flight together, so at a few bytes per peer the network latency overlaps; what grows with
each extra peer is the time one more send and one more receive take in the MPI library and
its caller. The slope of its measured time over p-1, fitted across process counts at the
smallest size measured (1 KiB per peer or less), is that cost per peer. Half of it is
charged to each send and half to each receive.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from a2a.errors import BadConfig
from a2a.record.results import load
from a2a.simulate.simgrid import MessageCost

ALGORITHM = "linear"
LARGEST_BYTES = 1024  # above this, the bytes begin to count in the slope


def message_cost(directory: Path) -> MessageCost:
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
    return MessageCost(slope / 2, slope / 2, source)


def linear_points(directory: Path) -> dict[int, float]:
    """Per process count, linear's sync-timed p50 (us) at its smallest size of at most LARGEST_BYTES per peer."""
    rows = [r for r in load(directory).rows if r.measured and r.timing == "sync" and r.algorithm == ALGORITHM
            and r.bytes_per_peer <= LARGEST_BYTES and not r.mesh and r.collective == "alltoall"]
    smallest: dict[int, tuple[int, float]] = {}
    for row in rows:
        if row.nprocs not in smallest or row.bytes_per_peer < smallest[row.nprocs][0]:
            smallest[row.nprocs] = (row.bytes_per_peer, row.t_p50_us)
    if len(smallest) < 2:
        raise BadConfig(f"{directory} has linear (sync timing) at {len(smallest)} process count(s) at {LARGEST_BYTES} "
                        "bytes per peer or less; calibration needs two or more, e.g. `mpirun -n 16 python -m bench run "
                        "--nprocs 2,4,8,16 --sizes 8 --algorithms linear`")
    return {n: smallest[n][1] for n in sorted(smallest)}


def _listed(points: dict[int, float]) -> str:
    return ", ".join(f"{n} ranks {us:.1f} us" for n, us in points.items())
