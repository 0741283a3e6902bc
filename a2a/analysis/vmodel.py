"""What each alltoallv schedule costs on a given count matrix: its latency terms and its busiest bytes.

Replaying the schedule on the matrix gives, per algorithm, the terms of a Hockney cost
T = rounds x alpha + bytes x beta: `rounds` counts the message latencies in series on one
rank, `bytes` the bytes the busiest rank sends in series (the sum over rounds of the largest
message any rank sends in that round, since every rank waits for the round's slowest).
Padded Bruck sends every block at the largest block's size; two-phase Bruck and TuNA send
only real bytes but pay a second (metadata) message per round.
"""
from __future__ import annotations

import numpy as np

from a2a.algos.builtin.bruck import bruck_rounds


def terms(algorithm: str, counts: np.ndarray, itemsize: int, radix: int = 2) -> dict[str, float]:
    """{"rounds": latencies in series, "bytes": bytes in series on the busiest rank} for one call."""
    p = len(counts)
    sizes = counts * itemsize
    off = sizes - np.diag(np.diag(sizes))
    if algorithm in ("linear", "native", "throttled", "node_aware"):  # all peers at once: the busiest link
        return {"rounds": 1.0 if p > 1 else 0.0, "bytes": float(max(off.sum(axis=1).max(), off.sum(axis=0).max()))}
    if algorithm == "pairwise":  # step s: r -> r+s for every r at once
        steps = [max(off[r, (r + s) % p] for r in range(p)) for s in range(1, p)]
        return {"rounds": float(p - 1), "bytes": float(sum(steps))}
    if algorithm == "padded_bruck":
        width = float(sizes.max(initial=0))
        rounds = bruck_rounds(p, radix)
        return {"rounds": float(len(rounds)), "bytes": sum(len(moved) for *_, moved in rounds) * width}
    if algorithm in ("two_phase_bruck", "tuna"):
        radix = 2 if algorithm == "two_phase_bruck" else max(2, min(radix, p - 1))
        return _forwarded(sizes, radix, direct=algorithm == "tuna")
    raise ValueError(f"no alltoallv cost for {algorithm}")


def _forwarded(sizes: np.ndarray, radix: int, direct: bool) -> dict[str, float]:
    """Replay the uneven Bruck rounds: held[r][i] is the size rank r holds at index i."""
    p = len(sizes)
    held = np.array([[sizes[r, (r + i) % p] for i in range(p)] for r in range(p)], dtype=float)
    rounds = total = 0.0
    for distance, digit, moved in bruck_rounds(p, radix):
        step = digit * distance
        outgoing = held[:, moved].sum(axis=1)
        total += outgoing.max()
        rounds += 1 if direct and len(moved) == 1 else 2  # sizes first, then data
        held[:, moved] = np.roll(held[:, moved], step, axis=0)  # rank r now holds what r - step held
    return {"rounds": rounds, "bytes": total}
