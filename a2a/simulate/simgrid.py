"""Finding SimGrid: smpirun and its trace replayer, their version, and our S4U replayer built against them.

`bench simulate` writes SMPI time-independent traces (a2a.simulate.traces) and replays them in
C++ (a2a.simulate.replay), from any Python (SimGrid's Python bindings serve only Debian's system
Python and have no MPI layer): with `smpirun -replay ... smpireplaymain`, SMPI's own MPI model,
or with our S4U replayer (s4u_replay.cpp, built here against the same SimGrid), which models the
same point-to-point protocol but matches each message in a mailbox of its own (source,
destination) pair instead of scanning the receiver's one mailbox.

Which SimGrid: the smpirun that $A2A_SMPIRUN names, else the first on PATH; its replayer, library
and headers are the ones of its own installation.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from a2a.errors import BadConfig
from a2a.kept import cache_home, private_directories, refuse_unless_private  # noqa: F401  (simgrid.X is used)

SMPIRUN_VARIABLE = "A2A_SMPIRUN"
FAST_SINCE = (3, 34)  # before 3.34 every finished eager send is removed from one list of all of them
OLDEST = (3, 32)  # the oldest SimGrid the testbed runs on (Debian 12's)
SINGLE_COST_SINCE = (3, 34)  # SMPI reads a message cost given as one value
COST_KEYS = ("smpi/os", "smpi/ois", "smpi/or")
TO_GET_ONE = ("`make simgrid` builds SimGrid 4.1 into /usr/local (about 12 minutes; `bash mk/simgrid.sh PREFIX` "
              "elsewhere, then PREFIX/bin first on PATH or A2A_SMPIRUN=PREFIX/bin/smpirun), or on Debian "
              "`apt-get install libsimgrid-dev` (3.32: slow past 256 ranks)")


def smpirun() -> str | None:
    """The smpirun program $A2A_SMPIRUN names, else the first on PATH; None when there is none."""
    chosen = os.environ.get(SMPIRUN_VARIABLE)
    return shutil.which(chosen) if chosen else shutil.which("smpirun")


def prefix() -> Path | None:
    """The installation smpirun belongs to (PREFIX of PREFIX/bin/smpirun), or None."""
    runner = smpirun()
    return Path(runner).resolve().parent.parent if runner else None


def replayer() -> str | None:
    """SMPI's trace replayer (smpireplaymain) of the SimGrid that smpirun belongs to, or None."""
    home = prefix()
    if home is None:
        return None
    found = [*(home / "lib" / "simgrid").glob("smpireplaymain"), *home.glob("lib/*/simgrid/smpireplaymain")]
    if found:
        return str(found[0])  # Debian puts it under lib/<multiarch>/simgrid
    return None if os.environ.get(SMPIRUN_VARIABLE) else shutil.which("smpireplaymain")


REPLAYERS = ("s4u", "smpi")
S4U_SOURCE = Path(__file__).with_name("s4u_replay.cpp")
HEADERS = ("simgrid", "xbt", "smpi", "xbt.h")  # what SimGrid installs under PREFIX/include




def s4u_replayer() -> str:
    """Our S4U replayer, compiled against smpirun's SimGrid once per source and library, then kept; one that another
    user could have written is refused, not run."""
    program, library = s4u_program()
    private_directories(program.parent, cache_home())
    if program.exists():
        refuse_unless_private(program)
    else:
        _build(program, library)
    return str(program)


def s4u_program() -> tuple[Path, Path]:
    """Where the S4U replayer of smpirun's SimGrid is kept (by its source and library), and that library."""
    home = prefix() or Path("/nonexistent")
    libraries = sorted([*home.glob("lib/libsimgrid.so*"), *home.glob("lib/*/libsimgrid.so*")])
    if not smpirun() or not libraries:
        raise BadConfig(f"the S4U replayer is built against SimGrid's library beside smpirun ({missing() or home}); "
                        "--replayer smpi replays with smpirun alone")
    library = libraries[0].resolve()
    key = hashlib.sha256(S4U_SOURCE.read_bytes() + f"{library}:{library.stat().st_mtime_ns}".encode())
    return cache_home() / "s4u-replay" / key.hexdigest()[:16] / "s4u_replay", library


def _build(program: Path, library: Path) -> None:
    """Compile the S4U replayer against `library` into `program`, which this user alone may write."""
    home = prefix() or Path("/nonexistent")
    if not shutil.which("c++"):
        raise BadConfig("building the S4U replayer needs a C++ compiler (c++; Debian: apt-get install g++); "
                        "--replayer smpi replays with smpirun alone")
    building = program.with_name(f"s4u_replay.{os.getpid()}")  # then renamed: another process may build it
    with tempfile.TemporaryDirectory(prefix="a2a-simgrid-include-") as include:
        # SimGrid's headers alone, first: a compiler searches /usr/local/include before an -I/usr/include, so
        # Debian's SimGrid would be built with the headers of another one installed in /usr/local
        for name in HEADERS:
            if (home / "include" / name).exists():
                os.symlink(home / "include" / name, Path(include) / name)
        command = ["c++", "-O2", "-std=c++17", str(S4U_SOURCE), "-o", str(building), f"-I{include}",
                   f"-L{library.parent}", f"-Wl,-rpath,{library.parent}", "-lsimgrid"]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-12:])
        raise BadConfig(f"building the S4U replayer failed ({' '.join(command)}):\n{tail}\n"
                        "--replayer smpi replays with smpirun alone")
    os.chmod(building, 0o700)
    os.replace(building, program)






def missing() -> str | None:
    """What is missing for simulation, with how to get it; None when SimGrid is ready."""
    chosen = os.environ.get(SMPIRUN_VARIABLE)
    if chosen and not smpirun():
        return (f"{SMPIRUN_VARIABLE}={chosen} names no program to run; accepted: the path of a SimGrid smpirun "
                f"(e.g. /usr/bin/smpirun), or {SMPIRUN_VARIABLE} unset for the smpirun first on PATH")
    if smpirun() and replayer():
        return None
    where = f" beside {smpirun()}" if smpirun() else ""
    return (f"SimGrid's SMPI is not installed (no {'smpirun' if not smpirun() else 'smpireplaymain'}{where}); "
            f"`bench simulate` needs it: {TO_GET_ONE}")


def numbers(text: str) -> tuple[int, ...]:
    """A version's first two numbers: '3.32' -> (3, 32); () when it has none."""
    found = tuple(int(n) for n in re.findall(r"\d+", text)[:2])
    return found if len(found) == 2 else ()


def slow_version(text: str) -> bool:
    """Whether SimGrid `text` (3.32, 4.1) predates the fix that makes many eager sends in flight cheap."""
    return bool(numbers(text)) and numbers(text) < FAST_SINCE


def unsupported(text: str) -> str | None:
    """Why SimGrid `text` cannot run `bench simulate`, with the way to one that can; None when it can."""
    if not numbers(text) or numbers(text) >= OLDEST:
        return None
    return (f"SimGrid {text} ({smpirun()}) is not supported: `bench simulate` runs on SimGrid "
            f"{'.'.join(map(str, OLDEST))} or later; {TO_GET_ONE}")


def version() -> str:
    """SimGrid's version as smpirun reports it."""
    return _version(smpirun() or "smpirun")


@functools.cache
def _version(runner: str) -> str:
    done = subprocess.run([runner, "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"SimGrid version (\S+)", done.stdout + done.stderr)
    return match.group(1) if match else "unknown"


def smpirun_config(config: list[str]) -> list[str]:
    """SMPI options in the form this smpirun reads: before 3.34 a message cost (smpi/os, ois, or) is read only as
    THRESHOLD:BASE:PER_BYTE (a single value crashes it), so SECONDS becomes 0:SECONDS:0, the same at every size."""
    if not numbers(version()) or numbers(version()) >= SINGLE_COST_SINCE:
        return config
    costs = tuple(f"--cfg={key}:" for key in COST_KEYS)
    return [option.replace(":", ":0:", 1) + ":0" if option.startswith(costs) and option.count(":") == 1 else option
            for option in config]
