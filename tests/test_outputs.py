"""Every command's outputs checked before anything is done: refused in one line naming the path chosen and why, printed
once, exit 2, never a temporary file's name; a write that fails mid-run keeps what was written."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from support import bench, bench_here, python

from a2a.record.outputs import Unwritable, writable_file, writable_folder
from a2a.record.results import RESULTS_CSV, SAMPLES_CSV, Recorder, Row, read_rows, read_samples, write_atomic

PROC = Path("/proc/a2a-out")  # a folder that takes no new files, for every user (root too)


def unwritable(tmp_path: Path) -> list[tuple[Path, str]]:
    """Outputs no command can write, each with the reason its refusal gives."""
    (tmp_path / "afile").write_text("")
    return [(PROC, "no new files can be made in /proc"),
            (tmp_path / "afile" / "out", f"{tmp_path / 'afile'} is a file, not a folder")]


# the lines of Open MPI's launcher when a rank exits non-zero
OPEN_MPI_BOX = ("-----", "prterun detected", "mpirun detected", "mpiexec detected", "thus causing", "Process name",
                "Exit code")


def assert_one_line(done, start: str, why: str) -> None:
    """A refusal: exit 2, one line on stderr that begins `start` and gives `why`, no traceback, no temporary file
    (Open MPI's launcher adds its own box about a rank's non-zero exit: not ours to count)."""
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.strip().startswith(OPEN_MPI_BOX)]
    assert len(lines) == 1 and lines[0].startswith(f"error: {start}") and why in lines[0], done.stderr
    assert "Traceback" not in done.stderr and ".tmp" not in done.stderr


def here(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` run in this process, as a finished process: a refusal made before anything is done
    reads the same (test_run_refuses_an_unwritable_output_once_on_every_rank launches one to show it is said once)."""
    code, out, err = bench_here(capsys, *args)
    return subprocess.CompletedProcess(["bench", *args], code, out, err)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, small_sweep: Path) -> Path:
    """The small sweep's decision table."""
    out = tmp_path_factory.mktemp("table") / "decision.json"
    done = python("-m", "bench", "decide", str(small_sweep), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.launches
def test_run_refuses_an_unwritable_output_once_on_every_rank(tmp_path, capsys):
    """The first output launched on 2 ranks (said once, exit 2 on each); the second, only another reason, in this
    process."""
    for k, (path, why) in enumerate(unwritable(tmp_path)):
        args = ("run", "--algorithms", "native", "--sizes", "8", "--output", str(path))
        done = bench(2, *args, timeout=60) if k == 0 else here(capsys, *args)
        assert_one_line(done, f"bench run: cannot write the results to {path}: ", why)
        assert "(accepted: a folder you can create and write)" in done.stderr


@pytest.mark.launches
def test_run_refuses_an_unwritable_output_of_its_config_file(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(f"output: {PROC}\nsizes: 8\n")
    done = python("-m", "bench", "run", "--config", str(config), "--algorithms", "native")
    assert_one_line(done, f"bench run: cannot write the results to {PROC}: ", "/proc")


def test_simulate_refuses_an_unwritable_output_or_traces_folder(tmp_path, capsys):
    for path, why in unwritable(tmp_path):
        for option, what in (("--output", "the results"), ("--keep-traces", "the traces")):
            done = here(capsys, "simulate", "--sizes", "8", "--nprocs", "4", "--output",
                          str(tmp_path / "sim"), option, str(path))
            assert_one_line(done, f"bench simulate: cannot write {what} to {path}: ", why)
    assert not (tmp_path / "sim").exists()


def test_tune_refuses_an_unwritable_output(tmp_path, capsys):
    for path, why in unwritable(tmp_path):
        assert_one_line(here(capsys, "tune", "--output", str(path)),
                        f"bench tune: cannot write the tune to {path}: ", why)


@pytest.mark.launches
def test_plot_refuses_an_unwritable_output(tmp_path, small_sweep):
    for path, why in unwritable(tmp_path):
        assert_one_line(python("-m", "bench", "plot", str(small_sweep), "-o", str(path)),
                        f"bench plot: cannot write the figures to {path}: ", why)


@pytest.mark.launches
@pytest.mark.parametrize("command", ["decide", "export", "deploy", "compare"])
def test_the_commands_writing_a_file_refuse_it_naming_it(command, tmp_path, capsys, small_sweep, table):
    args = {"decide": ["decide", str(small_sweep)], "export": ["export", str(table), "--format", "ompi"],
            "deploy": ["deploy", str(table)],
            "compare": ["compare", "--baseline", str(small_sweep), "--tuned", str(small_sweep), "--revert-slower",
                        str(table)]}[command]
    what = {"decide": "the decision table", "export": "the tuning file", "deploy": "the deploy file",
            "compare": "the verified table"}[command]
    places = [(PROC.with_suffix(".json"), "no new files can be made in /proc"), *unwritable(tmp_path)[1:],
              (tmp_path / "missing" / "x.json", f"its folder {tmp_path / 'missing'} does not exist")]
    for path, why in places:
        done = here(capsys, *args, "-o", str(path))
        assert_one_line(done, f"bench {command}: cannot write {what} to {path}: ", why)
        assert "(accepted: a file in a folder that exists and you can write)" in done.stderr


def test_a_folder_or_file_that_can_be_written_is_let_through_untouched(tmp_path):
    assert writable_folder(tmp_path / "new" / "deeper", "x", "bench x") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checked, not made
    assert writable_file(tmp_path / "x.json", "x", "bench x") == tmp_path / "x.json"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Unwritable, match="it is a folder"):
        writable_file(tmp_path, "x", "bench x")
    with pytest.raises(Unwritable, match="it is not a regular file"):
        writable_file(Path("/dev/null"), "x", "bench x")


def full_disk(monkeypatch: pytest.MonkeyPatch, after: int = 0) -> None:
    """From now on, every write reaches the disk only its first `after` bytes, then finds no space left."""
    real = os.write

    def write(fd: int, data) -> int:
        if len(data) > after:
            if after:
                real(fd, bytes(data[:after]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))


def test_an_atomic_write_that_fails_names_the_file_chosen_and_keeps_its_old_content(tmp_path, monkeypatch):
    target = tmp_path / "decision.json"
    write_atomic(target, "old\n")
    full_disk(monkeypatch)
    with pytest.raises(Unwritable) as refused:
        write_atomic(target, "new\n" * 1000)
    assert str(refused.value) == f"cannot write {target}: no space left on its device ({target} keeps what it held)"
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["decision.json"]  # no temporary file left behind


def test_an_atomic_write_into_a_folder_that_takes_no_files_names_the_file_chosen():
    with pytest.raises(Unwritable, match=r"^cannot write /proc/x.json: no new files can be made in /proc$"):
        write_atomic(Path("/proc/x.json"), "{}")


def point(size: int) -> Row:
    return Row(nprocs=2, nnodes=1, ppn=2, algorithm="native", options="", dtype="uint8", count=size,
               bytes_per_peer=size, iterations=2, valid=True, t_min_us=1.0)


def test_a_full_disk_mid_run_keeps_the_points_recorded_before_whole(tmp_path, monkeypatch):
    recorder = Recorder(tmp_path)
    recorder.add(point(8), [1e-6, 2e-6])
    recorder.add(point(16), [1e-6, 2e-6])
    with monkeypatch.context() as patched:
        full_disk(patched, after=5)  # a torn line, cut off again
        with pytest.raises(Unwritable, match=f"^cannot write the results to {tmp_path}: no space left on its device; "
                                             "the points recorded before are kept whole"):
            recorder.add(point(32), [1e-6, 2e-6])
    recorder.close()
    assert [r.bytes_per_peer for r in read_rows(tmp_path)] == [8, 16]
    assert len(read_samples(tmp_path)) == 2
    assert (tmp_path / RESULTS_CSV).read_text().endswith("\n") and (tmp_path / SAMPLES_CSV).read_text().endswith("\n")
    again = Recorder(tmp_path)  # the resume goes on from them
    again.add(point(32), [1e-6])
    again.close()
    assert [r.bytes_per_peer for r in read_rows(tmp_path)] == [8, 16, 32]


def test_a_record_folder_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(Unwritable, match=f"^cannot write the results to {tmp_path}/afile/run: {tmp_path}/afile is a "
                                         "file, not a folder$"):
        Recorder(tmp_path / "afile" / "run")

