"""TCP counters from /proc/net/netstat: the footprints of a 0.2 s stall (timeouts, tail loss probes)."""
from __future__ import annotations

from pathlib import Path

NETSTAT = Path("/proc/net/netstat")
STALL_COUNTERS = ("TCPTimeouts", "TCPLossProbes")  # both wait about 200 ms before resending


def tcp_ext(text: str) -> dict[str, int]:
    """The TcpExt counters of a /proc/net/netstat text ({} when it has none)."""
    lines = text.splitlines()
    for header, values in zip(lines, lines[1:]):
        if header.startswith("TcpExt:") and values.startswith("TcpExt:"):
            return dict(zip(header.split()[1:], map(int, values.split()[1:])))
    return {}


def stall_counters(path: Path = NETSTAT) -> list[int] | None:
    """This network namespace's STALL_COUNTERS, or None where they cannot be read."""
    try:
        table = tcp_ext(path.read_text())
    except OSError:
        return None
    return [table[name] for name in STALL_COUNTERS] if all(n in table for n in STALL_COUNTERS) else None
