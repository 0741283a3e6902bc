"""Every algorithm gives what MPI_Alltoall gives, at every process count, and refuses bad input."""
from __future__ import annotations

import numpy as np
import pytest
from support import mpiexec

import a2a
from a2a.builtin.hierarchical import leader_permutations
from a2a.builtin.pairwise_inplace import one_factor
from a2a.mpi import idle_barrier
from a2a.registry import _buffer_problem

VARIANTS = [
    ("native", {}), ("linear", {}), ("pairwise", {}), ("throttled", {}), ("throttled", {"window": 2}),
    ("bruck", {}), ("bruck", {"radix": 3}), ("bruck", {"radix": 4}), ("node_aware", {}),
    ("node_aware", {"ppn": 3}), ("node_aware", {"ppn": 2, "placement": "cyclic"}), ("hierarchical", {}),
    ("hierarchical", {"ppn": 3}), ("hierarchical", {"ppn": 3, "placement": "cyclic"}),
    ("pairwise_inplace", {}),
]
DTYPES = [np.float32, np.int16, np.complex128]


def counts(dtype: type) -> list[int]:
    """0, 1, 7 elements, and one count above 64 KiB per peer."""
    return [0, 1, 7, 65536 // np.dtype(dtype).itemsize + 3]


def subcommunicators(comm):
    """(p, communicator of the first p ranks or None) for p = 1 .. world size."""
    from mpi4py import MPI

    for p in range(1, comm.size + 1):
        sub = comm.Split(0 if comm.rank < p else MPI.UNDEFINED, comm.rank)
        yield p, (sub if sub != MPI.COMM_NULL else None)
        if sub != MPI.COMM_NULL:
            sub.Free()
        idle_barrier(comm)


def random_buffer(dtype: type, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(-1000, 1000, size=n)
    return (values + 1j * values if np.dtype(dtype).kind == "c" else values).astype(dtype)


@pytest.mark.mpi
@pytest.mark.parametrize("name,options", VARIANTS, ids=[f"{n}{o or ''}" for n, o in VARIANTS])
def test_matches_mpi_alltoall(comm, name, options):
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        for dtype in DTYPES:
            for count in counts(dtype):
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
    for name in a2a.algorithms("alltoall"):
        if name == "auto":
            continue
        with a2a.get(name).plan(comm, send, got) as plan:
            for _ in range(3):
                got[:] = 0
                plan()
                assert np.array_equal(got, want), name


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
    with pytest.raises(a2a.BadInput, match="every rank must pass the same dtype and size"):
        a2a.alltoall(comm, send, recv, "linear")


def test_every_algorithm_on_one_to_eight_ranks():
    """The collective tests above, at every p from 1 to 8 (non-powers of two included)."""
    done = mpiexec(8, "-m", "pytest", "-q", "-m", "mpi", "-p", "no:cacheprovider",
                   "tests/test_algorithms.py", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def self_comm():
    from mpi4py import MPI

    return MPI.COMM_SELF


@pytest.mark.parametrize("send,recv,message", [
    (np.zeros(4, np.float32), np.zeros(4, np.float64), "sendbuf is float32 but recvbuf is float64"),
    (np.zeros(4, np.float32), np.zeros(6, np.float32), "sendbuf has 4 elements but recvbuf 6"),
    (np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), "sendbuf must be C-contiguous"),
    ([0.0] * 4, np.zeros(4), "sendbuf must be a NumPy array, not list"),
])
def test_bad_buffers_are_refused(send, recv, message):
    with pytest.raises(a2a.BadInput, match=message):
        a2a.alltoall(self_comm(), send, recv, "pairwise")


def test_same_array_for_both_is_refused():
    buf = np.zeros(4)
    with pytest.raises(a2a.BadInput, match="overlap"):
        a2a.alltoall(self_comm(), buf, buf, "bruck")


def test_size_not_divisible_by_comm_size():
    assert "not divisible by the communicator size 3" in _buffer_problem(3, np.zeros(4), np.zeros(4))


def test_read_only_recvbuf_is_refused():
    recv = np.zeros(4)
    recv.flags.writeable = False
    with pytest.raises(a2a.BadInput, match="read-only"):
        a2a.alltoall(self_comm(), np.zeros(4), recv, "linear")


@pytest.mark.parametrize("name,options,message", [
    ("bruck", {"radix": 1}, "radix=1; accepted: an integer >= 2"),
    ("bruck", {"radix": "two"}, "radix='two' is not a int"),
    ("throttled", {"window": 0}, "window=0; accepted: an integer >= 1"),
    ("pairwise", {"schedule": "spiral"}, "accepted: shift, or xor"),
    ("node_aware", {"placement": "random"}, "accepted: block or cyclic"),
    ("linear", {"window": 4}, "linear: unknown option window; accepted: none"),
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
