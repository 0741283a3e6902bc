"""Typed errors: each names what was wrong and what is accepted; the CLI catches them once."""
from __future__ import annotations

import difflib
from typing import Sequence

KINDS = {int: "a whole number, e.g. 2", float: "a number, e.g. 0.5", bool: "true or false", str: "a word"}


def accepted_kind(kind: type) -> str:
    """What an option of this type accepts, in words ('a whole number, e.g. 2')."""
    return KINDS.get(kind, f"a {kind.__name__}")


def unknown(what: str, word: str, known: Sequence[str], listed: str = "accepted") -> str:
    """The words for a `what` not among `known`: unknown WHAT 'word'; did you mean 'closest'? accepted: ... (the
    question only where a known word is close)."""
    close = difflib.get_close_matches(word, list(known), 1)
    question = f" did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {word!r};{question} {listed}: {', '.join(known)}"


class A2AError(Exception):
    """Base of every error the testbed raises on purpose."""


class BadInput(A2AError, ValueError):
    """Buffers or arguments that MPI_Alltoall semantics do not accept."""


class BadOption(BadInput):
    """An unknown algorithm option, or a value out of range."""


class UnknownAlgorithm(A2AError, KeyError):
    """A name that no registered algorithm has."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(name)

    def __str__(self) -> str:
        return unknown("algorithm", self.name, self.known, "registered")


class BadConfig(A2AError):
    """An option or config file value the sweep cannot use."""


class PluginError(A2AError):
    """A plug-in that cannot be loaded."""


class BadResults(A2AError):
    """A results directory or file that cannot be read."""


class ClusterError(A2AError):
    """The emulated cluster cannot be made, used or found."""


class MissingMatplotlib(A2AError):
    """Plotting was asked for but matplotlib is not installed."""


class CaptureError(A2AError):
    """A call the stand-in communicator cannot answer, or a schedule it cannot record."""


class CaptureOutgrew(CaptureError):
    """A capture that grew past the memory it was given."""


class HarnessError(A2AError):
    """A program the testbed launches (mpiexec, mpicc, the C reference) is missing, failed or timed out."""



class PlanFailed(A2AError):
    """A plan that some rank could not make (a source missing there, a full disk, a library that will not load, a
    factory's error on that rank alone), raised alike on every rank, naming each failing rank and its cause."""

    failed: tuple[tuple[int, str], ...] = ()  # each failing rank and its cause, where `of` made it

    @classmethod
    def of(cls, causes: list[str | None]) -> "PlanFailed":
        """The error every rank raises, from each rank's cause (None where its part of the plan was made)."""
        by_cause: dict[str, list[int]] = {}
        for rank, cause in enumerate(causes):
            if isinstance(cause, str):  # (anything else came from a rank inside another collective of the factory's)
                by_cause.setdefault(cause, []).append(rank)
        told = "; ".join(f"{'rank' if len(ranks) == 1 else 'ranks'} {','.join(map(str, ranks))} of {len(causes)}: "
                         f"{cause}" for cause, ranks in by_cause.items())
        error = cls(f"planning failed on {told}; every rank raises this, and none runs the plan")
        error.failed = tuple((rank, cause) for rank, cause in enumerate(causes) if isinstance(cause, str))
        return error
