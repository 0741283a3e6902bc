"""Figures of a record (PNG and SVG) and an index.html that shows them under what the record is.

Needs matplotlib (the optional `plot` extra); it is imported only when a figure is drawn, with
the Agg backend, so this works on machines without a display. Never imports MPI.
"""
from __future__ import annotations

import html
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from a2a.analysis import model
from a2a.errors import A2AError, BadResults, MissingMatplotlib
from a2a.record.decision import Cell
from a2a.record.meta import SIMULATED, backend_of
from a2a.record.results import NATIVE, Defaults, Row, Run, label, point_key, short_label
from a2a.record.stats import bandwidths, stall_mask
from a2a.record.verdict import FASTER, MARGIN, SLOWER, Comparison
from a2a.units import human_bytes

INSTALL_HINT = "pip install 'a2a-testbed[plot]'"
PANEL = (5.4, 3.8)  # inches per panel of a figure with a panel per process count
SMALL = (3.6, 2.7)  # inches per panel of a figure with a panel per series
DPI = 110
BAND = (10, 90)  # percentiles of the shaded band around each median
STYLE = {"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8, "svg.fonttype": "none", "axes.grid": True,
         "grid.alpha": 0.3}  # applied while drawing only: the caller's rcParams stay as they were
CROWD = 6  # more series than this on one axis: those fastest at some size drawn strong, the others light
LABEL_WIDTH = 24  # characters per line of a series name in legends, titles and cells
MARKERS = "osD^vPX*"
LINES = ("-", "--", ":", "-.")
SYMBOLS = dict(zip(MARKERS, "●■◆▲▼✚✖★"))  # each marker as the page's series table shows it
DASHES = {"-": "", "--": "6,3", ":": "2,2", "-.": "6,2,2,2"}  # each line style in the page's SVG marks


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


@dataclass(frozen=True)
class Style:
    """How one series is drawn: colour (hex), marker and line style."""

    color: str
    marker: str
    line: str


def series_styles(names: list[str]) -> dict[str, Style]:
    """A style per series, in order; no two of the first 80 share both colour and marker.

    Series k takes colour k mod 10 and marker k mod 8 (40 different pairs), then marker k+1 mod 8
    (40 more, colour and marker of opposite parity); its line style changes every ten series.
    """
    from matplotlib.colors import to_hex

    colors = [to_hex(c) for c in pyplot().get_cmap("tab10").colors]
    return {name: Style(colors[k % 10], MARKERS[(k + k // 40) % 8], LINES[(k // 10) % 4])
            for k, name in enumerate(names)}


def distinct_colors(count: int) -> list[Any]:
    """`count` colours that differ, for cells coloured by name: tab10, tab20, then a spectrum."""
    plt = pyplot()
    if count <= 20:
        return list(plt.get_cmap("tab10" if count <= 10 else "tab20").colors[:count])
    return list(plt.get_cmap("turbo")(np.linspace(0.05, 0.95, count)))


def wrap_label(name: str, width: int = LABEL_WIDTH) -> str:
    """A name broken after its ':' separators into lines of at most `width` characters where it can be."""
    lines = [""]
    for part in re.split(r"(?<=:)", name):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def series_name(row: Row, defaults: Defaults | None) -> str:
    """How every figure names a row's series: without options at the record's defaults, wrapped."""
    return wrap_label(short_label(row, defaults))


@dataclass
class Data:
    """What every figure draws from: valid rows, samples by point, fitted models, styles and names."""

    run: Run
    rows: list[Row]
    fits: list[model.Fit]
    styles: dict[str, Style]  # by series label
    names: dict[str, str]  # series label -> the name the figures give it
    stall_threshold: float

    @cached_property
    def panels(self) -> list[Panel]:
        """Process counts (with timing mode, mesh and groups when a run has several), ascending."""
        return sorted({panel_of(r) for r in self.rows})

    @cached_property
    def sizes(self) -> list[int]:
        return sorted({r.bytes_per_peer for r in self.rows})

    @cached_property
    def labels(self) -> list[str]:
        return sorted({r.label for r in self.rows})

    @property
    def simulated(self) -> bool:
        return backend_of(self.run.meta) in SIMULATED

    @property
    def baseline(self) -> str | None:
        """The series speed-ups are measured against: native, else the first of native's variants."""
        natives = [r.label for r in self.rows if r.algorithm == NATIVE]
        return NATIVE if NATIVE in natives else min(natives, default=None)

    def title(self, panel: Panel, unit: str = " processes") -> str:
        """A panel's title: of its context ('[pipelined timing]', '[tests 10]') only what differs between panels
        (mesh and groups together, as collective and workload)."""
        contexts = {p[1] for p in self.panels}
        varies = {c for k, c in enumerate(model.CONTEXT) if len({context[k] for context in contexts}) > 1}
        for pair in (("mesh", "groups"), ("collective", "workload")):
            if varies & set(pair):
                varies |= set(pair)
        shown = tuple(v if c in varies else plain for v, c, plain in zip(panel[1], model.CONTEXT, model.PLAIN))
        return f"{panel[0]}{unit}{model.context_text(shown)}"

    def series(self, panel: Panel, name: str) -> list[Row]:
        """Rows of one series in one panel, by size."""
        return sorted((r for r in self.rows if panel_of(r) == panel and r.label == name),
                      key=lambda r: r.bytes_per_peer)

    def samples(self, row: Row) -> np.ndarray:
        return np.asarray(self.run.samples.get(point_key(row), []), dtype=float)

    def winners(self, panel: Panel) -> dict[int, str]:
        """Per size, the series with the lowest median in a panel."""
        return {size: name for (where, size), name in fastest(self.rows).items() if where == panel}

    def strong(self, panel: Panel) -> set[str]:
        """The series drawn strong in a panel: all of them, or when crowded those fastest at some size."""
        present = {r.label for r in self.rows if panel_of(r) == panel}
        return present if len(present) <= CROWD else set(self.winners(panel).values())


Panel = tuple  # (nprocs, (timing, mesh, groups)): what one panel, heat-map row or samples figure shows
Maker = Callable[[Data, Path], list[Figure]]  # draws its figures of a record into a directory


def fastest(rows: Iterable[Row]) -> dict[tuple[Panel, int], str]:
    """Per panel and size, the series with the lowest median."""
    best: dict[tuple[Panel, int], Row] = {}
    for r in rows:
        cell = panel_of(r), r.bytes_per_peer
        if cell not in best or r.t_p50_us < best[cell].t_p50_us:
            best[cell] = r
    return {cell: r.label for cell, r in best.items()}


def panel_of(row: Row) -> Panel:
    return row.nprocs, model.context_of(row)


def prepare(run: Run) -> Data:
    """Valid rows, the model fits, and a style and name per series."""
    rows = [r for r in run.rows if r.valid and r.t_p50_us > 0]
    if not rows:
        raise BadResults(f"{run.directory}: no valid measured points to plot")
    defaults = run.meta.get("option_defaults")
    names = {r.label: series_name(r, defaults) for r in rows}
    fits = model.fit(rows) if any(model.row_placement(r).nprocs >= 2 for r in rows) else []
    threshold = float(run.meta.get("config", {}).get("stall_threshold", 0.1))
    winners = sorted(set(fastest(rows).values()))  # styled first: the lines drawn strong differ in colour
    order = winners + sorted(set(names) - set(winners))
    return Data(run, rows, fits, series_styles(order), names, threshold)


def plot_all(run: Run, directory: Path) -> list[Figure]:
    """Draw the record's figures into `directory` (PNG and SVG) and write index.html; return the figures."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with pyplot().rc_context(STYLE):
        data = prepare(run)
        figures = [f for make in makers({r.timing for r in data.rows}, data.simulated) for f in make(data, directory)]
    write_index(data, figures, directory)
    return figures


# --- helpers ------------------------------------------------------------------------------

def panels(count: int, columns: int = 3, size: tuple[float, float] = PANEL) -> tuple[Any, list[Any]]:
    """A figure laid out by matplotlib's constrained layout, `count` panels in rows of at most `columns`."""
    cols = min(columns, count)
    nrows = math.ceil(count / cols)
    fig, axes = pyplot().subplots(nrows, cols, figsize=(size[0] * cols, size[1] * nrows), squeeze=False,
                                  layout="constrained", dpi=DPI)
    flat = list(axes.flat)
    for ax in flat[count:]:
        ax.remove()
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
    from matplotlib.ticker import FuncFormatter, LogFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def legend_below(fig: Any, handles: list[Any], labels: list[str], bold: Iterable[str] = ()) -> None:
    """One legend under the panels, in as many columns as the figure's width holds, the figure made taller by the
    legend's height (so a long legend under one panel leaves the panel its size); `bold` labels stand out."""
    bold, renderer = set(bold), fig.canvas.get_renderer()
    for columns in range(min(len(labels), 8), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncol=columns, frameon=False)
        for text in legend.get_texts():
            text.set_fontweight("bold" if text.get_text() in bold else "normal")
        box = legend.get_window_extent(renderer)
        if columns == 1 or box.width <= 0.98 * fig.bbox.width:
            fig.set_figheight(fig.get_figheight() + box.height / fig.dpi)
            return
        legend.remove()


def save(fig: Any, directory: Path, name: str) -> None:
    """Write NAME.png and NAME.svg, widened to whatever was drawn outside the figure; then free it."""
    lay_out(fig)
    drawn = fig.get_tightbbox()
    box = whole_pixels(drawn.padded(0.1))
    if fig.dpi == DPI and fig.bbox_inches.contains(drawn.x0, drawn.y0) and fig.bbox_inches.contains(drawn.x1, drawn.y1):
        write_png(fig, box, directory / f"{name}.png")
    else:  # something lies outside the canvas: drawn again, moved into the image
        fig.savefig(directory / f"{name}.png", dpi=DPI, bbox_inches=box)
    fig.savefig(directory / f"{name}.svg", bbox_inches=box)
    pyplot().close(fig)


def lay_out(fig: Any) -> None:
    """Lay the figure out and render it, once: both files keep that layout and the PNG those pixels."""
    fig.canvas.draw()
    fig.set_layout_engine("none")


def whole_pixels(box: Any) -> Any:
    """`box` (inches) widened to the pixel grid, so that the PNG's pixels are the canvas's as rendered."""
    from matplotlib.transforms import Bbox

    return Bbox([[math.floor(box.x0 * DPI) / DPI, math.floor(box.y0 * DPI) / DPI],
                 [math.ceil(box.x1 * DPI) / DPI, math.ceil(box.y1 * DPI) / DPI]])


def write_png(fig: Any, box: Any, path: Path) -> None:
    """The canvas's pixels inside `box` (inches, all it draws within the canvas) as a PNG, the margin beyond the
    canvas in the figure's colour: what savefig(bbox_inches=box) writes, without drawing every artist again."""
    from matplotlib.colors import to_rgba
    from matplotlib.image import imsave

    pixels = np.asarray(fig.canvas.buffer_rgba())
    height, width = pixels.shape[:2]
    image = np.empty((round(box.height * DPI), round(box.width * DPI), 4), dtype=np.uint8)
    image[...] = np.round(np.array(to_rgba(fig.get_facecolor())) * 255).astype(np.uint8)
    left, top = round(box.x0 * DPI), height - round(box.y1 * DPI)  # the image's corner on the canvas, rows down
    rows = slice(max(top, 0), min(top + image.shape[0], height))
    cols = slice(max(left, 0), min(left + image.shape[1], width))
    image[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left] = pixels[rows, cols]
    imsave(path, image, format="png", dpi=DPI)


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
        ax.set_title(data.title(panel))
    return fig, axes


def line(ax: Any, x: Sequence[float], y: Sequence[float], style: Style, strong: bool = True) -> None:
    """One series' line: strong in front, or light behind the strong ones."""
    ax.plot(x, y, color=style.color, marker=style.marker, linestyle=style.line,
            markersize=4.5 if strong else 3, linewidth=1.6 if strong else 0.8, alpha=1 if strong else 0.4,
            zorder=3 if strong else 2)


def handle(style: Style) -> Any:
    """A legend entry drawn as the series' lines are."""
    return pyplot().Line2D([], [], color=style.color, marker=style.marker, linestyle=style.line, markersize=4.5)


def series_legend(data: Data, fig: Any, names: list[str], bold: Iterable[str] = ()) -> None:
    legend_below(fig, [handle(data.styles[n]) for n in names], [data.names[n] for n in names],
                 {data.names[n] for n in bold})


# --- the figures --------------------------------------------------------------------------

CROWDED = (f"Where a panel has more than {CROWD} series, those fastest at some size are drawn strong "
           "(bold in the legend) and the others light.")


def size_figure(data: Data, directory: Path, figure: Figure, ylabel: str,
                draw_series: Callable[[Any, str, list[Row], bool], None]) -> list[Figure]:
    """A log-log figure against bytes per peer, a panel per process count, a line per series."""
    def draw(ax: Any, panel: Panel) -> None:
        strong = data.strong(panel)
        for name in data.labels:
            if rows := data.series(panel, name):
                draw_series(ax, name, rows, name in strong)
        bytes_axis(ax)
        log_axis(ax)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel(ylabel)

    fig, _ = each_panel(data, draw)
    crowded = any(len(data.strong(p)) < len({r.label for r in data.rows if panel_of(r) == p}) for p in data.panels)
    bold = set().union(*(data.strong(p) for p in data.panels)) if crowded else set()
    series_legend(data, fig, data.labels, bold)
    save(fig, directory, figure.name)
    return [figure]


def time_vs_size(data: Data, directory: Path) -> list[Figure]:
    """Median time vs bytes per peer, log-log, a panel per process count, p10-p90 bands."""
    def draw(ax: Any, name: str, rows: list[Row], strong: bool) -> None:
        x, style = [r.bytes_per_peer for r in rows], data.styles[name]
        if strong and not data.simulated:
            low, high = zip(*(band(data, r) for r in rows))
            ax.fill_between(x, low, high, color=style.color, alpha=0.12, linewidth=0)
        line(ax, x, [r.t_p50_us for r in rows], style, strong)
        stalled = [r for r in rows if r.stalls]
        ax.plot([r.bytes_per_peer for r in stalled], [r.t_p50_us for r in stalled], "o",
                markersize=9, markerfacecolor="none", markeredgecolor="red", zorder=4)

    what = ("Simulated time per all-to-all, log-log, one panel per process count. " if data.simulated else
            f"Median time per all-to-all (line) with the p{BAND[0]}-p{BAND[1]} band of its samples (shaded), "
            "log-log, one panel per process count. Red rings: points with stalls. ")
    return size_figure(data, directory, Figure("time_vs_size", "Time vs message size", what + CROWDED),
                       ("simulated" if data.simulated else "median") + " time per all-to-all (us)", draw)


def busbw_vs_size(data: Data, directory: Path) -> list[Figure]:
    """Bus bandwidth (nccl-tests convention) vs bytes per peer, a panel per process count."""
    def draw(ax: Any, name: str, rows: list[Row], strong: bool) -> None:
        busbw = [bandwidths(r.bytes_per_peer, model.row_placement(r).nprocs, r.t_p50_us * 1e-6)[1] for r in rows]
        line(ax, [r.bytes_per_peer for r in rows], busbw, data.styles[name], strong)

    return size_figure(data, directory, Figure(
        "busbw_vs_size", "Bus bandwidth vs message size",
        "busbw = bytes_per_peer x nprocs / median time x (nprocs-1)/nprocs, as nccl-tests reports it; "
        "higher is better. " + CROWDED), "bus bandwidth (GB/s)", draw)


def median_grid(data: Data, name: str) -> np.ndarray:
    """Median us of a series as a (panel x size) array, NaN where not measured."""
    grid = np.full((len(data.panels), len(data.sizes)), np.nan)
    for r in data.rows:
        if r.label == name:
            grid[data.panels.index(panel_of(r)), data.sizes.index(r.bytes_per_peer)] = r.t_p50_us
    return grid


def cell_axes(ax: Any, sizes: list[int], rows: list[str], ylabel: str = "") -> None:
    """Sizes across, `rows` up or down (process counts, topologies, series), one cell each."""
    ax.set_xticks(range(len(sizes)), [human_bytes(s) for s in sizes], rotation=60 if len(sizes) > 6 else 0)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("bytes per peer")
    ax.set_ylabel(ylabel)
    ax.grid(False)


def log_colorbar(fig: Any, image: Any, axes: Any, span: float, title: str) -> None:
    """A colour bar of ratios on a log scale from 2^-span to 2^span, ticks at powers of two."""
    bar = fig.colorbar(image, ax=axes, fraction=0.05, shrink=0.9)
    bar.set_label(title)
    step = 1 if span <= 3 else 2 if span <= 8 else 4
    exponents = [e for e in range(-math.floor(span), math.floor(span) + 1) if e % step == 0]
    bar.set_ticks([2.0 ** e for e in exponents], labels=[f"{2.0 ** e:.3g}" for e in exponents])
    bar.ax.minorticks_off()


def speedup_heatmaps(data: Data, directory: Path) -> list[Figure]:
    """The baseline's median / each series' median, a series per row, a panel per process count."""
    from matplotlib.colors import LogNorm

    base = data.baseline
    others = [n for n in data.labels if n != base]
    if base is None or not others:
        return []
    base_grid = median_grid(data, base)
    ratios = np.stack([base_grid / median_grid(data, n) for n in others], axis=1)  # panel x series x size
    finite = ratios[np.isfinite(ratios)]
    span = max(2.0, float(np.max(np.abs(np.log2(finite))))) if finite.size else 2.0
    norm, cmap = LogNorm(2 ** -span, 2 ** span), pyplot().get_cmap("RdBu")
    lines = max(data.names[n].count("\n") + 1 for n in others)
    columns = min(4, len(data.panels))
    room = (1.1 * lines + 1.2) / columns  # the names (first column only) and the colour bar, shared out
    fig, axes = panels(len(data.panels), columns, (max(3.6, 0.6 * len(data.sizes) + 0.5 + room),
                                                   max(2.6, 0.17 * lines * len(others) + 1.4)))
    for k, (ax, panel, grid) in enumerate(zip(axes, data.panels, ratios)):
        cells = np.ma.masked_invalid(grid)
        image = ax.imshow(cells, cmap=cmap, norm=norm, aspect="auto")
        annotate(ax, cells, lambda v: f"{v:.2g}", lambda i, j, v: cmap(norm(v)))
        cell_axes(ax, data.sizes, [data.names[n] for n in others])
        ax.tick_params(labelleft=k % columns == 0)  # the series' names once per row of panels
        ax.set_title(data.title(panel))
    log_colorbar(fig, image, axes, span, f"speed-up over {data.names[base]}")
    save(fig, directory, "speedup_heatmap")
    return [Figure("speedup_heatmap", f"Speed-up over {short(data, base)}",
                   f"Median time of {short(data, base)} divided by each series', per size, a panel per process "
                   f"count. Blue: faster than {short(data, base)}; red: slower; blank: not measured.")]


def short(data: Data, name: str) -> str:
    """A series' name on one line, for text."""
    return data.names[name].replace("\n", "")


def annotate(ax: Any, grid: np.ndarray, text: Callable[[float], str],
             background: Callable[[int, int, float], Any] | None = None) -> None:
    """Write each cell's value in it (white on dark cells) when the grid is small enough to read."""
    values = np.ma.filled(grid, np.nan)
    write_cells(ax, [[text(v) if np.isfinite(v) else "" for v in row] for row in values],
                lambda i, j: background(i, j, values[i, j]) if background else "white")


def write_cells(ax: Any, texts: list[list[str]], background: Callable[[int, int], Any], fontsize: float = 7) -> None:
    """Write a text in each cell of an image, white on dark cells, unless there are too many cells to read."""
    if sum(map(len, texts)) > 200:
        return
    for i, row in enumerate(texts):
        for j, text in enumerate(row):
            if text:
                ax.text(j, i, text, ha="center", va="center", fontsize=fontsize,
                        color="white" if luminance(background(i, j)) < 0.45 else "black")


def luminance(rgba: Any) -> float:
    """Perceived brightness of a colour, 0 (black) to 1 (white)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(rgba)
    return 0.299 * r + 0.587 * g + 0.114 * b


def decision_map(data: Data, directory: Path) -> list[Figure]:
    """Size x process count coloured by the series with the lowest median, named in its cell."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    best = [[data.winners(p).get(s) for s in data.sizes] for p in data.panels]
    winners = sorted({n for row in best for n in row if n})
    colors = [data.styles[n].color for n in winners]
    if len(set(colors)) < len(colors):
        colors = distinct_colors(len(winners))
    cells = np.array([[winners.index(n) if n else -1 for n in row] for row in best])
    named = len(data.sizes) <= 12
    fig, axes = panels(1, 1, (max(6.0, (1.3 if named else 0.55) * len(data.sizes) + 2.5),
                              max(2.8, (0.5 if named else 0.35) * len(data.panels) + 2.2)))
    ax = axes[0]
    ax.imshow(np.ma.masked_less(cells, 0), cmap=ListedColormap(colors), vmin=-0.5, vmax=len(winners) - 0.5,
              aspect="auto", origin="lower")
    speedup = baseline_speedup(data)
    texts = [[cell_text(data, n, speedup[i, j] if speedup is not None else None, named) if n else ""
              for j, n in enumerate(row)] for i, row in enumerate(best)]
    write_cells(ax, texts, lambda i, j: colors[cells[i, j]], 8)
    cell_axes(ax, data.sizes, [data.title(p, "") for p in data.panels], "processes")
    over = f"speed-up over {short(data, data.baseline)}" if data.baseline else ""
    ax.set_title("Fastest by median" + (f" (text: {over})" if over else ""))
    legend_below(fig, [Patch(color=c) for c in colors], [data.names[n] for n in winners])
    save(fig, directory, "decision_map")
    return [Figure("decision_map", "Decision map",
                   "The series with the lowest median time in each cell (not tested for significance; "
                   f"`bench decide` does that){', with its ' + over if over else ''}.")]


def cell_text(data: Data, name: str, speedup: float | None, named: bool) -> str:
    """A decision map cell's text: the winner's name and its speed-up over the baseline."""
    parts = ([data.names[name]] if named else []) + \
        ([f"{speedup:.1f}x"] if speedup is not None and np.isfinite(speedup) else [])
    return "\n".join(parts)


def baseline_speedup(data: Data) -> np.ndarray | None:
    """The baseline's median over the fastest median per (panel, size), or None without a baseline."""
    if data.baseline is None:
        return None
    stack = np.stack([median_grid(data, n) for n in data.labels])
    fastest = np.nanmin(np.where(np.isfinite(stack), stack, np.inf), axis=0)
    return median_grid(data, data.baseline) / fastest


def model_overlay(data: Data, directory: Path) -> list[Figure]:
    """Measured medians (points) and the fitted alpha-beta curves (lines), a panel per series."""
    if not data.fits:
        return []
    plt = pyplot()
    counts = sorted({p for fit in data.fits for p in fit.nprocs})
    shade = dict(zip(counts, plt.get_cmap("viridis")(np.linspace(0, 0.85, len(counts)))))
    fig, axes = panels(len(data.fits), 4, SMALL)
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
        name = data.names.get(label(fit.algorithm, fit.options)) or wrap_label(label(fit.algorithm, fit.options))
        context = model.context_text(fit.context) if len({p[1] for p in data.panels}) > 1 else ""
        ax.set_title(f"{name}{context}\nmedian error {fit.error:.0%}", fontsize=9)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("time (us)")
    handles = [plt.Line2D([], [], color=shade[p], marker="o", markersize=4) for p in counts]
    handles.append(plt.Line2D([], [], color="gray", marker="v", linestyle="none", markeredgecolor="black"))
    legend_below(fig, handles, [f"{p} processes" for p in counts] + ["crossover (latency = bandwidth term)"])
    save(fig, directory, "model_overlay")
    return [Figure("model_overlay", "Cost model vs measurement",
                   "Medians (dots) and the Hockney alpha-beta model fitted to them (lines) per series "
                   "and process count; a triangle marks the crossover size where the latency and "
                   "bandwidth terms are equal.")]


def samples_over_iterations(data: Data, directory: Path) -> list[Figure]:
    """Every sample of every point in iteration order, a figure per process count, stalls marked."""
    if not data.run.samples:
        return []
    return [samples_figure(data, panel, directory) for panel in data.panels]


def samples_figure(data: Data, panel: Panel, directory: Path) -> Figure:
    """One process count's samples: a panel per series, a line per size, stalls as red crosses."""
    from matplotlib.colors import LogNorm

    plt = pyplot()
    norm = LogNorm(min(data.sizes), max(data.sizes) if len(data.sizes) > 1 else min(data.sizes) * 2)
    cmap = plt.get_cmap("viridis")
    fig, axes = panels(len(data.labels), 4, SMALL)
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
        ax.set_title(data.names[name], fontsize=9)
        ax.set_xlabel("iteration")
        ax.set_ylabel("time (us)")
    fig.suptitle(f"{data.title(panel)}: every sample (max over ranks); red x: stall "
                 f"(>= fastest + {data.stall_threshold:g} s); stalls: {stalls}")
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, fraction=0.02, shrink=0.8)
    bar.set_label("bytes per peer")
    ticks = data.sizes[:: max(1, len(data.sizes) // 8)]
    bar.set_ticks(ticks, labels=[human_bytes(t) for t in ticks])
    bar.ax.minorticks_off()
    name = f"samples_p{panel[0]}" + "".join(f"_{re.sub('[^A-Za-z0-9]+', '-', part)}"
                                            for part, plain in zip(panel[1], model.PLAIN) if part != plain)
    save(fig, directory, name)
    return Figure(name, f"Samples over iterations, {data.title(panel)}",
                  "Every timed iteration of every point, coloured by size; red crosses mark stalls, "
                  "the seed's 0.2 s TCP retransmission delays.")


def ratio_to_native(data: Data, directory: Path) -> list[Figure]:
    """Each algorithm's time over native's with the interval of its verdict (bench decide's), a panel per table;
    filled where the verdict is faster or slower, hollow where it is a tie; the band is what no verdict may call a
    difference (the margin, or the cell's noise floor where larger)."""
    from a2a.analysis.decide import decide
    from a2a.record.decision import where

    try:
        document = decide([data.run.directory])
    except A2AError:  # nothing a decision can read (a simulated record, say)
        return []
    tables = [t for t in document.tables if any(e.vs_native for c in t.cells for e in c.candidates)]
    if data.simulated or not tables:
        return []
    fig, axes = panels(len(tables))
    drawn: set[str] = set()
    for ax, table in zip(axes, tables):
        cells = table.cells
        _bands(ax, cells, MARGIN if document.margin is None else document.margin)
        for name in data.labels:
            found = [(c.bytes_per_peer, e.vs_native) for c in cells for e in c.candidates
                     if label(e.algorithm, e.options) == name and e.vs_native]
            if found:
                drawn.add(name)
                _intervals(ax, found, data.styles[name])
        bytes_axis(ax)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("time / native's")
        ax.set_title(where(table))
    series_legend(data, fig, sorted(drawn))
    save(fig, directory, "ratio_to_native")
    return [Figure("ratio_to_native", "Ratio to native, with the verdicts' intervals",
                   f"Each algorithm's time over the library's own ({document.statistic or 'bench decide'}). "
                   "Filled: faster or slower by the verdict; hollow: a tie. The grey band is the margin; the light "
                   "band the cell's noise floor, where a control measured one.")]


def _bands(ax: Any, cells: list[Cell], margin: float) -> None:
    """The margin as a band around 1, and each cell's noise floor as a wider light one."""
    ax.axhspan(1 / (1 + margin), 1 + margin, color="0.85", zorder=0)
    for cell in cells:
        floor = cell.noise_floor
        if floor:
            wide, size = max(floor, 1 / floor), cell.bytes_per_peer
            ax.fill_between([size / 1.4, size * 1.4], 1 / wide, wide, color="0.93", zorder=0)
    ax.axhline(1.0, color="0.5", linewidth=0.8)


def _intervals(ax: Any, found: list[tuple[int, Comparison]], style: Style) -> None:
    """One series' ratios with their intervals: filled markers where a verdict was reached."""
    for size, said in found:
        ratio, low, high = said.ratio, said.low, said.high
        decided = said.verdict in (FASTER, SLOWER)
        ax.errorbar([size], [ratio], yerr=[[ratio - (low or ratio)], [(high or ratio) - ratio]], color=style.color,
                    marker=style.marker, markersize=4.5, markerfacecolor=style.color if decided else "white",
                    capsize=2, linewidth=1, zorder=3)


def overlap_vs_size(data: Data, directory: Path) -> list[Figure]:
    """The overlap protocol's: how much of each exchange hid behind the compute phase, OSU's figure (solid) and
    IMB-NBC's (dotted), against bytes per peer, a panel per process count, test count and progress mode."""
    def draw(ax: Any, panel: Panel) -> None:
        strong = data.strong(panel)
        for name in data.labels:
            if rows := data.series(panel, name):
                x, style = [r.bytes_per_peer for r in rows], data.styles[name]
                line(ax, x, [r.overlap_osu_pct for r in rows], style, name in strong)
                ax.plot(x, [r.overlap_imb_pct for r in rows], linestyle=":", color=style.color,
                        alpha=0.9 if name in strong else 0.3, linewidth=1)
        bytes_axis(ax)
        ax.set_ylim(-3, 103)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("overlap (%)")

    fig, _ = each_panel(data, draw)
    series_legend(data, fig, data.labels)
    save(fig, directory, "overlap_vs_size")
    return [Figure("overlap_vs_size", "Overlap vs message size",
                   "How much of each exchange hid behind the compute phase (compute_ratio x its pure time, with "
                   "`tests` progress calls): OSU's figure, 100 x max(0, 1 - (overall - compute) / pure), solid; "
                   "IMB-NBC's, 100 x (pure + compute - overall) / max(pure, compute), dotted. The other figures' "
                   "times are the overall ones: start, compute, wait.")]


# The figures of a record, by the timing mode of its rows: a mode not listed gets MEASURED. A protocol
# with figures of its own (columns only its rows have) lists MEASURED and its own makers here.
MEASURED: list[Maker] = [time_vs_size, busbw_vs_size, speedup_heatmaps, ratio_to_native, decision_map, model_overlay,
                         samples_over_iterations]
MAKERS: dict[str, list[Maker]] = {"overlap": [overlap_vs_size, *MEASURED]}
ONE_SAMPLE: list[Maker] = [samples_over_iterations]  # what a simulated record, one sample a point, goes without


def makers(timings: Iterable[str], simulated: bool = False) -> list[Maker]:
    """The figure makers for rows of these timing modes (simulated or measured), each once, in order."""
    chosen = dict.fromkeys(m for t in sorted(timings) for m in MAKERS.get(t, MEASURED))
    return [m for m in chosen if not (simulated and m in ONE_SAMPLE)]


# --- index.html -----------------------------------------------------------------------------

def metadata(run: Run) -> list[tuple[str, str]]:
    """A measured run's facts worth showing beside its figures."""
    meta = run.meta
    config = meta.get("config", {})
    hosts = meta.get("hosts") or {}
    items = [
        ("results", str(Path(run.directory).resolve())),
        ("command", meta.get("command", "")),
        ("MPI library", library(meta)),
        ("hosts", ", ".join(f"{h} ({n} ranks)" for h, n in hosts.items()) if isinstance(hosts, dict) else str(hosts)),
        ("process counts", counts(run)),
        ("timing", str(config.get("timing", ""))),
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


def library(meta: dict[str, Any]) -> str:
    """The first line of the MPI library's own description."""
    lines = (meta.get("mpi_library") or "").splitlines()
    return lines[0] if lines else ""


def counts(run: Run) -> str:
    return ", ".join(str(p) for p in run.meta.get("config", {}).get("nprocs", sorted({r.nprocs for r in run.rows})))


def simulated_metadata(run: Run) -> list[tuple[str, str]]:
    """A simulated record's facts: the platform, its links and the costs the simulator charged."""
    meta = run.meta
    rate, _, latency = str(meta.get("link", "")).partition(",")
    factor = meta.get("bandwidth_factor") or {}
    nodes = ", ".join(f"{p} processes on {f.get('nnodes')} nodes" for p, f in (meta.get("by_nprocs") or {}).items())
    items = [
        ("results", str(Path(run.directory).resolve())),
        ("command", meta.get("command", "")),
        ("platform", f"{meta.get('platform', '')} ({nodes})" if nodes else str(meta.get("platform", ""))),
        ("link", f"{rate} bandwidth, {latency} latency" if latency else rate),
        ("network model", str(meta.get("network", ""))),
        ("message cost", message_cost(meta.get("message_cost") or {})),
        ("bandwidth factor", f"{factor['factor']:g} (from {factor.get('source')})" if factor.get("factor")
         else "SMPI's own"),
        ("local copies", f"{meta['copy_bandwidth'] / 1e9:.3g} GB/s" if meta.get("copy_bandwidth") else ""),
        ("process counts", counts(run)),
        ("simulator", f"SimGrid {meta.get('simgrid', '?')}, {meta.get('replay', '')} replay" if "analytical" not in meta
         else f"analytical network, congestion-{meta['analytical'].get('congestion')} (bench simulate --backend "
              "analytical)"),
        ("versions", ", ".join(f"{k} {meta[k]}" for k in ("a2a", "numpy", "python") if meta.get(k))),
        ("git commit", meta.get("git_commit") or ""),
        ("started / ended", f"{meta.get('start', '')} / {meta.get('end', '')}"),
        ("status", str(meta.get("status", ""))),
        ("points", f"{len(run.rows)} ({sum(r.valid for r in run.rows)} simulated)"),
    ]
    return [(k, v) for k, v in items if v.strip(" /(),")]


def message_cost(cost: dict[str, Any]) -> str:
    """The software cost charged per message, or that there was none."""
    send, recv = float(cost.get("send_us") or 0), float(cost.get("recv_us") or 0)
    if not send and not recv:
        return "none: a message costs only its time on the links (set one with --message-cost or --calibrate)"
    return f"send {send:g} us + receive {recv:g} us per message (from {cost.get('source', '?')})"


def measured_heading(run: Run) -> tuple[str, str, list[tuple[str, str]]]:
    """A measured run's title, what its figures show, and its facts."""
    meta, name = run.meta, Path(run.directory).name
    where = library(meta) or "the MPI library"
    return (f"All-to-all measured: {name}",
            f"Times measured by bench run with {where}: each point is the median of its timed iterations, "
            "each iteration the slowest rank's time.", metadata(run))


def simulated_heading(run: Run) -> tuple[str, str, list[tuple[str, str]]]:
    """A simulated record's title, what its figures show, and its facts."""
    meta, name = run.meta, Path(run.directory).name
    return (f"All-to-all simulated: {name}",
            f"Simulated, not measured: every schedule replayed by SimGrid {meta.get('simgrid', '')} on the "
            f"platform {meta.get('platform', '?')} (links {meta.get('link', '?')}); each point is one simulated "
            "time.", simulated_metadata(run))


def analytical_heading(run: Run) -> tuple[str, str, list[tuple[str, str]]]:
    """An analytical record's title, what its figures show, and its facts."""
    meta, name = run.meta, Path(run.directory).name
    congestion = (meta.get("analytical") or {}).get("congestion", "aware")
    return (f"All-to-all simulated analytically: {name}",
            f"Simulated, not measured: every schedule's rounds timed on the analytical network, congestion-"
            f"{congestion}, on the platform {meta.get('platform', '?')} (links {meta.get('link', '?')}); each point "
            "is one simulated time.", simulated_metadata(run))


HEADINGS: dict[str, Callable[[Run], tuple[str, str, list[tuple[str, str]]]]] = {
    "mpi": measured_heading, "simgrid": simulated_heading, "analytical": analytical_heading}


def mark(style: Style) -> str:
    """A series' line and marker as a small inline SVG, for the page's tables."""
    return (f'<svg class="mark" width="40" height="14" role="img"><line x1="0" y1="7" x2="40" y2="7" '
            f'stroke="{style.color}" stroke-width="2" stroke-dasharray="{DASHES[style.line]}"/>'
            f'<text x="20" y="12" text-anchor="middle" font-size="12" fill="{style.color}">'
            f"{SYMBOLS[style.marker]}</text></svg>")


def table(head: list[str], body: list[list[str]]) -> str:
    """An HTML table; `head` is text, `body` cells are HTML already."""
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in line) + "</tr>" for line in body)
    return f"<table><tr>{cells}</tr>{rows}</table>"


def series_table(data: Data) -> str:
    """Each series: its mark, the name the figures give it, the full variant, and the cells it wins."""
    wins = Counter(n for p in data.panels for n in data.winners(p).values())
    cells = sum(len(data.winners(p)) for p in data.panels)
    body = [[mark(data.styles[n]), html.escape(short(data, n)), f"<code>{html.escape(n)}</code>",
             f"{wins[n]} of {cells}"] for n in data.labels]
    return ("<h2>Series</h2><p>How the figures draw and name each series (options at the record's defaults "
            "left out), with every option, and in how many cells (size x process count) its median is the "
            "lowest.</p>" + table(["mark", "name in the figures", "variant", "fastest in"], body))


def fit_table(data: Data) -> str:
    """The fitted model of every series, or nothing when none was fitted."""
    esc = html.escape
    body = [[esc(f.label), esc(f.formula.text), esc("; ".join(f.describe())), f"{f.error:.0%}",
             f"{len(f.bad_points())} of {len(f.residuals)}"] for f in data.fits]
    if not body:
        return ""
    return ('<section id="cost-model"><h2>Cost model (Hockney alpha-beta, fitted to the medians)</h2>' +
            table(["series", "formula", "parameters", "median error", "points off by > 50%"], body) + "</section>")


def page(title: str, lede: str, facts: list[tuple[str, str]], figures: list[Figure], before: Iterable[str] = (),
         after: Iterable[str] = ()) -> str:
    """A report page: a title and what it shows, the facts, every figure linked to its SVG, with HTML sections
    before and after the figures."""
    esc = html.escape
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    contents = "".join(f'<li><a href="#{f.name}">{esc(f.title)}</a></li>' for f in figures)
    sections = "".join(
        f'<section id="{f.name}"><h2>{esc(f.title)}</h2><p>{esc(f.caption)}</p><a href="{f.name}.svg">'
        f'<img src="{f.name}.png" alt="{esc(f.title)}"></a></section>' for f in figures)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:sans-serif;max-width:1500px;margin:1em auto;padding:0 1em;line-height:1.35}}
.lede{{font-size:1.1em;color:#333}}table{{border-collapse:collapse;margin-bottom:1em;font-size:.92em}}
th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}}th{{background:#f4f4f4}}
img{{max-width:100%;height:auto;border:1px solid #eee}}section{{margin-top:1.5em}}
svg.mark{{vertical-align:middle}}code{{font-size:.95em}}</style></head>
<body><h1>{esc(title)}</h1><p class="lede">{esc(lede)}</p>
<table>{rows}</table><p>Figures: </p><ul>{contents}</ul>
{"".join(before)}
{sections}
{"".join(after)}
</body></html>
"""


def write_index(data: Data, figures: list[Figure], directory: Path) -> None:
    """index.html: what the record is, its series, the model's fit and every figure (PNG, linked to SVG)."""
    title, lede, facts = HEADINGS.get(backend_of(data.run.meta), measured_heading)(data.run)
    (directory / "index.html").write_text(page(title, lede, facts, figures, [series_table(data)], [fit_table(data)]))
