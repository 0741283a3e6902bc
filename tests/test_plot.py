"""`bench plot`: every figure from a small real run, index.html, the message without matplotlib, and figures
that hold every algorithm: styles that differ, legends whole, titles apart; simulated records' pages."""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pytest
from decide_fixtures import two_algorithm_run
from support import mpi_library, python

import a2a
from a2a.algos.registry import with_defaults
from a2a.record.results import Recorder, Row, load, write_meta

FIGURES = ["time_vs_size", "busbw_vs_size", "speedup_heatmap", "ratio_to_native", "decision_map", "model_overlay",
           "samples_p2"]


@pytest.mark.launches
def test_every_figure_is_drawn_from_a_real_run(plotted_run):
    pytest.importorskip("matplotlib")
    assert plotted_run.stdout is not None
    plots = plotted_run.run / "plots"  # the default place
    for name in FIGURES:
        for suffix in ("png", "svg"):
            image = plots / f"{name}.{suffix}"
            assert image.stat().st_size > 2000, image
            assert f"{name}.png" in plotted_run.stdout
        assert (plots / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (plots / f"{name}.svg").read_bytes()[:2000]
    page = (plots / "index.html").read_text()
    assert all(f'src="{name}.png"' in page and f'href="{name}.svg"' in page for name in FIGURES)
    library = mpi_library().strip().splitlines()[0]
    assert html.escape(library) in page and "Cost model" in page and str(plotted_run.run.resolve()) in page
    assert sorted(p.stem for p in plots.glob("*.png")) == sorted(FIGURES)


@pytest.mark.launches
def test_model_command_runs_on_the_real_run(plotted_run):
    done = python("-m", "bench", "model", str(plotted_run.run), "--predict-nprocs", "64")
    assert done.returncode == 0, done.stderr
    for series in ("native", "pairwise", "bruck"):  # at their defaults, named without options
        assert series in done.stdout
    assert "Predicted median time at 64 processes" in done.stdout


def test_stalls_are_counted_and_marked(tmp_path):
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    two_algorithm_run(tmp_path)
    (tmp_path / "plots").mkdir()
    with plot.pyplot().rc_context(plot.STYLE):  # the samples figure alone, as plot_all draws it
        figures = plot.samples_over_iterations(plot.prepare(load(tmp_path)), tmp_path / "plots")
    assert "samples_p2" in [f.name for f in figures]
    svg = (tmp_path / "plots" / "samples_p2.svg").read_text()
    assert "stalls: 4" in svg  # one 0.3 s sample in each of the four points


def test_the_png_is_the_rendered_canvas_cut_to_the_saved_box(tmp_path):
    """save writes the layout's own pixels: the same as matplotlib drawing them again into that box, and where
    something lies outside the canvas, drawn again with it in."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    from a2a.analysis import plot

    def figure(outside: bool = False):
        fig, [ax] = plot.panels(1, 1, (3.0, 2.0))
        ax.imshow(np.arange(12.0).reshape(3, 4))
        ax.set_title("cells")
        if outside:
            fig.text(1.1, 0.5, "beyond the canvas")
        return fig

    plot.save(figure(), tmp_path, "cut")
    again = figure()
    plot.lay_out(again)
    box = plot.whole_pixels(again.get_tightbbox().padded(0.1))
    again.savefig(tmp_path / "drawn.png", dpi=plot.DPI, bbox_inches=box)
    assert np.array_equal(imread(tmp_path / "cut.png"), imread(tmp_path / "drawn.png"))
    plot.save(figure(outside=True), tmp_path, "wide")
    wide = imread(tmp_path / "wide.png")
    assert (wide[:, round(3.2 * plot.DPI):, :3] < 0.5).any()  # the text right of the canvas, drawn


@pytest.mark.launches
def test_without_matplotlib_the_message_names_the_extra(tmp_path):
    two_algorithm_run(tmp_path)
    hide = ("import sys; sys.modules['matplotlib'] = None; "  # makes `import matplotlib` fail
            "from bench.cli import entry; entry(['plot', sys.argv[1]])")
    done = python("-c", hide, str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("pip install 'a2a-testbed[plot]'") == 1, done.stderr
    assert "matplotlib" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "plots").exists()


@pytest.mark.launches
def test_plot_refuses_a_run_without_valid_points(tmp_path):
    pytest.importorskip("matplotlib")
    recorder = Recorder(tmp_path)
    recorder.add(Row(2, 1, 2, "native", "", "float32", 2, 8, note="skipped: too big"))
    recorder.close()
    done = python("-m", "bench", "plot", str(tmp_path))
    assert done.returncode == 2
    assert "no valid measured points" in done.stderr and "Traceback" not in done.stderr


# --- every algorithm on one page: styles, names, layout ---------------------------------------

VARIANTS = {"bruck": ["radix=3", "radix=4", "radix=8"], "throttled": ["window=2", "window=16"],
            "onesided": ["op=get;sync=lock", "op=put;sync=pscw"], "pairwise": ["schedule=xor"],
            "locality_aware": ["groups=2;placement=cyclic;ppn=4"], "multileader": ["leaders=4;placement=block;ppn=4"],
            "hierarchical": ["placement=cyclic;ppn=4"], "linear_sync": ["window=4"]}


def crowded_record(directory: Path, nprocs: tuple[int, ...] = (8,)) -> Path:
    """Every alltoall algorithm of the registry at its defaults and a dozen variants with long names."""
    defaults = {name: with_defaults(name, {}) for name in a2a.algorithms("alltoall") if name != "auto"}
    series = [(name, ";".join(f"{k}={v}" for k, v in sorted(opts.items()))) for name, opts in defaults.items()]
    series += [(name, options) for name, variants in VARIANTS.items() for options in variants]
    random = np.random.default_rng(7)
    recorder = Recorder(directory)
    for p in nprocs:
        for size in (8, 1024, 1 << 17, 1 << 20):
            for k, (name, options) in enumerate(series):
                median = (5 + k % 7) * p ** 0.5 + size * p * (1 + 0.1 * random.random()) / 2e3
                recorder.add(Row(p, p // 4, 4, name, options, "uint8", size, size, 5, 1, t_p50_us=median,
                                 t_min_us=median * 0.9, t_p90_us=median * 1.2, valid=True), [median * 1e-6] * 5)
    recorder.close()
    write_meta(directory, {"status": "complete", "option_defaults": defaults})
    return directory


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The crowded record's figures laid out as `save` lays them out, kept to measure what they drew: (name, figure)
    pairs, and the Data. Not written: the files copy that layout's pixels and draw it again as SVG (the real run's
    test reads them), and what these tests measure is the layout."""
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    directory = crowded_record(tmp_path_factory.mktemp("crowded"))
    kept = []

    def keep(fig, where, name):
        kept.append((name, fig))
        plot.lay_out(fig)
        plot.pyplot().close(fig)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plot, "save", keep)
        plot.plot_all(load(directory), directory / "plots")
    return kept, plot.prepare(load(directory))


def renderer_of(fig):
    """A renderer for a saved (closed) figure: its layout stays as it was saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg(fig).get_renderer()


def overlap(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def test_no_two_series_share_colour_and_marker():
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    styles = plot.series_styles([f"s{k}" for k in range(80)])
    assert len({(s.color, s.marker) for s in styles.values()}) == 80
    first = list(styles.values())[:10]
    assert len({s.color for s in first}) == 10  # the first ten (the winners) differ in colour alone


def test_long_names_wrap_at_their_separators_the_same_everywhere():
    from a2a.analysis import plot

    name = "locality_aware:groups=2:placement=cyclic:ppn=4"
    wrapped = plot.wrap_label(name)
    assert wrapped == "locality_aware:groups=2:\nplacement=cyclic:ppn=4"
    assert all(len(line) <= plot.LABEL_WIDTH for line in wrapped.splitlines())
    assert plot.wrap_label("bine") == "bine" and wrapped.replace("\n", "") == name
    row = Row(8, 2, 4, "bruck", "radix=2", "uint8", 8, 8)
    assert plot.series_name(row, {"bruck": {"radix": "2"}}) == "bruck"  # defaults left out, as tables do


def test_every_legend_is_whole_and_beside_the_panels(drawn):
    figures, data = drawn
    legends = 0
    for name, fig in figures:
        renderer = renderer_of(fig)
        for legend in fig.legends:
            legends += 1
            box = legend.get_window_extent(renderer)
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0, name
            assert not any(overlap(box, ax.get_tightbbox(renderer)) for ax in fig.axes), name
    assert legends >= 3
    time_legend = dict(figures)["time_vs_size"].legends[0]
    assert {t.get_text() for t in time_legend.get_texts()} == set(data.names.values())
    assert len(data.labels) >= 25


def test_no_title_overlaps_another_or_a_panel(drawn):
    figures, _ = drawn
    for name, fig in figures:
        renderer = renderer_of(fig)
        titled = [ax for ax in fig.axes if ax.get_title()]
        boxes = [ax.title.get_window_extent(renderer) for ax in titled]
        for i, box in enumerate(boxes):
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, (name, titled[i].get_title())
            for j, other in enumerate(titled):
                if j != i:
                    assert not overlap(box, boxes[j]), (name, titled[i].get_title(), other.get_title())
                    assert not overlap(box, other.get_window_extent(renderer)), (name, titled[i].get_title())


def test_lines_of_one_panel_differ_and_crowded_panels_put_the_fastest_in_front(drawn):
    figures, data = drawn
    ax = dict(figures)["time_vs_size"].axes[0]
    lines = [line for line in ax.get_lines() if line.get_linestyle() != "None"]
    assert len({(line.get_color(), line.get_marker()) for line in lines}) == len(lines) == len(data.labels)
    strong = [line for line in lines if line.get_alpha() in (None, 1)]
    assert 1 <= len(strong) < len(lines)


def test_figures_are_chosen_by_the_records_timing():
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    assert plot.samples_over_iterations in plot.makers({"sync"})
    assert plot.samples_over_iterations not in plot.makers({"simulated"}, simulated=True)
    assert plot.makers({"overlap"}, simulated=True) == [plot.overlap_vs_size, *plot.MEASURED[:-1]]
    assert plot.makers({"a-protocol-to-come"}) == plot.MEASURED  # until it lists its own
    assert plot.makers({"sync", "pipelined"}) == plot.MEASURED  # each maker once


def simulated_record(directory: Path) -> Path:
    """A record as `bench simulate` writes it: simulated rows, one sample each, the platform's facts in meta."""
    recorder = Recorder(directory)
    for p in (8, 16):
        for size in (8, 1024, 65536):
            for k, (name, options) in enumerate([("linear", ""), ("bruck", "radix=2"), ("native", "selector=mpich")]):
                seconds = (1 + k) * 1e-6 * p + size * p * 1e-10 * (3 - k)
                recorder.add(Row(p, p, 1, name, options, "uint8", size, size, 1, 0, t_p50_us=seconds * 1e6,
                                 t_min_us=seconds * 1e6, valid=True, timing="simulated", platform="switch"), [seconds])
    recorder.close()
    write_meta(directory, {"schema": "a2a-record/1", "backend": "simgrid", "platform": "switch",
                           "link": "100Gbps,1us", "copy_bandwidth": 9.8e9, "network": "calibrated",
                           "message_cost": {"send_us": 1.5, "recv_us": 0.5, "source": "--message-cost"},
                           "bandwidth_factor": {"factor": 0.0, "source": "none"}, "simgrid": "4.1",
                           "replay": "s4u", "status": "complete", "option_defaults": {"bruck": {"radix": "2"}},
                           "by_nprocs": {"8": {"nnodes": 8, "ppn": 1}, "16": {"nnodes": 16, "ppn": 1}}})
    return directory


def test_a_simulated_record_says_what_its_page_shows(tmp_path):
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    figures = plot.plot_all(load(simulated_record(tmp_path)), tmp_path / "plots")
    assert [f.name for f in figures] == ["time_vs_size", "busbw_vs_size", "speedup_heatmap", "decision_map",
                                         "model_overlay"]
    page = (tmp_path / "plots" / "index.html").read_text()
    for said in ("All-to-all simulated", "Simulated, not measured", "SimGrid 4.1", "switch (8 processes on 8 nodes",
                 "100Gbps bandwidth, 1us latency", "send 1.5 us + receive 0.5 us per message (from --message-cost)",
                 "Speed-up over native:selector=mpich", "simulated time per all-to-all"):
        assert html.escape(said) in page or said in (tmp_path / "plots" / "time_vs_size.svg").read_text(), said
    assert "MPI library" not in page and "samples_p" not in page


def test_an_overlap_record_draws_both_overlap_figures_per_size(tmp_path, monkeypatch):
    """OSU's figure solid and IMB-NBC's dotted, from the record's columns, beside the measured figures."""
    pytest.importorskip("matplotlib")
    from a2a.analysis import plot

    recorder = Recorder(tmp_path)
    for k, name in enumerate(["linear", "pairwise"]):
        for size in (1024, 65536):
            recorder.add(Row(2, 1, 2, name, "", "uint8", size, size, 5, 1, t_p50_us=10.0 + k, t_min_us=9.0,
                             valid=True, timing="overlap", tests="10", progress="poll", compute_ratio="1",
                             t_pure_us=8.0, t_overall_us=10.0 + k, t_compute_us=8.0,
                             overlap_osu_pct=75.0 - 10 * k, overlap_imb_pct=70.0 - 10 * k), [1e-5] * 5)
    recorder.close()
    write_meta(tmp_path, {"status": "complete"})
    kept, save = {}, plot.save
    monkeypatch.setattr(plot, "save", lambda fig, where, name: (kept.update({name: fig}), save(fig, where, name)))
    figures = [f.name for f in plot.plot_all(load(tmp_path), tmp_path / "plots")]
    assert figures[0] == "overlap_vs_size" and "time_vs_size" in figures and any("samples_p2" in f for f in figures)
    drawn = {(tuple(line.get_ydata()), line.get_linestyle()) for line in kept["overlap_vs_size"].axes[0].lines}
    assert {((75.0, 75.0), "-"), ((70.0, 70.0), ":"), ((65.0, 65.0), "-"), ((60.0, 60.0), ":")} <= drawn
