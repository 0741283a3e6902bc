"""Every algorithm gives what MPI_Alltoall gives, at every process count, and refuses bad input."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from support import assert_collective_tests_passed, bench, listed, runs_alike, self_comm, subcommunicators

import a2a
from a2a.algos.buffers import alltoall_call
from a2a.algos.builtin import bine, bruck_zero_copy
from a2a.algos.builtin.dimensional import balanced, factors
from a2a.algos.builtin.hierarchical import leader_permutations
from a2a.algos.builtin.locality_aware import Aggregation
from a2a.algos.builtin.pairwise_inplace import one_factor
from a2a.algos.builtin.parallel_split import split_factor
from a2a.algos.nodes import split_nodes, virtual_nodes
from a2a.algos.registry import candidates
from a2a.algos.schedule import pairs, slots
from a2a.record.results import read_rows
from a2a.simulate.capture import capture

# every algorithm that may be chosen, at its defaults (a new built-in is checked with no line here), and
# the options that change a schedule
VARIANTS: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in candidates("alltoall")]
VARIANTS += [
    ("throttled", {"window": 2}), ("bruck", {"radix": 3}), ("bruck", {"radix": 4}),
    ("node_aware", {"ppn": 3}), ("node_aware", {"ppn": 2, "placement": "cyclic"}),
    ("hierarchical", {"ppn": 3}), ("hierarchical", {"ppn": 3, "placement": "cyclic"}),
    ("linear_sync", {"window": 1}), ("linear_sync", {"window": 3}),
    ("dimensional", {"dims": "2x2"}), ("dimensional", {"dims": "4x2"}), ("dimensional", {"dims": "2x2x2"}),
    ("bruck_zero_copy", {"radix": 3}), ("bruck_zero_copy", {"radix": 4}),
    ("multileader", {"leaders": 1, "ppn": 3}), ("multileader", {"leaders": 2, "ppn": 3, "placement": "cyclic"}),
    ("locality_aware", {"groups": 2}), ("locality_aware", {"ppn": 3}),
    ("locality_aware", {"groups": 2, "ppn": 3, "placement": "cyclic"}),
    *[("onesided", {"sync": sync, "op": op}) for sync in ("fence", "lock", "pscw") for op in ("put", "get")],
    ("parallel_split", {"factor": 4}),
]


def fits(options: dict, p: int) -> bool:
    """Explicit dims run where their product is p (elsewhere they are refused, tested below)."""
    dims = options.get("dims", "auto")
    return dims == "auto" or math.prod(map(int, dims.split("x"))) == p


DTYPES = [np.float32, np.int16, np.complex128]


def counts(dtype: type) -> list[int]:
    """0, 1, 7 elements, and one count above 64 KiB per peer."""
    return [0, 1, 7, 65536 // np.dtype(dtype).itemsize + 3]


def cases(p: int) -> list[tuple[type, int]]:
    """The (dtype, count) pairs tested at p: every pair at 4 ranks (and at 1, in plain pytest); elsewhere, where only
    the schedule's shape is new, an odd count of int16, and below 4 a float32 block past 64 KiB (the library's
    large-message protocol) and an empty exchange too."""
    if p in (1, 4):
        return [(dtype, count) for dtype in DTYPES for count in counts(dtype)]
    return [(np.int16, 7), *([(np.float32, counts(np.float32)[-1]), (np.complex128, 0)] if p < 4 else [])]


def random_buffer(dtype: type, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(-1000, 1000, size=n)
    return (values + 1j * values if np.dtype(dtype).kind == "c" else values).astype(dtype)


@pytest.mark.mpi
@pytest.mark.parametrize("name,options", VARIANTS, ids=[f"{n}{o or ''}" for n, o in VARIANTS])
def test_matches_mpi_alltoall(comm, name, options):
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None or not fits(options, p):
            continue
        for dtype, count in cases(p):
            send = random_buffer(dtype, p * count, seed=1000 * sub.rank + count)
            want, got = np.empty_like(send), np.full_like(send, 99)
            sub.Alltoall(send, want)
            a2a.alltoall(sub, send, got, name, **options)
            if not np.array_equal(got, want):
                wrong.append((p, np.dtype(dtype).name, count))
    assert not wrong, f"{name} {options} differs from MPI_Alltoall at (p, dtype, count) {wrong}"


@pytest.mark.mpi
def test_pairwise_xor_matches_at_powers_of_two_and_is_refused_elsewhere(comm):
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        send = random_buffer(np.int16, p * 7, seed=sub.rank)
        want, got = np.empty_like(send), np.full_like(send, 99)
        sub.Alltoall(send, want)
        if p & (p - 1):
            with pytest.raises(a2a.BadOption, match=f"schedule=xor needs a power-of-two process count, not {p}"):
                a2a.alltoall(sub, send, got, "pairwise", schedule="xor")
        else:
            a2a.alltoall(sub, send, got, "pairwise", schedule="xor")
            if not np.array_equal(got, want):
                wrong.append(p)
    assert not wrong, f"pairwise schedule=xor differs from MPI_Alltoall on {wrong} ranks"


@pytest.mark.mpi
def test_plan_reused_many_times(comm):
    send = random_buffer(np.float64, comm.size * 5, seed=comm.rank)
    want, got = np.empty_like(send), np.empty_like(send)
    comm.Alltoall(send, want)
    for name in sorted(set(a2a.algorithms("alltoall")) - {"auto"}):  # auto needs a table (its own tests)
        assert runs_alike(a2a.get(name).plan(comm, send, got), got, want), name


@pytest.mark.mpi
def test_bad_input_on_one_rank_fails_on_every_rank(comm):
    send = np.zeros(comm.size * 4, np.float32)
    recv = np.zeros(comm.size * 4 if comm.rank != comm.size - 1 else comm.size * 4 + 1, np.float32)
    if comm.size == 1:
        recv = np.zeros(5, np.float32)
    with pytest.raises(a2a.BadInput, match=f"rank {comm.size - 1}: sendbuf has"):
        a2a.alltoall(comm, send, recv, "pairwise")


@pytest.mark.mpi
def test_ranks_with_different_dtypes_are_refused(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    dtype = np.float32 if comm.rank else np.float64
    send, recv = np.zeros(comm.size * 2, dtype), np.zeros(comm.size * 2, dtype)
    with pytest.raises(a2a.BadInput, match="every rank must give the same algorithm, options, dtype and count"):
        a2a.alltoall(comm, send, recv, "linear")


@pytest.mark.nested
def test_every_algorithm_above_four_ranks(above_four):
    """Pairwise's xor schedule at 5 ranks (refused) and 8, in the shared nested job (`mpirun -n 4` runs the collective
    tests above at 1 to 4). Every variant's schedule at 5 and 8 runs there through start/test/wait instead
    (test_nonblocking, the same `cases`): a schedule wrong at 5 or 8 fails that; the blocking entry that is all
    test_matches_mpi_alltoall would add is the executor's, run at every p to 9 there (test_executor)."""
    assert_collective_tests_passed(above_four, __file__)


@pytest.mark.parametrize("name,options", [(n, o) for n, o in VARIANTS if n != "onesided"],  # the stand-in has no RMA
                         ids=[f"{n}{o or ''}" for n, o in VARIANTS if n != "onesided"])
def test_every_variant_on_five_to_twelve_stand_in_ranks(name, options):
    """test_matches_mpi_alltoall's schedules at every p from 5 to 12, in process: the capture's stand-in MPI runs the
    algorithm's own code, moves the data and checks every rank's result. Real MPI runs them at 1 to 4, and at 5 and 8
    through start/test/wait (test_nonblocking)."""
    for p in range(5, 13):
        if fits(options, p):
            for dtype, count in (("int16", 7), ("complex128", 1)):  # the stand-in has no large-message protocol
                capture(name, options, p, count, dtype)  # raises on a wrong result


@pytest.mark.parametrize("send,recv,message", [
    (np.zeros(4, np.float32), np.zeros(4, np.float64), "sendbuf is float32 but recvbuf is float64"),
    (np.zeros(4, np.float32), np.zeros(6, np.float32), "sendbuf has 4 elements but recvbuf 6"),
    (np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), "sendbuf must be C-contiguous"),
    ([0.0] * 4, np.zeros(4), r"a message spec is \[buf, datatype\] or \[buf, count, datatype\]"),
    ({"a": 1}, np.zeros(4), "sendbuf is a dict; accepted: a NumPy array"),
])
def test_bad_buffers_are_refused(send, recv, message):
    with pytest.raises(a2a.BadInput, match=message):
        a2a.alltoall(self_comm(), send, recv, "pairwise")


def test_same_array_for_both_is_refused():
    buf = np.zeros(4)
    with pytest.raises(a2a.BadInput, match="overlap"):
        a2a.alltoall(self_comm(), buf, buf, "bruck")


def test_size_not_divisible_by_comm_size():
    with pytest.raises(a2a.BadInput, match="not divisible by the 3 ranks"):
        alltoall_call(SimpleNamespace(size=3), np.zeros(4), np.zeros(4))


def test_read_only_recvbuf_is_refused():
    recv = np.zeros(4)
    recv.flags.writeable = False
    with pytest.raises(a2a.BadInput, match="read-only"):
        a2a.alltoall(self_comm(), np.zeros(4), recv, "linear")


@pytest.mark.parametrize("name,options,message", [
    ("bruck", {"radix": 1}, "radix=1; accepted: an integer >= 2"),
    ("bruck", {"radix": "two"}, "radix='two'; accepted: a whole number, e.g. 2"),
    ("throttled", {"window": 0}, "window=0; accepted: an integer >= 1"),
    ("pairwise", {"schedule": "spiral"}, "accepted: shift, or xor"),
    ("node_aware", {"placement": "random"}, "accepted: block or cyclic"),
    ("linear", {"window": 4}, "linear: unknown option window; accepted: executor"),
    ("linear_sync", {"window": -1}, "window=-1; accepted: 0 (all peers at once) or an integer >= 1"),
    ("bruck_zero_copy", {"radix": 1}, "radix=1; accepted: an integer >= 2"),
    ("dimensional", {"dims": "4y2"}, "dims='4y2'; accepted: auto, or extents such as 4x2"),
    ("dimensional", {"dims": "2x2"}, "dims=2x2 makes 4 processes, not 1; accepted: auto, or extents whose "
     "product is 1"),
    ("bine", {"radix": 2}, "bine: unknown option radix; accepted: executor"),
        ("pairwise", {"executor": "fortran"}, "executor='fortran'; accepted: c (its schedule as data"),
    ("multileader", {"leaders": 0}, "leaders=0; accepted: an integer >= 1"),
    ("locality_aware", {"groups": 0}, "groups=0; accepted: an integer >= 1"),
    ("onesided", {"sync": "flush"}, "sync='flush'; accepted: fence, lock"),
    ("onesided", {"op": "accumulate"}, "op='accumulate'; accepted: put"),
    ("parallel_split", {"factor": 3}, "factor=3; accepted: 2, 4 or 8"),
])
def test_bad_options_are_refused(name, options, message):
    with pytest.raises(a2a.BadOption, match=message.replace("(", r"\(").replace(")", r"\)")):
        a2a.alltoall(self_comm(), np.zeros(4), np.zeros(4), name, **options)


def test_unknown_algorithm_lists_the_valid_names():
    with pytest.raises(a2a.UnknownAlgorithm) as error:
        a2a.get("brook")
    assert "unknown algorithm 'brook'" in str(error.value) and "bruck" in str(error.value)


def test_freed_plan_cannot_run():
    plan = a2a.get("native").plan(self_comm(), np.zeros(2), np.zeros(2))
    plan.free()
    with pytest.raises(a2a.BadInput, match="freed"):
        plan()


def test_one_factor_pairs_every_rank_with_every_other_once():
    for p in range(1, 10):
        schedule = [one_factor(p, r) for r in range(p)]
        for r in range(p):
            partners = [q for q in schedule[r] if q >= 0]
            assert sorted(partners) == [q for q in range(p) if q != r]
            for k, q in enumerate(schedule[r]):
                assert q < 0 or schedule[q][k] == r  # partners agree in every round


def test_leader_permutations_route_every_block():
    """Play hierarchical's leader steps on block labels: every (source, dest) block reaches dest."""
    for nodes in ([[0, 1, 2], [3, 4], [5, 6, 7]], [[0, 2, 4], [1, 3]], [[0], [1, 2, 3]], [[0, 1, 2, 3]]):
        p = sum(map(len, nodes))
        outgoing = {}
        for n, members in enumerate(nodes):
            pack, _ = leader_permutations(nodes, n, p)
            gathered = [(source, dest) for source in members for dest in range(p)]  # local Gather order
            outgoing[n] = [gathered[i] for i in pack]  # outgoing = gathered[pack]
        for c, members in enumerate(nodes):
            # Alltoallv: from each node b, the slice of b's outgoing addressed to node c
            incoming = []
            for b, senders in enumerate(nodes):
                start = sum(len(m) * len(senders) for m in nodes[:c])
                incoming += outgoing[b][start:start + len(members) * len(senders)]
            _, unpack = leader_permutations(nodes, c, p)
            scattered = [incoming[i] for i in unpack]  # row dest_local * p + source, then Scatter
            assert scattered == [(source, dest) for dest in members for source in range(p)], nodes


def test_negabinary_digits_by_hand():
    # 6 = 16 - 8 - 2 (11010), -2 = 10, 3 = 4 - 2 + 1 (111)
    assert [bine.to_negabinary(x) for x in (0, 1, -2, 3, 6)] == [0, 1, 0b10, 0b111, 0b11010]
    assert [bine.from_negabinary(b) for b in (0b10, 0b111, 0b11010)] == [-2, 3, 6]
    assert [bine.distance(s) for s in range(5)] == [1, -1, 3, -5, 11]  # negabinary 1, 11, 111, ...


def test_bine_partners_and_leaves_by_hand():
    assert [bine.partner(r, 0, 8) for r in range(8)] == [1, 0, 3, 2, 5, 4, 7, 6]
    assert [bine.partner(r, 1, 8) for r in range(8)] == [7, 2, 1, 4, 3, 6, 5, 0]  # even - 1, odd + 1
    assert [bine.partner(r, 2, 8) for r in range(8)] == [3, 6, 5, 0, 7, 2, 1, 4]  # even + 3, odd - 3
    # rank 1: negabinary 001, gray 001, reversed 100 = 4; rank 2: -2 = 010, gray 011 -> 110 = 6;
    # rank 3: 111, gray 100 -> 001 = 1
    assert [bine.remap_rank(8, r) for r in range(8)] == [0, 4, 6, 1, 3, 7, 5, 2]
    assert bine.remap_rank(1, 0) == 0 and [bine.remap_rank(2, r) for r in range(2)] == [0, 1]


@pytest.mark.parametrize("p", [2, 4, 8, 16, 32])
def test_bine_sends_half_and_delivers_every_block(p):
    for rank in range(p):
        schedule = bine.rounds(p, rank)
        assert len(schedule) == p.bit_length() - 1
        assert all(len(r.sent) == len(r.received) == p // 2 for r in schedule)
        arrived = sorted(block for *_, received in listed(schedule) for block in received if block[1] == rank)
        assert arrived == [(s, rank) for s in range(p) if s != rank]
        slots(schedule, rank, p)  # raises if a block is sent by a rank that does not hold it


def test_bruck_zero_copy_rounds_and_slots_by_hand():
    schedule = bruck_zero_copy.rounds(4, 0, 2)
    # round 1 moves distances 1 and 3 to rank 1; round 2 distances 2 and 3 to rank 2
    assert listed(schedule) == [(1, [(0, 1), (0, 3)], 3, [(3, 0), (3, 2)]), (2, [(0, 2), (3, 2)], 2, [(2, 0), (1, 0)])]
    placed, rows = slots(schedule, 0, 4)
    # (3, 2) waits in temp row 0 between its rounds; everything else moves send -> recv directly
    assert placed == [([("send", 1), ("send", 3)], [("recv", 3), ("temp", 0)]),
                      ([("send", 2), ("temp", 0)], [("recv", 2), ("recv", 1)])] and rows == 1


@pytest.mark.parametrize("p,radix", [(p, k) for p in (1, 2, 3, 5, 6, 7, 9, 12) for k in (2, 3, 4)])
def test_bruck_zero_copy_delivers_every_block(p, radix):
    for rank in range(p):
        schedule = bruck_zero_copy.rounds(p, rank, radix)
        arrived = sorted(block for *_, received in listed(schedule) for block in received if block[1] == rank)
        assert arrived == [(s, rank) for s in range(p) if s != rank]
        slots(schedule, rank, p)


def test_slots_refuse_a_block_the_rank_does_not_hold():
    with pytest.raises(RuntimeError, match=r"sends block \(1, 2\) that rank 0 does not hold"):
        slots([bruck_zero_copy.Step(1, pairs(1, [2]), 1, pairs([], []))], 0, 3)


def test_dimension_factors():
    assert factors("4x2", 8) == [4, 2] and factors("2x1x4", 8) == [2, 4] and factors("1", 1) == [1]
    assert factors("auto", 8) == [4, 2] and factors("auto", 12) == [4, 3] and factors("auto", 7) == [7]
    assert factors("auto", 1) == [1]
    assert balanced(12) == [4, 3] and balanced(7) == [7]
    from mpi4py import MPI

    for p in range(1, 65):  # auto is MPI_Dims_create's two-factor split
        assert factors("auto", p) == ([n for n in MPI.Compute_dims(p, 2) if n > 1] or [1]), p
    with pytest.raises(a2a.BadOption, match=r"dims=4x2 makes 8 processes, not 6; .* \(e.g. 3x2\)"):
        factors("4x2", 6)


@pytest.mark.launches
def test_bine_row_says_it_ran_pairwise_where_p_is_not_a_power_of_two(tmp_path):
    done = bench(4, "run", "--algorithms", "bine", "--sizes", "8", "--nprocs", "3,4",
           "--iterations", "2", "--output", str(tmp_path / "run"), "--quiet", "--allow-oversubscribed", asleep=True)
    assert done.returncode == 0, done.stderr
    notes = {row.nprocs: row.note for row in read_rows(tmp_path / "run")}
    assert "bine: 3 ranks is not a power of two; ran pairwise, as Open MPI does" in notes[3]
    assert "pairwise" not in notes[4]


def test_virtual_nodes_list_each_nodes_ranks_nodes_by_lowest_rank():
    assert virtual_nodes(7, 3, "block") == [[0, 1, 2], [3, 4, 5], [6]]
    assert virtual_nodes(7, 3, "cyclic") == [[0, 3, 6], [1, 4], [2, 5]]
    assert virtual_nodes(4, 1, "cyclic") == [[0], [1], [2], [3]]


def test_split_nodes_cuts_each_node_into_consecutive_runs():
    assert split_nodes([[0, 1, 2], [3, 4], [5, 6, 7]], 2) == [[0, 1], [2], [3], [4], [5, 6], [7]]
    assert split_nodes([[0, 1, 2, 3, 4]], 3) == [[0, 1], [2, 3], [4]]
    # cyclic placement: runs keep each node's members; groups ordered by their lowest rank
    assert split_nodes([[0, 2, 4, 6, 8], [1, 3, 5, 7]], 2) == [[0, 2, 4], [1, 3], [5, 7], [6, 8]]
    assert split_nodes([[0, 1]], 5) == [[0], [1]]  # never more parts than ranks


def test_locality_aware_collectors_by_hand():
    parts = [[0, 1, 2], [3, 4], [5, 6, 7]]
    # equal groups would give "member i of every group"; group 1 has 2 members, so k mod 2 decides
    assert Aggregation.of(parts, 3).held.tolist() == [0, 2, 3, 5, 7]
    assert Aggregation.of(parts, 4).held.tolist() == [1, 4, 6]
    assert Aggregation.of(parts, 2).held.tolist() == [2, 7]
    assert Aggregation.of([[0, 1], [2, 3]], 1).held.tolist() == [1, 3]
    assert Aggregation.of(parts, 4).dests.tolist() == [1, 6]  # member 1 of group 0, member 1 mod 3 of group 2
    for part in parts:  # every source has exactly one collector in every group
        held = [q for rank in part for q in Aggregation.of(parts, rank).held.tolist()]
        assert sorted(held) == list(range(8))
        # the group's Alltoallv gives each member what every member collected, member by member
        assert Aggregation.of(parts, part[0]).delivered.tolist() == held
        assert Aggregation.of(parts, part[0]).collected.tolist() == \
            [len(Aggregation.of(parts, rank).held) for rank in part]
    assert not Aggregation.of(parts, 0).reordered and Aggregation.of([[0, 2], [1, 3]], 0).reordered


def test_parallel_split_factor_is_lowered_as_acoll_does():
    assert [split_factor(p, 8) for p in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17)] == [8, 2, 2, 4, 4, 2, 2, 8, 8, 8, 8]
    assert [split_factor(p, 4) for p in (4, 5, 6, 7, 12)] == [4, 4, 2, 2, 4]
    assert split_factor(10, 2) == 2
