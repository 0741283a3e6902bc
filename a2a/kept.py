"""What the testbed keeps between runs (compiled programs, schedules): where, and the rule that it runs only what
this user alone could have written."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from a2a.errors import BadConfig


def cache_home() -> Path:
    """$XDG_CACHE_HOME/a2a-testbed (~/.cache when unset): what the testbed keeps between runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "a2a-testbed"


def private_directories(directory: Path, top: Path) -> None:
    """`directory` and every directory from `top` down to it, made (this user's alone) where missing, and each
    refused unless it is private (refuse_unless_private)."""
    for path in [*reversed(directory.relative_to(top).parents), directory.relative_to(top)]:
        path = top / path
        try:
            path.mkdir(mode=0o700, parents=path == top)
        except FileExistsError:
            pass
        refuse_unless_private(path)


def refuse_unless_private(path: Path) -> None:
    """BadConfig unless `path` is this user's own and no one else may write it: the testbed runs what it keeps."""
    held = path.stat()
    if held.st_uid != os.getuid():
        raise BadConfig(f"{path} is owned by uid {held.st_uid}, not by this user (uid {os.getuid()}), so the "
                        "testbed will not run what it holds; remove it, or set XDG_CACHE_HOME to a directory of "
                        "your own")
    if held.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise BadConfig(f"{path} is writable by its group or others (mode {stat.S_IMODE(held.st_mode):o}), so the "
                        f"testbed will not run what it holds; `chmod go-w {path}`, or remove it")
