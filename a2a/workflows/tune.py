"""`bench tune`: the MPI library made faster in one command, with the evidence, and how to keep it.

This process drives MPI jobs of its own (`bench run`, each launched with the launcher prefix):

1. the sweep, `launches` times: one launch's ranking is one sample of the machine;
2. the decision from all of them; a cell whose winner changed between launches is unstable
   and stays with the library's own choice unless asked (`keep_unstable`);
3. the tuning file for the library in use (MPICH's selection JSON, Open MPI's rules file);
4. verification: `rounds` alternating launches of the library's MPI_Alltoall without and
   with the file; per size the ratio of their medians and a Mann-Whitney test over launches;
5. with `revert_slower`, the cells the library ran slower go back to it, and the table is
   verified again.

With `collective` ialltoall the sweeps time by the overlap protocol (start, a compute phase with
`tests` progress calls, wait), the file is MPICH's Ialltoall selection, and the verification
launches time MPI_Ialltoall the same way.

Everything lands in one directory with its meta.json (the steps done: `--resume` goes on from
there). The file, the gains and the lines that apply it are the result.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tabulate import tabulate

from a2a.algos.facts import library_own_options, shown
from a2a.algos.plugins import load_plugin
from a2a.analysis.compare import compare
from a2a.analysis.decide import decide, summary, unstable, winners_by_launch
from a2a.analysis.export.common import Exported, library_only
from a2a.analysis.export.formats import export
from a2a.analysis.revert import back_to_native, revert_slower
from a2a.errors import BadConfig, HarnessError
from a2a.measure.environment import TUNING_PREFIXES
from a2a.mpi import bench_words, clean_launcher_env, launcher_flags, launcher_library, launcher_size, mpi_tool
from a2a.record.decision import write_decision
from a2a.record.meta import now, software
from a2a.record.results import NATIVE, OVERLAP, read_meta, write_meta
from a2a.sweep.config import from_options
from a2a.sweep.naming import named
from a2a.sweep.parsing import parse_counts
from a2a.sweep.session import EXIT_NOTHING, NOTHING
from a2a.units import counted, human_bytes

FORMATS = {"MPICH": ("mpich", "json"), "Open MPI": ("ompi", "rules")}  # library -> (export format, file suffix)
COLLECTIVES = ("alltoall", "ialltoall")  # what a tune may tune
EXIT_STOPPED = 143
GRID = {"nprocs": "2,4", "sizes": "8,1K,16K,128K,1M"}  # the grid tuned unless told


@dataclass(frozen=True)
class TuneConfig:
    """What one tune does; kept in its meta.json, so that --resume goes on the same way."""

    launcher: list[str]
    nprocs: list[int]
    sizes: str
    algorithms: str = "all"
    options: list[str] = field(default_factory=list)  # further `bench run` options of the sweeps (--plugin, ...)
    iterations: int = 25
    verify_iterations: int = 50
    launches: int = 3
    rounds: int = 5
    metric: str = "mean"
    alpha: float = 0.05
    revert_slower: bool = False
    keep_unstable: bool = False
    job_timeout: float = 3600.0
    collective: str = COLLECTIVES[0]  # ialltoall: the overlap protocol's sweeps, MPICH's Ialltoall selection
    tests: int = 10  # ialltoall: the progress calls in the compute phase of every launch
    compute_ratio: float = 1.0  # ialltoall: the compute phase over the pure exchange time

    def run_command(self, output: Path, algorithms: str, iterations: int) -> list[str]:
        """One `bench run` job on the largest process count, into `output` (resumed when it holds a record)."""
        job = [*self.launcher, "-n", str(max(self.nprocs)), sys.executable, "-m", "bench", "run"]
        if (output / "meta.json").exists():
            return [*job, "--resume", str(output), "--quiet"]
        overlap = ["--timing", "overlap", "--tests", str(self.tests), "--compute-ratio", f"{self.compute_ratio:g}"]
        return [*job, "--nprocs", ",".join(map(str, self.nprocs)), "--sizes", self.sizes, "--algorithms", algorithms,
                "--iterations", str(iterations), *self.options, *(overlap if self.nonblocking else []),
                "--output", str(output), "--quiet"]

    @property
    def nonblocking(self) -> bool:
        """Whether it tunes MPI_Ialltoall (by the overlap protocol) rather than MPI_Alltoall."""
        return self.collective == COLLECTIVES[1]

    @property
    def call(self) -> str:
        """The library's function being tuned."""
        return "MPI_Ialltoall" if self.nonblocking else "MPI_Alltoall"

    @property
    def library_call(self) -> str:
        """The variant that is the library's own call being tuned: native, or its non-blocking form."""
        return shown(NATIVE, library_own_options(OVERLAP if self.nonblocking else ""))


TUNE_DEFAULTS = {**GRID, **{f.name: f.default for f in fields(TuneConfig) if f.default is not MISSING}}


def tune(values: dict[str, Any], say: Any = print) -> int:
    """`bench tune` as one call: a new tune from its options (checked before any launch), or --resume DIR."""
    if launcher_size() > 1:
        raise HarnessError("run `python -m bench tune` without mpirun: it launches its own MPI jobs "
                           "(inside an allocation, give --launcher srun)")
    if values.get("resume"):
        return Tune.resumed(Path(values["resume"]), say).run()
    given = {k: v for k, v in values.items() if v is not None}
    config = TuneConfig(launcher_words(given.get("launcher")), parse_counts(given.get("nprocs") or GRID["nprocs"],
                        "--nprocs"), given.get("sizes") or GRID["sizes"], given.get("algorithms") or "all",
                        [*(f"--option={o}" for o in given.get("option", ())),
                         *(f"--plugin={p}" for p in given.get("plugin", ()))],
                        **{k: given[k] for k in ("iterations", "verify_iterations", "launches", "rounds", "metric",
                                                 "alpha", "revert_slower", "keep_unstable", "job_timeout",
                                                 "collective", "tests", "compute_ratio") if k in given})
    check_grid(config, given.get("plugin", ()), given.get("option", ()))
    directory = named(given.get("output"), prefix="tune-")
    if (directory / "meta.json").exists():
        raise BadConfig(f"{directory} already holds a tune; go on with --resume {directory}, "
                        "or choose another --output")
    return Tune(directory, config, say).run()


def check_grid(config: TuneConfig, plugins: tuple[str, ...], options: tuple[str, ...]) -> None:
    """Everything the jobs would refuse, refused now (BadConfig or BadOption): process counts, sizes, algorithms,
    options, plug-ins, the launcher, the significance level."""
    if not 0 < config.alpha < 1:
        raise BadConfig(f"--alpha {config.alpha}; accepted: a level strictly between 0 and 1")
    if shutil.which(config.launcher[0]) is None:
        raise BadConfig(f"--launcher {shlex.join(config.launcher)}: {config.launcher[0]} is not found; accepted: a "
                        "command on PATH that launches MPI jobs with -n N (mpiexec, srun)")
    for plugin in plugins:
        load_plugin(plugin)
    if config.nonblocking and launcher_library(shutil.which(config.launcher[0])) == "Open MPI":
        raise BadConfig(f"--collective ialltoall: {config.launcher[0]} launches Open MPI, whose libnbc runs its "
                        "linear Ialltoall always (no MCA parameter chooses another); accepted: MPICH")
    overlap = {"timing": "overlap", "tests": str(config.tests), "compute_ratio": config.compute_ratio} \
        if config.nonblocking else {}
    swept = from_options({"sizes": config.sizes, "nprocs": ",".join(map(str, config.nprocs)),
                          "algorithms": config.algorithms, "option": options, **overlap}, world=max(config.nprocs))
    if 0 in swept.sizes:
        raise BadConfig("--sizes 0: a tuning file chooses by bytes per peer, and 0 bytes moves nothing; accepted: "
                        "sizes of 1 byte or more")


def library_format(library: str) -> tuple[str, str, str]:
    """(library, export format, file suffix) of an MPI_Get_library_version text; BadConfig for another library."""
    for name, (fmt, suffix) in FORMATS.items():
        if name in library:
            return name, fmt, suffix
    first = library.strip().splitlines()[0] if library.strip() else "an MPI library that did not say which"
    raise BadConfig(f"bench tune verifies tables on MPICH and Open MPI; this job runs {first}. For Intel MPI use "
                    "bench decide, then bench export --format intel (text only)")


class Tune:
    """One tune in its directory: each step is skipped when its record is complete, so a resume goes on."""

    def __init__(self, directory: Path, config: TuneConfig, say: Any = print):
        self.directory, self.config, self.say = Path(directory), config, say
        self.meta = read_meta(self.directory) or {"schema": "a2a-tune/1", **software(), "start": now(),
                                                   "config": asdict(config), "steps": {}}
        self.child: subprocess.Popen | None = None
        self.stopped = ""

    @classmethod
    def resumed(cls, directory: Path, say: Any = print) -> "Tune":
        """The tune recorded in DIR/meta.json."""
        meta = read_meta(directory)
        if meta.get("schema") != "a2a-tune/1":
            raise BadConfig(f"{directory} holds no tune to resume (no meta.json of `bench tune`)")
        return cls(directory, TuneConfig(**meta["config"]), say)

    def run(self) -> int:
        """Every step not done yet; 0 when the verified file is ready, 143 when stopped (resume it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(signum, self._stop)
        self.meta["status"] = "running"
        self._write()
        try:
            sweeps = [self._job(f"sweep-{k}", self.config.algorithms, self.config.iterations)
                      for k in range(1, self.config.launches + 1)]
            if self.stopped:
                raise Stopped()
            table = self._decide(sweeps)
            if library_only(json.loads(table.read_text())):
                return self._nothing_to_apply("the table leaves every cell to the library's own choice")
            made = self._export(table, "tuned")
            rows = self._verify(made, "tuned")
            if self.config.revert_slower:
                document = json.loads(table.read_text())
                reverted = revert_slower(document, rows, self.config.alpha)
                self._note("reverted", reverted or ["nothing ran slower: the table stands"])
                if reverted and library_only(document):
                    return self._nothing_to_apply("every cell the table changed ran slower and went back to the "
                                                  "library", rows)
                if reverted:
                    write_decision(document, self.directory / "verified.json")
                    made = self._export(self.directory / "verified.json", "verified")
                    rows = self._verify(made, "verified")
        except Stopped:
            self.meta["status"] = f"stopped by {self.stopped}"
            self._write()
            self.say(f"tune stopped by {self.stopped}; the finished steps are in {self.directory}; "
                     f"go on with: {shlex.join([*bench_words(), 'tune', '--resume', str(self.directory)])}")
            return EXIT_STOPPED
        self._finish(made, rows)
        return 0

    # -- the steps ----------------------------------------------------------------------------

    def _job(self, name: str, algorithms: str, iterations: int, env: dict[str, str] | None = None) -> Path:
        """One `bench run` job into DIR/NAME, unless its record is complete; stopped cleanly on a stop signal."""
        output = self.directory / name
        if read_meta(output).get("status") == "complete":
            return output
        if self.stopped:
            raise Stopped()
        command = self.config.run_command(output, algorithms, iterations)
        self.say(f"{name}: {shlex.join(command)}")
        self.child = subprocess.Popen(command, env={**job_environment(), **(env or {})}, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        try:
            out, err = self.child.communicate(timeout=self.config.job_timeout)
        except subprocess.TimeoutExpired:
            self.child.kill()
            raise HarnessError(f"{name} did not finish within {self.config.job_timeout:.0f} s: "
                               f"{shlex.join(command)}") from None
        code, self.child = self.child.returncode, None
        if self.stopped:
            raise Stopped()
        said = f"error: {NOTHING.format('measured')}"
        cause = next((line for line in err.splitlines() if line.startswith(said)), None)
        if code == EXIT_NOTHING and cause:  # it ran, and says in a line of its own why no point was measured
            raise HarnessError(f"{name} measured no valid point ({cause.removeprefix('error: ')}): "
                               f"{shlex.join(command)}")
        if code != 0:
            raise HarnessError(f"{name} failed (exit {code}): {shlex.join(command)}\n{err.strip()[-3000:]}")
        self._done(name, {"command": command})
        return output

    def _decide(self, sweeps: list[Path]) -> Path:
        """decision.json from every sweep; cells whose winner changed between launches go to the library."""
        path = self.directory / "decision.json"
        if "decide" in self.meta["steps"]:
            return path
        cfg = self.config
        document = decide(sweeps, cfg.metric, cfg.alpha)
        changed = unstable(winners_by_launch(sweeps, cfg.metric, cfg.alpha))
        report = [f"{cell[0][0]} ranks, {human_bytes(cell[1])}: the winner changed between launches: "
                  + ", ".join(f"{name} ({n} of {cfg.launches})" for name, n in wins.most_common())
                  for cell, wins in sorted(changed.items())]
        if changed and not cfg.keep_unstable:
            back_to_native(document, {cell: ("won in some launches only (unstable)",
                                             {"unstable": dict(wins)}) for cell, wins in changed.items()})
        write_decision(document, path)
        self._note("unstable", report)
        self._done("decide", {"unstable_cells": len(changed), "kept": cfg.keep_unstable})
        for line in report:
            self.say(f"unstable: {line}" + ("" if cfg.keep_unstable else "; left to the library"))
        self.say("the table:\n" + "\n".join(f"  {line}" for line in summary(document)))
        return path

    def _export(self, table: Path, name: str) -> Made:
        """The tuning file for the library the sweeps ran on, next to the table, with its applying variables."""
        library, fmt, suffix = library_format(read_meta(self.directory / "sweep-1").get("mpi_library") or "")
        path = (self.directory / f"{name}.{suffix}").resolve()
        exported = export(table, fmt, path)
        self.meta.update(library=library, format=fmt)
        self._done(f"export-{name}", {"file": str(path), "warnings": exported.warnings})
        return Made(str(path), exported)

    def _verify(self, made: Made, name: str) -> list[dict[str, Any]]:
        """Alternating launches of the library's own MPI_Alltoall without and with the file; the comparison."""
        env = made.environment
        sides: dict[str, list[Path]] = {"default": [], "with": []}
        for round_ in range(1, self.config.rounds + 1):
            call = self.config.library_call
            sides["default"].append(self._job(f"{name}-default-{round_}", call, self.config.verify_iterations))
            sides["with"].append(self._job(f"{name}-with-{round_}", call, self.config.verify_iterations, env))
        rows = compare(sides["default"], sides["with"], NATIVE, "median")
        (self.directory / f"{name}-comparison.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
        return rows

    # -- the result ---------------------------------------------------------------------------

    def _finish(self, made: Made, rows: list[dict[str, Any]]) -> None:
        variables = made.environment
        won = faster_and_none_slower(rows, self.config.alpha)
        self.meta.update(status="complete", end=now(), file=made.path, environment=variables, verified=won,
                         gains=[{k: row[k] for k in ("nprocs", "bytes_per_peer", "baseline_us", "tuned_us", "ratio",
                                                     "p")} for row in rows])
        self._write()
        what = f"{self.config.call} (start, compute, wait)" if self.config.nonblocking else self.config.call
        self.say(f"\n{what} of {self.meta['library']} with the file against without it: the median of each "
                 f"launch, {self.config.rounds} alternating launches a side, Mann-Whitney over the launches")
        self.say(gains_table(rows, self.config.alpha))
        self.say(verdict(rows, self.config.alpha, self.config.revert_slower))
        for line in made.exported.warnings:
            self.say(f"warning: {line}")
        if not won:
            self.say(f"\nnot applied: the file made no cell significantly faster without making one slower "
                     f"(alpha {self.config.alpha}); it stays for inspection in {made.path}, and {self.config.call} of "
                     "this library stays as it is")
            return
        applying = self._apply_files(variables)
        self.say(f"\nthe verified file: {made.path}\napply it with:\n  export "
                 + " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()))
        if self.meta["library"] == "Open MPI":
            self.say("  or: mpirun " + " ".join(f"--mca {k.removeprefix('OMPI_MCA_')} {shlex.quote(v)}"
                                                 for k, v in variables.items()))
        self.say(f"a module file a site installs: {applying['module']}\n"
                 f"an mpirun that applies it: {applying['wrapper']}")

    def _nothing_to_apply(self, why: str, rows: list[dict[str, Any]] | None = None) -> int:
        """The tune ends without a file: the library's MPI_Alltoall stays as it is."""
        self.meta.update(status="complete", end=now(), file=None)
        self._write()
        if rows:
            self.say(gains_table(rows, self.config.alpha))
        self.say(f"\nnothing to apply: {why}; {self.config.call} of this library stays as it is here")
        return 0

    def _apply_files(self, variables: dict[str, str]) -> dict[str, Path]:
        """An Lmod module file and an mpirun wrapper that apply the file, written into the tune's directory."""
        module = self.directory.resolve() / "a2a-tuned.lua"
        module.write_text(f"-- {self.config.call} tuned by a2a (bench tune, {now()}); load it before running jobs\n"
                          + "".join(f'setenv("{k}", "{v}")\n' for k, v in variables.items()))
        launcher = self.config.launcher[0]
        wrapper = self.directory.resolve() / "mpirun-tuned"
        wrapper.write_text(f"#!/bin/sh\n# mpirun with {self.config.call} tuned by a2a (bench tune)\n"
                           + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in variables.items())
                           + f'exec {shlex.quote(launcher)} "$@"\n')
        wrapper.chmod(0o755)
        return {"module": module, "wrapper": wrapper}

    # -- bookkeeping --------------------------------------------------------------------------

    def _done(self, step: str, facts: dict[str, Any]) -> None:
        self.meta["steps"][step] = {"end": now(), **facts}
        self._write()

    def _note(self, key: str, lines: list[str]) -> None:
        self.meta[key] = lines
        self._write()

    def _write(self) -> None:
        write_meta(self.directory, self.meta)

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopped = signal.Signals(signum).name
        if self.child and self.child.poll() is None:
            self.child.send_signal(signal.SIGUSR1)  # every launcher passes it on; the sweep stops cleanly


class Stopped(Exception):
    """A stop signal ended the running step."""


@dataclass(frozen=True)
class Made:
    """A tuning file written: where, and what the exporter said of it."""

    path: str
    exported: Exported

    @property
    def environment(self) -> dict[str, str]:
        """The variables that apply the file."""
        return self.exported.environment(self.path)


def gains_table(rows: list[dict[str, Any]], alpha: float) -> str:
    """Per process count and size: without, with, their ratio, p and what it says."""
    body = [[row["nprocs"], human_bytes(row["bytes_per_peer"]), f"{row['baseline_us']:,.1f}",
             f"{row['tuned_us']:,.1f}", f"{row['ratio']:.2f}", "-" if row["p"] is None else f"{row['p']:.3f}",
             _verdict(row, alpha)] for row in rows]
    return tabulate(body, headers=["nprocs", "bytes/peer", "default us", "tuned us", "tuned/default", "p", "verdict"],
                    disable_numparse=True)


def significant(rows: list[dict[str, Any]], alpha: float) -> tuple[list[dict], list[dict]]:
    """The cells the file made significantly faster, and those it made significantly slower."""
    real = [r for r in rows if r["p"] is not None and r["p"] < alpha]
    return [r for r in real if r["ratio"] < 1], [r for r in real if r["ratio"] > 1]


def faster_and_none_slower(rows: list[dict[str, Any]], alpha: float) -> bool:
    """Whether a file may be offered to apply: some cell significantly faster with it, none slower."""
    faster, slower = significant(rows, alpha)
    return bool(faster) and not slower


def verdict(rows: list[dict[str, Any]], alpha: float, reverted: bool) -> str:
    """In one line: where the file made the library faster, and slower."""
    faster, slower = significant(rows, alpha)
    text = (f"faster at {len(faster)} of {counted(len(rows), 'point')} (down to "
            f"{min(r['ratio'] for r in faster):.2f} of the time)" if faster else
            f"no point significantly faster (alpha {alpha})")
    if slower:
        text += f"; SLOWER at {len(slower)}" + ("" if reverted else ": --revert-slower leaves them to the library")
    return text


def _verdict(row: dict[str, Any], alpha: float) -> str:
    if row["p"] is None or row["p"] >= alpha:
        return "same (not significant)"
    return "faster" if row["ratio"] < 1 else "SLOWER"


def job_environment() -> dict[str, str]:
    """This environment for the jobs, without what a launcher set for this process and without the library's
    collective tuning (the baseline is the library's own choice); its other settings stay (MPICH's yield, say)."""
    settings = {k: v for k, v in os.environ.items()
                if k.startswith(("MPIR_CVAR_", "OMPI_MCA_", "I_MPI_")) and not k.startswith(TUNING_PREFIXES)}
    return {**clean_launcher_env(), **settings}


def launcher_words(text: str | None) -> list[str]:
    """--launcher as words (`srun --mpi=pmix`); by default the mpiexec beside this Python with its flags."""
    if text:
        return shlex.split(text)
    mpiexec = mpi_tool("mpiexec")
    return [mpiexec, *launcher_flags(mpiexec)]

