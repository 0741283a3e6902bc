"""Finding SimGrid: smpirun and its trace replayer, their version, and our S4U replayer built against them.

`bench simulate` writes SMPI time-independent traces (a2a.simulate.traces) and replays them in
C++ (a2a.simulate.replay), from any Python (SimGrid's Python bindings serve only Debian's system
Python and have no MPI layer): with `smpirun -replay ... smpireplaymain`, SMPI's own MPI model,
or with our S4U replayer (s4u_replay.cpp, built here against the same SimGrid), which models the
same point-to-point protocol but matches each message in a mailbox of its own (source,
destination) pair instead of scanning the receiver's one mailbox.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from a2a.errors import BadConfig

FAST_SINCE = (3, 34)  # before 3.34 every finished eager send is removed from one list of all of them


def smpirun() -> str | None:
    """The smpirun program first on PATH, or None."""
    return shutil.which("smpirun")


def replayer() -> str | None:
    """SMPI's trace replayer (smpireplaymain) of the SimGrid that smpirun belongs to, or None."""
    runner = smpirun()
    if not runner:
        return None
    prefix = Path(runner).resolve().parent.parent  # Debian puts it under lib/<multiarch>/simgrid
    found = [*(prefix / "lib" / "simgrid").glob("smpireplaymain"), *prefix.glob("lib/*/simgrid/smpireplaymain")]
    return str(found[0]) if found else shutil.which("smpireplaymain")


REPLAYERS = ("s4u", "smpi")
S4U_SOURCE = Path(__file__).with_name("s4u_replay.cpp")


def cache_home() -> Path:
    """$XDG_CACHE_HOME/a2a-testbed (~/.cache when unset): what the testbed keeps between runs."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "a2a-testbed"


def s4u_replayer() -> str:
    """Our S4U replayer, compiled against smpirun's SimGrid once per source and library, then kept."""
    prefix = Path(smpirun() or "/nonexistent").resolve().parent.parent
    libraries = sorted([*prefix.glob("lib/libsimgrid.so*"), *prefix.glob("lib/*/libsimgrid.so*")])
    if not smpirun() or not libraries:
        raise BadConfig(f"the S4U replayer is built against SimGrid's library beside smpirun ({missing() or prefix}); "
                        "--replayer smpi replays with smpirun alone")
    library = libraries[0].resolve()
    key = hashlib.sha256(S4U_SOURCE.read_bytes() + f"{library}:{library.stat().st_mtime_ns}".encode())
    program = cache_home() / "s4u-replay" / key.hexdigest()[:16] / "s4u_replay"
    if not program.exists():
        if not shutil.which("c++"):
            raise BadConfig("building the S4U replayer needs a C++ compiler (c++; Debian: apt-get install g++); "
                            "--replayer smpi replays with smpirun alone")
        program.parent.mkdir(parents=True, exist_ok=True)
        building = program.with_name(f"s4u_replay.{os.getpid()}")  # then renamed: another process may build it
        command = ["c++", "-O2", "-std=c++17", str(S4U_SOURCE), "-o", str(building), f"-I{prefix / 'include'}",
                   f"-L{library.parent}", f"-Wl,-rpath,{library.parent}", "-lsimgrid"]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join(done.stderr.strip().splitlines()[-12:])
            raise BadConfig(f"building the S4U replayer failed ({' '.join(command)}):\n{tail}\n"
                            "--replayer smpi replays with smpirun alone")
        os.replace(building, program)
    return str(program)


def missing() -> str | None:
    """What is missing for simulation, with how to get it; None when SimGrid is ready."""
    if smpirun() and replayer():
        return None
    return (f"SimGrid's SMPI is not installed (no {'smpirun' if not smpirun() else 'smpireplaymain'}); "
            "`bench simulate` needs it: `make simgrid` builds SimGrid 4.1 into /usr/local (about 12 minutes; "
            "`bash mk/simgrid.sh PREFIX` elsewhere, then PREFIX/bin first on PATH), or on Debian "
            "`apt-get install libsimgrid-dev` (3.32: slow past 256 ranks)")


def slow_version(text: str) -> bool:
    """Whether SimGrid `text` (3.32, 4.1) predates the fix that makes many eager sends in flight cheap."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", text)[:2])
    return len(numbers) == 2 and numbers < FAST_SINCE


def version() -> str:
    """SimGrid's version as smpirun reports it."""
    done = subprocess.run([smpirun() or "smpirun", "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"SimGrid version (\S+)", done.stdout + done.stderr)
    return match.group(1) if match else "unknown"
