"""What every `bench tune` shares: its configuration (checked before any launch), the directory that holds its
steps, the `bench run` jobs it launches (each stopped cleanly and resumed where it stopped), and the decision from
their records, the launches its verdicts' top level (a2a.record.verdict). The tunes themselves: a2a.workflows.tune
(the library's own tables) and a2a.workflows.tune_deploy (a deploy file for liba2a, verified).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from a2a.algos.facts import library_own_options, shown
from a2a.algos.plugins import load_plugin
from a2a.analysis.decide import decide, summary
from a2a.errors import BadConfig, HarnessError
from a2a.measure.environment import TUNING_PREFIXES
from a2a.mpi import bench_words, clean_launcher_env, launcher_flags, launcher_library, mpi_tool
from a2a.record.decision import write_decision
from a2a.record.meta import now, software
from a2a.record.results import NATIVE, OVERLAP, read_meta, write_meta
from a2a.record.verdict import least_pairs
from a2a.sweep.config import SweepConfig, from_options
from a2a.sweep.parsing import parse_counts
from a2a.sweep.session import EXIT_NOTHING, NOTHING

COLLECTIVES = ("alltoall", "ialltoall")  # what a tune may tune
EXIT_STOPPED = 143
GRID = {"nprocs": "2,4", "sizes": "8,1K,16K,128K,1M"}  # the grid tuned unless told
DEPLOY_SIZES = "0:1M:x2"  # what --deploy sweeps unless told: 0 B and every power of two to 1 MiB
DEPLOY_DTYPE = "uint8"  # --deploy sweeps bytes, as programs and the verification loop call MPI_BYTE


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
    rounds: int = 6  # pairs of verification launches: the sign test needs 6 at alpha 0.05
    metric: str = "mean"
    alpha: float = 0.05
    revert_slower: bool = False
    job_timeout: float = 3600.0
    collective: str = COLLECTIVES[0]  # ialltoall: the overlap protocol's sweeps, MPICH's Ialltoall selection
    tests: int = 10  # ialltoall: the progress calls in the compute phase of every launch
    compute_ratio: float = 1.0  # ialltoall: the compute phase over the pure exchange time
    deploy: bool = False  # tune the deploy path instead (a2a.workflows.tune_deploy): sweep, refine, deploy, verify
    verify_with: str = ""  # deploy: the user's program as the verifier too
    verify_pattern: str = ""  # deploy: the number the program prints, by a regular expression (else its wall time)
    keep_ties: bool = False  # deploy: keep the sizes the verification finds no faster, only not slower
    mpicc: str = ""  # deploy: the program's MPI library's compiler wrapper (liba2a, the loop and their launcher)

    def run_command(self, output: Path, algorithms: str, iterations: int, sizes: str = "",
                    control: bool = True) -> list[str]:
        """One `bench run` job on the largest process count, into `output` (resumed when it holds a record); `sizes`
        instead of the tune's own; without the noise floor's control where `control` is False (a verification
        launch times the library's own call alone)."""
        job = [*self.launcher, "-n", str(max(self.nprocs)), sys.executable, "-m", "bench", "run"]
        if (output / "meta.json").exists():
            return [*job, "--resume", str(output), "--quiet"]
        overlap = ["--timing", "overlap", "--tests", str(self.tests), "--compute-ratio", f"{self.compute_ratio:g}"]
        deploy = ["--dtype", DEPLOY_DTYPE] if self.deploy else []
        return [*job, "--nprocs", ",".join(map(str, self.nprocs)), "--sizes", sizes or self.sizes, "--algorithms",
                algorithms, "--iterations", str(iterations), *self.options, *(overlap if self.nonblocking else []),
                *deploy, *([] if control else ["--no-control"]), "--output", str(output), "--quiet"]

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



def config_of(given: dict[str, Any]) -> TuneConfig:
    """A tune's configuration from the options given (None or '' where not given)."""
    given = {k: v for k, v in given.items() if v is not None and v != ""}
    sizes = given.get("sizes") or (DEPLOY_SIZES if given.get("deploy") else GRID["sizes"])
    return TuneConfig(launcher_words(given.get("launcher")), parse_counts(given.get("nprocs") or GRID["nprocs"],
                      "--nprocs"), sizes, given.get("algorithms") or "all",
                      [*(f"--option={o}" for o in given.get("option", ())),
                       *(f"--plugin={p}" for p in given.get("plugin", ()))],
                      **{k: given[k] for k in ("iterations", "verify_iterations", "launches", "rounds", "metric",
                                               "alpha", "revert_slower", "job_timeout", "collective",
                                               "tests", "compute_ratio", "deploy", "verify_with", "verify_pattern",
                                               "keep_ties", "mpicc") if k in given})


def recorded_config(directory: Path) -> TuneConfig:
    """The configuration of the tune in DIR/meta.json (BadConfig where there is none)."""
    meta = read_meta(directory)
    if meta.get("schema") != "a2a-tune/1":
        raise BadConfig(f"{directory} holds no tune to resume (no meta.json of `bench tune`)")
    known = {f.name for f in fields(TuneConfig)}  # a tune of an earlier version may hold options since dropped
    return TuneConfig(**{k: v for k, v in meta["config"].items() if k in known})


def check_program(config: TuneConfig) -> None:
    """--verify-with and --verify-pattern refused now if the verification could not run them."""
    if config.verify_pattern and not config.verify_with:
        raise BadConfig("--verify-pattern reads the output of --verify-with's program: give --verify-with too")
    if config.verify_pattern:
        try:
            re.compile(config.verify_pattern)
        except re.error as e:
            raise BadConfig(f"--verify-pattern {config.verify_pattern!r}: {e}; accepted: a Python regular "
                            r"expression whose first group is the number, e.g. 'took ([\d.]+) us'") from None
    if config.verify_with:
        try:
            words = shlex.split(config.verify_with)
        except ValueError as e:
            raise BadConfig(f"--verify-with {config.verify_with!r}: {e}; accepted: the program and its arguments "
                            "as a shell would split them") from None
        if not words or shutil.which(words[0]) is None:
            raise BadConfig(f"--verify-with {config.verify_with!r}: {words[0] if words else 'nothing'} is not an "
                            "executable program; accepted: a path to one (./program) or a command on PATH")


def check_grid(config: TuneConfig, plugins: tuple[str, ...], options: tuple[str, ...]) -> None:
    """Everything the jobs would refuse, refused now (BadConfig or BadOption): process counts, sizes, algorithms,
    options, plug-ins, the launcher, the significance level."""
    if not 0 < config.alpha < 1:
        raise BadConfig(f"--alpha {config.alpha}; accepted: a level strictly between 0 and 1")
    if config.deploy and config.rounds < least_pairs(config.alpha):  # else no size could be called faster
        raise BadConfig(f"--rounds {config.rounds}: --deploy judges each size by the sign test over pairs of "
                        f"launches (with the file beside the one without it), which calls nothing different at "
                        f"--alpha {config.alpha:g} over fewer than {least_pairs(config.alpha)} pairs; accepted: "
                        f"--rounds {least_pairs(config.alpha)} or more")
    check_program(config)
    if config.mpicc and not config.deploy:
        raise BadConfig(f"--mpicc {config.mpicc} builds liba2a for the program a deploy file is verified with: add "
                        "--deploy")
    if config.mpicc:
        mpicc_launcher(config.mpicc)
    launcher = launcher_found(config)
    for plugin in plugins:
        load_plugin(plugin)
    if config.deploy and (config.nonblocking or config.revert_slower):
        raise BadConfig("--deploy verifies the file itself and gives back what it makes slower: --collective "
                        "ialltoall and --revert-slower go with the library's own tables; accepted with --deploy: "
                        "--collective alltoall, --keep-ties, --verify-with")
    if not config.deploy and (config.verify_with or config.keep_ties or config.verify_pattern):
        raise BadConfig("--verify-with, --verify-pattern and --keep-ties verify a deploy file: add --deploy")
    if config.nonblocking and launcher_library(launcher) == "Open MPI":
        raise BadConfig(f"--collective ialltoall: {config.launcher[0]} launches Open MPI, whose libnbc runs its "
                        "linear Ialltoall always (no MCA parameter chooses another); accepted: MPICH")
    if 0 in swept_grid(config, options).sizes and not config.deploy:
        raise BadConfig("--sizes 0: a tuning file chooses by bytes per peer, and 0 bytes moves nothing; accepted: "
                        "sizes of 1 byte or more")


def launcher_found(config: TuneConfig) -> str:
    """The launcher's path; BadConfig where it is not found."""
    launcher = shutil.which(config.launcher[0])
    if launcher is None:
        raise BadConfig(f"--launcher {shlex.join(config.launcher)}: {config.launcher[0]} is not found; accepted: a "
                        "command on PATH that launches MPI jobs with -n N (mpiexec, srun)")
    return launcher


def swept_grid(config: TuneConfig, options: tuple[str, ...] = ()) -> SweepConfig:
    """The sweep the jobs would run, checked as they would check it (BadConfig or BadOption)."""
    overlap = {"timing": "overlap", "tests": str(config.tests), "compute_ratio": config.compute_ratio} \
        if config.nonblocking else {}
    dtype = {"dtype": DEPLOY_DTYPE} if config.deploy else {}
    return from_options({"sizes": config.sizes, "nprocs": ",".join(map(str, config.nprocs)),
                         "algorithms": config.algorithms, "option": options, **overlap, **dtype},
                        world=max(config.nprocs))


def mpicc_launcher(mpicc: str) -> str:
    """The launcher of the MPI library whose compiler wrapper is `mpicc`: the mpiexec (or mpirun) beside it with its
    suffix (/usr/bin/mpicc.mpich: /usr/bin/mpiexec.mpich), looked for beside the wrapper and beside what it links to;
    BadConfig in one line where `mpicc` is not an executable or no launcher is beside it."""
    accepted = ("accepted: an MPI compiler wrapper with its library's launcher beside it (mpicc and mpiexec, "
                "mpicc.mpich and mpiexec.mpich, mpicc.openmpi and mpiexec.openmpi)")
    found = shutil.which(mpicc)
    if found is None:
        raise BadConfig(f"--mpicc {mpicc}: not an executable program; {accepted}")
    given = Path(found).absolute()
    tools = [path.parent / f"{tool}{path.name[len('mpicc'):]}" for path in dict.fromkeys([given.resolve(), given])
             if path.name.startswith("mpicc") for tool in ("mpiexec", "mpirun")]
    launcher = next((str(t) for t in tools if t.is_file() and os.access(t, os.X_OK)), None)
    if launcher is None:
        looked = f"none of {', '.join(map(str, tools))} is an executable" if tools else "its name is not mpicc[SUFFIX]"
        raise BadConfig(f"--mpicc {mpicc}: no launcher beside it ({looked}); {accepted}")
    return launcher


class Tuning:
    """One tune in its directory: each step is skipped when its record is complete, so a resume goes on. A kind of
    tune gives its steps (_steps)."""

    def __init__(self, directory: Path, config: TuneConfig, say: Any = print):
        self.directory, self.config, self.say = Path(directory), config, say
        self.meta = read_meta(self.directory) or {"schema": "a2a-tune/1", **software(), "start": now(),
                                                   "config": asdict(config), "steps": {}}
        self.child: subprocess.Popen | None = None
        self.stopped = ""

    def run(self) -> int:
        """Every step not done yet; 0 when the verified file is ready, 143 when stopped (resume it)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(signum, self._stop)
        self.meta["status"] = "running"
        self._write()
        try:
            return self._steps()
        except Stopped:
            self.meta["status"] = f"stopped by {self.stopped}"
            self._write()
            self.say(f"{self.meta['schema'].removeprefix('a2a-').split('/')[0]} stopped by {self.stopped}; the "
                     f"finished steps are in {self.directory}; go on with: {self._resume()}")
            return EXIT_STOPPED

    def _resume(self) -> str:
        """The command that goes on from the first step not done."""
        return shlex.join([*bench_words(), "tune", "--resume", str(self.directory)])

    def _steps(self) -> int:
        """The tune's steps; the exit code."""
        raise NotImplementedError

    def _sweeps(self) -> list[Path]:
        """The sweep, `launches` times."""
        sweeps = [self._job(f"sweep-{k}", self.config.algorithms, self.config.iterations)
                  for k in range(1, self.config.launches + 1)]
        if self.stopped:
            raise Stopped()
        return sweeps

    def _job(self, name: str, algorithms: str, iterations: int, env: dict[str, str] | None = None,
             sizes: str = "", control: bool = True) -> Path:
        """One `bench run` job into DIR/NAME (at `sizes`, else the tune's), unless its record is complete; stopped
        cleanly on a stop signal."""
        output = self.directory / name
        if read_meta(output).get("status") == "complete":
            return output
        if self.stopped:
            raise Stopped()
        command = self.config.run_command(output, algorithms, iterations, sizes, control)
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

    def _decide(self, sweeps: list[Path], more: list[Path] | None = None, step: str = "decide") -> Path:
        """decision.json from every sweep (and `more` records, at sizes of their own): a cell whose winner changed
        between the sweeps' launches has an interval that spans both, and goes to the library."""
        path = self.directory / "decision.json"
        if step in self.meta["steps"]:
            return path
        cfg = self.config
        document = decide([*sweeps, *(more or [])], cfg.metric, cfg.alpha)  # the launches are the verdicts' top level
        write_decision(document, path)
        self._done(step, {"launches": len(sweeps)})
        self.say("the table:\n" + "\n".join(f"  {line}" for line in summary(document)))
        return path

    def _nothing_to_apply(self, why: str, rows: list[dict[str, Any]] | None = None) -> int:
        """The tune ends without a file: the library's MPI_Alltoall stays as it is."""
        self.meta.update(status="complete", end=now(), file=None)
        self._write()
        if rows:
            self.say(self._gains(rows))
        self.say(f"\nnothing to apply: {why}; {self.config.call} of this library stays as it is here")
        return 0

    def _gains(self, rows: list[dict[str, Any]]) -> str:
        """What the verification found, as a table."""
        raise NotImplementedError

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

