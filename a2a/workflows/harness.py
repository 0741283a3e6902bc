"""The harness against C: MPI_Alltoall timed by a C reference program and by `bench run` (native), side by side.

Both launch as MPI jobs of their own (this process is their driver), alternating, in the
three protocols, with IMB-MPI1 itself when given; the medians over the repeats are compared
per size. docs/harness.md has the findings.
"""
from __future__ import annotations

import csv
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from a2a.errors import HarnessError
from a2a.mpi import launcher_flags, launcher_size, mpi_tool, run_job
from a2a.units import human_bytes

SOURCE = Path(__file__).resolve().parent / "c" / "alltoall_ref.c"
MODES = ("sync", "pipelined", "imb")
# the figure each protocol's users quote: the median sample (sync), the mean over ranks (IMB's t_avg)
STATISTIC = {"sync": "t_p50_us", "pipelined": "t_mean_us", "imb": "t_mean_us"}
TARGET_RATIO, TARGET_FROM_BYTES = 1.10, 64 * 1024
# against IMB-MPI1 itself: within IMB_GAP_US below IMB_RATIO_FROM_BYTES, within IMB_RATIO from there
IMB_GAP_US, IMB_RATIO, IMB_RATIO_FROM_BYTES = 0.5, 1.10, 4096
BUSY_BELOW_IDLE = 0.8


@dataclass(frozen=True)
class Comparison:
    """One size in one protocol: the C figure and the Python figure, in microseconds."""

    mode: str
    bytes_per_peer: int
    c_us: float
    python_us: float
    imb_us: float | None = None  # IMB-MPI1's t_avg, for the imb protocol when IMB-MPI1 ran

    @property
    def ratio(self) -> float:
        """Python over C."""
        return self.python_us / self.c_us

    @property
    def gap_us(self) -> float:
        """Python minus C."""
        return self.python_us - self.c_us


@dataclass
class Measurement:
    """What measure() saw: the comparisons, how idle the CPUs were per repeat, the driver's warnings."""

    comparisons: list[Comparison]
    idle: list[float | None]
    warnings: list[str]


def mpiexec_command() -> list[str]:
    """The mpiexec beside this Python with the flags its library needs."""
    launcher = mpi_tool("mpiexec")
    return [launcher, *launcher_flags(launcher)]


def build_reference(output: Path, mpicc: str | None = None) -> Path:
    """Compile the C reference with the MPI library's own mpicc, unless `output` is newer than the source."""
    output = Path(output)
    if output.exists() and output.stat().st_mtime >= SOURCE.stat().st_mtime:
        return output
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [mpicc or mpi_tool("mpicc"), "-O2", "-o", str(output), str(SOURCE)]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise HarnessError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")
    return output


def table_rows(text: str) -> list[dict[str, str]]:
    """The CSV records of a program's output, from its header line (the first naming bytes_per_peer)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "bytes_per_peer" in line.split(",")), None)
    if start is None:
        raise HarnessError(f"no CSV header with bytes_per_peer in this output:\n{text.strip()[:2000]}")
    return [row for row in csv.DictReader(lines[start:]) if row.get("bytes_per_peer")]


def figures(rows: list[dict[str, str]], mode: str) -> dict[int, float]:
    """bytes_per_peer -> the mode's figure in microseconds, from rows of that mode."""
    column = STATISTIC[mode]
    found = {}
    for row in rows:
        if row.get("mode", row.get("timing", mode)) == mode and row.get(column):
            found[int(row["bytes_per_peer"])] = float(row[column])
    return found


def reference_command(binary: Path, nprocs: int, sizes: list[int], iterations: int, warmup: int) -> list[str]:
    """mpiexec running the C reference in every protocol."""
    return [*mpiexec_command(), "-n", str(nprocs), str(binary), "-i", str(iterations), "-w", str(warmup),
            "-m", "all", *map(str, sizes)]


def imb_command(binary: Path, nprocs: int, lengths: Path, iterations: int) -> list[str]:
    """mpiexec running IMB-MPI1's Alltoall at `nprocs` ranks on the sizes listed in `lengths`, `iterations` each."""
    return [*mpiexec_command(), "-n", str(nprocs), str(binary), "Alltoall", "-npmin", str(nprocs),
            "-msglen", str(lengths), "-iter", str(iterations), "-iter_policy", "off"]


def imb_figures(text: str) -> dict[int, float]:
    """bytes -> t_avg[usec] from IMB-MPI1's output (its table under the '#bytes' header)."""
    found: dict[int, float] = {}
    column = None
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["#bytes"] and "t_avg[usec]" in fields:
            column = fields.index("t_avg[usec]")
        elif column is not None and len(fields) > column and fields[0].isdigit():
            found[int(fields[0])] = float(fields[column])
    if not found:
        raise HarnessError(f"no t_avg table in IMB-MPI1's output:\n{text.strip()[-2000:]}")
    return found


def python_command(nprocs: int, sizes: list[int], mode: str, iterations: int, warmup: int,
                   output: Path) -> list[str]:
    """mpiexec running the Python driver on MPI_Alltoall (algorithm native) in one protocol."""
    return [*mpiexec_command(), "-n", str(nprocs), sys.executable, "-m", "bench", "run",
            "--algorithms", "native", "--timing", mode, "--nprocs", str(nprocs),
            "--sizes", ",".join(map(str, sizes)), "--iterations", str(iterations), "--warmup", str(warmup),
            "--output", str(output), "--format", "csv", "--quiet"]


def idle_share(seconds: float = 1.0) -> float | None:
    """Share of all CPUs' time spent idle over the next `seconds` (Linux /proc/stat; None elsewhere)."""
    def read() -> tuple[int, int]:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return ticks[3] + ticks[4], sum(ticks)  # idle + iowait, all

    try:
        idle_before, total_before = read()
        time.sleep(seconds)
        idle_after, total_after = read()
    except (OSError, ValueError, IndexError):
        return None
    return (idle_after - idle_before) / max(total_after - total_before, 1)


def measure(binary: Path, nprocs: int, sizes: list[int], iterations: int, warmup: int,
            repeats: int, imb: Path | None = None) -> Measurement:
    """Alternate C, Python and IMB-MPI1 (when given) runs `repeats` times; compare the medians over the repeats.

    Also note how idle the machine was just before each repeat (other work skews microseconds)
    and keep the driver's warnings (oversubscription), each once.
    """
    c_runs: dict[str, list[dict[int, float]]] = {mode: [] for mode in MODES}
    python_runs: dict[str, list[dict[int, float]]] = {mode: [] for mode in MODES}
    imb_runs: list[dict[int, float]] = []
    idle, warnings = [], []
    with tempfile.TemporaryDirectory(prefix="a2a-harness-") as scratch:
        lengths = Path(scratch) / "lengths"
        lengths.write_text("".join(f"{size}\n" for size in sizes))
        for repeat in range(repeats):
            idle.append(idle_share())
            rows = table_rows(run_job(reference_command(binary, nprocs, sizes, iterations, warmup),
                                     "C reference").stdout)
            for mode in MODES:
                c_runs[mode].append(figures(rows, mode))
                output = Path(scratch) / f"{mode}-{repeat}"
                done = run_job(python_command(nprocs, sizes, mode, iterations, warmup, output), "python -m bench run")
                python_runs[mode].append(figures(table_rows(done.stdout), mode))
                warnings += [line for line in done.stderr.splitlines()
                             if line.startswith("WARNING") and line not in warnings]
            if imb:
                imb_runs.append(imb_figures(run_job(imb_command(imb, nprocs, lengths, iterations), "IMB-MPI1").stdout))
    comparisons = [Comparison(mode, size, _median_of(c_runs[mode], size, "C reference"),
                              _median_of(python_runs[mode], size, "python -m bench run"),
                              _median_of(imb_runs, size, "IMB-MPI1") if imb and mode == "imb" else None)
                   for mode in MODES for size in sizes]
    return Measurement(comparisons, idle, warnings)


def _median_of(runs: list[dict[int, float]], size: int, what: str) -> float:
    values = [run[size] for run in runs if size in run]
    if not values:
        raise HarnessError(f"{what} reported no figure for {size} bytes per peer")
    return statistics.median(values)


def render(comparisons: list[Comparison]) -> str:
    """One line per size: C, Python, ratio and gap in each protocol, and IMB-MPI1 beside imb when it ran."""
    by_key = {(c.mode, c.bytes_per_peer): c for c in comparisons}
    sizes = sorted({c.bytes_per_peer for c in comparisons})
    with_imb = any(c.imb_us is not None for c in comparisons)
    headers = ["bytes/peer"]
    for mode in MODES:
        headers += [f"{mode} C us", f"{mode} Py us", f"{mode} Py/C", f"{mode} gap us"]
    headers += ["IMB-MPI1 us", "imb Py/IMB", "imb C/IMB"] if with_imb else []
    lines = []
    for size in sizes:
        line: list[object] = [human_bytes(size)]
        for mode in MODES:
            c = by_key.get((mode, size))
            line += ["", "", "", ""] if c is None else [f"{c.c_us:.2f}", f"{c.python_us:.2f}",
                                                        f"{c.ratio:.3f}", f"{c.gap_us:+.2f}"]
        imb = by_key.get(("imb", size))
        if with_imb:
            line += ["", "", ""] if imb is None or imb.imb_us is None else [
                f"{imb.imb_us:.2f}", f"{imb.python_us / imb.imb_us:.3f}", f"{imb.c_us / imb.imb_us:.3f}"]
        lines.append(line)
    return tabulate(lines, headers=headers, disable_numparse=True, stralign="right")


def verdict(comparisons: list[Comparison]) -> list[str]:
    """The small-size gap per protocol, whether the large sizes are within the target ratio, and how the imb
    protocol stands against IMB-MPI1 itself when it ran."""
    said = []
    for mode in MODES:
        ours = sorted((c for c in comparisons if c.mode == mode), key=lambda c: c.bytes_per_peer)
        if not ours:
            continue
        smallest = ours[0]
        said.append(f"{mode}: gap at {human_bytes(smallest.bytes_per_peer)} per peer {smallest.gap_us:+.2f} us "
                    f"(Python {smallest.python_us:.2f} us, C {smallest.c_us:.2f} us)")
        large = [c for c in ours if c.bytes_per_peer >= TARGET_FROM_BYTES]
        missed = [c for c in large if c.ratio > TARGET_RATIO]
        if large:
            state = "met" if not missed else "MISSED at " + ", ".join(
                f"{human_bytes(c.bytes_per_peer)} ({c.ratio:.3f})" for c in missed)
            said.append(f"{mode}: Python/C <= {TARGET_RATIO:.2f} from {human_bytes(TARGET_FROM_BYTES)} per peer: "
                        f"{state}")
    return said + _against_imb([(c, c.imb_us) for c in comparisons if c.imb_us is not None])


def _against_imb(measured: list[tuple[Comparison, float]]) -> list[str]:
    """imb protocol (Python) against IMB-MPI1 (each comparison with IMB-MPI1's time): within IMB_GAP_US below
    IMB_RATIO_FROM_BYTES, IMB_RATIO from it."""
    limit, said = human_bytes(IMB_RATIO_FROM_BYTES), []
    small = [(c, imb) for c, imb in measured if c.bytes_per_peer < IMB_RATIO_FROM_BYTES]
    if small:
        off = [f"{human_bytes(c.bytes_per_peer)} ({c.python_us - imb:+.2f} us)" for c, imb in small
               if c.python_us - imb > IMB_GAP_US]
        said.append(f"imb vs IMB-MPI1: within +{IMB_GAP_US:g} us below {limit} per peer: "
                    + ("MISSED at " + ", ".join(off) if off else "met"))
    large = [(c, imb) for c, imb in measured if c.bytes_per_peer >= IMB_RATIO_FROM_BYTES]
    if large:
        off = [f"{human_bytes(c.bytes_per_peer)} ({c.python_us / imb:.3f})" for c, imb in large
               if c.python_us / imb > IMB_RATIO]
        said.append(f"imb vs IMB-MPI1: within {IMB_RATIO:.2f}x from {limit} per peer: "
                    + ("MISSED at " + ", ".join(off) if off else "met"))
    return said


def idle_notes(idle: list[float | None]) -> list[str]:
    """How idle the CPUs were before each repeat, and a warning when other work was running."""
    known = [share for share in idle if share is not None]
    if not known:
        return []
    notes = ["CPUs idle before each repeat: " + " ".join(f"{share:.0%}" for share in known)]
    if min(known) < BUSY_BELOW_IDLE:
        notes.append(f"WARNING: other work was running (idle below {BUSY_BELOW_IDLE:.0%}); these "
                     "microseconds measure the scheduler as much as the harness: rerun on a quiet machine")
    return notes


def harness_report(nprocs: int, sizes: list[int], iterations: int, warmup: int, repeats: int, reference: Path,
                   imb: Path | None) -> str:
    """`bench harness` as one call: the C reference built if stale, both programs (and IMB) timed, the report."""
    if launcher_size() > 1:
        raise HarnessError("run `python -m bench harness` without mpirun: it launches its own MPI jobs")
    measured = measure(build_reference(reference), nprocs, sizes, iterations, warmup, repeats, imb)
    head = (f"MPI_Alltoall at {nprocs} ranks, {iterations} iterations after {warmup} warm-up, median of {repeats} "
            "alternating runs; sync quotes the median sample, pipelined and imb the mean over ranks (IMB's t_avg)")
    lines = [*verdict(measured.comparisons), *idle_notes(measured.idle), *measured.warnings]
    return "\n".join([head, render(measured.comparisons), *lines])
