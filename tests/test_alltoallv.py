"""alltoallv: every algorithm gives what MPI_Alltoallv gives for every workload kind, and bad counts fail everywhere."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from decide_fixtures import minimal_table
from support import runs_alike, self_comm, shared_path, subcommunicators

import a2a
from a2a.algos.buffers import overlap, packed
from a2a.algos.builtin.bruck import bruck_rounds
from a2a.algos.registry import candidates, register
from a2a.errors import BadConfig, PluginError
from a2a.simulate.capture import capture
from a2a.sweep.workload import imbalance, parse_workload, read_matrix

# every alltoallv algorithm that may be chosen, at its defaults (a new one is checked with no line here), and the
# options that change a schedule
VARIANTS: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in candidates("alltoallv")] + [
    ("throttled", {"window": 2}), ("node_aware", {"ppn": 3}), ("hierarchical", {"ppn": 3, "placement": "cyclic"}),
    ("padded_bruck", {"radix": 3}), ("tuna", {"radix": 3}),
]
# (workload, dtype, mean bytes per peer, blocks out of order with holes between them)
WORKLOADS = [
    ("uniform", np.float32, 64, False), ("random:spread=1", np.complex128, 3000, True),
    ("zipf:s=1.5", np.int16, 200, False), ("sparse:density=0.3", np.float64, 3000, True),
    ("moe:experts=5,topk=2,skew=1", np.float32, 1000, False),
    ("moe:topk=1,capacity=0.8,direction=combine", np.float32, 64, True), ("matrix", np.float64, 800, False),
]


def workload_counts(spec: str, p: int, mean_bytes: int, itemsize: int, tmp_path) -> np.ndarray:
    """The workload's matrix, with rank 0 sending nothing to the last rank (a count-0 peer always)."""
    if spec == "matrix":  # every rank writes the same file into its own directory
        path = tmp_path / f"m{p}.csv"
        path.write_text("\n".join(",".join(str((i * 3 + j) % 4) for j in range(p)) for i in range(p)))
        spec = f"matrix:{path}"
    counts = parse_workload(spec).counts(p, mean_bytes, itemsize, seed=7)
    counts[0, p - 1] = 0
    return counts


def buffers(counts: np.ndarray, r: int, dtype: type, holes: bool) -> tuple:
    """(send, sendcounts, sdispls, recvcounts, rdispls, empty recvbuf) for rank r.

    With holes, blocks lie in reverse peer order with a gap before each, as MPI allows.
    """
    p = len(counts)
    sendcounts, recvcounts = counts[r], counts[:, r]
    gaps = np.arange(p)[::-1] if holes else np.zeros(p, int)
    sdispls, rdispls = (packed(c[::-1])[::-1] + k * gaps if holes else packed(c)
                        for c, k in ((sendcounts, 1), (recvcounts, 2)))
    send: np.ndarray = (np.arange(sendcounts.sum() + gaps.sum()) + 10000 * r).astype(dtype)
    return send, sendcounts, sdispls, recvcounts, rdispls, np.full(recvcounts.sum() + 2 * gaps.sum(), -1, dtype)


@pytest.mark.mpi
@pytest.mark.parametrize("spec,dtype,mean_bytes,holes", WORKLOADS, ids=[w[0] for w in WORKLOADS])
def test_matches_mpi_alltoallv(comm, spec, dtype, mean_bytes, holes, tmp_path):
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        counts = workload_counts(spec, p, mean_bytes, np.dtype(dtype).itemsize, tmp_path)
        send, sendcounts, sdispls, recvcounts, rdispls, want = buffers(counts, sub.rank, dtype, holes)
        sub.Alltoallv([send, (sendcounts, sdispls)], [want, (recvcounts, rdispls)])
        for name, options in VARIANTS:
            got = np.full_like(want, -1)
            a2a.alltoallv(sub, send, sendcounts, got, recvcounts, name, sdispls, rdispls, **options)
            if not np.array_equal(got, want):
                wrong.append((p, name, options))
    assert not wrong, f"{spec}: differs from MPI_Alltoallv at (p, algorithm, options) {wrong}"


@pytest.mark.mpi
def test_v_plan_reused_many_times(comm):
    counts = parse_workload("zipf").counts(comm.size, 100, 8, seed=1)
    out, into = counts[comm.rank], counts[:, comm.rank]
    send = np.arange(out.sum(), dtype=np.float64) + comm.rank
    want, got = np.empty(into.sum()), np.empty(into.sum())
    comm.Alltoallv([send, out], [want, into])
    for name in sorted(set(a2a.algorithms("alltoallv")) - {"auto"}):  # auto needs a table (its own tests)
        assert runs_alike(a2a.get(name).plan_v(comm, send, out, got, into), got, want), name


def bad_case(case: str, p: int, r: int):
    """(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls) that only the last rank gets wrong."""
    counts = np.full(p, 2)
    send, recv = np.zeros(2 * p, np.float32), np.zeros(2 * p + 2, np.float32)
    sdispls = rdispls = None
    if r == p - 1:
        if case == "negative":
            counts = counts.copy()
            counts[0] = -1
        elif case == "too small":
            send = np.zeros(2 * p - 1, np.float32)
        elif case == "overlap":
            rdispls = np.arange(p) * 2 - (np.arange(p) > 0)
        elif case == "length":
            counts = np.full(p + 1, 2)
    return send, counts, recv, counts, sdispls, rdispls


@pytest.mark.mpi
@pytest.mark.parametrize("case,message", [
    ("negative", r"sendcounts\[0\] = -1; counts and displacements must be >= 0"),
    ("too small", "sendbuf has .* elements, but block .* ends at element"),
    ("overlap", "receive blocks 0 and 1 overlap"),
    ("length", "sendcounts must be .* integers"),
])
def test_bad_counts_on_one_rank_fail_on_every_rank(comm, case, message):
    if case == "overlap" and comm.size == 1:
        pytest.skip("needs two blocks")
    args = bad_case(case, comm.size, comm.rank)
    with pytest.raises(a2a.BadInput, match=f"rank {comm.size - 1}: {message}"):
        a2a.alltoallv(comm, *args[:4], "pairwise", *args[4:])


@pytest.mark.mpi
def test_counts_that_peers_do_not_expect_fail_on_every_rank(comm):
    p, r = comm.size, comm.rank
    sendcounts, recvcounts = np.full(p, 2), np.full(p, 2)
    if r == 0:
        sendcounts[p - 1] = 3  # rank p-1 expects 2 from rank 0
    send, recv = np.zeros(3 * p), np.zeros(3 * p)
    with pytest.raises(a2a.BadInput, match=f"rank {p - 1}: rank 0 sends 3 but recvcounts\\[0\\] = 2"):
        a2a.alltoallv(comm, send, sendcounts, recv, recvcounts, "tuna")


@pytest.mark.parametrize("name,options", VARIANTS, ids=[f"{n}{o or ''}" for n, o in VARIANTS])
def test_every_workload_above_four_stand_in_ranks(name, options, tmp_path):
    """test_matches_mpi_alltoallv's workloads at 5 to 9 ranks, in process: the capture's stand-in MPI runs the
    algorithm's own code, moves the data and checks every rank's result (`mpirun -n 4` runs them on real MPI at 1
    to 4, displacements with holes included)."""
    for p in range(5, 10):
        for spec, dtype, mean_bytes, _ in WORKLOADS:
            counts = workload_counts(spec, p, mean_bytes, np.dtype(dtype).itemsize, tmp_path)
            capture(name, options, p, 0, np.dtype(dtype).name, matrix=counts)  # raises on a wrong result


def test_collectives_per_algorithm():
    assert a2a.get("native").collectives == ("alltoall", "alltoallv")
    assert a2a.get("tuna").collectives == ("alltoallv",)
    assert a2a.get("bruck").collectives == ("alltoall",)
    assert {"padded_bruck", "two_phase_bruck", "tuna", "linear"} <= set(a2a.algorithms("alltoallv"))
    assert "tuna" not in a2a.algorithms("alltoall") and "tuna" in a2a.algorithms()


def test_wrong_collective_names_the_algorithms_that_serve_it():
    with pytest.raises(a2a.BadOption, match="tuna serves alltoallv, not alltoall; algorithms serving alltoall: .*"):
        a2a.alltoall(self_comm(), np.zeros(2), np.zeros(2), "tuna")
    with pytest.raises(a2a.BadOption, match="bruck serves alltoall, not alltoallv; .*two_phase_bruck"):
        a2a.alltoallv(self_comm(), np.zeros(2), [2], np.zeros(2), [2], "bruck")


def test_other_options_for_the_second_collective_are_refused():
    def other(comm, send, recv, *, radix: int = 3):
        return lambda: None

    with pytest.raises(PluginError, match="bruck: its alltoallv options \\(radix=3, executor=c\\) differ from its "
                                          "alltoall options \\(radix=2, executor=c\\)"):
        register("bruck", collective="alltoallv")(other)
    assert a2a.get("bruck").collectives == ("alltoall",)


def test_v_options_are_checked():
    with pytest.raises(a2a.BadOption, match="radix=1; accepted: an integer >= 2"):
        a2a.alltoallv(self_comm(), np.zeros(2), [2], np.zeros(2), [2], "tuna", radix=1)


def test_bruck_rounds_move_every_block_home():
    for p in range(1, 12):
        for radix in (2, 3, 5):
            travelled = np.zeros(p, int)
            for distance, digit, moved in bruck_rounds(p, radix):
                travelled[moved] += digit * distance
            assert travelled.tolist() == list(range(p)), (p, radix)


def test_overlap_and_packed():
    assert overlap([2, 2, 0], [0, 2, 1]) is None  # an empty block inside another is fine
    assert overlap([2, 2], [0, 1]) == (0, 1)
    assert packed(np.array([3, 0, 2])).tolist() == [0, 3, 3]


def test_workloads_against_hand_computed_matrices(tmp_path):
    assert parse_workload("uniform").counts(2, 8, 4).tolist() == [[2, 2], [2, 2]]
    assert parse_workload("sparse:density=1").counts(3, 4, 1).tolist() == [[4] * 3] * 3
    assert parse_workload("zipf:s=0").counts(2, 6, 2).tolist() == [[3, 3], [3, 3]]
    # s=1, p=2: weights 1 and 1/2 in some order, the same for both senders; mean 3 elements
    zipf = parse_workload("zipf:s=1").counts(2, 3, 1)
    assert sorted(zipf[0].tolist()) == [2, 4] and zipf[0].tolist() == zipf[1].tolist()
    # every token goes to both experts (one per rank): 4 tokens per pair, 1 element per token
    assert parse_workload("moe:topk=2,tokens=4").counts(2, 4, 1).tolist() == [[4, 4], [4, 4]]
    # one expert on rank 0, capacity 0.5 of 10 tokens: 5 kept per sender, 4 elements per token
    moe = "moe:experts=1,topk=1,tokens=10,capacity=0.5"
    assert parse_workload(moe).counts(2, 10, 1).tolist() == [[20, 0], [20, 0]]
    assert parse_workload(moe + ",direction=combine").counts(2, 10, 1).tolist() == [[20, 20], [0, 0]]
    path = tmp_path / "fractions.csv"
    path.write_text("0,0.1\n0.2,0.3\n")
    assert parse_workload(f"matrix:{path}").counts(2, 6, 1).tolist() == [[0, 4], [8, 12]]
    assert imbalance(np.array([[0, 4], [8, 12]])) == 2.0


def test_workloads_are_seeded():
    spec = parse_workload("random:spread=0.9")
    assert np.array_equal(spec.counts(6, 1000, 4, seed=3), spec.counts(6, 1000, 4, seed=3))
    assert not np.array_equal(spec.counts(6, 1000, 4, seed=3), spec.counts(6, 1000, 4, seed=4))
    counts = spec.counts(6, 1000, 4)
    assert counts.min() >= 0.1 * 250 - 1 and counts.max() <= 1.9 * 250 + 1 and abs(counts.mean() - 250) < 25


def test_workload_text_lists_every_parameter():
    assert parse_workload("moe:experts=16,topk=2").text == (
        "moe:experts=16,topk=2,capacity=0.0,skew=0.0,tokens=256,direction=dispatch")
    assert parse_workload("zipf").text == "zipf:s=1.1"


@pytest.mark.parametrize("spec,message", [
    ("zipff", "unknown kind 'zipff'; accepted: uniform, random:spread=S"),
    ("zipf:q=2", "'q=2'; zipf takes s=1.1"),
    ("sparse:density=0", r"density=0.0; accepted: in \(0, 1\]"),
    ("moe:topk=two", "topk='two'; accepted: a whole number, e.g. 2"),
    ("moe:experts=2,topk=3", "topk=3 is more than experts=2"),
    ("moe:direction=back", "accepted: dispatch or combine"),
    ("matrix:", "give the file"),
])
def test_bad_workload_specs(spec, message):
    with pytest.raises(BadConfig, match=message):
        parse_workload(spec)


def test_bad_matrix_files(tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("1,2\n3\n")
    with pytest.raises(BadConfig, match="not square"):
        parse_workload(f"matrix:{ragged}")
    square = tmp_path / "square.csv"
    square.write_text("1,2\n3,4\n")
    with pytest.raises(BadConfig, match="is 2 x 2; this exchange has 3 ranks"):
        read_matrix(str(square), 3)


def v_table(nprocs: int, workload: str, ranges: list[tuple[int, str, str]]) -> dict:
    """A hand-made alltoallv table for one workload, beside an alltoall table that names bruck."""
    document = minimal_table(nprocs, ranges)
    document["context_columns"] = ["nprocs", "collective", "workload"]
    document["tables"][0].update(collective="alltoallv", workload=workload)
    document["tables"].append(minimal_table(nprocs, [(0, "bruck", "")])["tables"][0])
    return document


def run_auto_v(comm, table: str, mean_bytes: int, **options) -> bool:
    counts = parse_workload("zipf").counts(comm.size, mean_bytes, 4, seed=2)
    send, sendcounts, _, recvcounts, _, want = buffers(counts, comm.rank, np.float32, False)
    recv = np.zeros_like(want)
    comm.Alltoallv([send, sendcounts], [want, recvcounts])
    a2a.alltoallv(comm, send, sendcounts, recv, recvcounts, "auto", table=table, **options)
    return all(comm.allgather(np.array_equal(recv, want)))


@pytest.mark.mpi
def test_auto_follows_the_alltoallv_table_of_the_workload(comm, tmp_path):
    # the middle range names options tuna refuses: planning there fails, proving the lookup
    table = shared_path(comm, tmp_path, "v.json", v_table(comm.size, "zipf:s=1.1", [
        (0, "tuna", "radix=3"), (100, "tuna", "radix=1"), (1000, "padded_bruck", "")]))
    assert run_auto_v(comm, table, 16) and run_auto_v(comm, table, 2000, workload="zipf:s=1.1")
    with pytest.raises(a2a.BadOption, match="tuna with options the algorithm refuses.*radix"):
        run_auto_v(comm, table, 200)
    assert run_auto_v(comm, table, 200, workload="sparse:density=0.5")  # no table for it: native
    with pytest.raises(a2a.BadOption, match="workload=zipf is for alltoallv"):
        a2a.alltoall(comm, np.zeros(comm.size), np.zeros(comm.size), "auto", table=table, workload="zipf")


def test_decide_splits_tables_by_collective_and_workload(tmp_path):
    from decide_fixtures import as_alltoallv, record

    from a2a.analysis import decide
    from a2a.record.decision import lookup

    uniform = record(tmp_path / "a", {(4, 64): {("native", ""): 50, ("bruck", "radix=2"): 20}})
    skewed = as_alltoallv(record(tmp_path / "v", {(4, 64): {("native", ""): 50, ("tuna", "radix=2"): 10,
                                                             ("padded_bruck", "radix=2"): 90}}), "zipf:s=1.1")
    document = decide.decide([uniform, skewed], metric="median")
    chosen = {(t.column("collective"), t.column("workload")): t.ranges[0].algorithm for t in document.tables}
    assert chosen == {("alltoall", "uniform"): "bruck", ("alltoallv", "zipf:s=1.1"): "tuna"}
    for found, algorithm in ((lookup(document, 4, 64, collective="alltoallv", workload="zipf:s=1.1"), "tuna"),
                             (lookup(document, 4, 64, collective="alltoall"), "bruck")):
        assert found and found[1].algorithm == algorithm


def test_schedule_costs_show_padding_waste_and_two_phase_rounds():
    from a2a.analysis.model import matrix_terms as terms

    uniform = parse_workload("uniform").counts(8, 1024, 1)
    padded, two_phase = terms("padded_bruck", uniform, 1), terms("two_phase_bruck", uniform, 1)
    assert padded == {"rounds": 3.0, "bytes": 12 * 1024.0}  # lg 8 rounds of 4 blocks
    assert two_phase == {"rounds": 6.0, "bytes": 12 * 1024.0}  # the same bytes, twice the messages
    skewed = np.zeros((4, 4), int)
    skewed[0, 1] = 400  # one big block: padding sends every block at 400
    assert terms("padded_bruck", skewed, 1)["bytes"] == 4 * 400
    assert terms("two_phase_bruck", skewed, 1)["bytes"] == 400  # it travels once (index 1: one hop)
    assert terms("linear", skewed, 1) == {"rounds": 1.0, "bytes": 400.0}
    assert terms("tuna", uniform, 1, radix="7")["rounds"] == 7  # radix p-1: every round direct
