"""The topology study's tables and figures: time per size on each topology, speedups, latency floors, winners.

Every number is a median (p50) of the timed iterations, in microseconds, from the runs of
`python -m bench topology-study` (one results directory per topology).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from statistics import median

import numpy as np
from tabulate import tabulate

from a2a import fabric
from a2a.analysis import model, plot
from a2a.errors import BadResults
from a2a.record.results import META_JSON, Row, label, load, read_meta, read_rows
from a2a.units import human_bytes

STUDY_MANIFEST = "topology-study.json"  # in a study directory: the runs it planned, in order
FLOOR_FACTOR = 2.0  # an algorithm has left its latency floor where its p50 first exceeds this x the floor

Medians = dict[tuple[int, str], float]  # (bytes per peer, algorithm label) -> p50 us


def medians(rows: Iterable[Row]) -> Medians:
    """The p50 of every valid point, by size and algorithm."""
    return {(r.bytes_per_peer, label(r.algorithm, r.options)): r.t_p50_us
            for r in rows if r.valid and not math.isnan(r.t_p50_us)}


def sizes_of(table: Medians) -> list[int]:
    return sorted({size for size, _ in table})


def names_of(table: Medians) -> list[str]:
    return sorted({name for _, name in table})


def time_table(table: Medians) -> str:
    """Sizes down, algorithms across: p50 in microseconds."""
    names = names_of(table)
    body = [[human_bytes(s), *(table.get((s, n), math.nan) for n in names)] for s in sizes_of(table)]
    return tabulate(body, headers=["bytes/peer", *names], floatfmt=",.1f", missingval="-")


def speedup_table(base: Medians, other: Medians) -> str:
    """Per size and algorithm, base p50 / other p50 (above 1: the other topology is faster); and best vs best."""
    names = [n for n in names_of(base) if n in names_of(other)]
    body = []
    for size in sizes_of(base):
        ratios = [base.get((size, n), math.nan) / other.get((size, n), math.nan) for n in names]
        best = best_time(base, size) / best_time(other, size)
        body.append([human_bytes(size), *ratios, best])
    return tabulate(body, headers=["bytes/peer", *names, "best/best"], floatfmt=".2f", missingval="-")


def best_time(table: Medians, size: int) -> float:
    """The fastest algorithm's p50 at a size (nan if none ran)."""
    return min((t for (s, _), t in table.items() if s == size), default=math.nan)


def fastest(table: Medians, size: int) -> str | None:
    """The algorithm with the lowest p50 at a size (None if none ran)."""
    times = {n: t for (s, n), t in table.items() if s == size}
    return min(times, key=times.__getitem__) if times else None


def floor_exits(table: Medians) -> dict[str, tuple[float, int | None]]:
    """Per algorithm: its latency floor (p50 at the smallest size) and the first size above FLOOR_FACTOR x it."""
    out = {}
    for name in names_of(table):
        series = sorted((s, t) for (s, n), t in table.items() if n == name)
        floor = series[0][1]
        out[name] = (floor, next((s for s, t in series if t > FLOOR_FACTOR * floor), None))
    return out


def floor_table(tables: dict[str, Medians]) -> str:
    """Algorithms down, topologies across: the floor and where each algorithm leaves it."""
    exits = {topology: floor_exits(table) for topology, table in tables.items()}
    names = sorted({n for table in tables.values() for n in names_of(table)})
    body = []
    for name in names:
        line = [name]
        for topology in tables:
            floor, size = exits[topology].get(name, (math.nan, None))
            line.append(f"{floor:,.0f} us, leaves at {human_bytes(size)}" if size else
                        f"{floor:,.0f} us, stays" if not math.isnan(floor) else "-")
        body.append(line)
    return tabulate(body, headers=["algorithm", *tables])


def winner_table(tables: dict[str, Medians]) -> str:
    """Sizes down, topologies across: the fastest algorithm and its p50."""
    sizes = sorted({s for table in tables.values() for s in sizes_of(table)})
    body = []
    for size in sizes:
        line = [human_bytes(size)]
        for table in tables.values():
            best = fastest(table, size)
            line.append(f"{best} ({table[size, best]:,.0f})" if best else "-")
        body.append(line)
    return tabulate(body, headers=["bytes/peer", *tables])


def model_errors(runs: dict[str, list[Row]], base: str) -> dict[str, Medians]:
    """Per topology, per (size, algorithm): (predicted - measured) / measured of the p50.

    The model is fitted on the base topology's rows alone; on the others it predicts with
    the bandwidth terms scaled by the busiest-link load of their routes (a2a/analysis/contention.py).
    """
    fits = {label(f.algorithm, f.options): f for f in model.fit(runs[base]) if f.context == model.PLAIN}
    errors: dict[str, Medians] = {}
    for topology, rows in runs.items():
        valid = [r for r in rows if r.valid and r.t_p50_us > 0]
        if not valid:
            continue
        net = fabric.parse(topology, max(r.nnodes for r in valid))
        table: Medians = {}
        for row in valid:
            fit = fits.get(label(row.algorithm, row.options))
            if fit:
                predicted = fit.predict_on_fabric(model.row_placement(row), row.bytes_per_peer, net) * 1e6
                table[row.bytes_per_peer, label(row.algorithm, row.options)] = predicted / row.t_p50_us - 1
        errors[topology] = table
    return errors


def error_table(table: Medians) -> str:
    """Sizes down, algorithms across: signed relative error in percent, and the median |error| per algorithm."""
    names = names_of(table)
    body = [[human_bytes(s), *(f"{table[s, n]:+.0%}" if (s, n) in table else "-" for n in names)]
            for s in sizes_of(table)]
    typical = [f"{median(abs(t) for (_, n), t in table.items() if n == name):.0%}" for name in names]
    return tabulate(body + [["median |err|", *typical]], headers=["bytes/peer", *names])


def report(runs: dict[str, list[Row]], base: str = "switch") -> str:
    """Every table of the study; `runs` maps a topology spec to its rows, `base` is compared against."""
    tables = {topology: medians(rows) for topology, rows in runs.items()}
    parts = [f"{topology}: p50 per call, us\n{time_table(table)}" for topology, table in tables.items()]
    for topology, table in tables.items():
        if topology != base and base in tables:
            parts.append(f"speedup {topology} over {base} ({base} p50 / {topology} p50; above 1: "
                         f"{topology} is faster)\n{speedup_table(tables[base], table)}")
    parts.append(f"latency floor (p50 at the smallest size) and the first size whose p50 exceeds "
                 f"{FLOOR_FACTOR:g}x it\n{floor_table(tables)}")
    parts.append(f"fastest algorithm per size (p50 us)\n{winner_table(tables)}")
    try:
        errors = model_errors(runs, base)
    except BadResults as exc:
        return "\n\n".join(parts + [f"model check skipped: {exc}"])
    for topology, table in errors.items():
        how = "fitted here (in-sample)" if topology == base else f"fitted on {base}, busiest-link loads of {topology}"
        parts.append(f"model vs measured on {topology}, (predicted - measured) / measured of p50; "
                     f"{how}\n{error_table(table)}")
    return "\n\n".join(parts)


def study_entries(directory: Path) -> list[dict]:
    """The runs a study directory planned: name (its subdirectory), topology, title."""
    path = Path(directory) / STUDY_MANIFEST
    if not path.is_file():
        raise BadResults(f"{directory} has no {STUDY_MANIFEST}; it is not a topology-study directory")
    return json.loads(path.read_text())["runs"]


def study_runs(directory: Path) -> dict[str, list[Row]]:
    """The rows of every finished run of a study directory, by topology, in the study's order."""
    return {entry["topology"]: read_rows(Path(directory) / entry["name"]) for entry in study_entries(directory)
            if (Path(directory) / entry["name"] / "results.csv").is_file()}


# --- figures (matplotlib, through a2a.analysis.plot) ----------------------------------------

def plot_study(study: Path, directory: Path) -> list[plot.Figure]:
    """Draw a study directory's figures into `directory` (PNG and SVG) and an index.html; return them."""
    runs = study_runs(study)
    tables = {topology: table for topology, rows in runs.items() if (table := medians(rows))}
    if not tables:
        raise BadResults("the study has no valid measured points to plot")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with plot.pyplot().rc_context(plot.STYLE):
        names = shown_names(study, runs)
        figures = [latency_by_topology(tables, names, directory), winners(tables, names, directory)]
        if len(tables) > 1:
            figures.append(speedup(tables, directory))
    facts = study_facts(study, runs, tables)
    lede = ("Measured on the emulated cluster (network namespaces): the same algorithms on each topology at "
            "equal link physics, as bench topology-study runs them; every time is the median (p50) of a point's "
            "timed iterations, in microseconds.")
    page = plot.page(f"Topology study: {Path(study).resolve().name}", lede, facts, figures)
    (directory / "index.html").write_text(page)
    return figures


def shown_names(study: Path, runs: dict[str, list[Row]]) -> dict[str, str]:
    """Every algorithm label of the study -> the name the figures give it (as a record's figures do)."""
    defaults: dict[str, dict[str, str]] = {}
    for entry in study_entries(study):
        if (Path(study) / entry["name"] / META_JSON).is_file():
            defaults.update(read_meta(Path(study) / entry["name"]).get("option_defaults") or {})
    return {label(r.algorithm, r.options): plot.series_name(r, defaults) for rows in runs.values() for r in rows}


def study_facts(study: Path, runs: dict[str, list[Row]], tables: dict[str, Medians]) -> list[tuple[str, str]]:
    """What the study page says it shows: its runs, topologies, algorithms, sizes and process counts."""
    facts = [("study", str(Path(study).resolve()))]
    for entry in study_entries(study):
        table = tables.get(entry["topology"])
        done = f"{len(table)} points in {entry['name']}/" if table else "no results (the run did not finish)"
        facts.append((f"topology {entry['topology']}", f"{entry.get('title', '')}: {done}"))
    rows = [r for rows in runs.values() for r in rows]
    facts += [("algorithms", ", ".join(sorted({n for t in tables.values() for n in names_of(t)}))),
              ("sizes (bytes per peer)", ", ".join(human_bytes(s) for s in sorted({s for t in tables.values()
                                                                                  for s in sizes_of(t)}))),
              ("process counts", ", ".join(str(p) for p in sorted({r.nprocs for r in rows}))),
              ("speed-ups against", next(iter(tables)))]
    return facts


def latency_by_topology(tables: dict[str, Medians], names: dict[str, str], directory: Path) -> plot.Figure:
    """One panel per topology: p50 vs bytes per peer, a line per algorithm, the same y scale."""
    every = sorted({n for table in tables.values() for n in names_of(table)})
    styles = plot.series_styles(every)
    fig, axes = plot.panels(len(tables))
    low = min(min(t.values()) for t in tables.values())
    high = max(max(t.values()) for t in tables.values())
    for ax, (topology, table) in zip(axes, tables.items()):
        strong = set(names_of(table)) if len(names_of(table)) <= plot.CROWD else \
            {fastest(table, s) for s in sizes_of(table)}
        for name in names_of(table):
            series = sorted((s, t) for (s, n), t in table.items() if n == name)
            plot.line(ax, [s for s, _ in series], [t for _, t in series], styles[name], name in strong)
        plot.bytes_axis(ax)
        plot.log_axis(ax)
        ax.set_ylim(low / 1.5, high * 1.5)
        ax.set_title(topology)
        ax.set_xlabel("bytes per peer")
        ax.set_ylabel("p50 per call (us)")
    plot.legend_below(fig, [plot.handle(styles[n]) for n in every], [names[n] for n in every])
    plot.save(fig, directory, "latency_by_topology")
    return plot.Figure("latency_by_topology", "Latency vs size per topology",
                       "Median time of one all-to-all per size, one panel per emulated topology, same axes. "
                       f"Where a panel has more than {plot.CROWD} algorithms, those fastest at some size are "
                       "drawn strong and the others light.")


def speedup(tables: dict[str, Medians], directory: Path) -> plot.Figure:
    """Rows: each topology but the base; cells: base's best p50 / the topology's best p50 per size."""
    from matplotlib.colors import LogNorm

    base, *others = tables
    sizes = sizes_of(tables[base])
    grid = np.array([[best_time(tables[base], s) / best_time(tables[t], s) for s in sizes] for t in others])
    finite = grid[np.isfinite(grid)]
    span = max(1.0, float(np.max(np.abs(np.log2(finite))))) if finite.size else 1.0
    norm, cmap = LogNorm(2 ** -span, 2 ** span), plot.pyplot().get_cmap("RdBu")
    fig, axes = plot.panels(1, 1, (max(6.0, 0.6 * len(sizes) + 2.5), max(2.5, 0.5 * len(others) + 2)))
    ax = axes[0]
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
    plot.save(fig, directory, "topology_speedup")
    return plot.Figure("topology_speedup", f"Speed-up over {base}",
                       f"The best algorithm's median on {base} divided by the best algorithm's median on each "
                       "other topology, per size. Blue: that topology is faster; red: slower.")


def winners(tables: dict[str, Medians], names: dict[str, str], directory: Path) -> plot.Figure:
    """Rows: topologies; cells: coloured by the fastest algorithm, text its name and p50 in us."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    topologies = list(tables)
    sizes = sorted({s for table in tables.values() for s in sizes_of(table)})
    best: list[list[str | None]] = [[fastest(tables[t], s) for s in sizes] for t in topologies]
    found = sorted({n for line in best for n in line if n})
    colors = plot.distinct_colors(len(found))
    index = np.array([[found.index(n) if n else -1 for n in line] for line in best])
    fig, axes = plot.panels(1, 1, (max(6.0, 1.3 * len(sizes) + 2.5), max(2.5, 0.5 * len(topologies) + 2.2)))
    ax = axes[0]
    ax.imshow(np.ma.masked_less(index, 0), cmap=ListedColormap(colors), vmin=-0.5, vmax=len(found) - 0.5,
              aspect="auto", origin="lower")
    texts = [[f"{names[n]}\n{tables[t][s, n]:,.0f}" if n else "" for s, n in zip(sizes, line)]
             for t, line in zip(topologies, best)]
    plot.write_cells(ax, texts, lambda i, j: colors[index[i, j]], 8)
    plot.cell_axes(ax, sizes, topologies)
    ax.set_title("Fastest algorithm per size and topology (text: its p50, us)")
    plot.legend_below(fig, [Patch(color=c) for c in colors], [names[n] for n in found])
    plot.save(fig, directory, "topology_winners")
    return plot.Figure("topology_winners", "Fastest algorithm per topology",
                       "Where the crossovers lie on each topology: the algorithm with the lowest median per size.")


def draw(results: Path, output: Path | None = None) -> str:
    """`bench plot`: a record's figures, or a topology study's, as PNG and SVG with an index.html (in
    RESULTS/plots unless told); what was drawn, a line each."""
    plot.pyplot()  # fail first, and clearly, when matplotlib is missing
    directory = output or results / "plots"
    if (results / STUDY_MANIFEST).is_file():
        figures, what = plot_study(results, directory), "the study's runs"
    else:
        figures, what = plot.plot_all(load(results), directory), "the run's metadata"
    return "\n".join([*(f"{directory / figure.name}.png  (.svg)  {figure.title}" for figure in figures),
                      f"{directory / 'index.html'}  shows them all with {what}"])
