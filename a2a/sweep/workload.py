"""Workloads: how an alltoallv's count matrix is made, the same on every rank (seeded).

Entry [i, j] is what rank i sends rank j. The size axis is the mean over all p x p entries
(self included, as in a uniform all-to-all), so sweeps read like the uniform ones.
"""
from __future__ import annotations

import csv
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from a2a.deploy.recorded import Record, RecordedCall, read_record
from a2a.errors import BadConfig, accepted_kind

# kind -> {parameter: default}; documented in docs/alltoallv.md
KINDS: dict[str, dict[str, Any]] = {
    "uniform": {},
    "random": {"spread": 0.5},
    "zipf": {"s": 1.1},
    "sparse": {"density": 0.25},
    "moe": {"experts": 0, "topk": 2, "capacity": 0.0, "skew": 0.0, "tokens": 256, "direction": "dispatch"},  # 0: p
    "matrix": {},
    "recorded": {},  # recorded:DIR[:job=ID]: a program's own calls (a2a.deploy.recorded); a point's adds :call=N
}
ACCEPTED = ("uniform, random:spread=S, zipf:s=S, sparse:density=D, "
            "moe:experts=E,topk=K,capacity=C,skew=S,tokens=T,direction=dispatch|combine, matrix:FILE.csv, "
            "recorded:DIR[:job=ID]")
RECORDED_SELECTORS = ("job", "call")
DIRECTIONS = ("dispatch", "combine")


@dataclass(frozen=True)
class Workload:
    """A parsed workload spec: its kind and every parameter (defaults filled in)."""

    kind: str
    params: tuple[tuple[str, Any], ...] = ()
    path: str = ""

    @property
    def text(self) -> str:
        """The spec as rows store it: kind, then every parameter (matrix: its file; recorded: its directory, then
        job and call where given)."""
        if self.kind in ("matrix", "recorded"):
            return ":".join([self.kind, self.path, *(f"{k}={v}" for k, v in self.params)])
        shown = [(k, v) for k, v in self.params if (k, v) != ("experts", 0)]  # left out: one expert per rank
        return ":".join([self.kind] + ([",".join(f"{k}={v}" for k, v in shown)] if shown else []))

    def counts(self, p: int, mean_bytes: int, itemsize: int, seed: int = 0) -> np.ndarray:
        """The p x p matrix of elements rank i sends rank j; its mean is about `mean_bytes` (a recorded call's: its
        own, exactly)."""
        values = dict(self.params)
        if self.kind == "recorded":
            return self.recorded_call(p).counts(itemsize)
        rng = np.random.default_rng([seed, p, zlib.crc32(self.text.encode())])
        mean = mean_bytes / itemsize
        if self.kind == "moe":
            tokens = moe_tokens(p, rng, **values)
            per_token = max(1, round(mean * p * p / tokens.sum())) if tokens.sum() else 0
            return tokens * (per_token if mean_bytes else 0)
        if self.kind == "random":  # its range is the definition: no rescaling
            return np.rint(mean * rng.uniform(1 - values["spread"], 1 + values["spread"], (p, p))).astype(np.int64)
        weights = read_matrix(self.path, p) if self.kind == "matrix" else WEIGHTS[self.kind](p, rng, **values)
        total = weights.sum()
        return np.rint(weights * (mean * p * p / total)).astype(np.int64) if total else weights.astype(np.int64)

    def record(self) -> Record:
        """A recorded workload's record (of its job)."""
        return read_record(self.path, dict(self.params).get("job", ""))

    def recorded_call(self, p: int) -> RecordedCall:
        """The recorded call a point replays, made on `p` ranks (BadConfig naming what is wrong)."""
        if "call" not in dict(self.params):
            raise BadConfig(f"workload {self.text}: a point replays one recorded call; name it with :call=N")
        call = self.record().calls[dict(self.params)["call"]]
        if call.nprocs != p:
            raise BadConfig(f"recorded call {call.index} ({call.where}) was made on {call.nprocs} ranks; this "
                            f"exchange has {p}")
        return call


def imbalance(counts: np.ndarray) -> float:
    """Largest entry over the mean entry (1 for uniform; nan when nothing moves)."""
    mean = counts.mean() if counts.size else 0
    return float(counts.max() / mean) if mean else float("nan")


def parse_workload(text: str) -> Workload:
    """'zipf:s=1.1' -> Workload; BadConfig names what was wrong and what is accepted."""
    kind, _, rest = str(text).strip().partition(":")
    if kind not in KINDS:
        raise BadConfig(f"workload {text!r}: unknown kind {kind!r}; accepted: {ACCEPTED}")
    if kind == "matrix":
        if not rest:
            raise BadConfig(f"workload {text!r}: give the file, matrix:FILE.csv")
        read_matrix(rest, None)  # fails now, not at the first point
        return Workload(kind, (), rest)
    if kind == "recorded":
        return _recorded(text, rest)
    defaults, given = KINDS[kind], {}
    for item in filter(None, (piece.strip() for piece in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in defaults:
            accepted = ", ".join(f"{k}={v}" for k, v in defaults.items()) or "no parameters"
            raise BadConfig(f"workload {text!r}: {item!r}; {kind} takes {accepted}")
        given[key] = _parse_value(text, key, value, defaults[key])
    if given.get("experts") == 0:
        raise BadConfig(f"workload {text!r}: experts=0; accepted: an integer >= 1 (leave experts out for one "
                        "expert per rank)")
    values = {**defaults, **given}
    _check(text, kind, values)
    return Workload(kind, tuple(values.items()))


def _recorded(text: str, rest: str) -> Workload:
    """recorded:DIR[:job=ID][:call=N], its record read now (fails here, not at the first point)."""
    given: dict[str, str] = {}
    while True:
        head, sep, tail = rest.rpartition(":")
        key, equals, value = tail.partition("=")
        if not (sep and equals and key in RECORDED_SELECTORS and key not in given):
            break
        given[key], rest = value, head
    if not rest:
        raise BadConfig(f"workload {text!r}: give the directory, recorded:DIR (a program's record, A2A_RECORD=DIR)")
    if not given.get("call", "0").isdigit():
        raise BadConfig(f"workload {text!r}: call={given['call']}; accepted: a call's index in the record, 0 or more")
    call = int(given["call"]) if "call" in given else None
    params = tuple((k, call if k == "call" else given[k]) for k in RECORDED_SELECTORS if k in given)
    workload = Workload("recorded", params, rest)
    record = workload.record()
    if call is not None and (call >= len(record.calls) or not record.calls[call].replayable):
        raise BadConfig(f"workload {text!r}: the record holds no call {call} to replay; accepted: "
                        f"{', '.join(str(c.index) for c in record.calls if c.replayable)}")
    return workload


def _parse_value(text: str, key: str, value: str, default: Any) -> Any:
    try:
        return type(default)(value)
    except ValueError:
        raise BadConfig(f"workload {text!r}: {key}={value!r}; accepted: {accepted_kind(type(default))}") from None


LIMITS = {
    "spread": (lambda v: 0 <= v <= 1, "between 0 and 1"),
    "s": (lambda v: v >= 0, ">= 0"),
    "density": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "experts": (lambda v: v >= 0, ">= 1 (left out: one per rank)"),
    "topk": (lambda v: v >= 1, ">= 1"),
    "capacity": (lambda v: v >= 0, ">= 0 (0: no capacity limit)"),
    "skew": (lambda v: v >= 0, ">= 0 (0: experts equally popular)"),
    "tokens": (lambda v: v >= 1, ">= 1"),
    "direction": (lambda v: v in DIRECTIONS, " or ".join(DIRECTIONS)),
}


def _check(text: str, kind: str, values: dict[str, Any]) -> None:
    for key, value in values.items():
        ok, accepted = LIMITS[key]
        if not ok(value):
            raise BadConfig(f"workload {text!r}: {key}={value}; accepted: {accepted}")
    if kind == "moe" and values["experts"] and values["topk"] > values["experts"]:
        raise BadConfig(f"workload {text!r}: topk={values['topk']} is more than experts={values['experts']}")


def _uniform(p: int, rng: np.random.Generator) -> np.ndarray:
    return np.ones((p, p))


def _zipf(p: int, rng: np.random.Generator, s: float) -> np.ndarray:
    """Every rank favours the same destinations: the k-th most popular gets 1/k^s (order seeded)."""
    popularity = 1.0 / np.arange(1, p + 1) ** s
    return np.tile(popularity[rng.permutation(p)], (p, 1))


def _sparse(p: int, rng: np.random.Generator, density: float) -> np.ndarray:
    return (rng.random((p, p)) < density).astype(float)


# each kind's weights from (p, rng) and its own parameters
WEIGHTS: dict[str, Callable[..., np.ndarray]] = {"uniform": _uniform, "zipf": _zipf, "sparse": _sparse}


def moe_tokens(p: int, rng: np.random.Generator, experts: int, topk: int, capacity: float, skew: float,
               tokens: int, direction: str) -> np.ndarray:
    """Tokens rank i sends rank j when each rank routes `tokens` tokens to its top-k experts.

    Experts sit on ranks in blocks (expert e on rank e * p // E); their popularity is
    1/k^skew in a seeded order. With a capacity factor C, an expert takes at most
    floor(C * tokens * topk / E) tokens from each rank (GShard's capacity, per batch); the
    rest are dropped. A token routed to two experts on one rank is sent twice.
    Combine sends every token back: the transpose.
    """
    experts = experts or p
    if topk > experts:
        raise BadConfig(f"workload moe: topk={topk} is more than the {experts} experts")
    popularity = (1.0 / np.arange(1, experts + 1) ** skew)[rng.permutation(experts)]
    # top-k of log-weight + Gumbel noise: k experts drawn without replacement by popularity
    keys = np.log(popularity) + rng.gumbel(size=(p * tokens, experts))
    chosen = np.argpartition(-keys, topk - 1, axis=1)[:, :topk]
    per_expert = np.zeros((p, experts), np.int64)  # [source rank, expert]
    np.add.at(per_expert, (np.repeat(np.arange(p), tokens * topk), chosen.reshape(-1)), 1)
    if capacity:  # GShard's expert capacity, per source rank's batch
        per_expert = np.minimum(per_expert, int(capacity * tokens * topk / experts))
    home = np.arange(experts) * p // experts
    matrix = np.zeros((p, p), np.int64)
    for e in range(experts):
        matrix[:, home[e]] += per_expert[:, e]
    return matrix if direction == "dispatch" else matrix.T.copy()


def read_matrix(path: str, p: int | None) -> np.ndarray:
    """An N x N CSV of bytes or fractions (nccl-tests style); only the shape of its values is used."""
    try:
        with open(Path(path), newline="") as handle:
            rows = [[float(v) for v in row if v.strip()] for row in csv.reader(handle) if any(v.strip() for v in row)]
    except (OSError, ValueError) as exc:
        raise BadConfig(f"workload matrix:{path}: {exc}; accepted: a CSV of N rows of N numbers >= 0") from None
    n = len(rows)
    if not n or any(len(row) != n for row in rows):
        raise BadConfig(f"workload matrix:{path}: not square ({n} rows of {sorted({len(r) for r in rows})} values); "
                        "accepted: N rows of N numbers >= 0, row i = what rank i sends")
    matrix = np.array(rows)
    if (matrix < 0).any() or not np.isfinite(matrix).all():
        raise BadConfig(f"workload matrix:{path}: negative or non-finite values; accepted: numbers >= 0")
    if p is not None and n != p:
        raise BadConfig(f"workload matrix:{path} is {n} x {n}; this exchange has {p} ranks")
    return matrix
