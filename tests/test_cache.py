"""--cache warm|cold: the last-level cache read from the machine, the cold ring of buffer sets, its record."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from support import assert_refused_here, mpiexec

from a2a.measure.cache import PAGE, RING_OVER_CACHE, buffer_sets, cycling, last_level_cache
from a2a.record.results import read_rows, read_samples
from a2a.sweep.pattern import send_pattern


def fake_caches(root, *caches):
    for i, (level, kind, size) in enumerate(caches):
        index = root / f"index{i}"
        index.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(f"{value}\n")
    return root


def test_last_level_cache_is_the_highest_data_level(tmp_path):
    root = fake_caches(tmp_path / "cache", (1, "Data", "32K"), (1, "Instruction", "64K"), (2, "Unified", "512K"),
                       (3, "Unified", "8192K"))
    assert last_level_cache(root) == {"bytes": 8 << 20, "read_from": str(root / "index3" / "size")}
    only_l2 = fake_caches(tmp_path / "l2", (1, "Data", "48K"), (2, "Unified", "2M"))
    assert last_level_cache(only_l2)["bytes"] == 2 << 20


def test_last_level_cache_falls_back_when_sysfs_is_absent(tmp_path):
    found = last_level_cache(tmp_path / "missing")
    assert found["bytes"] > 0 and found["read_from"].startswith(("sysconf(", "assumed"))


@pytest.mark.launches
def test_cycling_goes_round_in_order():
    seen: list[int] = []
    run = cycling([functools.partial(seen.append, i) for i in range(3)])
    for _ in range(7):
        run()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
    single = lambda: None  # noqa: E731
    assert cycling([single]) is single


@pytest.mark.mpi
def test_cold_sets_fill_a_ring_beyond_the_cache_on_pages_of_their_own(comm):
    count, dtype = 64, np.dtype("float32")  # 256 B per peer
    pattern = send_pattern(dtype, comm.size, comm.rank, count)
    template = pattern, np.zeros_like(pattern)
    warm, note = buffer_sets(comm, "warm", template, 100, 1 << 30)
    assert len(warm) == 1 and note == "" and all(a.ctypes.data % PAGE == 0 for a in warm[0])
    assert np.array_equal(warm[0][0], pattern) and not warm[0][1].any()
    llc = last_level_cache()["bytes"]
    stride = 2 * -(-comm.size * count * dtype.itemsize // PAGE) * PAGE
    uses = 10_000_000  # never the limit here
    cold, note = buffer_sets(comm, "cold", template, uses, 1 << 30)
    assert note == "" and len(cold) == max(2, -(-RING_OVER_CACHE * llc // stride))
    assert len(cold) * stride >= RING_OVER_CACHE * llc
    starts = sorted(a.ctypes.data for pair in cold for a in pair)
    assert all(start % PAGE == 0 for start in starts)
    assert all(b - a >= comm.size * count * dtype.itemsize for a, b in zip(starts, starts[1:]))  # disjoint
    assert all(np.array_equal(send, pattern) and not recv.any() for send, recv in cold)
    # fewer calls than the ring: one set per call; less memory than the ring: shorter, and said
    assert len(buffer_sets(comm, "cold", template, 7, 1 << 30)[0]) == 7
    short, note = buffer_sets(comm, "cold", template, uses, 5 * stride)
    assert len(short) == 5 and note.startswith("cache cold: only 5 buffer sets fit in --max-memory")


@pytest.mark.launches
def test_cold_sweep_records_its_mode_and_the_cache(tmp_path, small_sweep):
    out = tmp_path / "cold"
    done = mpiexec(2, "-m", "bench", "run", "--cache", "cold", "--sizes", "8,64K", "--algorithms", "native,pairwise",
                   "--no-control", "--iterations", "10", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert "(sync timing, cold caches;" in done.stdout
    rows = read_rows(out)
    assert len(rows) == 4 and all(r.cache == "cold" and r.valid and r.iterations == 10 for r in rows)
    assert "cache" in (out / "results.csv").read_text().splitlines()[0].split(",")
    assert all(len(samples) == 10 for samples in read_samples(out).values())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["last_level_cache"]["bytes"] > 0 and meta["config"]["cache"] == "cold"
    warm = next(r for r in read_rows(small_sweep) if r.algorithm == "native")  # the same point, warm
    assert warm.cache == "warm" and warm.key not in {r.key for r in rows}
    skewed = tmp_path / "alltoallv"
    done = mpiexec(2, "-m", "bench", "run", "--cache", "cold", "--collective", "alltoallv", "--workload", "zipf:s=1.1",
                   "--sizes", "1K", "--algorithms", "native,pairwise", "--iterations", "5", "--output", str(skewed),
                   "--quiet")
    assert done.returncode == 0, done.stderr
    assert all(r.cache == "cold" and r.collective == "alltoallv" and r.valid for r in read_rows(skewed))


def test_bad_cache_mode_is_refused_once(tmp_path, capsys):
    """click's own refusal, before any rank measures: in this process (launched refusals elsewhere show one rank
    says them)."""
    assert_refused_here(capsys, ["--cache", "lukewarm"], "'lukewarm' is not one of 'warm', 'cold'", tmp_path / "x")


def thp_eligible(array: np.ndarray) -> bool:
    """Whether the kernel may back any page of `array` with transparent huge pages."""
    start, end, overlaps, eligible = array.ctypes.data, array.ctypes.data + array.nbytes, False, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            low, high = (int(x, 16) for x in head.split("-"))
            overlaps = low < end and start < high
        elif overlaps and head == "THPeligible:":
            eligible |= line.split()[1] == "1"
    return eligible


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(not THP.exists() or "[madvise]" not in THP.read_text(),
                    reason="needs transparent huge pages in madvise mode, where malloc's buffers get none")
def test_buffers_get_no_huge_pages_as_mallocs_do():
    """numpy asks for huge pages from 4 MiB; C's malloc, which the C benchmarks use, never does."""
    big = np.zeros(4 << 20, np.uint8)
    assert thp_eligible(big)  # the trap: a plain numpy array of 4 MiB is eligible
    [(send, recv)], _ = buffer_sets(MPI.COMM_SELF, "warm", (big, big.copy()), 1, 1 << 30)
    assert not thp_eligible(send) and not thp_eligible(recv)
