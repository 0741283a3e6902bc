"""A launch's sweep from its options: fresh (the YAML file under the options given, plug-ins loaded, the config
checked, a free directory named) or resumed (taken from the record, the options that would change it refused)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from a2a.algos.plugins import load_plugin
from a2a.errors import BadConfig
from a2a.record.results import read_meta, read_rows
from a2a.sweep.config import CONFIG_KEYS, DEFAULTS, OVERLAP, PROGRESS_MODES, Chooser, SweepConfig, from_options
from a2a.sweep.grid import points
from a2a.sweep.naming import fresh_record
from a2a.sweep.parsing import as_list, as_text, choice, load_config
from a2a.sweep.session import SweepState
from a2a.sweep.variants import variants


def fresh_sweep(values: dict[str, Any], backend: str = "mpi", world: int | None = None, memory: int | None = None,
                choose: Chooser = variants, suffix: str = "") -> tuple[Path, SweepState]:
    """The directory and sweep of a new launch, nothing measured yet (the same on every rank)."""
    if values.get("force_resume"):
        raise BadConfig("--force-resume goes with --resume DIR")
    merged = with_file(values)
    plugins = as_list(merged.get("plugin"))
    for plugin in plugins:
        load_plugin(plugin)
    config = from_options(merged, backend, world, memory, choose)
    return fresh_record(merged.get("output"), suffix), SweepState(config, plugins)


def refuse_with_resume(directory: Path, given: dict[str, Any], refused: Iterable[str]) -> None:
    """BadConfig naming the options given that --resume takes from the record instead."""
    clashing = sorted(k for k, v in given.items() if k in set(refused) and v not in (None, "", ()))
    if clashing:
        raise BadConfig(f"--resume takes the sweep from {directory}/meta.json; drop --"
                        + ", --".join(k.replace("_", "-") for k in clashing))


def with_file(values: dict[str, Any]) -> dict[str, Any]:
    """The options given over those of the YAML sweep file they name (--config), if any."""
    merged = load_config(Path(values["config"]), CONFIG_KEYS) if values.get("config") else {}
    merged.update({k: v for k, v in values.items() if k != "config" and v not in (None, "", ())})
    return merged


def launch_progress_mode(values: dict[str, Any]) -> str:
    """The progress mode this launch of an overlap sweep measures, known before MPI starts (a library's progress
    thread is chosen then): the first of --progress, or on --resume the first with points missing; '' for another
    timing."""
    if not values.get("resume"):
        merged = with_file(values)
        if merged.get("timing", DEFAULTS["timing"]) != OVERLAP:
            return ""
        return choice(as_text(merged.get("progress", DEFAULTS["progress"])).split(",")[0].strip(), PROGRESS_MODES,
                      "--progress")
    directory = Path(values["resume"])
    meta = read_meta(directory)
    if meta.get("config", {}).get("timing") != OVERLAP:
        return ""  # nothing to choose (a record that is not a sweep is refused when it is resumed)
    config = SweepConfig.from_dict(meta["config"])
    done = {row.key for row in read_rows(directory)} if (directory / "results.csv").exists() else set()
    missing = [p.progress for n in config.nprocs for p in points(config, n) if p.key not in done]
    return missing[0] if missing else config.progress[0]
