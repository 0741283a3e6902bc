"""liba2a learning inside the project's own program (a2a/deploy/c/verify_loop.c, every byte checked): the A/A check
and a library that chose wrong (docs/deploy.md "Learning inside the program"; findings/learn-inside.md).

    python examples/learn_inside.py aa --runs 10 --nprocs 2,4
    python examples/learn_inside.py wrong --nprocs 4

aa: the candidates are the library's own under two names (`control`); each run learns afresh at 8 B, 1 KiB and
64 KiB per peer and must keep the library at every size (the issue asks 9 runs of 10).
wrong: MPICH is made to run Bruck's algorithm at every size (MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=brucks, or
--library-algorithm); the
default candidates learn over 8 B to 1 MiB; the report says what serves each size and what exploring cost; then a
second run starts from the learned file (A2A_LEARN_OUT) and a third runs without liba2a: the loop's median time per
call of each, side by side.
Run it without mpirun: it launches its own jobs.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from a2a.deploy.file import this_library
from a2a.deploy.learn import DEFAULT_CANDIDATES, learning
from a2a.deploy.library import preload_library
from a2a.deploy.verify import loop_program
from a2a.mpi import clean_launcher_env, launcher_flags, mpi_tool

SMALL, WIDE = ["8", "1024", "65536"], ["8", "1024", "65536", "262144", "1048576"]


def loop(nprocs: int, rounds: int, sizes: list[str], **variables: str) -> subprocess.CompletedProcess:
    """The project's loop on `nprocs` ranks, these variables set in the ranks (LD_PRELOAD among them) only."""
    mpiexec = mpi_tool("mpiexec")
    settings = [f"{k}={v}" for k, v in variables.items()]
    command = [mpiexec, *launcher_flags(mpiexec), "-n", str(nprocs), "env", *settings, str(loop_program()),
               "alltoall", str(rounds), *sizes]
    done = subprocess.run(command, env=clean_launcher_env(None), capture_output=True, text=True, timeout=1800)
    if done.returncode or "WRONG" in done.stdout:
        sys.exit(f"the loop failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def learn_lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip().startswith("learn alltoall")]


def medians(stdout: str) -> dict[str, float]:
    """The loop's median time per call (us) at each size."""
    return {words[1]: statistics.median(map(float, words[2:]))
            for words in map(str.split, stdout.splitlines()) if words[:1] == ["alltoall"]}


def aa(runs: int, nprocs: list[int], rounds: int, folder: Path) -> None:
    preload = str(preload_library())
    for p in nprocs:
        path = folder / f"aa-{p}.a2a"
        path.write_text(learning(["control", "control"], [p], 0, 1, -1, this_library()).text())
        kept = 0
        for run in range(runs):
            lines = learn_lines(loop(p, rounds, SMALL, LD_PRELOAD=preload, A2A_DEPLOY=str(path),
                                     A2A_DEPLOY_REPORT="1").stderr)
            switched = [line for line in lines if "the library's own serves" not in line]
            kept += not switched
            print(f"p={p} run {run + 1}: {'library kept at every size' if not switched else 'SWITCHED: '}"
                  + "; ".join(switched), flush=True)
        print(f"p={p}: the library kept in {kept} of {runs} runs")


def wrong(nprocs: list[int], rounds: int, folder: Path, algorithm: str, asleep: bool) -> None:
    preload = str(preload_library())
    brucks = {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": algorithm} if algorithm != "default" else {}
    brucks |= {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"} if asleep else {}
    for p in nprocs:
        path, learned = folder / f"learn-{p}.a2a", folder / f"learned-{p}.a2a"
        path.write_text(learning(list(DEFAULT_CANDIDATES), [p], 0, 1, -1, this_library()).text())
        first = loop(p, rounds, WIDE, LD_PRELOAD=preload, A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                     A2A_LEARN_OUT=str(learned), **brucks)
        print(f"p={p}, MPICH's alltoall algorithm: {algorithm}, learning among the library's own and "
              f"{', '.join(DEFAULT_CANDIDATES)}:", *learn_lines(first.stderr), sep="\n  ")
        again = loop(p, rounds, WIDE, LD_PRELOAD=preload, A2A_DEPLOY=str(learned), A2A_DEPLOY_REPORT="1", **brucks)
        print("from the learned file:", *learn_lines(again.stderr), sep="\n  ")
        alone = loop(p, rounds, WIDE, **brucks)
        print(f"{'bytes':>8} {'library alone':>14} {'learning':>9} {'learned':>8}  (median us per call)")
        times = [medians(done.stdout) for done in (alone, first, again)]
        for size in WIDE:
            print(f"{size:>8} {times[0][size]:>14.2f} {times[1][size]:>9.2f} {times[2][size]:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", choices=["aa", "wrong"])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--nprocs", default="2,4")
    parser.add_argument("--rounds", type=int, default=100, help="the loop's rounds per size (about 1 ms each)")
    parser.add_argument("--output", default="results/learn-inside")
    parser.add_argument("--library-algorithm", default="brucks",
                        help="wrong: MPICH's MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM ('default': its own choice)")
    parser.add_argument("--asleep", action="store_true",
                        help="ranks wait asleep in MPICH (MPIR_CVAR_ENABLE_HEAVY_YIELD=1): more ranks than cores")
    args = parser.parse_args()
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    nprocs = [int(p) for p in args.nprocs.split(",")]
    if args.check == "aa":
        aa(args.runs, nprocs, args.rounds, folder)
    else:
        wrong(nprocs, args.rounds, folder, args.library_algorithm, args.asleep)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
