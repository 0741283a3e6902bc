"""Interleaved rounds: a cell's algorithms are timed in rounds that each visit every one once, in a fresh seeded
order; samples keep their round and launch; the control and the A/A twins are swept beside them."""
from __future__ import annotations

import json

import pytest
from support import assert_refused_before_measuring, assert_refused_here, bench

from a2a.record.results import CONTROL, read_rounds, read_rows
from a2a.sweep.config import from_options
from a2a.sweep.grid import calls_in_round, round_order

STAMPED = "tests/plugins/stamped.py"


def test_the_iterations_are_split_over_the_rounds_and_every_round_times_at_least_one_call():
    assert [calls_in_round(25, 10, r) for r in range(10)] == [2, 3, 2, 3, 2, 3, 2, 3, 2, 3]
    assert sum(calls_in_round(7, 3, r) for r in range(3)) == 7
    assert [calls_in_round(3, 3, r) for r in range(3)] == [1, 1, 1]


def test_each_round_has_its_own_order_the_same_for_a_seed():
    orders = [tuple(round_order(list("abcdef"), ("2", "8"), 0, r)) for r in range(10)]
    assert len(set(orders)) > 5 and all(sorted(o) == list("abcdef") for o in orders)
    assert orders == [tuple(round_order(list("abcdef"), ("2", "8"), 0, r)) for r in range(10)]
    assert orders != [tuple(round_order(list("abcdef"), ("2", "8"), 1, r)) for r in range(10)]


def test_a_sweep_adds_the_control_beside_native_and_the_aa_check_adds_twins():
    swept = from_options({"algorithms": "native,bruck", "sizes": "8"}, world=2)
    assert [v.label for v in swept.variants if v.name == CONTROL] == ["control:form=blocking:of=native:twin=1"]
    assert not [v for v in from_options({"algorithms": "native,bruck", "control": False, "sizes": "8"},
                                         world=2).variants if v.name == CONTROL]
    assert not [v for v in from_options({"algorithms": "bruck", "sizes": "8"}, world=2).variants
                if v.name == CONTROL]  # no native, no floor to measure
    checked = from_options({"aa": True, "sizes": "8"}, world=2)
    assert sorted(v.label for v in checked.variants) == [
        "control:form=blocking:of=native:twin=1", "control:form=blocking:of=pairwise:twin=1",
        "control:form=blocking:of=pairwise:twin=2", "native:form=blocking", "pairwise:executor=c:schedule=shift"]
    assert checked.rounds == 25 and from_options({"iterations": "4", "sizes": "8"}, world=2).rounds == 4


@pytest.mark.launches
def test_a_cells_visits_interleave_in_rounds_and_samples_keep_round_and_launch(tmp_path):
    out, log = tmp_path / "run", tmp_path / "calls.txt"
    done = bench(2, "run", "--plugin", STAMPED, "--algorithms",
                 f"stamped:tag=a:path={log},stamped:tag=b:path={log}", "--sizes", "8", "--nprocs", "2",
                 "--iterations", "12", "--rounds", "6", "--warmup", "1", "--no-control", "--output", str(out))
    assert done.returncode == 0, done.stderr
    calls = log.read_text()
    # a warm-up call and two timed calls a visit; in the last round a visit also checks its result with one more
    visits = [calls[i:i + 3] for i in range(0, 30, 3)] + [calls[30:34], calls[34:]]
    assert len(calls) == 38 and all(len(set(v)) == 1 for v in visits), calls
    rounds = [{visits[2 * r][0], visits[2 * r + 1][0]} for r in range(6)]
    assert all(r == {"a", "b"} for r in rounds), calls  # every round visits each once
    assert len({visits[2 * r][0] for r in range(6)}) == 2, calls  # and not always in the same order
    launch = json.loads((out / "meta.json").read_text())["launches"][0]["start"]
    for row in read_rows(out):
        kept = read_rounds(out)[row.key]
        assert [r for _, r, _ in kept] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
        assert {at for at, _, _ in kept} == {launch}


@pytest.mark.launches
def test_launches_make_a_record_each_and_the_decision_reads_them_all(tmp_path):
    out = tmp_path / "run"
    done = bench(2, "run", "--algorithms", "native,pairwise", "--sizes", "8", "--nprocs", "2", "--iterations", "3",
                 "--launches", "2", "--output", str(out))
    assert done.returncode == 0, done.stderr
    for k in (1, 2):
        assert {r.algorithm for r in read_rows(out / f"launch-{k}")} == {"native", "pairwise", CONTROL}
    assert f"decide {out / 'launch-1'} {out / 'launch-2'}" in done.stdout


@pytest.mark.launches
def test_launches_refuse_resume_and_refine_in_one_line(tmp_path, capsys):
    """The first launched on 2 ranks (said once, not per rank); the second, of the option alone, in this process."""
    assert_refused_before_measuring(["--launches", "2", "--refine", "--sizes", "8"],
                                    "--launches goes without --refine", tmp_path / "run")
    assert_refused_here(capsys, ["--launches", "0", "--sizes", "8"], "--launches 0; accepted: 1 or more",
                        tmp_path / "run")


@pytest.mark.launches
def test_a_cell_whose_buffers_pass_max_memory_together_plans_each_visit_and_still_measures_every_point(tmp_path):
    out = tmp_path / "run"
    # 64 KiB per peer on 2 ranks: 256 KiB of buffers a point, three points a cell; 300 KiB holds one at a time
    done = bench(2, "run", "--algorithms", "native,pairwise", "--sizes", "64K", "--nprocs", "2", "--iterations", "4",
                 "--max-memory", "300K", "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert {r.algorithm for r in rows} == {"native", "pairwise", CONTROL}
    assert all(r.valid and r.iterations == 4 for r in rows), [r.note for r in rows]
    assert all([r for _, r, _ in read_rounds(out)[row.key]] == [0, 1, 2, 3] for row in rows)

