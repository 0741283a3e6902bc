"""The ranks' agreement on a call, before any message moves: one problem anywhere is one error everywhere.

Each rank checks its own call (a2a.algos.buffers), then one allgather at plan time (over both
groups of an intercommunicator) brings every rank's problem and the signature of its call
(algorithm, options, dtype, count, in place) to every rank: any problem, or a signature that
differs, is one BadInput on every rank, never a hang. An alltoallv's counts are then checked
against the peers' (one alltoall of the counts).

Once a plan's factory has run, every rank says how it ended (`ended`, one allgather on the plan's private
communicator): its part made, or the error it met. A factory may make plans of its own on the communicator it was
given (a plug-in built on `a2a.get("pairwise").plan`); a rank whose factory raised before such a nested plan then
meets, in that same allgather, peers inside the nested plan's agreement. Each side knows the other's message: the
ranks inside the nested plan raise the failure they were told (EndedElsewhere), their factories end with it, and the
round is held again until every rank has ended; the error then names the ranks that failed first. No rank waits
for a peer that will never come, and the ordinary path costs what it did: one allgather each.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from a2a.algos.buffers import VBuffer, is_inter
from a2a.errors import A2AError, BadInput, BadOption, PlanFailed

# What every rank must give alike: (algorithm, its options as text in name order, dtype, count or "per-peer counts",
# in place); None where there is nothing to compare (a problem, or the counts' check)
Signature = tuple[str, tuple[tuple[str, str], ...], str, "int | str", bool]
# A rank's told problem (whether a BadOption, its text), or None; and its signature
Verdict = tuple["tuple[bool, str] | None", "Signature | None"]
# What a rank whose factory ended says: (ENDED, its error as text or None, whether that error is a failure it was
# told of, EndedElsewhere); a plain tuple, as cheap to send as a verdict (a pair)
Ending = tuple[str, "str | None", bool]
ENDED = "ended"


class EndedElsewhere(PlanFailed):
    """Raised inside a factory, by a nested plan's agreement, where peers had ended that factory (one failed): the
    failure they told, which this rank's factory passes on."""


def agree(comm: Any, problem: BadInput | A2AError | None, signature: Signature | None) -> None:
    """Raise, on every rank alike, the first rank's problem, or that the ranks' calls differ (naming how).

    One allgather, over both groups of an intercommunicator (merged for it, then freed). A bad option
    is a BadOption on every rank, any other problem a BadInput. Inside a factory, where peers had ended it instead
    (ended), what they told (EndedElsewhere, or that the factories differ).
    """
    mine = told(problem)
    verdicts = gathered(comm, (mine, None if problem else signature))
    if mine is None and verdicts.count(verdicts[0]) == len(verdicts):
        return  # all alike, no problem: one comparison per rank in C (a capture runs every rank's call)
    if any(map(is_ending, verdicts)):
        raise ended_elsewhere(verdicts, signature)
    judged(verdicts)


def gathered(comm: Any, item: Any) -> list[Any]:
    """Every rank's `item`, by rank, over both groups of an intercommunicator (merged for it, then freed)."""
    everyone = comm.Merge() if is_inter(comm) else comm
    try:
        return everyone.allgather(item)
    finally:
        if everyone is not comm:
            everyone.Free()


def ended(comm: Any, failure: BaseException | None) -> list[Ending]:
    """Every rank's Ending once each has ended its factory (collective on the plan's private `comm`): a round that
    meets peers still inside theirs, in a nested plan's agreement on `comm`, is held again, for those peers raise
    there what this round told them (EndedElsewhere) and end their factories with it (a peer in an allgather of the
    factory's own on `comm` is given this rank's Ending there, and comes too)."""
    cause = None if failure is None else f"{type(failure).__name__}: {failure}"
    mine: Ending = (ENDED, cause, isinstance(failure, EndedElsewhere))
    while True:
        said = gathered(comm, mine)
        if all(map(is_ending, said)):
            return said


def is_ending(said: Any) -> bool:
    """Whether what a rank said in an allgather is an Ending (else a nested plan's verdict, or a factory's own)."""
    return type(said) is tuple and len(said) == 3 and said[0] == ENDED


def first_failures(said: list[Ending]) -> list[str | None]:
    """Each rank's error, None for those that only passed on a failure they were told of (unless every failing rank
    did)."""
    first = [None if relayed else cause for _, cause, relayed in said]
    return first if any(first) else [cause for _, cause, _ in said]


def ended_elsewhere(said: list[Any], signature: Signature | None) -> A2AError:
    """What a rank inside a nested plan's agreement raises when some peers had ended their factory instead: the
    failure they told (EndedElsewhere), or, where they all made their part, that the factories differ."""
    endings = [s if is_ending(s) else (ENDED, None, False) for s in said]
    if any(cause for _, cause, _ in endings):
        return EndedElsewhere(str(PlanFailed.of(first_failures(endings))))
    done = [rank for rank, s in enumerate(said) if is_ending(s)]
    inside = [rank for rank, s in enumerate(said) if not is_ending(s)]
    return BadInput(f"the ranks' factories differ: {_ranks(done)} ended it without the plan {_ranks(inside)} "
                    f"began inside it ({describe(signature)}); a factory makes the same plans on every rank")


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
