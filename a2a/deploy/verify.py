"""A deploy file verified on this machine before a program runs under it: alternating launches with and without
liba2a of an IMB-style loop (c/verify_loop.c) over the collectives the file serves, or of the user's own program;
per size (or per program) the verdict of a2a.record.verdict's rule across launches, each launch with the file paired
with the launch without it just before it, the pairs judged by the sign test (paired_launches)."""
from __future__ import annotations

import re
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from a2a.errors import HarnessError
from a2a.kept import compiled
from a2a.record import verdict
from a2a.record.decision import lower_bounds

SOURCE = Path(__file__).resolve().parent / "c" / "verify_loop.c"
FLAGS = ["-O2", "-Wall", "-Wextra"]
FASTER, SLOWER, SAME, UNTESTED = "faster", "slower", "same", "untested"  # verdicts (untested: too few pairs)


def loop_program(mpicc: str | None = None) -> Path:
    """The verification loop, compiled by the MPI library's own mpicc (or `mpicc`) unless kept."""
    return compiled([SOURCE], "verify_loop", FLAGS, mpicc=mpicc)


@dataclass(frozen=True)
class Verdict:
    """One size (or the program) compared: the medians with and without the file, the p of a difference beyond the
    margin, the verdict."""

    collective: str  # alltoall, alltoallv, or program
    nprocs: int
    bytes_per_peer: int  # -1 for a program
    with_file: float  # median, microseconds (a program: its measure)
    without: float
    p: float
    verdict: str
    runs: str = ""  # what the file ran there when it was verified (a schedule, or the library)

    @property
    def ratio(self) -> float:
        return self.with_file / self.without if self.without > 0 else 1.0

    def line(self) -> str:
        """The file's `verified` line of this verdict."""
        what = f"{self.collective} {self.nprocs} {self.bytes_per_peer}"
        return (f"{what} with {self.with_file:.4g} without {self.without:.4g} ratio {self.ratio:.3f} p {self.p:.3g} "
                f"{self.verdict}")


def judged(collective: str, nprocs: int, size: int, with_file: list[float], without: list[float],
           alpha: float, margin: float = verdict.MARGIN) -> Verdict:
    """The verdict of one comparison, the k-th launch with the file paired with the k-th without it (they ran one
    after the other), by the rule across launches (a2a.record.verdict.paired_launches, the sign test on the pairs'
    log ratios): faster or slower where the interval of the median ratio lies wholly beyond the margin, untested
    below least_pairs(alpha) pairs, else the same."""
    ratios = [max(w, verdict.RESOLUTION) / max(o, verdict.RESOLUTION) for w, o in zip(with_file, without)]
    found = verdict.paired_launches(np.log(ratios), verdict.bound_of(margin, None), alpha)
    said = {verdict.FASTER: FASTER, verdict.SLOWER: SLOWER, verdict.UNTESTED: UNTESTED}.get(found.verdict, SAME)
    return Verdict(collective, nprocs, size, statistics.median(with_file), statistics.median(without),
                   1.0 if found.p is None else found.p, said)


Launch = Callable[[list[str], dict[str, str]], str]  # (command after the launcher and -n, ranks' variables) -> stdout


def loop_samples(launch: Launch, collective: str, sizes: list[int], rounds: int,
                 variables: dict[str, str], mpicc: str | None = None) -> dict[int, list[float]]:
    """One launch of the loop (built by `mpicc`, default this Python's): per size, each round's microseconds per
    call."""
    out = launch([str(loop_program(mpicc)), collective, str(rounds), *map(str, sizes)], variables)
    found = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == rounds + 2 and words[0] == collective:
            found[int(words[1])] = [float(w) for w in words[2:]]
    missing = sorted(set(sizes) - set(found))
    if missing:
        raise HarnessError(f"the verification loop printed no time for {collective} at {missing} B per peer:\n"
                           f"{out[-1500:]}")
    return found


def verify_sizes(launch: Launch, collective: str, nprocs: int, sizes: list[int], launches: int, rounds: int,
                 variables: dict[str, str], alpha: float, mpicc: str | None = None) -> list[Verdict]:
    """Alternating launches of the loop (built by `mpicc`) without and with `variables` (liba2a and the file); a
    verdict per size, from each launch's median over its rounds (a launch is one sample of the machine: rounds within
    it are not independent, and pooling them finds differences between two launches of the same program)."""
    sides: dict[bool, dict[int, list[float]]] = {False: {s: [] for s in sizes}, True: {s: [] for s in sizes}}
    for _ in range(launches):
        for with_file in (False, True):
            for size, samples in loop_samples(launch, collective, sizes, rounds,
                                              variables if with_file else {}, mpicc).items():
                sides[with_file][size].append(statistics.median(samples))
    return [judged(collective, nprocs, s, sides[True][s], sides[False][s], alpha) for s in sizes]


def verify_program(launch: Launch, command: str, pattern: str, nprocs: int, launches: int,
                   variables: dict[str, str], alpha: float) -> Verdict:
    """Alternating launches of the user's program without and with `variables`: its wall time, or the number its
    output prints by `pattern` (a regular expression whose first group is the number), compared."""
    sides: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(launches):
        for with_file in (False, True):
            start = time.monotonic()
            out = launch(shlex.split(command), variables if with_file else {})
            took = time.monotonic() - start
            if pattern:
                found = re.search(pattern, out)
                if not found:
                    raise HarnessError(f"--verify-pattern {pattern!r} matches nothing the program printed:\n"
                                       f"{out[-1500:]}")
                number = found.group(1) if found.groups() else found.group(0)
                try:
                    took = float(number)
                except (TypeError, ValueError):
                    raise HarnessError(f"--verify-pattern {pattern!r} matched {found.group(0)!r}, whose first group "
                                       f"({number!r}) is not a number") from None
            sides[with_file].append(took)
    return judged("program", nprocs, -1, sides[True], sides[False], alpha)


def sizes_to_verify(measured: list[int]) -> list[int]:
    """Every measured size and the geometric midpoints between neighbours (none between 0 and the next)."""
    between = [round((a * b) ** 0.5) for a, b in zip(measured, measured[1:]) if a > 0 and b > a + 1]
    return sorted({*measured, *between})


def given_back(verdicts: list[Verdict], keep_ties: bool) -> list[tuple[int, int]]:
    """The byte ranges (low, high; -1: no limit) of an alltoall whose verdict was slower or untested (or, unless
    `keep_ties`, the same): each verified size stands for the bytes between its geometric midpoints with its
    neighbours."""
    sizes = [v.bytes_per_peer for v in verdicts]
    lows = lower_bounds(sizes)
    highs = [low - 1 for low in lows[1:]] + [-1]
    refused = {SLOWER, UNTESTED} | (set() if keep_ties else {SAME})
    return [(low, high) for v, low, high in zip(verdicts, lows, highs) if v.verdict in refused]


def run_launch(prefix: list[str], env: dict[str, str], timeout: float) -> Launch:
    """A Launch that runs `prefix + [env VARIABLES] + command` (the variables on the ranks, not the launcher)."""
    def launch(command: list[str], variables: dict[str, str]) -> str:
        settings = ["env", *(f"{k}={v}" for k, v in variables.items())] if variables else []
        full = [*prefix, *settings, *command]
        try:
            done = subprocess.run(full, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{shlex.join(full)} did not finish within {timeout:.0f} s") from None
        if done.returncode != 0:
            raise HarnessError(f"{shlex.join(full)} failed (exit {done.returncode}):\n{done.stderr.strip()[-2000:]}")
        unused = next((line for line in done.stderr.splitlines()
                       if line.startswith("a2a: A2A_DEPLOY=") or "cannot be preloaded" in line), None)
        if unused and "A2A_DEPLOY" in variables:  # the "with" side would be the library's alone
            raise HarnessError(f"{shlex.join(full)}: the deploy file was not in use, so it cannot be verified: "
                               f"{unused}")
        return done.stdout
    return launch
