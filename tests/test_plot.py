"""`bench plot`: every figure from a small real run, index.html, and the message without matplotlib."""
from __future__ import annotations

import html

import pytest
from decide_fixtures import two_algorithm_run
from support import mpi_library, mpiexec, python

from a2a.record.results import Recorder, Row

FIGURES = ["time_vs_size", "busbw_vs_size", "speedup_heatmap", "decision_map", "model_overlay",
           "samples_p2"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A real two-rank sweep: three algorithms, three sizes, a few iterations."""
    directory = tmp_path_factory.mktemp("run") / "results"
    done = mpiexec(2, "-m", "bench", "run", "--sizes", "8,1K,16K", "--iterations", "5",
                   "--algorithms", "native,pairwise,bruck", "--output", str(directory), "--quiet",
                   timeout=240)
    assert done.returncode == 0, done.stderr
    return directory


def test_every_figure_is_drawn_from_a_real_run(real_run):
    pytest.importorskip("matplotlib")
    done = python("-m", "bench", "plot", str(real_run), timeout=600)  # matplotlib is slow on a loaded machine
    assert done.returncode == 0, done.stderr
    plots = real_run / "plots"  # the default place
    for name in FIGURES:
        for suffix in ("png", "svg"):
            image = plots / f"{name}.{suffix}"
            assert image.stat().st_size > 2000, image
            assert f"{name}.png" in done.stdout
        assert (plots / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (plots / f"{name}.svg").read_bytes()[:2000]
    page = (plots / "index.html").read_text()
    assert all(f'src="{name}.png"' in page and f'href="{name}.svg"' in page for name in FIGURES)
    library = mpi_library().strip().splitlines()[0]
    assert html.escape(library) in page and "Cost model" in page and str(real_run.resolve()) in page
    assert sorted(p.stem for p in plots.glob("*.png")) == sorted(FIGURES)


def test_model_command_runs_on_the_real_run(real_run):
    done = python("-m", "bench", "model", str(real_run), "--predict-nprocs", "64")
    assert done.returncode == 0, done.stderr
    for series in ("native", "pairwise:schedule=shift", "bruck:radix=2"):
        assert series in done.stdout
    assert "Predicted median time at 64 processes" in done.stdout


def test_stalls_are_counted_and_marked(tmp_path):
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot
    from a2a.record.results import load

    two_algorithm_run(tmp_path)
    figures = plot.plot_all(load(tmp_path), tmp_path / "plots")
    assert "samples_p2" in [f.name for f in figures]
    svg = (tmp_path / "plots" / "samples_p2.svg").read_text()
    assert "stalls: 4" in svg  # one 0.3 s sample in each of the four points


def test_without_matplotlib_the_message_names_the_extra(tmp_path):
    two_algorithm_run(tmp_path)
    hide = ("import sys; sys.modules['matplotlib'] = None; "  # makes `import matplotlib` fail
            "from bench.cli import entry; entry(['plot', sys.argv[1]])")
    done = python("-c", hide, str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("pip install 'a2a-testbed[plot]'") == 1, done.stderr
    assert "matplotlib" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "plots").exists()


def test_plot_refuses_a_run_without_valid_points(tmp_path):
    pytest.importorskip("matplotlib")
    recorder = Recorder(tmp_path)
    recorder.add(Row(2, 1, 2, "native", "", "float32", 2, 8, note="skipped: too big"))
    recorder.close()
    done = python("-m", "bench", "plot", str(tmp_path))
    assert done.returncode == 2
    assert "no valid measured points" in done.stderr and "Traceback" not in done.stderr
