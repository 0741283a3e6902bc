"""The seed mail's table: #CPUs, floats per peer, average, std.dev., min, max in seconds, `!` on stalls."""
from __future__ import annotations

import math
from collections.abc import Iterable

from a2a.record.results import Row

HEADER = ("       mesg size  time in seconds\n"
          "#CPUs     floats  average   std.dev.    min.      max.     TCP timeouts")


def mail_table(rows: Iterable[Row], title: str) -> str:
    """One algorithm's rows as the seed printed them (Kutzner, Open MPI users' list, 2005).

    Sizes are elements per peer ("floats" when the dtype is float32); times are the mean,
    sample standard deviation, min and max of the timed iterations, each the slowest
    rank's time. `!` marks a size with a stall; the last column is the TCP retransmission
    timeouts counted during the point (blank where unknown).
    """
    lines = [f"{title}:", "=" * (len(title) + 1), HEADER]
    for row in sorted(rows, key=lambda r: (r.nprocs, r.count)):
        times = [row.t_mean_us, row.t_std_us, row.t_min_us, row.t_max_us]
        avg, std, low, high = (f"{t / 1e6:8.6f}" if not math.isnan(t) else f"{'-':>8}" for t in times)
        timeouts = "" if row.tcp_timeouts is None else str(row.tcp_timeouts)
        mark = "!" if row.stalls else " "
        lines.append(f"{row.nprocs:4d}{row.count:12d}  {avg}  {std}    {low}  {high} {mark}{timeouts:>9}".rstrip())
    return "\n".join(lines)


def stall_summary(rows: Iterable[Row]) -> str:
    """'7 of 18 sizes stalled (31 stalled iterations), 45 TCP timeouts'."""
    rows = list(rows)
    stalled = sum(1 for r in rows if r.stalls)
    iterations = sum(r.stalls for r in rows)
    known = [r.tcp_timeouts for r in rows if r.tcp_timeouts is not None]
    timeouts = f", {sum(known)} TCP timeouts" if known else ""
    return f"{stalled} of {len(rows)} sizes stalled ({iterations} stalled iterations){timeouts}"
