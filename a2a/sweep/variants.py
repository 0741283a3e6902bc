"""Variants: an algorithm with its options, as `--algorithms bruck:radix=4,native` names them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.algos.registry import candidates, get
from a2a.errors import BadConfig, BadOption
from a2a.record.results import label


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
        wanted: dict[str, str | int] = {**options.get(name, {}), **own}
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
