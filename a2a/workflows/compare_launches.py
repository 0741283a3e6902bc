"""`bench compare --launches N`: the experiment a tuning's effect needs, as one command. A launch is what a tuning
changes, so the unit is the launch: N pairs of launches of the library's own MPI_Alltoall (`bench run` jobs, launched
as `bench tune` launches them), one without and one with the tuning (a deploy file, the variables `bench export
--env` printed, or `--env`), half the pairs the tuned one first, then a2a.analysis.compare on them, each launch
with the tuning paired with its neighbour without it (the sign test: 6 pairs or more at alpha 0.05). Everything
lands in one directory; the same command again goes on where it stopped."""
from __future__ import annotations

import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from a2a.analysis.compare import compare, compared, render_comparison
from a2a.deploy.file import MAGIC, Deployment
from a2a.deploy.library import preload_library
from a2a.errors import BadConfig, BadInput, HarnessError
from a2a.mpi import bench_words, launcher_size
from a2a.record.meta import now
from a2a.record.outputs import writable_file, writable_folder
from a2a.record.results import NATIVE, read_meta
from a2a.record.verdict import MARGIN, least_pairs, pair_orders
from a2a.sweep.naming import named
from a2a.workflows.tuning import TuneConfig, Tuning, config_of, launcher_found, swept_grid

SCHEMA = "a2a-compare/1"


def compare_command(baseline: list[str], tuned: list[str], algorithm: str, metric: str, alpha: float, margin: float,
                    table: str | None, output: str | None, launches: int | None, launching: dict[str, Any],
                    say: Any = print) -> int | None:
    """`bench compare` as one call: records compared (None), or with `launches` the launches made first (their
    exit code); options that belong to the other way are refused in one line."""
    if launches:
        given = [o for o, v in (("--baseline", baseline), ("--tuned", tuned), ("--revert-slower", table)) if v]
        if given or algorithm != NATIVE:
            raise BadInput(f"--launches times native itself: drop {', '.join(given) or '--algorithm'}")
        folder = writable_folder(named(launching["results"], prefix="compare-"), "the launches", "bench compare")
        return compare_launches({**launching, "launches": launches, "output": str(folder), "metric": metric,
                                 "alpha": alpha, "margin": margin}, say)
    if not baseline or not tuned:
        raise BadInput("give --baseline DIR and --tuned DIR (each repeatable), or --launches N to make them")
    stray = [f"--{k.replace('_', '-')}" for k, v in launching.items() if v not in (None, ())]
    if stray:
        raise BadInput(f"{', '.join(stray)}: only with --launches N (they describe the launches it makes)")
    verified = writable_file(output, "the verified table", "bench compare") if output else None
    say(compared([Path(d) for d in baseline], [Path(d) for d in tuned], algorithm, metric, alpha,
                 Path(table) if table else None, verified, margin))
    return None


def compare_launches(values: dict[str, Any], say: Any = print) -> int:
    """`bench compare --launches N` as one call: the options checked before any launch, the launches, the
    comparison; 0 when compared, 143 when stopped."""
    if launcher_size() > 1:
        raise HarnessError("run `python -m bench compare --launches N` without mpirun: it launches its own MPI jobs "
                           "(inside an allocation, give --launcher srun)")
    config = config_of({"launcher": values.get("launcher"), "nprocs": values.get("nprocs"),
                        "sizes": values.get("sizes"), "algorithms": NATIVE,
                        "verify_iterations": values.get("iterations"), "rounds": int(values["launches"]),
                        "alpha": values.get("alpha"), "job_timeout": values.get("job_timeout")})
    if not 0 < config.alpha < 1:
        raise BadConfig(f"--alpha {config.alpha}; accepted: a level strictly between 0 and 1")
    launcher_found(config)
    swept_grid(config)
    variables = tuned_variables(values.get("with_file"), values.get("env") or ())
    directory = named(values.get("output"), prefix="compare-")
    return Compared(directory, config, say, variables, values.get("metric") or "median",
                    values.get("margin", MARGIN), [*bench_words(), *sys.argv[1:]]).run()


def tuned_variables(path: str | None, pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The tuned side's variables: those that apply `path` (a deploy file: liba2a preloaded with it; else a file of
    KEY=VALUE lines, as `bench export -o FILE --env` prints them), then each KEY=VALUE given."""
    variables: dict[str, str] = {}
    if path:
        variables.update(_applying(Path(path)))
    variables.update(_pair(pair, "--env") for pair in pairs)
    return variables


def _applying(path: Path) -> dict[str, str]:
    accepted = ("accepted: a deploy file (bench deploy, bench tune --deploy) or the KEY=VALUE lines that apply a "
                "tuning file (bench export -o FILE --env > FILE.env)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--with {path}: cannot be read ({getattr(e, 'strerror', None) or e}); {accepted}") from None
    if text.startswith(f"{MAGIC} "):
        Deployment.read(path)  # refused in one line where it is not one, or was altered
        return {"LD_PRELOAD": str(preload_library()), "A2A_DEPLOY": str(path.resolve())}
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines or any("=" not in line.split()[0] or len(line.split()) > 1 for line in lines):
        raise BadInput(f"--with {path}: neither a deploy file nor KEY=VALUE lines; {accepted}")
    return dict(_pair(line.removeprefix("export ").strip(), f"--with {path}") for line in lines)


def _pair(text: str, option: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key or not key.replace("_", "").isalnum():
        raise BadInput(f"{option} {text!r}: accepted: KEY=VALUE, the variable's name in letters, digits and _")
    return key, value


class Compared(Tuning):
    """The alternating launches of a comparison and its result, in its directory."""

    def __init__(self, directory: Path, config: TuneConfig, say: Any, variables: dict[str, str], metric: str,
                 margin: float, words: list[str]):
        earlier = read_meta(directory)
        super().__init__(directory, config, say)
        wanted = {"schema": SCHEMA, "config": asdict(config), "variables": variables, "metric": metric,
                  "margin": margin}
        if earlier and any(earlier.get(k) != v for k, v in wanted.items()):
            raise BadConfig(f"{directory} already holds other launches; go on with the command that made them "
                            "(the same options), or choose another --output")
        self.meta.update(wanted, command=self.meta.get("command") or words)
        self.variables, self.metric, self.margin = variables, metric, margin

    def _steps(self) -> int:
        sides: dict[str, list[Path]] = {"baseline": [], "tuned": []}
        every = self.config.rounds
        if every < least_pairs(self.config.alpha):
            self.say(f"{every} pairs of launches carry no verdict (a launch is the unit a tuning changes, and a sign "
                     f"test over fewer than {least_pairs(self.config.alpha)} pairs cannot reach alpha "
                     f"{self.config.alpha:g}): the ratios are described only")
        for k, tuned_first in enumerate(pair_orders(every), 1):
            for side in ("tuned", "baseline") if tuned_first else ("baseline", "tuned"):
                sides[side].append(self._job(f"{side}-{k}", NATIVE, self.config.verify_iterations,
                                             self.variables if side == "tuned" else None, control=False))
        rows = compare(sides["baseline"], sides["tuned"], NATIVE, self.metric, self.margin, self.config.alpha)
        self.meta.update(status="complete", end=now(), rows=rows)
        self._write()
        tuned = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.variables.items()) or "nothing (an A/A comparison)"
        self.say(f"\nthe library's own MPI_Alltoall, {every} launches a side in pairs of neighbours; tuned: {tuned}")
        self.say(render_comparison(rows, self.metric, self.config.alpha, self.margin))
        return 0

    def _resume(self) -> str:
        words = self.meta["command"]
        return shlex.join(words if "--output" in words else [*words, "--output", str(self.directory)])
