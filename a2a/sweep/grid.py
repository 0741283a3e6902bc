"""The grid: process counts x sizes x algorithm variants, and the points a sweep or a simulation walks."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from a2a.algos.facts import shown
from a2a.record.results import CALL, KEY_COLUMNS, KEY_DEFAULTS, Row, point_key
from a2a.sweep.config import OVERLAP, SweepConfig
from a2a.sweep.mesh import Layout
from a2a.sweep.variants import Variant


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
    tests: str = ""  # the overlap protocol's: progress calls during the compute phase ('' in any other)
    progress: str = ""  # the overlap protocol's: poll or thread
    call: tuple[int, int] | None = None  # a recorded workload's: (the call's index, how often the program made it)

    algorithm = property(lambda self: self.variant.name)
    options = property(lambda self: self.variant.options_text)
    dtype = property(lambda self: self.config.dtype)
    timing = property(lambda self: self.config.timing)
    collective = property(lambda self: self.config.collective)
    cache = property(lambda self: self.config.cache)
    mesh = property(lambda self: self.layout.mesh_text if self.layout else "")
    groups = property(lambda self: self.layout.strategy if self.layout else "")
    compute_ratio = property(lambda self: f"{self.config.compute_ratio:g}" if self.tests and not self.config.compute_us
                             else "")
    compute_us = property(lambda self: f"{self.config.compute_us:g}" if self.tests and self.config.compute_us else "")

    @property
    def workload(self) -> str:
        """The sweep's workload; a recorded one's with the call this point replays."""
        return f"{self.config.workload}{CALL}{self.call[0]}" if self.call else self.config.workload

    @property
    def key(self) -> tuple:
        """The results key of this point: its row's key columns, by name."""
        return point_key(self)

    @property
    def cell(self) -> tuple:
        """The key of its cell: every key column but the algorithm and its options (what a round's visits share)."""
        return tuple(v for k, v in zip(KEY_COLUMNS, self.key) if k not in ("algorithm", "options"))

    def row(self, nnodes: int, ppn: int, **columns: Any) -> Row:
        """A row of this point, not yet measured: its key and layout columns filled in, and `columns`."""
        layout = self.layout
        return Row(self.nprocs, nnodes, ppn, self.algorithm, self.options, self.dtype,
                   self.bytes_per_peer // np.dtype(self.dtype).itemsize, self.bytes_per_peer,
                   timing=self.timing, collective=self.collective, workload=self.workload, cache=self.cache,
                   mesh=self.mesh, groups=self.groups, group_size=layout.group_size if layout else None,
                   ngroups=layout.ngroups if layout else None, tests=self.tests, progress=self.progress,
                   compute_ratio=self.compute_ratio, compute_us=self.compute_us,
                   recorded_calls=self.call[1] if self.call else None, **columns)

    def __str__(self) -> str:
        where = f" in groups {self.layout.strategy} of mesh {self.layout.mesh_text}" if self.layout else ""
        plain = (KEY_DEFAULTS["collective"], KEY_DEFAULTS["workload"])
        what = f" ({self.collective}, {self.workload})" if (self.collective, self.workload) != plain else ""
        polled = f" with {self.tests} tests, progress {self.progress}" if self.tests else ""
        name = shown(self.variant.name, self.variant.options_text)
        return f"{name} at {self.bytes_per_peer} B per peer on {self.nprocs} ranks{where}{what}{polled}"


def points(config: SweepConfig, nprocs: int) -> list[Point]:
    """A process count's points: per progress mode and layout, sizes ascending, then test counts, algorithms in a
    seeded shuffle per size.

    The shuffle keeps any algorithm from always running first (cold) or last (after the
    others warmed caches and links); the seed makes the order the same on every rank.
    """
    order: list[Point] = []
    overlap = config.timing == OVERLAP
    for progress in config.progress if overlap else [""]:
        layouts: list[Layout | None] = [m for m in config.layouts if m.nprocs == nprocs] or [None]
        for layout in layouts:
            for size, call in _sizes(config, nprocs):
                for tests in map(str, config.tests) if overlap else [""]:
                    variants = list(config.variants)
                    replayed = f"{CALL}{call[0]}" if call else ""
                    random.Random(f"{config.seed}:{nprocs}:{size}{tests and ':' + tests}{replayed}").shuffle(variants)
                    order += [Point(config, nprocs, size, v, layout, tests, progress, call) for v in variants]
    return order


def cells(todo: list[Point]) -> list[list[Point]]:
    """The points grouped by cell, in the order their cells first come (a cell's candidates are timed together)."""
    grouped: dict[tuple, list[Point]] = {}
    for point in todo:
        grouped.setdefault(point.cell, []).append(point)
    return list(grouped.values())


def round_order(visitors: list[Any], cell: tuple, seed: int, round_: int) -> list[Any]:
    """What a cell visits, in the order of one round: a fresh seeded shuffle, the same on every rank."""
    order = list(visitors)
    random.Random(f"{seed}:{cell}:{round_}").shuffle(order)
    return order


def calls_in_round(iterations: int, rounds: int, round_: int) -> int:
    """The timed calls of round `round_` of `rounds`: `iterations` split as evenly as can be, at least one each."""
    return max(1, iterations * (round_ + 1) // rounds - iterations * round_ // rounds)


def _sizes(config: SweepConfig, nprocs: int) -> list[tuple[int, tuple[int, int] | None]]:
    """(bytes per peer, recorded call) of each point of a process count: the sizes, or the recorded calls made on
    `nprocs` ranks."""
    if not config.calls:
        return [(size, None) for size in config.sizes]
    return [(size, (index, made)) for index, n, size, made in config.calls if n == nprocs]
