"""Figures of a results directory (PNG and SVG) and an index.html that shows them with the run's metadata.

Needs matplotlib (the optional `plot` extra); it is imported only when a figure is drawn, with
the Agg backend, so this works on machines without a display. Never imports MPI.
"""
from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from a2a.analysis import model
from a2a.errors import BadResults, MissingMatplotlib
from a2a.record.results import NATIVE, Row, Run, point_key
from a2a.record.stats import bandwidths, stall_mask
from a2a.units import human_bytes

INSTALL_HINT = "pip install 'a2a-testbed[plot]'"
PANEL = (4.6, 3.4)  # inches per panel
DPI = 110
BAND = (10, 90)  # percentiles of the shaded band around each median
STYLE = {"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8, "svg.fonttype": "none", "axes.grid": True,
         "grid.alpha": 0.3}  # applied while drawing only: the caller's rcParams stay as they were


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or MissingMatplotlib naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        raise MissingMatplotlib(f"plotting needs matplotlib, which is not installed; install the "
                                f"plot extra: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class Figure:
    """One written figure: file stem, title and what it shows."""

    name: str
    title: str
    caption: str


@dataclass
class Data:
    """What every figure draws from: valid rows, samples by point, fitted models, colours."""

    run: Run
    rows: list[Row]
    fits: list[model.Fit]
    colors: dict[str, Any]
    stall_threshold: float

    @property
    def panels(self) -> list[Panel]:
        """Process counts (with timing mode, mesh and groups when a run has several), ascending."""
        return sorted({panel_of(r) for r in self.rows})

    @property
    def sizes(self) -> list[int]:
        return sorted({r.bytes_per_peer for r in self.rows})

    @property
    def labels(self) -> list[str]:
        return sorted({r.label for r in self.rows})

    def series(self, panel: Panel, name: str) -> list[Row]:
        """Rows of one series in one panel, by size."""
        return sorted((r for r in self.rows if panel_of(r) == panel and r.label == name),
                      key=lambda r: r.bytes_per_peer)

    def samples(self, row: Row) -> np.ndarray:
        return np.asarray(self.run.samples.get(point_key(row), []), dtype=float)


Panel = tuple  # (nprocs, (timing, mesh, groups)): what one panel, heat-map row or samples figure shows


def panel_of(row: Row) -> Panel:
    return row.nprocs, model.context_of(row)


def panel_title(panel: Panel, unit: str = " processes") -> str:
    """'8 processes', or '8 processes [mesh 2x4 groups z]'."""
    return f"{panel[0]}{unit}{model.context_text(panel[1])}"


def prepare(run: Run) -> Data:
    """Valid measured rows, the model fits and one colour per series."""
    plt = pyplot()
    rows = [r for r in run.rows if r.valid and r.t_p50_us > 0]
    if not rows:
        raise BadResults(f"{run.directory}: no valid measured points to plot")
    labels = sorted({r.label for r in rows})
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20").colors
    colors = {name: palette[i % len(palette)] for i, name in enumerate(labels)}
    fits = model.fit(rows) if any(model.row_placement(r).nprocs >= 2 for r in rows) else []
    threshold = float(run.meta.get("config", {}).get("stall_threshold", 0.1))
    return Data(run, rows, fits, colors, threshold)


def plot_all(run: Run, directory: Path) -> list[Figure]:
    """Draw every figure into `directory` (PNG and SVG) and write index.html; return the figures."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    figures: list[Figure] = []
    with pyplot().rc_context(STYLE):
        data = prepare(run)
        for draw in (time_vs_size, busbw_vs_size, speedup_heatmaps, decision_map, model_overlay):
            figures += draw(data, directory)
        figures += samples_over_iterations(data, directory)
    write_index(data, figures, directory)
    return figures


# --- helpers ------------------------------------------------------------------------------

def panels(count: int, columns: int = 3) -> tuple[Any, list[Any]]:
    """A figure with `count` panels in rows of at most `columns`; unused panels hidden."""
    plt = pyplot()
    cols = min(columns, count)
    nrows = math.ceil(count / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(PANEL[0] * cols, PANEL[1] * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def bytes_axis(ax: Any) -> None:
    """Log-2 x axis of bytes per peer, ticks as 4, 64, 1K, 16K."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(round(v)) if v >= 1 else ""))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def log_axis(ax: Any) -> None:
    """Log y axis with plain numbers (0.01, 10, 1000), not powers of ten."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def legend_below(fig: Any, handles: list[Any], labels: list[str]) -> None:
    """One legend for the whole figure, under the panels."""
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False,
               bbox_to_anchor=(0.5, 0))
    rows = math.ceil(len(labels) / 4)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * rows * 3.4 / fig.get_figheight(), 1, 1))


def save(fig: Any, directory: Path, name: str) -> None:
    """Write NAME.png and NAME.svg, then free the figure."""
    fig.savefig(directory / f"{name}.png", dpi=DPI)
    fig.savefig(directory / f"{name}.svg")
    pyplot().close(fig)


def band(data: Data, row: Row) -> tuple[float, float]:
    """Low and high of the shaded band (p10, p90 of the samples; else min and p90), in us."""
    samples = data.samples(row)
    if samples.size:
        low, high = np.percentile(samples, BAND) * 1e6
        return float(low), float(high)
    return row.t_min_us, row.t_p90_us


def each_panel(data: Data, draw: Callable[[Any, Panel], None]) -> tuple[Any, list[Any]]:
    """One panel per process count (and mesh or timing), each drawn by `draw(ax, panel)`."""
    fig, axes = panels(len(data.panels))
    for ax, panel in zip(axes, data.panels):
        draw(ax, panel)
        ax.set_title(panel_title(panel))
    return fig, axes


def series_legend(data: Data, fig: Any, names: Iterable[str]) -> None:
    plt = pyplot()
    names = list(names)
    handles = [plt.Line2D([], [], color=data.colors[n], marker="o", markersize=4) for n in names]
    legend_below(fig, handles, names)


# --- the figures --------------------------------------------------------------------------

def size_figure(data: Data, directory: Path, figure: Figure, ylabel: str,
                draw_series: Callable[[Any, str, list[Row]], None]) -> list[Figure]:
    """A log-log figure against bytes per peer, a panel per process count, a series per algorithm."""
    def draw(ax: Any, panel: Panel) -> None:
        for name in data.labels:
            rows = data.series(panel, name)
            if rows:
                draw_series(ax, name, rows)
        bytes_axis(ax)
        log_axis(ax)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel(ylabel)

    fig, _ = each_panel(data, draw)
    series_legend(data, fig, data.labels)
    save(fig, directory, figure.name)
    return [figure]


def time_vs_size(data: Data, directory: Path) -> list[Figure]:
    """Median time vs bytes per peer, log-log, a panel per process count, p10-p90 bands."""
    def draw(ax: Any, name: str, rows: list[Row]) -> None:
        x = [r.bytes_per_peer for r in rows]
        low, high = zip(*(band(data, r) for r in rows))
        ax.fill_between(x, low, high, color=data.colors[name], alpha=0.15, linewidth=0)
        ax.plot(x, [r.t_p50_us for r in rows], "o-", color=data.colors[name], markersize=3)
        stalled = [r for r in rows if r.stalls]
        ax.plot([r.bytes_per_peer for r in stalled], [r.t_p50_us for r in stalled], "o",
                markersize=9, markerfacecolor="none", markeredgecolor="red")

    return size_figure(data, directory, Figure(
        "time_vs_size", "Time vs message size",
        f"Median time per all-to-all (line) with the p{BAND[0]}-p{BAND[1]} band of its samples (shaded), "
        "log-log, one panel per process count. Red rings: points with stalls."),
        "time per all-to-all (us)", draw)


def busbw_vs_size(data: Data, directory: Path) -> list[Figure]:
    """Bus bandwidth (nccl-tests convention) vs bytes per peer, a panel per process count."""
    def draw(ax: Any, name: str, rows: list[Row]) -> None:
        busbw = [bandwidths(r.bytes_per_peer, model.row_placement(r).nprocs, r.t_p50_us * 1e-6)[1] for r in rows]
        ax.plot([r.bytes_per_peer for r in rows], busbw, "o-", color=data.colors[name], markersize=3)

    return size_figure(data, directory, Figure(
        "busbw_vs_size", "Bus bandwidth vs message size",
        "busbw = bytes_per_peer x nprocs / median time x (nprocs-1)/nprocs, as nccl-tests reports it; "
        "higher is better."), "bus bandwidth (GB/s)", draw)


def median_grid(data: Data, name: str) -> np.ndarray:
    """Median us of a series as a (panel x size) array, NaN where not measured."""
    grid = np.full((len(data.panels), len(data.sizes)), np.nan)
    for r in data.rows:
        if r.label == name:
            grid[data.panels.index(panel_of(r)), data.sizes.index(r.bytes_per_peer)] = r.t_p50_us
    return grid


def cell_axes(ax: Any, sizes: list[int], rows: list[str], ylabel: str = "") -> None:
    """Sizes across, `rows` up (process counts, topologies), one cell each."""
    ax.set_xticks(range(len(sizes)), [human_bytes(s) for s in sizes], rotation=60)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("bytes per peer")
    ax.set_ylabel(ylabel)
    ax.grid(False)


def speedup_heatmaps(data: Data, directory: Path) -> list[Figure]:
    """native median / series median per (size, nprocs): > 1 means faster than native."""
    from matplotlib.colors import LogNorm

    others = [n for n in data.labels if n != NATIVE]
    if NATIVE not in data.labels or not others:
        return []
    native = median_grid(data, NATIVE)
    ratios = {name: native / median_grid(data, name) for name in others}
    finite = np.concatenate([r[np.isfinite(r)] for r in ratios.values()])
    span = max(2.0, float(np.max(np.abs(np.log2(finite))))) if finite.size else 2.0
    norm, cmap = LogNorm(2 ** -span, 2 ** span), pyplot().get_cmap("RdBu")
    fig, axes = panels(len(others))
    image = None
    for ax, name in zip(axes, others):
        grid = np.ma.masked_invalid(ratios[name])
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto", origin="lower")
        annotate(ax, grid, lambda v: f"{v:.2g}", lambda i, j, v: cmap(norm(v)))
        cell_axes(ax, data.sizes, [panel_title(p, "") for p in data.panels], "processes")
        ax.set_title(f"{name} vs native")
    fig.tight_layout(rect=(0, 0, 0.92, 1))
    bar = fig.colorbar(image, ax=axes, fraction=0.03, pad=0.02)
    bar.set_label("speed-up over native")
    step = 1 if span <= 3 else 2 if span <= 8 else 4
    exponents = [e for e in range(-math.floor(span), math.floor(span) + 1) if e % step == 0]
    bar.set_ticks([2.0 ** e for e in exponents], labels=[f"{2.0 ** e:.3g}" for e in exponents])
    bar.ax.minorticks_off()
    save(fig, directory, "speedup_heatmap")
    return [Figure("speedup_heatmap", "Speed-up over native",
                   "Median time of native divided by the algorithm's, per size and process count. "
                   "Blue: faster than native; red: slower; blank: not measured.")]


def annotate(ax: Any, grid: np.ndarray, text: Callable[[float], str],
             background: Callable[[int, int, float], Any] | None = None) -> None:
    """Write each cell's value in it (white on dark cells) when the grid is small enough to read."""
    if grid.size > 200:
        return
    for (i, j), value in np.ndenumerate(np.ma.filled(grid, np.nan)):
        if np.isfinite(value):
            dark = background is not None and luminance(background(i, j, value)) < 0.45
            ax.text(j, i, text(value), ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")


def luminance(rgba: Any) -> float:
    """Perceived brightness of a colour, 0 (black) to 1 (white)."""
    r, g, b = rgba[:3]
    return 0.299 * r + 0.587 * g + 0.114 * b




def decision_map(data: Data, directory: Path) -> list[Figure]:
    """Size x process count coloured by the series with the lowest median."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    grids = {name: median_grid(data, name) for name in data.labels}
    stack = np.stack([grids[n] for n in data.labels])
    filled = np.where(np.isfinite(stack), stack, np.inf)
    measured = np.isfinite(stack).any(axis=0)
    best = np.where(measured, np.argmin(filled, axis=0), -1)
    fastest = np.where(measured, np.min(filled, axis=0), np.nan)
    winners = sorted({data.labels[i] for i in best.flat if i >= 0})
    index = {data.labels.index(n): k for k, n in enumerate(winners)}
    cells = np.ma.masked_less(np.vectorize(lambda i: index.get(i, -1))(best), 0)
    fig, axes = panels(1, 1)
    ax = axes[0]
    names = max(len(panel_title(p, "")) for p in data.panels)
    fig.set_size_inches(max(6.0, 0.55 * len(data.sizes) + 2 + 0.07 * names),
                        max(3.0, 0.45 * len(data.panels) + 2.2))
    ax.imshow(cells, cmap=ListedColormap([data.colors[n] for n in winners]), vmin=-0.5,
              vmax=len(winners) - 0.5, aspect="auto", origin="lower")
    if NATIVE in grids:
        annotate(ax, np.ma.masked_invalid(grids[NATIVE] / fastest),
                 lambda v: f"{v:.1f}x", lambda i, j, v: data.colors[winners[cells[i, j]]])
    cell_axes(ax, data.sizes, [panel_title(p, "") for p in data.panels], "processes")
    ax.set_title("Fastest by median (text: speed-up over native)")
    handles = [Patch(color=data.colors[n]) for n in winners]
    legend_below(fig, handles, winners)
    save(fig, directory, "decision_map")
    return [Figure("decision_map", "Decision map",
                   "The series with the lowest median time in each cell (measured, not tested for "
                   "significance; `bench decide` does that), with its speed-up over native.")]


def model_overlay(data: Data, directory: Path) -> list[Figure]:
    """Measured medians (points) and the fitted alpha-beta curves (lines), a panel per series."""
    if not data.fits:
        return []
    plt = pyplot()
    counts = sorted({p for fit in data.fits for p in fit.nprocs})
    palette = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(counts)))
    shade = dict(zip(counts, palette))
    fig, axes = panels(len(data.fits))
    grid = np.geomspace(min(data.sizes), max(data.sizes), 80)
    for ax, fit in zip(axes, data.fits):
        for p in fit.nprocs:
            points = [r for r in fit.residuals if r.nprocs == p]
            ax.plot([r.bytes_per_peer for r in points], [r.measured * 1e6 for r in points], "o",
                    color=shade[p], markersize=4)
            ax.plot(grid, [fit.predict(p, m) * 1e6 for m in grid], "-", color=shade[p], linewidth=1.2)
            cross = fit.crossover(p)
            if grid[0] <= cross <= grid[-1]:
                ax.plot([cross], [fit.predict(p, cross) * 1e6], "v", color=shade[p], markersize=8,
                        markeredgecolor="black")
        bytes_axis(ax)
        log_axis(ax)
        ax.set_title(f"{fit.label}\nmedian error {fit.error:.0%}", fontsize=9)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("time (us)")
    handles = [plt.Line2D([], [], color=shade[p], marker="o", markersize=4) for p in counts]
    handles.append(plt.Line2D([], [], color="gray", marker="v", linestyle="none", markeredgecolor="black"))
    legend_below(fig, handles, [f"{p} processes" for p in counts] + ["crossover (latency = bandwidth term)"])
    save(fig, directory, "model_overlay")
    return [Figure("model_overlay", "Cost model vs measurement",
                   "Measured medians (dots) and the fitted Hockney alpha-beta model (lines) per series "
                   "and process count; a triangle marks the crossover size where the latency and "
                   "bandwidth terms are equal.")]


def samples_over_iterations(data: Data, directory: Path) -> list[Figure]:
    """Every sample of every point in iteration order, a figure per process count, stalls marked."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    if not data.run.samples:
        return []
    figures = []
    norm = LogNorm(min(data.sizes), max(data.sizes) if len(data.sizes) > 1 else min(data.sizes) * 2)
    cmap = plt.get_cmap("viridis")
    for panel in data.panels:
        fig, axes = panels(len(data.labels), columns=4)
        stalls = 0
        for ax, name in zip(axes, data.labels):
            for row in data.series(panel, name):
                samples = data.samples(row)
                if not samples.size:
                    continue
                ax.plot(samples * 1e6, "-", color=cmap(norm(row.bytes_per_peer)), linewidth=0.9)
                stalled = np.flatnonzero(stall_mask(samples, data.stall_threshold))
                stalls += stalled.size
                ax.plot(stalled, samples[stalled] * 1e6, "x", color="red", markersize=7, markeredgewidth=2)
            log_axis(ax)
            ax.set_title(name)
            ax.set_xlabel("iteration")
            ax.set_ylabel("time (us)")
        fig.suptitle(f"{panel_title(panel)}: every sample (max over ranks); red x: stall "
                     f"(>= fastest + {data.stall_threshold:g} s); stalls: {stalls}")
        fig.tight_layout(rect=(0, 0, 0.93, 0.97))
        bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, fraction=0.02, pad=0.01)
        bar.set_label("bytes per peer")
        ticks = data.sizes[:: max(1, len(data.sizes) // 8)]
        bar.set_ticks(ticks, labels=[human_bytes(t) for t in ticks])
        bar.ax.minorticks_off()
        name = f"samples_p{panel[0]}" + "".join(f"_{re.sub('[^A-Za-z0-9]+', '-', part)}"
                                                for part, plain in zip(panel[1], model.PLAIN) if part != plain)
        save(fig, directory, name)
        figures.append(Figure(name, f"Samples over iterations, {panel_title(panel)}",
                              "Every timed iteration of every point, coloured by size; red crosses "
                              "mark stalls, the seed's 0.2 s TCP retransmission delays."))
    return figures


# --- index.html -----------------------------------------------------------------------------

def metadata(run: Run) -> list[tuple[str, str]]:
    """The run's metadata worth showing beside its figures."""
    meta = run.meta
    config = meta.get("config", {})
    library = (meta.get("mpi_library") or "").splitlines()
    hosts = meta.get("hosts") or {}
    items = [
        ("results", str(Path(run.directory).resolve())),
        ("command", meta.get("command", "")),
        ("MPI library", library[0] if library else ""),
        ("hosts", ", ".join(f"{h} ({n} ranks)" for h, n in hosts.items()) if isinstance(hosts, dict) else str(hosts)),
        ("process counts", ", ".join(str(p) for p in config.get("nprocs", sorted({r.nprocs for r in run.rows})))),
        ("dtype", str(config.get("dtype", ""))),
        ("iterations / warm-up", f"{config.get('iterations', '')} / {config.get('warmup', '')}"),
        ("stall threshold", f"{config.get('stall_threshold', '')} s"),
        ("versions", ", ".join(f"{k} {meta[k]}" for k in ("a2a", "mpi4py", "numpy", "python") if meta.get(k))),
        ("git commit", meta.get("git_commit") or ""),
        ("started / ended", f"{meta.get('start', '')} / {meta.get('end', '')}"),
        ("status", str(meta.get("status", ""))),
        ("points", (f"{len(run.rows)} ({sum(r.valid for r in run.rows)} valid, "
                    f"{sum(1 for r in run.rows if r.stalls)} with stalls)")),
    ]
    return [(k, v) for k, v in items if v.strip(" /()")]


def write_index(data: Data, figures: list[Figure], directory: Path) -> None:
    """index.html: the run's metadata, the model's fit and every figure (PNG, linked to SVG)."""
    esc = html.escape
    meta_rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in metadata(data.run))
    fit_rows = "".join(
        f"<tr><td>{esc(f.label)}</td><td>{esc(f.formula.text)}</td><td>{esc('; '.join(f.describe()))}</td>"
        f"<td>{f.error:.0%}</td><td>{len(f.bad_points())} of {len(f.residuals)}</td></tr>" for f in data.fits)
    sections = "".join(
        f'<section><h2>{esc(f.title)}</h2><p>{esc(f.caption)}</p><a href="{f.name}.svg">'
        f'<img src="{f.name}.png" alt="{esc(f.title)}"></a></section>' for f in figures)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>a2a results: {esc(Path(data.run.directory).name)}</title>
<style>body{{font-family:sans-serif;max-width:1500px;margin:1em auto;padding:0 1em}}
table{{border-collapse:collapse;margin-bottom:1em}}th,td{{border:1px solid #ccc;padding:2px 8px;
text-align:left;vertical-align:top}}img{{max-width:100%;border:1px solid #eee}}</style></head>
<body><h1>All-to-all results: {esc(Path(data.run.directory).name)}</h1>
<table>{meta_rows}</table>
<h2>Cost model (Hockney alpha-beta, fitted to the medians)</h2>
<table><tr><th>series</th><th>formula</th><th>parameters</th><th>median error</th><th>points off by &gt; 50%</th></tr>
{fit_rows}</table>
{sections}
</body></html>
"""
    (directory / "index.html").write_text(page)
