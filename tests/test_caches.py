"""What the testbed keeps between runs runs no one else's code: stored schedules are data only, and a kept S4U
replayer that another user could have written is refused, not run."""
from __future__ import annotations

import io
import json
import os
import pickle
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support import bench_here, needs_simgrid

from a2a.errors import BadConfig
from a2a.schedules.events import Collective, Schedule
from a2a.simulate import schedule_cache, simgrid, traces
from a2a.simulate.capture import capture, capture_unit, stepped

NODES = [[0, 1, 2], [3, 4, 5]]


def stored(schedule: Schedule) -> Schedule:
    """`schedule` saved and read back."""
    out = io.BytesIO()
    schedule_cache.save(schedule, out)
    path = Path(os.environ["A2A_SCHEDULE_CACHE"]) / f"roundtrip-{os.getpid()}.npz"
    path.write_bytes(out.getvalue())
    try:
        return schedule_cache.load(path)
    finally:
        path.unlink()


def read(name: str, p: int) -> Schedule:
    """`name`'s schedule at p ranks, read from the steps it registers."""
    schedule = stepped(name, {}, p)
    assert schedule is not None, f"{name} registers no steps at p={p}"
    return schedule


# Every kind of event: posts, waits for ranges, bursts, sendrecvs with and without block counts,
# collectives of the whole job and of sub-communicators, copies, blocking sends
SCHEDULES: dict[str, Callable[[], Schedule]] = {
    "linear_sync": lambda: capture_unit("linear_sync", {"window": 16}, 20),
    "linear": lambda: read("linear", 8).scaled(4),
    "pairwise": lambda: read("pairwise", 5),
    "bine": lambda: read("bine", 8),
    "native": lambda: read("native", 6),
    "hierarchical": lambda: capture("hierarchical", {}, 6, 2, nodes=NODES),
    "bruck": lambda: capture("bruck", {}, 5, 3),
    "locality_aware": lambda: capture("locality_aware", {}, 20, 1).packed(),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_a_stored_schedule_reads_back_event_for_event(name):
    """Read back, a schedule is the one stored: the same events once expanded, the same trace lines, and what one
    object was for several ranks (a whole-job collective's members) is one object again."""
    schedule = SCHEDULES[name]()
    back = stored(schedule)
    assert (back.nprocs, back.count, back.itemsize) == (schedule.nprocs, schedule.count, schedule.itemsize)
    assert [[e.kind for e in rank] for rank in back.events] == [[e.kind for e in rank] for rank in schedule.events]
    assert back.expanded().events == schedule.expanded().events
    for r, (events, again) in enumerate(zip(schedule.events, back.events)):
        assert list(traces.trace_lines(events, r, schedule.nprocs, 1e9)) == \
            list(traces.trace_lines(again, r, schedule.nprocs, 1e9))
    kinds = {e.kind for rank in schedule.events for e in rank}
    assert name != "linear_sync" or {"posts", "wait"} <= kinds
    if name == "native":
        members = {id(last.members) for *_, last in back.events if isinstance(last, Collective)}
        assert len(members) == 1


def test_every_event_class_is_in_the_table_with_each_of_its_fields():
    from dataclasses import fields

    from a2a.schedules import events

    by_kind = {cls.kind: cls for cls in events.Event.__args__}
    for kind, (cls, hows) in schedule_cache.EVENTS.items():
        assert by_kind[kind] is cls and len(fields(cls)) == len(hows)
    assert {cls for cls, _ in schedule_cache.EVENTS.values()} == set(by_kind.values())


class Hostile:
    """A pickle that, loaded, creates `marker`: what another user could leave in a shared cache."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def hostile_files(marker: Path) -> dict[str, bytes]:
    """Files that are no stored schedule, each of which a reader that unpickles would run."""
    payload = pickle.dumps(Hostile(marker))
    in_npz = io.BytesIO()
    np.savez(in_npz, schedule=np.array([Hostile(marker)], dtype=object))
    named = io.BytesIO()
    document = {"format": schedule_cache.FORMAT, "nprocs": 4, "count": 1, "itemsize": 4,
                "events": [[["os.system", "touch " + str(marker)]]] * 4}
    np.savez(named, schedule=np.frombuffer(json.dumps(document).encode(), np.uint8))
    return {"pickle": payload, "pickled member": in_npz.getvalue(), "unknown kind": named.getvalue(),
            "truncated": in_npz.getvalue()[:100]}


def test_the_hostile_files_would_run_their_code_if_unpickled(tmp_path):
    """The files below are real threats: unpickling the first creates its marker."""
    marker = tmp_path / "ran"
    pickle.loads(hostile_files(marker)["pickle"])
    assert marker.exists()


@needs_simgrid
@pytest.mark.parametrize("planted", ["pickle", "pickled member", "unknown kind", "truncated"])
def test_a_planted_file_in_a_shared_schedule_cache_is_never_run_but_captured_again(tmp_path, capsys, planted):
    """A hostile pickle where the testbed used to read a pickle, and a crafted file where it now reads its .npz: the
    simulation runs neither, captures the schedule again, replaces the file and simulates the point."""
    shared, marker = tmp_path / "shared", tmp_path / "ran"
    args = ("simulate", "--nprocs", "4", "--sizes", "8", "--algorithms", "bruck", "--copy-bandwidth", "5e9",
            "--schedule-cache", str(shared), "--quiet")
    assert bench_here(capsys, *args, "--output", str(tmp_path / "first"))[0] == 0
    [path] = shared.glob("*.npz")
    path.with_suffix(".pickle").write_bytes(hostile_files(marker)["pickle"])  # where the old cache read its pickle
    path.write_bytes(hostile_files(marker)[planted])
    code, _, err = bench_here(capsys, *args, "--output", str(tmp_path / "second"))
    assert code == 0, err
    assert not marker.exists()
    meta = json.loads((tmp_path / "second" / "meta.json").read_text())
    assert (meta["schedules_captured"], meta["schedules_from_cache"], meta["schedules_replaced"]) == (1, 0, 1)
    results = (tmp_path / "second" / "results.csv").read_text().splitlines()
    assert len(results) == 2 and ",true," in results[1]
    assert schedule_cache.load(path).nprocs == 4  # replaced by the schedule captured again


HOSTILE_PROGRAM = """#!/bin/sh
touch {marker}
echo "Simulation time 1"
"""


def planted_replayer(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A program where the S4U replayer of this SimGrid is kept, under a cache of this test's own; and the marker
    it creates when run."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    program, _ = simgrid.s4u_program()
    marker = tmp_path / "ran"
    simgrid.private_directories(program.parent, simgrid.cache_home())
    program.write_text(HOSTILE_PROGRAM.format(marker=marker))
    program.chmod(0o700)
    return program, marker


def as_root(why: str):
    return pytest.mark.skipif(os.getuid() != 0, reason=f"only root can give a file to another user ({why})")


UNSAFE = {
    "program writable by its group": lambda program: program.chmod(0o770),
    "program owned by another user": lambda program: os.chown(program, 65534, 65534),
    "its directory writable by others": lambda program: program.parent.chmod(0o777),
    "a cache directory owned by another user": lambda program: os.chown(program.parent.parent, 65534, 65534),
    "the testbed's cache writable by its group": lambda program: simgrid.cache_home().chmod(0o770),
}


@needs_simgrid
@pytest.mark.parametrize("unsafe", [pytest.param(name, marks=as_root(name)) if "owned" in name else name
                                    for name in UNSAFE])
def test_a_kept_replayer_another_user_could_have_written_is_refused_not_run(tmp_path, capsys, monkeypatch, unsafe):
    """The S4U replayer found in the cache runs only if this user owns it and every cache directory on its path and
    no one else may write them: else the simulation stops before capturing, on one line naming the path, what is
    wrong and what to do."""
    program, marker = planted_replayer(tmp_path, monkeypatch)
    UNSAFE[unsafe](program)
    code, _, err = bench_here(capsys, "simulate", "--nprocs", "4", "--sizes", "8", "--algorithms", "linear",
                         "--copy-bandwidth", "5e9", "--output", str(tmp_path / "sim"))
    assert code == 2 and not marker.exists(), err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert ("owned by uid 65534" in line) if "owned" in unsafe else ("writable by its group or others" in line)
    assert "XDG_CACHE_HOME" in line if "owned" in unsafe else "chmod go-w" in line
    assert not (tmp_path / "sim").exists()


@pytest.mark.launches
@needs_simgrid
def test_a_kept_replayer_of_this_user_alone_is_run(tmp_path, monkeypatch):
    program, marker = planted_replayer(tmp_path, monkeypatch)
    assert simgrid.s4u_replayer() == str(program)
    subprocess.run([program], check=True, capture_output=True)
    assert marker.exists()


@needs_simgrid
def test_the_replayer_is_built_for_this_user_alone(tmp_path, monkeypatch):
    """Built under a fresh cache, every directory from the testbed's cache down and the program are this user's,
    and no one else may write (or, but for the program's readers, enter) them; whatever the compiler's mode."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = os.umask(0o002)  # a umask that leaves group write on
    compiled = []

    def compiler(command, **kwargs):
        out = Path(command[command.index("-o") + 1])
        out.write_text("#!/bin/sh\n")
        out.chmod(0o777)
        compiled.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    try:
        monkeypatch.setattr(simgrid.subprocess, "run", compiler)
        program = Path(simgrid.s4u_replayer())
    finally:
        os.umask(old)
    assert compiled and not any(arg == f"-I{simgrid.prefix()}/include" for arg in compiled[0])
    for path in (program, program.parent, program.parent.parent, simgrid.cache_home()):
        held = path.stat()
        assert held.st_uid == os.getuid() and stat.S_IMODE(held.st_mode) == 0o700, path


def test_the_cache_refuses_what_another_user_could_write(tmp_path):
    target = tmp_path / "kept"
    target.mkdir(mode=0o700)
    simgrid.refuse_unless_private(target)
    target.chmod(0o720)
    with pytest.raises(BadConfig, match=f"{target} is writable by its group or others .mode 720.*chmod go-w"):
        simgrid.refuse_unless_private(target)
