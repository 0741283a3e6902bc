"""No hidden state: a failing plug-in fails every time, plots leave rcParams alone, `bench show`
labels options from the run's own record."""
from __future__ import annotations

import json
import sys

import pytest
from decide_fixtures import two_algorithm_run
from support import python

import a2a
from a2a.algos import registry
from a2a.errors import PluginError
from a2a.record.results import Recorder, Row, short_label

HALFWAY = '''
import a2a

@a2a.register("{name}")
def first(comm, sendbuf, recvbuf):
    """Registered before the import fails."""
    return lambda: None

{tail}
'''


def test_a_plugin_that_fails_to_import_fails_again_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "halfway.py"
    path.write_text(HALFWAY.format(name="halfway_a", tail="raise RuntimeError('broken on purpose')"))
    for _ in range(2):
        with pytest.raises(PluginError, match="broken on purpose"):
            a2a.load_plugin(path)
        assert "halfway_a" not in a2a.algorithms()
        assert not [m for m in sys.modules if m.startswith("a2a_plugin_halfway_")]
    path.write_text(HALFWAY.format(name="halfway_a", tail=""))
    assert a2a.load_plugin(path) == ["halfway_a"]


class FailingEntryPoint:
    name, value = "halfway", "halfway_ep:first"

    def load(self) -> None:
        @a2a.register("halfway_ep")
        def first(comm, sendbuf, recvbuf):
            """Registered before the entry point fails."""
        raise ImportError("entry point broken on purpose")


def test_a_failing_entry_point_raises_every_time(monkeypatch):
    table = registry.Registry()
    monkeypatch.setattr(registry, "REGISTRY", table)
    monkeypatch.setattr(registry, "entry_points", lambda group: [FailingEntryPoint()])
    for _ in range(2):
        with pytest.raises(PluginError, match="entry point halfway .* broken on purpose"):
            table.all()
    assert "halfway_ep" not in table._algorithms


def test_plots_leave_the_callers_rcparams_alone(tmp_path, monkeypatch):
    """plot_all draws every figure inside its own style's rc_context: one figure (time_vs_size, the first) shows the
    style applied and given back as all seven would, at a seventh of the rendering."""
    matplotlib = pytest.importorskip("matplotlib")
    from a2a.analysis import plot
    from a2a.record.results import load

    every = plot.makers
    monkeypatch.setattr(plot, "makers", lambda *args: every(*args)[:1])
    two_algorithm_run(tmp_path)
    with matplotlib.rc_context({"font.size": 13.0, "axes.grid": False}):
        before = {key: matplotlib.rcParams[key] for key in plot.STYLE}
        plot.plot_all(load(tmp_path), tmp_path / "plots")
        assert {key: matplotlib.rcParams[key] for key in plot.STYLE} == before
    assert "font-size:9px" in (tmp_path / "plots" / "time_vs_size.svg").read_text().replace(" ", "")


def test_labels_hide_the_options_the_record_says_are_defaults():
    row = Row(2, 1, 2, "mine", "depth=3;width=8", "float32", 2, 8)
    assert short_label(row, {"mine": {"depth": "3", "width": "4"}}) == "mine:width=8"
    assert short_label(row, {}) == "mine:depth=3:width=8"  # unknown to the record: every option shown


@pytest.mark.launches
def test_bench_show_reads_option_defaults_from_the_record_not_the_registry(tmp_path):
    recorder = Recorder(tmp_path)
    recorder.add(Row(2, 1, 2, "plugged", "depth=3;width=8", "float32", 2, 8, iterations=2, t_mean_us=5.0,
                     valid=True), [5e-6, 5e-6])
    recorder.close()
    meta = {"status": "complete", "option_defaults": {"plugged": {"depth": "3", "width": "4"}}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    shown = python("-m", "bench", "show", str(tmp_path))  # the plug-in is not loaded here
    assert shown.returncode == 0, shown.stderr
    assert "plugged:width=8" in shown.stdout and "depth" not in shown.stdout
