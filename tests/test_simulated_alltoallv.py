"""alltoallv in the simulator: a direct schedule's program (the C executor's) with every block at the count matrix's
bytes, SMPI's own MPI_Alltoallv for native; synthetic workloads and a program's recorded calls simulate, and what a
replay moves is the matrix."""
from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support import bench_here, launch_command, needs_simgrid

from a2a.deploy.library import preload_library
from a2a.deploy.recorded import read_record
from a2a.deploy.transpose_sort import transpose_sort
from a2a.errors import BadOption
from a2a.mpi import clean_launcher_env
from a2a.record.results import read_rows
from a2a.schedules.events import Irecv, Isend
from a2a.schedules.tracer import NotExact
from a2a.simulate import platforms, traces, varied
from a2a.simulate.machine import simulated_variants

MATRIX = np.array([[3, 0, 5, 1], [2, 7, 0, 4], [6, 1, 2, 0], [0, 9, 3, 8]])
NODES = {"linear": [[0], [1], [2], [3]], "pairwise": [[0], [1], [2], [3]], "throttled": [[0], [1], [2], [3]],
         "node_aware": [[0, 1], [2, 3]]}


@pytest.mark.parametrize("name", sorted(NODES))
def test_a_direct_programs_messages_are_the_matrixs_blocks(name):
    """Each rank sends each peer its row's count and copies its own; every send meets a receive of its size at the
    peer (a block one element short, or a message given the send buffer's size, fails here)."""
    schedule = varied.filled(varied.program(name, {}, 4, NODES[name]), MATRIX, 8)
    assert (varied.volumes(schedule) == MATRIX * 8).all()
    sent: Counter[tuple[int, int, int]] = Counter()  # (sender, receiver, bytes)
    received: Counter[tuple[int, int, int]] = Counter()
    for rank, events in enumerate(schedule.events):
        for e in events:
            if isinstance(e, Isend):
                sent[rank, e.peer, e.nbytes] += 1
            elif isinstance(e, Irecv):
                received[e.peer, rank, e.nbytes] += 1
    assert sent == received


def test_native_is_smpis_own_alltoallv_of_the_matrix_and_a_forwarding_schedule_is_refused():
    schedule = varied.native(MATRIX, 4)
    assert (varied.volumes(schedule) == MATRIX * 4).all()
    lines = list(traces.trace_lines(schedule.events[1], 1, 4, 1e9))
    assert lines[1:3] == [f"1 compute {7 * 4 * platforms.TIME_SCALE}", "1 alltoallv 52 8 28 0 16 68 0 28 4 36"]
    with pytest.raises(NotExact, match="forwards blocks through a temporary buffer"):
        varied.program("padded_bruck", {}, 4, NODES["linear"])
    with pytest.raises(BadOption, match="an alltoallv goes by its selector"):
        simulated_variants("native:algorithm=pair", {}, 0, "alltoallv")
    assert [v.label for v in simulated_variants("all", {}, 0, "alltoallv") if v.name == "native"] == \
        ["native:selector=mpich", "native:selector=ompi"]


@needs_simgrid
@pytest.mark.parametrize("workload", ["moe:experts=4,topk=2,skew=1", "zipf:s=1.2"])
def test_uneven_workloads_simulate(tmp_path, capsys, workload):
    """A direct schedule of ours and SMPI's MPI_Alltoallv on a skewed matrix: simulated, their imbalance kept; a
    schedule that forwards blocks is refused on its row, naming why."""
    code, _, err = bench_here(capsys, "simulate", "--collective", "alltoallv", "--workload", workload, "--nprocs", "4",
                              "--sizes", "4K", "--algorithms", "linear,padded_bruck,native:selector=mpich",
                              "--copy-bandwidth", "1e10", "--output", str(tmp_path / "sim"))
    assert code == 0, err
    rows = {r.algorithm: r for r in read_rows(tmp_path / "sim")}
    assert rows["linear"].valid and rows["native"].valid and rows["linear"].collective == "alltoallv"
    assert rows["linear"].imbalance > 1.5 and rows["linear"].t_p50_us > 0
    assert not rows["padded_bruck"].valid and "forwards blocks" in rows["padded_bruck"].note


def sent_in_traces(kept: Path, nprocs: int, copy_bandwidth: float) -> np.ndarray:
    """bytes[i, j] rank i's kept trace sends rank j (its copies on the diagonal; SMPI's alltoallv line: its sends)."""
    moved = np.zeros((nprocs, nprocs), np.int64)
    for rank in range(nprocs):
        for line in (kept / "traces" / f"rank{rank}.txt").read_text().splitlines():
            words = line.split()
            if words[1] in ("isend", "send"):
                moved[rank, int(words[2])] += int(words[4])
            elif words[1] == "compute":
                moved[rank, rank] += round(float(words[2]) * copy_bandwidth / 1e9 / platforms.TIME_SCALE)
            elif words[1] == "alltoallv":
                moved[rank] += np.where(np.arange(nprocs) == rank, 0, [int(w) for w in words[3:3 + nprocs]])
    return moved


@pytest.mark.launches
@needs_simgrid
def test_the_projects_sample_sort_recorded_at_4_ranks_simulates_with_its_own_matrix(tmp_path, capsys):
    """The sample sort's MPI_Alltoallv recorded under liba2a (A2A_RECORD) and simulated with --collective alltoallv:
    what each replay's traces move, rank to rank, is the recorded matrix at the recorded width."""
    record = tmp_path / "record"
    done = subprocess.run(launch_command(4, "env", f"LD_PRELOAD={preload_library()}", f"A2A_RECORD={record}",
                                         str(transpose_sort()), "--n", "48", "--keys", "300", "--skew", "2",
                                         "--iterations", "2", "--seed", "7"),
                          env=clean_launcher_env(None), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.count("check ok") == 2, done.stdout + done.stderr
    calls = read_record(record).replayed("alltoallv")
    assert calls and all(c.nprocs == 4 for c in calls)
    kept = tmp_path / "kept"
    code, _, err = bench_here(capsys, "simulate", "--workload", f"recorded:{record}", "--collective", "alltoallv",
                              "--algorithms", "linear,pairwise,native:selector=mpich", "--copy-bandwidth", "1e9",
                              "--keep-traces", str(kept), "--output", str(tmp_path / "sim"))
    assert code == 0, err
    rows = read_rows(tmp_path / "sim")
    assert len(rows) == 3 * len(calls) and all(r.valid and r.recorded_calls for r in rows)
    for row in rows:
        call = calls[int(row.workload.rsplit("=", 1)[1])]
        point = next(kept.glob(f"4-{row.algorithm}*-{row.bytes_per_peer}"))
        assert (sent_in_traces(point, 4, 1e9) == np.array(call.matrix) * call.type_bytes).all(), point.name
