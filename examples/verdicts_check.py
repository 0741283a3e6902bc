"""The A/A and power check of the verdicts on this machine (docs/decide.md; findings/verdicts-aa-power.md).

    python examples/verdicts_check.py --launches 6 --output results/verdicts            # quiet machine
    python examples/verdicts_check.py --launches 6 --load --output results/verdicts-load  # beside a bursty load

Each launch sweeps, at --nprocs (2) and 8 B to 64 KiB per peer, the library's own, pairwise, two twins of pairwise
(`control:of=pairwise`, the same schedule under other names) and `slowed`, pairwise made about 1.3x slower by
construction (examples/twins.py). Then, per launch and over all launches together:
- A/A: of the twins' pairs, how many the verdicts call different (at most 5 % may be);
- power: in how many cells `slowed` is called slower than pairwise (and never faster).
With --load, examples/bursty_load.py runs beside every launch (two workers, busy and idle phases of 20-300 ms).
Run it without mpirun: it launches its own jobs (`--launcher` to change how).
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from a2a.analysis.aa import aa_check
from a2a.analysis.decide import gather
from a2a.mpi import launcher_flags, mpi_tool
from a2a.record import verdict
from a2a.record.results import label

HERE = Path(__file__).resolve().parent
SWEPT = "native,pairwise,control:of=pairwise:twin=1,control:of=pairwise:twin=2,slowed:of=pairwise:extra=0.3"


def sweep(launcher: list[str], nprocs: int, sizes: str, iterations: int, rounds: str, output: Path) -> None:
    """One launch of the sweep into `output` (`rounds`: the sweep's default where '')."""
    command = [*launcher, "-n", str(nprocs), sys.executable, "-m", "bench", "run", "--plugin", str(HERE / "twins.py"),
               "--algorithms", SWEPT, "--nprocs", str(nprocs), "--sizes", sizes, "--iterations", str(iterations),
               *(["--rounds", rounds] if rounds else []), "--output", str(output), "--quiet"]
    print("$", shlex.join(command), flush=True)
    subprocess.run(command, check=True)


def power(directories: list[Path], metric: str = "mean") -> tuple[int, int, int]:
    """(cells where slowed is called slower than pairwise, called faster, cells), each pair judged against the
    larger of the margin and the cell's noise floor."""
    points, _, _ = gather(directories)
    cells: dict[tuple, dict[str, object]] = {}
    for point in points.values():
        cells.setdefault((point.context, point.bytes_per_peer), {})[label(point.algorithm, point.options)] = point
    slower = faster = counted = 0
    for found in cells.values():
        slowed = next((p for name, p in found.items() if name.startswith("slowed")), None)
        pairwise = next((p for name, p in found.items() if name.startswith("pairwise")), None)
        native = next((p for name, p in found.items() if name.startswith("native")), None)
        control = next((p for name, p in found.items() if "of=native" in name), None)
        if slowed is None or pairwise is None:
            continue
        floor = verdict.noise_floor(control.per_round(metric), native.per_round(metric)) if control and native \
            else None
        judged = verdict.family({"pair": (slowed.per_round(metric), pairwise.per_round(metric))},
                                verdict.bound_of(verdict.MARGIN, floor))["pair"]
        slower, faster = slower + (judged.verdict == verdict.SLOWER), faster + (judged.verdict == verdict.FASTER)
        counted += 1
    return slower, faster, counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=6)
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--sizes", default="8:64K:x4")
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--rounds", default="", help="bench run's --rounds [its default]")
    beside = mpi_tool("mpiexec")  # this Python's MPI, not whichever mpirun comes first on PATH
    parser.add_argument("--launcher", default=shlex.join([beside, *launcher_flags(beside)]),
                        help="how to launch the sweeps  [default: the mpiexec beside this Python]")
    parser.add_argument("--load", action="store_true", help="a bursty background load beside every launch")
    parser.add_argument("--output", type=Path, required=True)
    given = parser.parse_args()
    records = [given.output / f"launch-{k}" for k in range(1, given.launches + 1)]
    for record in records:
        if (record / "results.csv").exists():
            continue
        load = subprocess.Popen([sys.executable, str(HERE / "bursty_load.py"), "--workers", "2", "--seconds",
                                 "3600"], start_new_session=True) if given.load else None
        try:
            sweep(shlex.split(given.launcher), given.nprocs, given.sizes, given.iterations, given.rounds, record)
        finally:
            if load:
                os.killpg(load.pid, signal.SIGKILL)  # the load's workers with it
                load.wait()
    for k, record in enumerate(records, 1):
        slower, faster, cells = power([record])
        print(f"launch {k}: {aa_check([record]).line()}; power: slowed called slower in {slower} of {cells} cells, "
              f"faster in {faster}")
    slower, faster, cells = power(records)
    print(f"all {len(records)} launches as one decision: {aa_check(records).line()}; power: slowed called slower in "
          f"{slower} of {cells} cells, faster in {faster}")


if __name__ == "__main__":
    main()
