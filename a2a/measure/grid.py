"""The grid: process counts x sizes x algorithm variants, and the points a sweep or a simulation walks."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from a2a.algos.registry import candidates, get
from a2a.errors import BadConfig, BadOption
from a2a.measure.mesh import Layout
from a2a.record.results import KEY_DEFAULTS, Row, label, point_key


@dataclass(frozen=True)
class Variant:
    """An algorithm with its resolved options."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def options_text(self) -> str:
        """Options as results.csv stores them: key=value pairs joined by ';', sorted by key."""
        return ";".join(f"{k}={v}" for k, v in sorted(self.options.items()))

    @property
    def label(self) -> str:
        """Name, with options when it has any: bruck:radix=4."""
        return label(self.name, self.options_text)


TIMINGS = ("sync", "pipelined", "imb", "global")
PER_RANK_MEANS = ("pipelined", "imb")  # timings whose samples are each rank's mean time per call


def default_nprocs(size: int) -> str:
    """Powers of two from 2 up to the world size, and the world size itself."""
    counts = {size}
    n = 2
    while n <= size:
        counts.add(n)
        n *= 2
    return ",".join(map(str, sorted(counts)))


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs; stored in meta.json so that --resume can rebuild it."""

    sizes: list[int]
    dtype: str
    variants: list[Variant]
    nprocs: list[int]
    warmup: int = 1
    iterations: int = 25
    max_time_per_point: float = 10.0
    stall_threshold: float = 0.1
    check: bool = True
    timeout: float = 300.0
    max_memory: int = 1 << 30
    ppn: int = 0
    seed: int = 0
    timing: str = KEY_DEFAULTS["timing"]
    layouts: list[Layout] = field(default_factory=list)
    collective: str = KEY_DEFAULTS["collective"]
    workload: str = KEY_DEFAULTS["workload"]
    cache: str = KEY_DEFAULTS["cache"]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepConfig":
        """Rebuild from as_dict() output."""
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["variants"] = [Variant(v["name"], dict(v["options"])) for v in data["variants"]]
        values["layouts"] = [Layout(tuple(m["mesh"]), tuple(m["keep"])) for m in data.get("layouts", [])]
        return cls(**values)


@dataclass(frozen=True)
class Point:
    """One measurement: a variant at a size on the first `nprocs` ranks (maybe in mesh groups) of a sweep.

    Its identity is its row's key columns (results.KEY_COLUMNS): its own nprocs, size, variant and
    layout, and the sweep's dtype, timing, collective, workload and cache.
    """

    config: SweepConfig = field(repr=False, compare=False)
    nprocs: int
    bytes_per_peer: int
    variant: Variant
    layout: Layout | None = None

    algorithm = property(lambda self: self.variant.name)
    options = property(lambda self: self.variant.options_text)
    dtype = property(lambda self: self.config.dtype)
    timing = property(lambda self: self.config.timing)
    collective = property(lambda self: self.config.collective)
    workload = property(lambda self: self.config.workload)
    cache = property(lambda self: self.config.cache)
    mesh = property(lambda self: self.layout.mesh_text if self.layout else "")
    groups = property(lambda self: self.layout.strategy if self.layout else "")

    @property
    def key(self) -> tuple:
        """The results key of this point: its row's key columns, by name."""
        return point_key(self)

    def row(self, nnodes: int, ppn: int, **columns: Any) -> Row:
        """A row of this point, not yet measured: its key and layout columns filled in, and `columns`."""
        layout = self.layout
        return Row(self.nprocs, nnodes, ppn, self.algorithm, self.options, self.dtype,
                   self.bytes_per_peer // np.dtype(self.dtype).itemsize, self.bytes_per_peer,
                   timing=self.timing, collective=self.collective, workload=self.workload, cache=self.cache,
                   mesh=self.mesh, groups=self.groups, group_size=layout.group_size if layout else None,
                   ngroups=layout.ngroups if layout else None, **columns)

    def __str__(self) -> str:
        where = f" in groups {self.layout.strategy} of mesh {self.layout.mesh_text}" if self.layout else ""
        plain = (KEY_DEFAULTS["collective"], KEY_DEFAULTS["workload"])
        what = f" ({self.collective}, {self.workload})" if (self.collective, self.workload) != plain else ""
        return f"{self.variant.label} at {self.bytes_per_peer} B per peer on {self.nprocs} ranks{where}{what}"


def points(config: SweepConfig, nprocs: int) -> list[Point]:
    """A process count's points: per layout, sizes ascending, algorithms in a seeded shuffle per size.

    The shuffle keeps any algorithm from always running first (cold) or last (after the
    others warmed caches and links); the seed makes the order the same on every rank.
    """
    order: list[Point] = []
    for layout in [m for m in config.layouts if m.nprocs == nprocs] or [None]:
        for size in config.sizes:
            variants = list(config.variants)
            random.Random(f"{config.seed}:{nprocs}:{size}").shuffle(variants)
            order += [Point(config, nprocs, size, v, layout) for v in variants]
    return order


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """'bruck:radix=4' -> ('bruck', {'radix': '4'}): a variant with its own options."""
    name, *assignments = [piece.strip() for piece in spec.split(":")]
    options = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise BadOption(f"algorithm {spec!r}; accepted: NAME or NAME:KEY=VALUE[:KEY=VALUE]")
        options[key] = value
    return name, options


def variants(text: str, options: dict[str, dict[str, str]], ppn: int, collective: str = "alltoall",
             workload: str = "uniform") -> list[Variant]:
    """Algorithm specs -> variants with resolved options (unknown names, options and collectives fail here)."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if specs == ["all"]:
        specs = candidates(collective)
    known = {parse_variant(s)[0] for s in specs}
    stray = sorted(set(options) - known)
    if stray:
        raise BadOption(f"--option names {', '.join(stray)}, which is not among the algorithms swept "
                        f"({', '.join(sorted(known))})")
    chosen = []
    for spec in specs:
        name, own = parse_variant(spec)
        algorithm = get(name)
        algorithm.kind(collective)
        wanted = {**options.get(name, {}), **own}
        if ppn and "ppn" in algorithm.options and "ppn" not in wanted:
            wanted["ppn"] = ppn
        if "workload" in algorithm.options and collective == "alltoallv":  # e.g. auto decides for the workload swept
            wanted.setdefault("workload", workload)
        variant = Variant(name, algorithm.resolve(wanted))
        if variant not in chosen:
            chosen.append(variant)
    if not chosen:
        raise BadConfig("no algorithms to sweep; name some with --algorithms (see `bench list`)")
    return chosen
