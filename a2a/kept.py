"""What the testbed keeps between runs (compiled programs, schedules): where, the rule that it runs only what
this user alone could have written, and how a C program or library is compiled and kept."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

from a2a.errors import BadConfig, HarnessError
from a2a.mpi import mpi_tool


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


def compiled_path(sources: list[Path], name: str, flags: list[str], shared: bool = False,
                  mpicc: str | None = None) -> Path:
    """Where compiled() keeps `name`: by the sources' bytes, the flags and the MPI library `mpicc` (default: its own)
    compiles for."""
    mpicc = mpicc or mpi_tool("mpicc")
    key = hashlib.sha256(b"".join(Path(p).read_bytes() for p in sources) +
                         f"{flags}\n{shared}\n{tool_file(mpicc)}\n{compile_line(mpicc)}".encode())
    return cache_home() / "compiled" / key.hexdigest()[:16] / name


def tool_file(tool: str) -> str:
    """The file a compiler name stands for, whatever the working directory: a bare name ('cc', which `mpicc -show`
    prints) as found on PATH, a path made absolute (links followed); a name not on PATH as it is."""
    found = shutil.which(tool) if os.sep not in tool else tool
    return str(Path(found).resolve()) if found else tool


@functools.lru_cache(maxsize=8)  # asked once per process: a plan that runs in C looks its library up each time
def compile_line(mpicc: str) -> str:
    """What `mpicc -show` prints: the compiler and flags the wrapper stands for."""
    return subprocess.run([mpicc, "-show"], capture_output=True, text=True, check=False).stdout


def compiled(sources: list[Path], name: str, flags: list[str], shared: bool = False, mpicc: str | None = None) -> Path:
    """The program `name` (with `shared`, the library) compiled from `sources` by the MPI library's own mpicc (or
    `mpicc`) with `flags` (after the sources, so -l works), unless kept already; every source counts (headers too),
    only the .c files are compiled, each source's directory is on the include path. One another user could write is
    refused (BadConfig); a compiler that is missing or fails raises HarnessError with its message."""
    mpicc = mpicc or mpi_tool("mpicc")
    path = compiled_path(sources, name, flags, shared, mpicc)
    private_directories(path.parent, cache_home())
    if path.exists():
        refuse_unless_private(path)
        return path
    building = path.with_name(f"{path.name}.{os.getpid()}")  # then renamed: another rank may build it too
    includes = [f"-I{d}" for d in dict.fromkeys(Path(p).resolve().parent for p in sources)]
    command = [mpicc, *(["-fPIC", "-shared"] if shared else []), "-o", str(building), *includes,
               *(str(p) for p in sources if str(p).endswith(".c")), *flags]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise HarnessError(f"{' '.join(command)} failed: {done.stderr.strip()[-600:]}")
    os.chmod(building, 0o700)
    os.replace(building, path)
    return path
