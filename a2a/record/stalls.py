"""Stalls explained in words: which points stalled while TCP counters rose, why that costs 0.2 s, what helped."""
from __future__ import annotations

import textwrap
from typing import Iterable

from a2a.record.results import Defaults, Row, short_label
from a2a.units import counted, human_bytes

WIDTH = 100
CAUSE = ("Why 0.2 s: a TCP retransmission timeout waits at least the minimum RTO, 200 ms on Linux by "
         "default, and a tail loss probe about srtt/4 + 200 ms when one segment is outstanding; so one "
         "segment lost at the end of a burst costs the whole call about 0.2 s (or a doubling of it).")
REMEDY = ("What helped in this project's emulated-cluster runs (docs/cluster.md: 4 nodes x 2 ranks, 1 Gbit/s, "
          "32 KiB switch buffers): an rto_min of a few milliseconds on the nodes' routes "
          "(`ip route change <subnet> dev <if> rto_min 5ms`; `bench cluster up --rto-min 5`) left stalls at "
          "1 of 18 sizes instead of 4-6 of 18 (the losses still happened, each costing milliseconds); "
          "ordering the exchange by nodes (node_aware) or limiting the messages in flight (throttled) "
          "alone did not remove them.")
ELSEWHERE = ("Stalled with no TCP timeout or loss probe counted: {points}. Look elsewhere (the CPU "
             "scheduler on a loaded or oversubscribed node, page faults, another job's traffic); where "
             "the counters are not readable (empty columns) TCP cannot be ruled out.")


def explain(rows: Iterable[Row], defaults: Defaults | None = None) -> list[str]:
    """Lines to print under a table (points named as the table names them): nothing when no point stalled."""
    stalled = [r for r in rows if r.stalls]
    with_tcp = [r for r in stalled if (r.tcp_timeouts or 0) + (r.tcp_loss_probes or 0) > 0]
    lines = []
    if with_tcp:
        timeouts = sum(r.tcp_timeouts or 0 for r in with_tcp)
        probes = sum(r.tcp_loss_probes or 0 for r in with_tcp)
        lines.append(f"Stalls with TCP losses behind them: {counted(len(with_tcp), 'point')}, "
                     f"{counted(timeouts, 'retransmission timeout')} and {counted(probes, 'tail loss probe')} "
                     "counted while they ran:")
        lines += [f"  {_point(r, defaults)}: {r.stalls} of {r.iterations} iterations stalled; "
                  f"{r.tcp_timeouts or 0} timeouts, {r.tcp_loss_probes or 0} loss probes" for r in with_tcp]
        lines += textwrap.wrap(CAUSE, WIDTH) + textwrap.wrap(REMEDY, WIDTH)
    others = [r for r in stalled if r not in with_tcp]
    if others:
        lines += textwrap.wrap(ELSEWHERE.format(points="; ".join(_point(r, defaults) for r in others)), WIDTH)
    return lines


def _point(row: Row, defaults: Defaults | None) -> str:
    return f"{short_label(row, defaults)} at {human_bytes(row.bytes_per_peer)} per peer on {row.nprocs} ranks"
