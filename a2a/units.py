"""Byte counts as people write them: 8, 1K, 64KiB, 32kb, 1M, 2G (all powers of 1024)."""
from __future__ import annotations

import re

from a2a.errors import BadConfig

UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
         "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}
SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str, what: str = "size") -> int:
    """'64KiB' -> 65536. Units K, KiB, KB, M, MiB, G in any case, or none (bytes)."""
    match = SIZE.match(str(text))
    if not match or match.group(2).upper() not in UNITS:
        raise BadConfig(f"{what} {text!r} is not a byte count; accepted: 8, 1K, 64KiB, 1M, 2G")
    return int(match.group(1)) * UNITS[match.group(2).upper()]


def human_bytes(n: int) -> str:
    """65536 -> '64K' (the shortest exact spelling that parse_size reads back)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def counted(n: int, thing: str) -> str:
    """'1 point', '2 points'."""
    return f"{n} {thing}{'' if n == 1 else 's'}"
