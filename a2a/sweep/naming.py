"""Where a record goes: results/<UTC time>[-kind] unless told, and never over another record."""
from __future__ import annotations

import time
from pathlib import Path

from a2a.errors import BadConfig

RESULTS = Path("results")


def utc_stamp() -> str:
    """This moment in UTC, as record names spell it: 20261202T183000Z."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def named(output: str | Path | None, prefix: str = "", suffix: str = "") -> Path:
    """`output`, or results/PREFIX<UTC time>SUFFIX."""
    return Path(output) if output else RESULTS / f"{prefix}{utc_stamp()}{suffix}"


def fresh_record(output: str | Path | None, suffix: str = "") -> Path:
    """A sweep's directory (`output` or results/<UTC time>SUFFIX); BadConfig if it already holds results."""
    directory = named(output, suffix=suffix)
    if (directory / "results.csv").exists():
        raise BadConfig(f"{directory} already holds results; use --resume {directory} or another --output")
    return directory


def empty_directory(output: str | Path | None, prefix: str) -> Path:
    """`output`, or results/PREFIX-<UTC time>, made now; BadConfig if it already holds anything."""
    directory = named(output, prefix=f"{prefix}-")
    if directory.exists() and any(directory.iterdir()):
        raise BadConfig(f"{directory} is not empty; choose another --output")
    directory.mkdir(parents=True, exist_ok=True)
    return directory
