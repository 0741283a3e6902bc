"""Where a command writes: each output, a folder or a file, checked before anything is measured, and refused in one
line that names the path the user chose and why (never a temporary file's name)."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from a2a.errors import A2AError

FOLDER = "a folder you can create and write"
FILE = "a file in a folder that exists and you can write"
PROBE = ".a2a-probe-"  # what the probes' short-lived files and folders are named after

REASONS = {errno.EACCES: "permission denied", errno.EPERM: "permission denied", errno.EROFS: "a read-only file system",
           errno.ENOSPC: "no space left on its device", errno.EDQUOT: "the disk quota is spent",
           errno.ENOENT: "no new files can be made", errno.ENAMETOOLONG: "the name is too long"}


class Unwritable(A2AError, OSError):
    """An output that cannot be written: the path the user chose, and why."""


def writable_folder(path: str | Path, what: str, command: str) -> Path:
    """`path` as a folder `command` may write `what` in (made later where missing); Unwritable if it cannot be."""
    why = folder_refusal(Path(path))
    if why:
        raise Unwritable(f"{command}: cannot write {what} to {path}: {why} (accepted: {FOLDER})")
    return Path(path)


def writable_file(path: str | Path, what: str, command: str) -> Path:
    """`path` as a file `command` may write `what` to (atomically, beside it); Unwritable if it cannot be."""
    why = file_refusal(Path(path))
    if why:
        raise Unwritable(f"{command}: cannot write {what} to {path}: {why} (accepted: {FILE})")
    return Path(path)


def folder_refusal(path: Path, chosen: Path | None = None) -> str:
    """Why files cannot be written in the folder `path` (or in it once made, where missing); '' when they can. The
    reason names the folder it comes from where that is not `chosen` (`path` unless told)."""
    existing = nearest_existing(path)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder" if existing.is_file() else f"{existing} is not a folder"
    try:
        if existing == path:
            fd, probe = tempfile.mkstemp(dir=path, prefix=PROBE)
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=PROBE))
    except OSError as error:
        return reason(error, existing, chosen or path)
    return ""


def file_refusal(path: Path) -> str:
    """Why the file `path` cannot be written (a new file beside it, then renamed over it); '' when it can."""
    if path.is_dir():
        return "it is a folder"
    if path.exists() and not path.is_file():
        return "it is not a regular file"
    folder = path.parent
    existing = nearest_existing(folder)
    if existing != folder:
        return f"{existing} is a file, not a folder" if existing.is_file() else f"its folder {folder} does not exist"
    return folder_refusal(folder, path)


def nearest_existing(path: Path) -> Path:
    """`path` itself if it exists, else its nearest ancestor that does."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def reason(error: OSError, where: Path, chosen: Path) -> str:
    """An OSError in words, naming the folder it happened in (`where`) when that is not the one chosen."""
    words = REASONS.get(error.errno or 0) or os.strerror(error.errno or 0).lower()
    return words if where == chosen else f"{words} in {where}"
