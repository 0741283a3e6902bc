"""What the commands share in their options: help texts that read each default from where it is defined, checks."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.errors import BadResults


def defaults(text: str, default: Any) -> str:
    """A help text ending in its default, as the code defines it."""
    shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
    return f"{text} [default: {shown}]"


def results_folders(given: tuple[str, ...]) -> list[Path]:
    """The results directories given, each an existing folder: BadResults names the first that is not, in the words
    of a folder without results.csv (checked in the command, not by click, whose refusal takes four lines)."""
    for folder in map(Path, given):
        if not folder.is_dir():
            raise BadResults(f"{folder}: not a results directory ({'a file' if folder.exists() else 'no such folder'})")
    return list(map(Path, given))
