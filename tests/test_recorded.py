"""A program's recorded traffic (A2A_RECORD=DIR) read, checked and replayed: `bench run --workload recorded:DIR`
replays each recorded call as one point, an alltoallv with exactly the recorded count matrix."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from decide_fixtures import row_for, samples_around
from support import assert_refused_here, bench, bench_here

import a2a
from a2a.analysis.decide import decide, decided
from a2a.deploy.recorded import read_record
from a2a.errors import BadConfig
from a2a.measure.traffic import Traffic, traffic_of
from a2a.record.results import Recorder, read_rows, write_meta
from a2a.simulate.machine import simulated_variants
from a2a.sweep.config import SweepConfig, from_options
from a2a.sweep.grid import points

UNEVEN = [[0, 5, 3, 2], [1, 0, 4, 4], [2, 2, 2, 2], [9, 0, 0, 1]]


def alltoall(p: int, count: int, type_bytes: int = 4, sendtype: str = "MPI_INT", calls: int = 100, **more) -> dict:
    return {"comm": 0, "nprocs": p, "collective": "alltoall", "sendtype": sendtype, "recvtype": sendtype,
            "type_bytes": type_bytes, "count": count, "block_bytes": count * type_bytes, "calls": calls,
            "seconds": 0.0123, **more}


def alltoallv(matrix: list[list[int]] | None, calls: int = 50, sendtype: str = "MPI_DOUBLE", type_bytes: int = 8,
              **more) -> dict:
    return {"comm": 1, "nprocs": len(matrix) if matrix else 4, "collective": "alltoallv", "sendtype": sendtype,
            "recvtype": sendtype, "type_bytes": type_bytes, "matrix": matrix, "calls": calls, "seconds": 0.01, **more}


def write_record(directory: Path, lines: list[dict | str], job: str = "20261203-141500-1234", rank: int = 0) -> Path:
    """What the library writes at MPI_Finalize: rank `rank`'s file of `job` in `directory`, a line per entry."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"record.{job}.rank{rank}.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps({"job": job, "writer": rank, **line}))
                            + "\n" for line in lines))
    return path


def random_matrix(p: int, seed: int = 3) -> list[list[int]]:
    return np.random.default_rng(seed).integers(0, 40, (p, p)).tolist()


def test_a_record_is_read_in_order_of_ranks_and_lines(tmp_path: Path):
    """Files by rank, lines in order; a line with `why` (the calls beyond the signatures the library keeps, their
    sizes or matrices mixed) is counted, not replayed, and a launch names it."""
    write_record(tmp_path, [alltoallv(UNEVEN)], rank=2)
    beyond = "beyond the 64 distinct signatures kept"
    write_record(tmp_path, [alltoall(4, 256), alltoallv(None, 7, why=beyond), alltoall(4, 3, calls=9, why=beyond)])
    record = read_record(tmp_path)
    assert [(c.index, c.writer, c.collective) for c in record.calls] == [(0, 0, "alltoall"), (1, 0, "alltoallv"),
                                                                          (2, 0, "alltoall"), (3, 2, "alltoallv")]
    assert record.calls[0].bytes_per_peer == 1024 and record.calls[3].bytes_per_peer == round(37 / 16) * 8
    assert [c.index for c in record.replayed("alltoallv")] == [3] and [c.index for c in record.replayed("alltoall")] \
        == [0]
    assert record.calls[1].why == beyond
    assert record.left_out("alltoall") == ("2 alltoallv call signatures (57 calls, 0.02 s in the program); 1 alltoall "
                                           f"call signatures (9 calls, 0.0123 s in the program) not kept ({beyond})")


# what is wrong -> (the files' lines, what the one-line refusal says)
BROKEN: dict[str, tuple[list[dict | str], str]] = {
    "not JSON": (["{\"job\": "], "record.J.rank0.jsonl:1: not JSON"),
    "not an object": (["[1, 2]"], "a JSON list, not an object"),
    "another collective": ([{**alltoall(2, 1), "collective": "bcast"}], "collective 'bcast'; accepted: alltoall"),
    "a field missing": ([{k: v for k, v in alltoall(2, 1).items() if k != "calls"}], "calls is None; accepted: an int"),
    "a count as text": ([{**alltoall(2, 1), "count": "1"}], "count is '1'; accepted: an int"),
    "sizes that disagree": ([{**alltoall(2, 3), "block_bytes": 13}], "block_bytes 13 is not count x type_bytes"),
    "no calls": ([alltoall(2, 1, calls=0)], "calls 0 (accepted: 1 or more)"),
    "a matrix of the wrong shape": ([alltoallv([[1, 2], [3, 4]]), alltoallv([[1, 2], [3]])],
                                    "record.J.rank0.jsonl:2: matrix [[1, 2], [3]]; accepted: 2 rows of 2"),
    "a negative count": ([alltoallv([[1, -2], [3, 4]])], "2 rows of 2 whole numbers >= 0"),
}


@pytest.mark.parametrize("what", BROKEN)
def test_a_malformed_line_is_refused_naming_its_file_and_line(tmp_path: Path, what: str):
    lines, said = BROKEN[what]
    write_record(tmp_path, lines, job="J")
    with pytest.raises(BadConfig) as refused:
        read_record(tmp_path)
    assert said in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
    assert f"{tmp_path}/record.J.rank0.jsonl:" in str(refused.value)


def test_what_is_not_a_record_is_refused_in_one_line(tmp_path: Path):
    for directory, said in ((tmp_path / "missing", "no such directory"), (tmp_path, "no record.<job>.rank<R>.jsonl")):
        with pytest.raises(BadConfig, match=said):
            read_record(directory)
    write_record(tmp_path, [" "])
    with pytest.raises(BadConfig, match="hold no line"):
        read_record(tmp_path)
    (tmp_path / "record.A.rank1.jsonl").write_text(json.dumps({"job": "A", "writer": 0, **alltoall(2, 1)}))
    with pytest.raises(BadConfig, match="job 'A', writer 0 in the file of job 'A', rank 1"):
        read_record(tmp_path, "A")


def test_the_records_of_two_jobs_are_told_apart_by_a_selector(tmp_path: Path):
    write_record(tmp_path, [alltoall(2, 1)], job="A")
    write_record(tmp_path, [alltoall(2, 8), alltoall(2, 16)], job="B")
    with pytest.raises(BadConfig) as refused:
        from_options({"workload": f"recorded:{tmp_path}"}, world=2)
    assert f"the records of 2 jobs; name one: recorded:{tmp_path}:job=A, recorded:{tmp_path}:job=B" in \
        str(refused.value)
    config = from_options({"workload": f"recorded:{tmp_path}:job=B"}, world=2)
    assert config.sizes == [32, 64] and config.workload == f"recorded:{tmp_path}:job=B"
    assert [p.workload for p in points(config, 2)][:1] == [f"recorded:{tmp_path}:job=B:call=0"]


def test_the_sizes_axis_becomes_the_recorded_calls(tmp_path: Path):
    """Each alltoallv matrix is a point at its mean block, named by its call and weighed by how often it was made;
    the process count, collective and dtype are the record's; alltoall signatures replay at their block bytes."""
    write_record(tmp_path, [alltoall(4, 256, 8, "MPI_DOUBLE"), alltoall(4, 1), alltoallv(UNEVEN),
                            alltoallv(random_matrix(4), 5), alltoallv(None, 7, why="beyond the 64 kept")])
    config = from_options({"workload": f"recorded:{tmp_path}", "collective": "alltoallv",
                           "algorithms": "pairwise,native"}, world=4)
    assert (config.collective, config.dtype, config.nprocs) == ("alltoallv", "float64", [4])
    got = {(p.workload, p.bytes_per_peer, p.row(1, 4).recorded_calls) for p in points(config, 4)}
    mean = round(np.mean(random_matrix(4))) * 8
    assert got == {(f"recorded:{tmp_path}:call=2", 16, 50), (f"recorded:{tmp_path}:call=3", mean, 5)}
    resumed = SweepConfig.from_dict(json.loads(json.dumps(config.as_dict())))  # as --resume reads meta.json
    assert [p.key for p in points(resumed, 4)] == [p.key for p in points(config, 4)]
    config = from_options({"workload": f"recorded:{tmp_path}", "collective": "alltoall"}, world=8)
    assert (config.sizes, config.dtype, config.nprocs) == ([4, 2048], "uint32", [4])  # 8 B and 4 B elements


def test_the_replayed_counts_are_the_recorded_ones(tmp_path: Path):
    """What the driver sends for each point (traffic_of, as it calls it) is the recorded matrix, element for
    element; at another width, the same bytes; at a width that does not divide them, refused."""
    matrices = {2: UNEVEN, 3: random_matrix(4)}
    write_record(tmp_path, [alltoall(4, 2), alltoall(4, 2, calls=5), *(alltoallv(m) for m in matrices.values())])
    config = from_options({"workload": f"recorded:{tmp_path}", "collective": "alltoallv"}, world=4)
    for point in points(config, 4):
        traffic = traffic_of(point.collective, point.workload, 4, point.bytes_per_peer, point.dtype, config.seed)
        call = int(point.workload.rsplit("=", 1)[1])
        assert isinstance(traffic, Traffic) and traffic.counts.dtype == np.int64
        assert np.array_equal(traffic.counts, matrices[call])
        in_bytes = traffic_of("alltoallv", point.workload, 4, 0, "uint8", 0)
        assert isinstance(in_bytes, Traffic) and np.array_equal(in_bytes.counts, np.array(matrices[call]) * 8)
    with pytest.raises(BadConfig, match="8 B elements .MPI_DOUBLE., which do not fill whole 32 B elements"):
        traffic_of("alltoallv", f"recorded:{tmp_path}:call=2", 4, 0, "complex256", 0)
    with pytest.raises(BadConfig, match="was made on 4 ranks; this exchange has 3"):
        traffic_of("alltoallv", f"recorded:{tmp_path}:call=2", 3, 0, "float64", 0)


def test_options_that_contradict_the_record_are_refused(tmp_path: Path, capsys):
    write_record(tmp_path, [alltoall(4, 2), alltoallv(UNEVEN)])
    spec = f"recorded:{tmp_path}"
    race = f"mpirun -n 4 python -m bench run --workload {spec} --collective"
    refusals = [({}, 4, f"{spec} holds 1 alltoall and 1 alltoallv call signatures, and a run races one collective: "
                        f"race each, then deploy both:\n  {race} alltoall --output race-alltoall\n  {race} alltoallv "
                        "--output race-alltoallv\n  python -m bench deploy race-alltoall race-alltoallv --nprocs 4 "
                        "-o deploy.a2a"),
                ({"collective": "alltoall", "nprocs": "2"}, 4, f"--nprocs 2: {spec}'s alltoall calls were made on 4 "
                                                               "ranks"),
                ({"collective": "alltoallv"}, 2, f"{spec}'s alltoallv calls were made on 4 ranks; this job has 2"),
                ({"collective": "alltoall", "sizes": "8"}, 4, "--sizes goes with a synthetic workload")]
    for values, world, said in refusals:
        with pytest.raises(BadConfig) as refused:
            from_options({"workload": spec, **values}, world=world)
        assert str(refused.value).startswith(said), str(refused.value)
    assert_refused_here(capsys, ["--workload", spec, "--collective", "alltoallv"], "were made on 4 ranks; this job "
                        "has 1", tmp_path / "run")


def test_a_one_rank_record_replays_through_bench_run(tmp_path: Path, capsys):
    """In this process: the rows name each call and its weight, and pass their check."""
    write_record(tmp_path / "rec", [alltoallv([[6]], 3, "MPI_INT", 4), alltoallv([[0]], 2, "MPI_INT", 4)])
    code, out, err = bench_here(capsys, "run", "--workload", f"recorded:{tmp_path / 'rec'}", "--algorithms",
                                "pairwise", "--iterations", "2", "--output", str(tmp_path / "run"), "--quiet")
    assert code == 0, err
    rows = sorted(read_rows(tmp_path / "run"), key=lambda r: r.workload)
    assert [(r.workload.rsplit(":", 1)[1], r.recorded_calls, r.bytes_per_peer, r.dtype, r.valid) for r in rows] == \
        [("call=0", 3, 24, "int32", True), ("call=1", 2, 0, "int32", True)]


@pytest.mark.launches
def test_a_recorded_alltoallv_replays_at_three_ranks(tmp_path: Path):
    """Launched: each recorded matrix is measured and checked by every algorithm, and by the control beside native;
    the rows carry its imbalance."""
    matrices = [random_matrix(3, 1), [[0, 900, 1], [2, 0, 0], [40, 0, 7]]]
    write_record(tmp_path / "rec", [alltoallv(m, 10 * i + 1, "MPI_INT", 4) for i, m in enumerate(matrices)])
    out = tmp_path / "run"
    done = bench(3, "run", "--workload", f"recorded:{tmp_path / 'rec'}", "--algorithms", "pairwise,linear,native",
                 "--iterations", "2", "--output", str(out), "--allow-oversubscribed")
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 2 * (3 + 1), [(r.algorithm, r.workload) for r in rows]  # 2 calls x (3 algorithms + control)
    assert all(r.valid and r.collective == "alltoallv" for r in rows), [r.note for r in rows]
    for row in rows:
        call = int(row.workload.rsplit("=", 1)[1])
        matrix = np.array(matrices[call])
        assert row.recorded_calls == 10 * call + 1
        assert row.imbalance == pytest.approx(matrix.max() / matrix.mean(), rel=1e-5)
    assert {r.algorithm for r in rows} == {"pairwise", "linear", "native", "control"}


def test_the_simulator_replays_the_recorded_calls_of_the_collective_chosen(tmp_path: Path):
    """bench simulate's config, as bench run's: the record's calls of one collective at their sizes and process count
    (the others named as left out); a record of both needs --collective, one of alltoallv calls alone replays those."""
    write_record(tmp_path / "both", [alltoall(4, 2), alltoall(4, 128, 8, "MPI_DOUBLE", 3), alltoallv(UNEVEN)])
    spec = f"recorded:{tmp_path / 'both'}"
    config = from_options({"workload": spec, "algorithms": "pairwise", "collective": "alltoall"}, "simgrid",
                          choose=simulated_variants)
    assert (config.collective, config.nprocs, config.sizes, config.dtype) == ("alltoall", [4], [8, 1024], "uint32")
    assert [p.workload.rsplit(":", 1)[1] for p in points(config, 4)] == ["call=0", "call=1"]
    assert read_record(tmp_path / "both").left_out("alltoall") == \
        "1 alltoallv call signatures (50 calls, 0.01 s in the program)"
    with pytest.raises(BadConfig, match="a simulation replays one collective: simulate each:\n  .* simulate --workload "
                       f"{re.escape(spec)} --collective alltoall --output simulated-alltoall\n"):
        from_options({"workload": spec}, "simgrid", choose=simulated_variants)
    write_record(tmp_path / "v", [alltoallv(UNEVEN)])
    config = from_options({"workload": f"recorded:{tmp_path / 'v'}"}, "simgrid", choose=simulated_variants)
    assert (config.collective, config.nprocs, config.dtype) == ("alltoallv", [4], "float64")


@pytest.mark.simgrid
def test_bench_simulate_replays_a_record(tmp_path: Path, capsys):
    write_record(tmp_path / "rec", [alltoall(4, 2, calls=7), alltoallv(UNEVEN)])
    code, _, err = bench_here(capsys, "simulate", "--workload", f"recorded:{tmp_path / 'rec'}", "--collective",
                              "alltoall", "--algorithms", "pairwise", "--copy-bandwidth", "10e9", "--output",
                              str(tmp_path / "sim"))
    assert code == 0, err
    assert "replays its alltoall calls, not 1 alltoallv call signatures (50 calls" in err
    rows = read_rows(tmp_path / "sim")
    assert [(r.nprocs, r.bytes_per_peer, r.workload, r.recorded_calls, r.valid) for r in rows] == \
        [(4, 8, f"recorded:{tmp_path / 'rec'}:call=0", 7, True)]


@pytest.mark.mpi
def test_a_recorded_matrix_is_exchanged_exactly(comm, tmp_path: Path):
    """Collective, at this job's size: the driver's traffic for the point, run by pairwise's plan, gives each rank
    exactly the recorded column of the matrix (its count from each peer, with the check pattern)."""
    p, matrix = comm.size, random_matrix(comm.size, 5)
    directory = Path(comm.bcast(str(tmp_path) if comm.rank == 0 else None))
    if comm.rank == 0:
        write_record(directory, [alltoallv(matrix, 2, "MPI_INT", 4)])
    comm.Barrier()
    config = from_options({"workload": f"recorded:{directory}", "algorithms": "pairwise"}, world=p)
    (point,) = points(config, p)
    traffic = traffic_of(point.collective, point.workload, p, point.bytes_per_peer, point.dtype, config.seed)
    send, recv = traffic.buffers(comm.rank)
    with traffic.plan(a2a.get("pairwise"), comm, send, recv, {}) as plan:
        plan()
    assert len(recv) == np.array(matrix)[:, comm.rank].sum() and np.array_equal(recv, traffic.expected(comm.rank))


def test_decide_ranks_algorithms_by_the_programs_total_time(tmp_path: Path):
    """The program's calls make one table per process count (its sizes; what a library can serve); then each
    algorithm's time over the program (its mean x times made, summed): pairwise wins the rare large call, native the
    frequent small one, so the choices beat both, and native, slower on the rare call, totals less than pairwise."""
    recorder = Recorder(tmp_path)
    for call, made, times in ((0, 10, {"native": 100, "pairwise": 50}), (1, 1000, {"native": 10, "pairwise": 20})):
        for j, (algorithm, us) in enumerate(times.items()):
            seconds = samples_around(us, seed=10 * call + j, spread=0.01)
            row = row_for(4, 64 * (1 + call), algorithm, "", "float64", 8, seconds)
            recorder.add(replace(row, collective="alltoallv", workload=f"recorded:R:call={call}",
                                 recorded_calls=made), seconds, rounds=[i // 2 for i in range(len(seconds))])
    recorder.close()
    write_meta(tmp_path, {"status": "complete", "mpi_library": "MPICH Version: test"})
    (table,) = decide([tmp_path]).tables
    cells = [(c.bytes_per_peer, c.algorithm, c.recorded_calls) for c in table.cells]
    assert table.column("workload") == "recorded:R" and cells == [(64, "pairwise", 10), (128, "native", 1000)]
    said = decided([tmp_path]).splitlines()[-1]
    found = re.fullmatch(r"recorded:R \(2 sizes, calls made 1010 times\), mean x times made: the choices "
                         r"([\d.]+) ms; native ([\d.]+) ms, pairwise ([\d.]+) ms", said)
    assert found, said
    assert [float(v) for v in found.groups()] == pytest.approx([10.5, 11.0, 20.5], rel=0.02)
