"""TCP retransmission timeouts from /proc/net/netstat: the footprint of a 0.2 s stall."""
from __future__ import annotations

from pathlib import Path

NETSTAT = Path("/proc/net/netstat")


def tcp_timeouts(path: Path = NETSTAT) -> int | None:
    """TcpExt TCPTimeouts of this network namespace, or None where it cannot be read."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines, lines[1:]):
        if names.startswith("TcpExt:") and values.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:]))
            return int(table["TCPTimeouts"]) if "TCPTimeouts" in table else None
    return None
