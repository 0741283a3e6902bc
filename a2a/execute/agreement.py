"""The ranks' agreement on a call, before any message moves: one problem anywhere is one error everywhere.

Each rank checks its own call (a2a.algos.buffers), then one allgather at plan time (over both
groups of an intercommunicator) brings every rank's problem and the signature of its call
(algorithm, options, dtype, count, in place) to every rank: any problem, or a signature that
differs, is one BadInput on every rank, never a hang. An alltoallv's counts are then checked
against the peers' (one alltoall of the counts).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from a2a.algos.buffers import VBuffer, is_inter
from a2a.errors import A2AError, BadInput, BadOption

# What every rank must give alike: (algorithm, its options as text in name order, dtype, count or "per-peer counts",
# in place); None where there is nothing to compare (a problem, or the counts' check)
Signature = tuple[str, tuple[tuple[str, str], ...], str, "int | str", bool]
# A rank's told problem (whether a BadOption, its text), or None; and its signature
Verdict = tuple["tuple[bool, str] | None", "Signature | None"]

def agree(comm: Any, problem: BadInput | A2AError | None, signature: Signature | None) -> None:
    """Raise, on every rank alike, the first rank's problem, or that the ranks' calls differ (naming how).

    One allgather, over both groups of an intercommunicator (merged for it, then freed). A bad option
    is a BadOption on every rank, any other problem a BadInput.
    """
    mine = told(problem)
    everyone = comm.Merge() if is_inter(comm) else comm
    try:
        verdicts = everyone.allgather((mine, None if problem else signature))
    finally:
        if everyone is not comm:
            everyone.Free()
    if mine is None and verdicts.count(verdicts[0]) == len(verdicts):
        return  # all alike, no problem: one comparison per rank in C (a capture runs every rank's call)
    judged(verdicts)


def told(problem: A2AError | None) -> tuple[bool, str] | None:
    """A rank's problem as its peers receive it: whether it is a BadOption, and its text."""
    return (type(problem) is BadOption, str(problem)) if problem else None


def judged(verdicts: list[Verdict]) -> None:
    """Raise what every rank's (told problem, signature) amounts to: the first rank's problem, or that the calls
    differ (naming how); nothing when they agree."""
    first = next(((rank, p) for rank, (p, _) in enumerate(verdicts) if p), None)
    if first:
        rank, (bad_option, text) = first
        raise (BadOption if bad_option else BadInput)(f"rank {rank}: {text}")
    if len({s for _, s in verdicts}) > 1:
        by_call: dict[Signature | None, list[int]] = {}
        for rank, (_, s) in enumerate(verdicts):
            by_call.setdefault(s, []).append(rank)
        calls = "; ".join(f"{_ranks(ranks)}: {describe(s)}" for s, ranks in by_call.items())
        raise BadInput(f"the ranks make different calls ({calls}); every rank must give the same algorithm, "
                       "options, dtype and count (and MPI.IN_PLACE on all or none)")


def describe(signature: Signature | None) -> str:
    """A call's signature as text: 'bruck radix=4, float32 x 8 per peer'."""
    if signature is None:  # never among calls that differ: then every rank has one
        return "no call"
    name, options, dtype, count, in_place = signature
    text = ",".join(f"{k}={v}" for k, v in options)
    return (f"{name}{' ' + text if text else ''}, {np.dtype(dtype).name} x {count}"
            f"{' per peer' if isinstance(count, int) else ''}{', in place' if in_place else ''}")


def _ranks(ranks: list[int]) -> str:
    """'rank 3', 'ranks 0,1,2' or 'ranks 0..63 (40 of them)'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    listed = ",".join(map(str, ranks)) if len(ranks) < 6 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)} of them)"
    return f"ranks {listed}"


def matched_counts(comm: Any, send: VBuffer | None, recv: VBuffer) -> None:
    """Raise on every rank unless what each rank sends each peer is what that peer expects (collective).

    In place, a rank sends each peer the block it receives from it: its recvcounts.
    """
    outgoing = (send or recv).counts.tolist()
    incoming = comm.alltoall(outgoing)  # incoming[j]: what rank j will send here
    mismatched = [(j, int(n), int(m)) for j, (n, m) in enumerate(zip(incoming, recv.counts)) if n != m]
    text = "; ".join(f"rank {j} sends {n} but recvcounts[{j}] = {m}" for j, n, m in mismatched[:4])
    agree(comm, BadInput(f"{text}; sendcounts must match the peers' recvcounts") if text else None, None)
