"""What the commands share in their options: help texts that read each default from where it is defined."""
from __future__ import annotations

from typing import Any


def defaults(text: str, default: Any) -> str:
    """A help text ending in its default, as the code defines it."""
    shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
    return f"{text} [default: {shown}]"
