"""Figures of a topology study: latency vs size per topology, speedup over the base topology, winners."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from a2a.analysis import plot
from a2a.analysis.study import Medians, best_time, fastest, medians, names_of, sizes_of
from a2a.errors import BadResults
from a2a.record.results import Row


def plot_study(runs: dict[str, list[Row]], directory: Path) -> list[plot.Figure]:
    """Draw the study's figures into `directory` (PNG and SVG) and an index.html; return them."""
    tables = {topology: table for topology, rows in runs.items() if (table := medians(rows))}
    if not tables:
        raise BadResults("the study has no valid measured points to plot")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted({n for table in tables.values() for n in names_of(table)})
    palette = plot.pyplot().get_cmap("tab10").colors
    colors = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    figures = [latency_by_topology(tables, colors, directory), winners(tables, colors, directory)]
    if len(tables) > 1:
        figures.append(speedup(tables, directory))
    write_index(figures, directory)
    return figures


def latency_by_topology(tables: dict[str, Medians], colors: dict[str, Any], directory: Path) -> plot.Figure:
    """One panel per topology: p50 vs bytes per peer, a line per algorithm, the same y scale."""
    fig, axes = plot.panels(len(tables))
    low = min(min(t.values()) for t in tables.values())
    high = max(max(t.values()) for t in tables.values())
    for ax, (topology, table) in zip(axes, tables.items()):
        for name in names_of(table):
            series = sorted((s, t) for (s, n), t in table.items() if n == name)
            ax.plot(*zip(*series), marker="o", markersize=3, color=colors[name], label=name)
        plot.bytes_axis(ax)
        plot.log_axis(ax)
        ax.set_ylim(low / 1.5, high * 1.5)
        ax.set_title(topology)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("p50 per call (us)")
    plot.legend_below(fig, *axes[0].get_legend_handles_labels())
    plot.save(fig, directory, "latency_by_topology")
    return plot.Figure("latency_by_topology", "Latency vs size per topology",
                       "Median time of one all-to-all per size, one panel per emulated topology, same axes.")


def speedup(tables: dict[str, Medians], directory: Path) -> plot.Figure:
    """Rows: each topology but the base; cells: base's best p50 / the topology's best p50 per size."""
    from matplotlib.colors import LogNorm

    base, *others = tables
    sizes = sizes_of(tables[base])
    grid = np.array([[best_time(tables[base], s) / best_time(tables[t], s) for s in sizes] for t in others])
    finite = grid[np.isfinite(grid)]
    span = max(1.0, float(np.max(np.abs(np.log2(finite))))) if finite.size else 1.0
    norm, cmap = LogNorm(2 ** -span, 2 ** span), plot.pyplot().get_cmap("RdBu")
    fig, axes = plot.panels(1, 1)
    ax = axes[0]
    fig.set_size_inches(max(6.0, 0.6 * len(sizes) + 2.5), max(2.5, 0.5 * len(others) + 2))
    masked = np.ma.masked_invalid(grid)
    image = ax.imshow(masked, cmap=cmap, norm=norm, aspect="auto", origin="lower")
    plot.annotate(ax, masked, lambda v: f"{v:.2f}", lambda i, j, v: cmap(norm(v)))
    plot.cell_axes(ax, sizes, others)
    ax.set_title(f"Speed-up over {base}: fastest algorithm vs fastest algorithm")
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label(f"{base} p50 / topology p50")
    ticks = [2.0 ** (e / 2) for e in range(-math.floor(2 * span), math.floor(2 * span) + 1)]
    bar.set_ticks(ticks, labels=[f"{t:.2g}" for t in ticks])
    bar.ax.minorticks_off()
    fig.tight_layout()
    plot.save(fig, directory, "topology_speedup")
    return plot.Figure("topology_speedup", f"Speed-up over {base}",
                       f"The best algorithm's median on {base} divided by the best algorithm's median on each "
                       "other topology, per size. Blue: that topology is faster; red: slower.")


def winners(tables: dict[str, Medians], colors: dict[str, Any], directory: Path) -> plot.Figure:
    """Rows: topologies; cells: coloured by the fastest algorithm, text its p50 in us."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    topologies = list(tables)
    sizes = sorted({s for table in tables.values() for s in sizes_of(table)})
    best: list[list[str | None]] = [[fastest(tables[t], s) for s in sizes] for t in topologies]
    names = sorted({n for line in best for n in line if n})
    index = np.ma.masked_less(np.array([[names.index(n) if n else -1 for n in line] for line in best]), 0)
    fig, axes = plot.panels(1, 1)
    ax = axes[0]
    fig.set_size_inches(max(6.0, 0.6 * len(sizes) + 2.5), max(2.5, 0.5 * len(topologies) + 2.2))
    ax.imshow(index, cmap=ListedColormap([colors[n] for n in names]), vmin=-0.5, vmax=len(names) - 0.5,
              aspect="auto", origin="lower")
    times = np.array([[best_time(tables[t], s) for s in sizes] for t in topologies])
    plot.annotate(ax, np.ma.masked_invalid(times), lambda v: f"{v:,.0f}",
                  lambda i, j, v: colors[names[index[i, j]]])
    plot.cell_axes(ax, sizes, topologies)
    ax.set_title("Fastest algorithm per size and topology (text: its p50, us)")
    plot.legend_below(fig, [Patch(color=colors[n]) for n in names], names)
    plot.save(fig, directory, "topology_winners")
    return plot.Figure("topology_winners", "Fastest algorithm per topology",
                       "Where the crossovers lie on each topology: the algorithm with the lowest median per size.")


def write_index(figures: list[plot.Figure], directory: Path) -> None:
    """index.html showing every figure with its caption."""
    sections = "".join(f'<section><h2>{f.title}</h2><p>{f.caption}</p><a href="{f.name}.svg">'
                       f'<img src="{f.name}.png" alt="{f.title}"></a></section>' for f in figures)
    (directory / "index.html").write_text(
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>a2a topology study</title></head>'
        f"<body><h1>Topology study</h1>{sections}</body></html>\n")
