"""`bench run` as one call: the sweep measured from its options, then on rank 0 what it decides, in short."""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from a2a.algos.facts import shown
from a2a.algos.registry import candidates
from a2a.analysis.aa import aa_check
from a2a.analysis.decide import decide, midpoints, summary
from a2a.analysis.export.formats import export_lines
from a2a.errors import A2AError, BadConfig
from a2a.execute.executor import progress_asked
from a2a.measure.driver import measure_sweep, resume_measured, set_thread_level
from a2a.measure.environment import ask_for_progress_thread, node_memory_share, progress_thread_running
from a2a.mpi import bench_words, tune_launcher, world
from a2a.record.decision import Decision, varying
from a2a.record.results import read_meta
from a2a.sweep.config import DEFAULTS, OVERLAP, SWEEP_OPTIONS, SweepConfig, check_sizes
from a2a.sweep.launch import fresh_sweep, launch_progress_mode, refuse_with_resume, with_file
from a2a.sweep.naming import named
from a2a.sweep.parsing import parse_dtype
from a2a.sweep.session import Output, StopRequest, SweepState
from a2a.units import human_bytes

EXIT_AA_FAILED = 3  # --aa: the statistics called one schedule under two names different too often here
MAX_REFINEMENTS = 6  # rounds of midpoints: a gap of 2^64 is bracketed within a factor of 2 in six


def measured(values: dict[str, Any], output: Output) -> int:
    """Measure the sweep the options describe (fresh, or --resume DIR) on this MPI job, --launches times; the exit
    code."""
    with StopRequest().installed() as stop:  # before MPI starts: a batch system's warning may come at any time
        return _measured(values, output, stop)


def _measured(values: dict[str, Any], output: Output, stop: StopRequest) -> int:
    """`measured`, the stop signals caught."""
    progress_asked()  # refused before MPI starts, in one line
    launches = _launches(values)
    mode = launch_progress_mode(values)
    if mode == "thread":
        ask_for_progress_thread()
    set_thread_level()
    comm = world()
    if mode == "thread":
        progress_thread_running()
    if launches == 1:
        code, directory, state = _launched(comm, values, output, stop, mode)
        directories = [directory]
    else:
        parent = Path(comm.bcast(str(named(with_file(values).get("output"))) if comm.rank == 0 else None, root=0))
        directories = [parent / f"launch-{k}" for k in range(1, launches + 1)]
        for directory in directories:
            code, _, state = _launched(comm, {**values, "output": str(directory)}, output, stop, mode)
            if code != 0:
                return code
    if code == 0 and comm.rank == 0 and output.fmt in ("table", "tpu") and not output.quiet:
        print(decision_summary(directories, state), flush=True)
    if code == 0 and comm.rank == 0 and state.config.aa:
        check = aa_check(directories)
        print(check.line(), flush=True)
        code = 0 if check.passed else EXIT_AA_FAILED
    return comm.bcast(code, root=0)


def _launches(values: dict[str, Any]) -> int:
    """--launches (or the config file's `launches`) checked: 1 or more, and not with --resume or --refine (a record
    of launches is resumed a launch at a time)."""
    given = with_file(values).get("launches")
    values.pop("launches", None)
    if given is not None and not (str(given).strip().isdigit() and int(given) >= 1):
        raise BadConfig(f"--launches {given}; accepted: 1 or more")
    launches = 1 if given is None else int(given)
    clash = [f"--{k}" for k in ("resume", "refine") if values.get(k)]
    if launches > 1 and clash:
        raise BadConfig(f"--launches goes without {' and '.join(clash)}: resume or refine one launch's record "
                        "(DIR/launch-N) at a time")
    return launches


def _launched(comm: Any, values: dict[str, Any], output: Output, stop: StopRequest,
              mode: str) -> tuple[int, Path, SweepState]:
    """One launch of the sweep into its record (refined as --refine asks): the exit code, the record, the sweep."""
    directory, state = _sweep(comm, values)
    if values.get("refine") and state.config.workload.startswith("recorded"):
        raise BadConfig(f"--refine: the sizes of --workload {state.config.workload} are the program's own; refine a "
                        "sweep of --sizes")
    state.progress_mode = mode
    timeout = float(values.get("timeout") or state.config.timeout)
    code = measure_sweep(comm, directory, state, output, stop, timeout)
    for _ in range(MAX_REFINEMENTS if values.get("refine") else 0):
        sizes = comm.bcast(_crossovers_left(directory) if comm.rank == 0 else None, root=0)
        if code != 0 or not sizes or stop():
            break
        state = resume_measured(comm, directory)
        state.config, state.progress_mode = replace(state.config, sizes=sorted({*state.config.sizes, *sizes})), mode
        code = measure_sweep(comm, directory, state, output, stop, timeout)
    return code, directory, state


def _crossovers_left(directory: Path) -> list[int]:
    """The sizes between neighbours whose winners differ and are not yet within a factor of 2 (a2a.analysis.decide
    midpoints); none where nothing can be decided."""
    try:
        return midpoints(decide([directory]))
    except A2AError:
        return []


def _sweep(comm: Any, values: dict[str, Any]) -> tuple[Path, SweepState]:
    """The launch's directory and sweep, identical on every rank; nothing is measured yet."""
    if not values.get("resume"):
        return fresh_sweep(values, "mpi", world=comm.size, memory=node_memory_share(comm))
    directory = Path(values["resume"])
    refuse_with_resume(directory, values, [*(k for k in SWEEP_OPTIONS if k != "dtype"), "output"])
    dtype = parse_dtype(values["dtype"]) if values.get("dtype") else None
    state = resume_measured(comm, directory, dtype, bool(values.get("force_resume")))
    check_sizes(state.config.sizes, state.config.dtype)
    return directory, state


def decision_summary(directories: list[Path], state: SweepState) -> str:
    """What the records (one per launch) decide, in short, and the commands that go on from them (each runs as
    printed)."""
    try:
        document = decide(directories)
    except A2AError as nothing:  # no valid point to decide from
        return f"\nno decision: {nothing}"
    full = shlex.join([*bench_words(), "decide", *map(str, directories)])
    return "\n".join([f"\nDecision (`{full}` has the full table):",
                      *(f"  {line}" for line in summary(document)), *next_steps(directories, state, document)])


def next_steps(directories: list[Path], state: SweepState, document: Decision) -> list[str]:
    """`bench tune` on this sweep's grid, launched as it was (where tune repeats such a sweep), or decide (every
    launch) then export for this MPI library (a file serves one value of each context column: the last one's here);
    a sweep that raced one candidate chose nothing, so its tune races them all."""
    config = state.config
    names = [shown(v.name, v.options_text) for v in config.variants if v.name in candidates(config.collective)]
    why_not = tune_refuses(config)
    if len(set(names)) < 2:
        alone = f"this sweep raced {names[0] if names else 'no candidate'} alone: nothing to choose"
        if why_not:
            return [f"next ({alone}; bench tune does not repeat {why_not}): sweep again with --algorithms all"]
        return [f"next ({alone}), to race every candidate on this grid, export for this MPI library and verify it "
                "there:", "  " + tune_line(state, [])]
    parent = Path(directories[0]).parent if len(directories) > 1 else Path(directories[0])
    table = parent / "decision.json"
    last = document.tables[-1]
    one = [f"--where={c}={last.column(c)}" for c in varying([t.columns for t in document.tables])[0] if c != "nprocs"]
    by_hand = [shlex.join([*bench_words(), "decide", *map(str, directories), *one, "-o", str(table)]),
               *export_lines(table, read_meta(directories[-1]).get("mpi_library") or "")]
    if why_not:
        return [f"next (bench tune does not repeat {why_not}):", *(f"  {line}" for line in by_hand)]
    chosen = names if sorted(names) != sorted(candidates(config.collective)) else []
    return ["next, to sweep again, export for this MPI library and verify it there:", "  " + tune_line(state, chosen),
            "or by hand:", *(f"  {line}" for line in by_hand)]


def tune_line(state: SweepState, names: list[str]) -> str:
    """`bench tune` of this sweep's grid and plug-ins, racing `names` (none: every candidate), launched as it was."""
    config = state.config
    tune = [*bench_words(), "tune", "--nprocs", ",".join(map(str, config.nprocs)),
            "--sizes", ",".join(map(human_bytes, config.sizes)), *(["--algorithms", ",".join(names)] if names else []),
            *(f"--plugin={p}" for p in state.plugins)]
    if config.timing == OVERLAP:
        tune += ["--collective", f"i{config.collective}", "--tests", str(max(config.tests))]
    return " ".join(filter(None, [shlex.join(tune), tune_launcher()]))


def tune_refuses(config: SweepConfig) -> str:
    """What of this sweep `bench tune` does not repeat ('' when it does all of it)."""
    if max(config.nprocs) < 2:
        return "a sweep of one rank"
    differs = [f"--{k} {getattr(config, k)}" for k in ("collective", "workload", "cache")
               if getattr(config, k) != DEFAULTS[k]]
    differs += [f"--timing {config.timing}"] if config.timing not in (DEFAULTS["timing"], OVERLAP) else []
    differs += ["--mesh"] if config.layouts else []
    return ", ".join(differs)
