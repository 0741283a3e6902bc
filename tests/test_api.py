"""The library's API as an mpi4py user calls it: intercommunicators, odd dtypes, in place, mpi4py's buffers, ranks
that disagree. Each case is either right (checked against MPI_Alltoall(v) on the same input) or one clear error on
every rank, never a hang or a wrong answer.

The `mpi` tests run under `mpirun -n 4`, and in plain mode as spawned jobs of 4 and 3 ranks (intercommunicators
need two groups; 3 ranks make them unequal).
"""
from __future__ import annotations

import array

import numpy as np
import pytest
from support import assert_refused_here, self_comm, subcommunicators

import a2a
from a2a.algos.registry import candidates
from a2a.record.results import NATIVE

ALLTOALL = candidates("alltoall")
ALLTOALLV = candidates("alltoallv")
RECORD = np.dtype([("tag", "S3"), ("value", "<f8"), ("flag", "?")])


def needs_two(comm) -> None:
    if comm.size < 2:
        pytest.skip("needs two ranks")


def intercomm(comm):
    """Ranks of even and odd world rank as the two groups of an intercommunicator (leaders: world ranks 0 and 1)."""
    color = comm.rank % 2
    local = comm.Split(color, comm.rank)
    inter = local.Create_intercomm(0, comm, 1 - color, tag=7)
    local.Free()
    return inter


def patterned(dtype: np.dtype, n: int, rank: int) -> np.ndarray:
    """n items of `dtype` whose bytes name the rank and the position."""
    raw = ((np.arange(n * dtype.itemsize) * 7 + rank * 31) % 251).astype(np.uint8)
    return raw.view(dtype)


def raw_reference(comm, send: np.ndarray) -> np.ndarray:
    """What MPI_Alltoall moves, byte for byte."""
    recv = np.zeros_like(send)
    comm.Alltoall(send.view(np.uint8), recv.view(np.uint8))
    return recv


def intercommunicators(comm):
    """Intercommunicators over the first p ranks for each p >= 2 (3 ranks give groups of 2 and 1)."""
    for p, sub in subcommunicators(comm):
        if p >= 2 and sub is not None:
            yield intercomm(sub)


@pytest.mark.mpi
def test_on_an_intercommunicator_native_is_mpis_alltoall_and_the_others_are_refused(comm):
    needs_two(comm)
    for inter in intercommunicators(comm):
        native_matches_and_the_others_are_refused(inter, comm.rank)


def native_matches_and_the_others_are_refused(inter, rank: int) -> None:
    try:
        send = patterned(np.dtype(np.int32), 3 * inter.Get_remote_size(), rank)
        want = np.zeros_like(send)
        inter.Alltoall(send, want)
        for name in ALLTOALL:
            got = np.zeros_like(send)
            if name == NATIVE:
                a2a.alltoall(inter, send, got, name)
                assert np.array_equal(got, want)
            else:
                with pytest.raises(a2a.BadInput, match=f"{name} does not serve intercommunicators"):
                    a2a.alltoall(inter, send, got, name)
    finally:
        inter.Free()


@pytest.mark.mpi
def test_on_an_intercommunicator_alltoallv_native_matches_and_groups_that_differ_fail_alike(comm):
    needs_two(comm)
    for inter in intercommunicators(comm):
        alltoallv_matches_and_groups_that_differ_fail_alike(inter, comm.rank)


def alltoallv_matches_and_groups_that_differ_fail_alike(inter, rank: int) -> None:
    try:
        n = inter.Get_remote_size()
        counts = [2] * n
        send = patterned(np.dtype(np.float64), 2 * n, rank)
        want = np.zeros_like(send)
        inter.Alltoallv([send, counts], [want, counts])
        got = np.zeros_like(send)
        a2a.alltoallv(inter, send, counts, got, counts, NATIVE)
        assert np.array_equal(got, want)
        with pytest.raises(a2a.BadInput, match="hierarchical does not serve intercommunicators"):
            a2a.alltoallv(inter, send, counts, got, counts, "hierarchical")
        # one group asks for native, the other for bruck: an error on both groups, not a hang
        name = NATIVE if rank % 2 == 0 else "bruck"
        with pytest.raises(a2a.BadInput, match="bruck does not serve intercommunicators"):
            a2a.alltoall(inter, send, np.zeros_like(send), name)
    finally:
        inter.Free()


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.dtype("S4"), np.dtype("U3"), RECORD, np.dtype(bool), np.dtype(">i4")],
                         ids=["bytes", "str", "record", "bool", "big-endian"])
def test_every_fixed_size_dtype_travels_as_mpi_moves_its_bytes(comm, dtype):
    for _, sub in subcommunicators(comm):
        if sub is not None:
            travels_as_mpi_moves_its_bytes(sub, dtype)


def travels_as_mpi_moves_its_bytes(comm, dtype: np.dtype) -> None:
    send = patterned(dtype, 2 * comm.size, comm.rank)
    want = raw_reference(comm, send)
    for name in ALLTOALL:
        got = np.zeros_like(send)
        a2a.alltoall(comm, send, got, name)
        assert got.tobytes() == want.tobytes(), name
    counts = [2] * comm.size
    for name in ALLTOALLV:
        got = np.zeros_like(send)
        a2a.alltoallv(comm, send, counts, got, counts, name)
        assert got.tobytes() == want.tobytes(), name


@pytest.mark.mpi
def test_object_arrays_are_refused_on_every_rank_even_if_one_rank_passes_them(comm):
    objects = np.array([object()] * comm.size)
    counts = [1] * comm.size
    for name in (NATIVE, "hierarchical", "bruck", "tuna"):
        with pytest.raises(a2a.BadInput, match="references to Python objects"):
            if name in ALLTOALL:
                a2a.alltoall(comm, objects, np.empty_like(objects), name)
            else:
                a2a.alltoallv(comm, objects, counts, np.empty_like(objects), counts, name)
    mine = objects if comm.rank == comm.size - 1 else np.zeros(comm.size)
    with pytest.raises(a2a.BadInput, match=f"rank {comm.size - 1}: sendbuf has dtype object"):
        a2a.alltoall(comm, mine, np.zeros(comm.size), "pairwise")


DIFFERENT = [  # (collective, what ranks 1.. ask for, what rank 0 asks for, the error every rank gets)
    ("alltoall", ("bruck", {"radix": 2}), ("bruck", {"radix": 3}), "bruck executor=c,radix=3"),
    ("alltoall", ("pairwise", {}), ("pairwise", {"executor": "python"}), "pairwise executor=python"),
    ("alltoall", (NATIVE, {}), ("pairwise", {}), "rank 0: pairwise"),
    ("alltoall", ("linear", {}), ("no_such_algorithm", {}), "unknown algorithm 'no_such_algorithm'"),
    ("alltoall", ("bruck", {}), ("bruck", {"radix": 1}), "radix=1; accepted: an integer >= 2"),
    ("alltoallv", ("tuna", {"radix": 2}), ("tuna", {"radix": 3}), "tuna radix=3"),
    ("alltoallv", (NATIVE, {}), ("linear", {}), "rank 0: linear"),
    ("alltoallv", ("pairwise", {}), ("no_such_algorithm", {}), "unknown algorithm 'no_such_algorithm'"),
]


@pytest.mark.mpi
@pytest.mark.parametrize("collective,mine,theirs,message", DIFFERENT,
                         ids=[f"{c}-{m[0]}-{t[0]}{t[1] or ''}" for c, m, t, _ in DIFFERENT])
def test_ranks_that_ask_for_different_things_get_one_error_everywhere(comm, collective, mine, theirs, message):
    needs_two(comm)
    name, options = theirs if comm.rank == 0 else mine
    send = np.arange(2 * comm.size, dtype=np.float32)
    counts = [2] * comm.size
    with pytest.raises(a2a.BadInput, match=message):
        if collective == "alltoall":
            a2a.alltoall(comm, send, np.zeros_like(send), name, **options)
        else:
            a2a.alltoallv(comm, send, counts, np.zeros_like(send), counts, name, **options)


@pytest.mark.mpi
def test_dtypes_counts_or_in_place_that_differ_between_ranks_are_one_error(comm):
    from mpi4py import MPI

    needs_two(comm)
    dtype = np.float64 if comm.rank == 0 else np.float32
    send = np.arange(2 * comm.size, dtype=dtype)
    with pytest.raises(a2a.BadInput, match="different calls"):
        a2a.alltoall(comm, send, np.zeros_like(send), "pairwise")
    buf = np.arange(2 * comm.size, dtype=np.float32)
    with pytest.raises(a2a.BadInput, match="in place"):
        a2a.alltoall(comm, MPI.IN_PLACE if comm.rank == 0 else buf.copy(), buf, "linear")


@pytest.mark.mpi
def test_in_place_matches_mpi_for_every_algorithm(comm):
    for _, sub in subcommunicators(comm):  # odd p included: 3 ranks under `mpirun -n 4`
        if sub is not None:
            in_place_matches_mpi(sub)


def in_place_matches_mpi(comm) -> None:
    from mpi4py import MPI

    start = patterned(np.dtype(np.int64), 3 * comm.size, comm.rank)
    want = start.copy()
    comm.Alltoall(MPI.IN_PLACE, want)
    for name in ALLTOALL:
        buf = start.copy()
        a2a.alltoall(comm, MPI.IN_PLACE, buf, name)
        assert np.array_equal(buf, want), name
    counts = [(comm.rank + j) % 3 for j in range(comm.size)]  # symmetric: what j sends here, j receives back
    start = patterned(np.dtype(np.int64), sum(counts), comm.rank)
    want = start.copy()
    comm.Alltoallv(MPI.IN_PLACE, [want, counts])
    for name in ALLTOALLV:
        buf = start.copy()
        a2a.alltoallv(comm, MPI.IN_PLACE, None, buf, counts, name)
        assert np.array_equal(buf, want), name


@pytest.mark.mpi
def test_the_buffers_mpi4py_takes_work(comm):
    from mpi4py import MPI

    n = 2 * comm.size
    values = [comm.rank * 100 + i for i in range(n)]
    want = np.zeros(n, np.int32)
    comm.Alltoall(np.array(values, np.int32), want)
    out = array.array("i", [0] * n)
    a2a.alltoall(comm, array.array("i", values), out, "pairwise")
    assert list(out) == want.tolist()
    raw = bytearray(4 * n)
    a2a.alltoall(comm, bytes(np.array(values, np.int32)), memoryview(raw), NATIVE)
    assert np.frombuffer(raw, np.int32).tolist() == want.tolist()
    spare = np.zeros(n + 5, np.int32)  # a spec's count says how much of the buffer is used
    a2a.alltoall(comm, [np.array(values, np.int32), 2, MPI.INT], [spare, 2, MPI.INT], "bruck")
    assert spare[:n].tolist() == want.tolist() and not spare[n:].any()
    doubles = np.zeros(n // 2, np.float64)  # [buf, datatype]: the buffer read as that type
    a2a.alltoall(comm, [np.array(values, np.int32), MPI.INT], [doubles, MPI.INT], "linear")
    assert doubles.view(np.int32).tolist() == want.tolist()


class FakeGpuArray:
    """What CuPy and Numba arrays show: a __cuda_array_interface__."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


class FakeDeviceTensor:
    """What a PyTorch CUDA tensor shows: DLPack on device type 2 (kDLCUDA)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a GPU tensor must not be read")


@pytest.mark.parametrize("gpu", [FakeGpuArray(), FakeDeviceTensor()], ids=["cuda-array-interface", "dlpack"])
def test_gpu_arrays_are_refused_with_what_to_do(gpu):
    with pytest.raises(a2a.BadInput, match="GPU array.*copy it to the host first"):
        a2a.alltoall(self_comm(), gpu, np.zeros(4, np.float32), NATIVE)


def test_derived_datatypes_and_read_only_receive_buffers_are_refused():
    from mpi4py import MPI

    pair = MPI.INT.Create_contiguous(2).Commit()
    try:
        with pytest.raises(a2a.BadInput, match="a derived datatype; accepted: a predefined datatype"):
            a2a.alltoall(self_comm(), [np.zeros(4, np.int32), pair], np.zeros(4, np.int32))
    finally:
        pair.Free()
    with pytest.raises(a2a.BadInput, match="recvbuf is read-only"):
        a2a.alltoall(self_comm(), np.zeros(4, np.uint8), b"\0\0\0\0", "linear")


@pytest.mark.parametrize("args,message", [
    (["--iterations", "0"], "--iterations '0'; accepted: a whole number, 1 or more"),
    (["--iterations", "-5"], "--iterations '-5'; accepted: a whole number, 1 or more"),  # the same words as for 0
    (["--rounds", "0"], "--rounds '0'; accepted: a whole number, 1 or more"),
    (["--collective", "alltoallv", "--workload", "moe:experts=0"], "experts=0; accepted: an integer >= 1"),
])
def test_cli_inputs_that_measure_nothing_are_refused(capsys, tmp_path, args, message):
    assert_refused_here(capsys, [*args, "--sizes", "8"], message, tmp_path / "out")
