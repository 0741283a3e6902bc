"""A simulation's ETA weighs its points by the messages they replay (ranks x messages), not one point as another: a
512-rank sweep whose cheap Bruck points ended first used to promise seconds for hours of linear."""
from __future__ import annotations

import time

import pytest

from a2a.record.results import Row
from a2a.schedules.events import Schedule
from a2a.simulate import effort
from a2a.simulate.capture import capture
from a2a.simulate.machine import simulated_variants
from a2a.sweep.launch import fresh_sweep
from a2a.sweep.session import Backend, Output, Session, status_line


def test_the_eta_counts_what_is_left_of_the_expected_cost():
    assert "ETA 0m10s" in status_line(1, 2, 10.0, "x")  # points alike: the part of the points
    assert "ETA 1m30s" in status_line(1, 2, 10.0, "x", share=0.1)


def test_a_formula_expects_ranks_times_messages_and_a_capture_counts_them():
    bruck, linear = sorted(sweep(["linear", "bruck"], "512").todo, key=lambda p: p.variant.label)
    assert effort.expected(linear, 8) == 512 * 511 and effort.expected(bruck, 8) == 512 * 9
    schedule: Schedule = capture("linear", {}, 6, 1, "float32")
    assert effort.captured(linear, schedule) == 6 * 5


def test_a_sweep_of_cheap_then_dear_points_says_how_long_the_dear_ones_take(tmp_path, capsys):
    state = sweep(["bruck", "linear"], "64", tmp_path / "sim")
    bruck, linear = sorted(state.todo, key=lambda p: p.variant.label)
    backend = Backend("simgrid", {}, "", weight=lambda point: effort.expected(point, 1))
    session = Session(tmp_path / "sim", state, backend, Output())
    session.began = time.monotonic() - 10  # the Bruck point took 10 s
    session.end_point(valid(bruck.row(1, 64)), [1e-6])
    said = capsys.readouterr().err.splitlines()[-1]
    left = 10 * effort.expected(linear, 1) / effort.expected(bruck, 1)  # 64 x 63 messages after 64 x 6
    assert f"ETA {int(left) // 60}m{int(left) % 60:02d}s" in said, said
    session.finish("complete")


def sweep(algorithms: list[str], nprocs: str, output=None):
    values = {"algorithms": ",".join(algorithms), "nprocs": nprocs, "sizes": "8", "platform": "switch",
              "output": str(output) if output else None}
    return fresh_sweep(values, "simgrid", choose=simulated_variants, suffix="-sim")[1]


def valid(row: Row) -> Row:
    row.valid = True
    return row


@pytest.fixture(autouse=True)
def _here(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a fresh sweep without --output names a directory under results/
