"""`bench run` as one call: the sweep measured from its options, then on rank 0 what it decides, in short."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.analysis.decide import decide, summary
from a2a.errors import A2AError
from a2a.measure.driver import measure_sweep, resume_measured, set_thread_level
from a2a.measure.environment import ask_for_progress_thread, node_memory_share, progress_thread_running
from a2a.mpi import world
from a2a.sweep.config import OVERLAP, SWEEP_OPTIONS, SweepConfig, check_sizes
from a2a.sweep.launch import fresh_sweep, launch_progress, refuse_with_resume
from a2a.sweep.parsing import parse_dtype
from a2a.sweep.session import Output, StopRequest, SweepState
from a2a.units import human_bytes


def measured(values: dict[str, Any], output: Output) -> int:
    """Measure the sweep the options describe (fresh, or --resume DIR) on this MPI job; the exit code."""
    stop = StopRequest()
    stop.install()  # before MPI starts: a batch system's warning may come at any time
    progress = launch_progress(values)
    if progress == "thread":
        ask_for_progress_thread()
    set_thread_level()
    comm = world()
    if progress == "thread":
        progress_thread_running()
    directory, state = _sweep(comm, values)
    state.progress = progress
    code = measure_sweep(comm, directory, state, output, stop, float(values.get("timeout") or state.config.timeout))
    if code == 0 and comm.rank == 0 and output.fmt in ("table", "tpu") and not output.quiet:
        print(decision_summary(directory, state.config), flush=True)
    return code


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


def decision_summary(directory: Path, config: SweepConfig) -> str:
    """What the record decides, in short, and the commands that go on from it."""
    try:
        lines = summary(decide([directory]))
    except A2AError as nothing:  # no valid point to decide from
        return f"\nno decision: {nothing}"
    grid = f"--nprocs {','.join(map(str, config.nprocs))} --sizes {','.join(map(human_bytes, config.sizes))}"
    if config.timing == OVERLAP:
        grid += f" --collective i{config.collective} --tests {max(config.tests)}"
    return "\n".join([f"\nDecision (by the mean; `python -m bench decide {directory}` has the full table):",
                      *(f"  {line}" for line in lines),
                      f"next: python -m bench tune {grid}   (sweeps, exports for this MPI library, verifies it there)",
                      f"  or: python -m bench decide {directory} -o decision.json; "
                      "python -m bench export decision.json --format ompi|mpich|intel"])
