"""`bench tune`: the MPI library made faster in one command, with the evidence, and how to keep it.

This process drives MPI jobs of its own (`bench run`, each launched with the launcher prefix):

1. the sweep, `launches` times: one launch's ranking is one sample of the machine;
2. the decision from all of them, the launches the top level of its verdicts (a2a.record.verdict): a cell whose
   winner changed between launches has an interval that spans both, and stays with the library's own choice;
3. the tuning file for the library in use (MPICH's selection JSON, Open MPI's rules file);
4. verification: `rounds` pairs of launches of the library's MPI_Alltoall, one without and one
   with the file (half the pairs with the file first); per size the ratio and its interval by a2a.record.verdict's
   rule across launches (each launch with the file paired with its neighbour without it, by the sign test: fewer
   than 6 pairs are untested at alpha 0.05; times below the timer's floor are never judged);
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
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.analysis.compare import compare, render_comparison
from a2a.analysis.export.common import Exported, library_only
from a2a.analysis.export.formats import export
from a2a.analysis.revert import revert_slower
from a2a.errors import BadConfig, HarnessError
from a2a.mpi import launcher_size
from a2a.mpilib import PROFILES, profile_of
from a2a.record.decision import read_decision, write_decision
from a2a.record.meta import now
from a2a.record.results import NATIVE, read_meta
from a2a.record.verdict import FASTER, SLOWER, pair_orders
from a2a.sweep.naming import named
from a2a.units import counted
from a2a.workflows.tune_deploy import DeployTune
from a2a.workflows.tuning import TuneConfig, Tuning, check_grid, config_of, recorded_config


def tune(values: dict[str, Any], say: Any = print) -> int:
    """`bench tune` as one call: a new tune from its options (checked before any launch), or --resume DIR."""
    if launcher_size() > 1:
        raise HarnessError("run `python -m bench tune` without mpirun: it launches its own MPI jobs "
                           "(inside an allocation, give --launcher srun)")
    if values.get("resume"):
        directory = Path(values["resume"])
        return tune_of(directory, recorded_config(directory), say).run()
    config = config_of(values)
    check_grid(config, values.get("plugin") or (), values.get("option") or ())
    directory = named(values.get("output"), prefix="tune-")
    if (directory / "meta.json").exists():
        raise BadConfig(f"{directory} already holds a tune; go on with --resume {directory}, "
                        "or choose another --output")
    return tune_of(directory, config, say).run()


def tune_of(directory: Path, config: TuneConfig, say: Any) -> Tuning:
    """The tune `config` asks for: the library's own tables, or the deploy path (--deploy)."""
    return (DeployTune if config.deploy else Tune)(directory, config, say)


def library_format(library: str) -> tuple[str, str, str]:
    """(library, export format, file suffix) of an MPI_Get_library_version text; BadConfig for a library bench tune
    does not verify tables on."""
    profile = profile_of(library)
    if profile.tune_verifies:
        return profile.name, profile.files[0].format, profile.files[0].suffix
    first = library.strip().splitlines()[0] if library.strip() else "an MPI library that did not say which"
    verified = " and ".join(p.name for p in PROFILES if p.tune_verifies)
    export_line = f"bench export --format {profile.files[0].format}" if profile.files else "bench export"
    raise BadConfig(f"bench tune verifies tables on {verified}; this job runs {first}. For it use bench decide, then "
                    f"{export_line}")


class Tune(Tuning):
    """The library's own tables tuned: sweep, decide, export, verify on the library (and revert)."""

    def _steps(self) -> int:
        """Sweep, decide, export, verify (and revert): 0."""
        sweeps = self._sweeps()
        table = self._decide(sweeps)
        if library_only(read_decision(table)):
            return self._nothing_to_apply("the table leaves every cell to the library's own choice")
        made = self._export(table, "tuned")
        rows = self._verify(made, "tuned")
        if self.config.revert_slower:
            document, reverted = revert_slower(read_decision(table), rows, self.config.alpha)
            self._note("reverted", reverted or ["nothing ran slower: the table stands"])
            if reverted and library_only(document):
                return self._nothing_to_apply("every cell the table changed ran slower and went back to the "
                                              "library", rows)
            if reverted:
                write_decision(document, self.directory / "verified.json")
                made = self._export(self.directory / "verified.json", "verified")
                rows = self._verify(made, "verified")
        self._finish(made, rows)
        return 0

    # -- the steps ----------------------------------------------------------------------------

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
        for round_, with_first in enumerate(pair_orders(self.config.rounds), 1):
            for side in ("with", "default") if with_first else ("default", "with"):
                sides[side].append(self._job(f"{name}-{side}-{round_}", self.config.library_call,
                                             self.config.verify_iterations, env if side == "with" else None,
                                             control=False))
        rows = compare(sides["default"], sides["with"], NATIVE, "median")  # their stamps say they ran in pairs
        (self.directory / f"{name}-comparison.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
        return rows

    # -- the result ---------------------------------------------------------------------------

    def _finish(self, made: Made, rows: list[dict[str, Any]]) -> None:
        variables = made.environment
        won = faster_and_none_slower(rows)
        self.meta.update(status="complete", end=now(), file=made.path, environment=variables, verified=won,
                         gains=[{k: row[k] for k in ("nprocs", "bytes_per_peer", "baseline_us", "tuned_us", "ratio",
                                                     "p")} for row in rows])
        self._write()
        what = f"{self.config.call} (start, compute, wait)" if self.config.nonblocking else self.config.call
        self.say(f"\n{what} of {self.meta['library']} with the file against without it, {self.config.rounds} "
                 "alternating launches a side:")
        self.say(gains_table(rows, self.config.alpha))
        self.say(verdict(rows, self.config.revert_slower))
        for line in made.exported.warnings:
            self.say(f"warning: {line}")
        if not won:
            self.say(f"\nnot applied: the file made no cell faster beyond the margin without making one slower "
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

    def _gains(self, rows: list[dict[str, Any]]) -> str:
        return gains_table(rows, self.config.alpha)

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
    """Per process count and size: without, with, their ratio with its interval, p and the verdict, under the
    statistic it rests on."""
    return render_comparison(rows, "median", alpha)


def significant(rows: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """The cells the file made faster by the verdicts, and those it made slower."""
    return [r for r in rows if r["verdict"] == FASTER], [r for r in rows if r["verdict"] == SLOWER]


def faster_and_none_slower(rows: list[dict[str, Any]]) -> bool:
    """Whether a file may be offered to apply: some cell faster with it, none slower."""
    faster, slower = significant(rows)
    return bool(faster) and not slower


def verdict(rows: list[dict[str, Any]], reverted: bool) -> str:
    """In one line: where the file made the library faster, and slower."""
    faster, slower = significant(rows)
    text = (f"faster at {len(faster)} of {counted(len(rows), 'point')} (down to "
            f"{min(r['ratio'] for r in faster):.2f} of the time)" if faster else
            "no point faster beyond the margin")
    if slower:
        text += f"; SLOWER at {len(slower)}" + ("" if reverted else ": --revert-slower leaves them to the library")
    return text
