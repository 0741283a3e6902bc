"""`bench tune --deploy`: a deploy file that never makes a program slower, in one command.

1. the sweep, `launches` times (bytes, by default 0 B and every power of two to 1 MiB), and the decision from
   all of them; cells whose winner changed between launches stay with the library;
2. the crossovers found: where neighbouring sizes' winners differ more than a factor of 2 apart, their geometric
   midpoints are measured (a launch each round) until every crossover is bracketed within a factor of 2 or the two
   winners are within noise;
3. the deploy file (a2a.deploy.file), for the process counts measured only;
4. verification (a2a.deploy.verify): alternating launches with and without liba2a of an IMB-style loop over each
   collective the file serves, at every measured size and the midpoints between; the sizes it makes
   slower, and unless `keep_ties` those it does not make faster, go back to the library, and the file is verified
   again;
5. with `verify_with`, the user's program as the last judge: the file is kept only if it is not
   slower with it.

With `mpicc` (a program built with another MPI library than this Python's), liba2a and the loop are built with it, the
verification launches run under the launcher beside it, and the file is made for the library they report; the sweeps
still time this Python's library.

The file carries its verification (`bench deploy --show FILE`); the tune ends with the lines that use it, or with
"not applied" and why.
"""
from __future__ import annotations

import functools
import os
import shlex
import socket
from dataclasses import replace
from pathlib import Path

from tabulate import tabulate

from a2a.analysis.decide import midpoints, pace
from a2a.deploy.file import Deployment, deployment, family, origin_of, served_by, span_text
from a2a.deploy.library import preload_library, wrapped
from a2a.deploy.verify import (
    FASTER,
    SLOWER,
    Launch,
    Verdict,
    given_back,
    run_launch,
    sizes_to_verify,
    verify_program,
    verify_sizes,
)
from a2a.errors import HarnessError
from a2a.kept import compiled
from a2a.mpi import bench_words
from a2a.record import verdict
from a2a.record.decision import Decision, read_decision
from a2a.record.meta import now
from a2a.record.results import read_meta
from a2a.record.stats import call_floor
from a2a.units import human_bytes
from a2a.workflows.tuning import Stopped, Tuning, job_environment, mpicc_launcher

REFINEMENTS = 6  # rounds of midpoints at most: a gap of 2^64 is bracketed within a factor of 2 in six
VERIFICATIONS = 3  # verify, give back, verify again: at most this many times
LOOP_ROUNDS = 10  # rounds of the verification loop per size and launch (each a sample)
LIBRARY_SOURCE = """#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Init(&argc, &argv);
    MPI_Get_library_version(version, &length);
    printf("%s\\n", version);
    MPI_Finalize();
    return 0;
}
"""  # --mpicc: what the verification launches run, said by a program built with that compiler


class DeployTune(Tuning):
    """The deploy path tuned and verified in the tune's directory."""

    def _steps(self) -> int:
        if self.config.mpicc:
            self.say(f"--mpicc {self.config.mpicc}: liba2a, the verification loop and its launches "
                     f"({self.verify_prefix[0]}) run {first_line(self._verifying_library())}; the sweeps time this "
                     "Python's MPI library, not that one")
        table = self._refined(self._sweeps())
        document = read_decision(table)
        made = deployment(document, self.config.nprocs, 0, family(self._verifying_library()),
                          origin_of(document, str(table)),
                          extrapolate=False)
        if not serves_calls(made):
            self._program_not_run("the decision leaves every size to the library")
            return self._nothing_to_apply("the file would keep the library's choice at every size: " + "; ".join(
                made.kept) if made.kept else "the decision keeps the library's own choice at every size")
        made, verdicts, back = self._verified(made, document)
        if not serves_calls(made):
            self._program_not_run("every size the file served was given back to the library")
            return self._not_applied(made, verdicts, back, "every size it served was given back to the library")
        program = self._program(made) if self.config.verify_with else None
        if program is not None and program.verdict == SLOWER:
            return self._not_applied(made, verdicts, back, f"the program ran {pace(program.ratio)} with it "
                                     f"(p={program.p:.2g})", program)
        return self._finish_deploy(made, verdicts, back, program)

    # -- the steps ----------------------------------------------------------------------------

    def _refined(self, sweeps: list[Path]) -> Path:
        """The decision from the sweeps, then from them and a launch at the midpoints of each crossover not yet
        bracketed within a factor of 2, until none is left."""
        table, refines = self._decide(sweeps), []
        for k in range(1, REFINEMENTS + 1):
            sizes = midpoints(read_decision(table))
            if not sizes:
                break
            self.say(f"refine: the crossovers between {', '.join(map(human_bytes, sizes))}")
            refines.append(self._job(f"refine-{k}", self.config.algorithms, self.config.iterations,
                                     sizes=",".join(map(str, sizes))))
            table = self._decide(sweeps, refines, f"decide-{k}")
        return table

    def _verified(self, made: Deployment, document: Decision
                  ) -> tuple[Deployment, list[Verdict], list[str]]:
        """Verify, give back what the file made slower (or no faster), verify again: the file, the last verdicts,
        and what went back and why."""
        back: list[str] = []
        verdicts: list[Verdict] = []
        for k in range(1, VERIFICATIONS + 1):
            verdicts = self._verification(made, document, k)
            given = self._give_back(made, verdicts)
            back += given
            if not given or not serves_calls(made):
                break
        return made, verdicts, back

    def _verification(self, made: Deployment, document: Decision, k: int) -> list[Verdict]:
        """One verification of the file as it stands (kept in the tune's meta.json: a resume does not repeat it)."""
        step = f"verify-{k}"
        if step in self.meta["steps"]:
            return [Verdict(**v) for v in self.meta["steps"][step]["verdicts"]]
        path = self.directory / f"{step}.a2a"
        path.write_text(made.text())
        variables = {"LD_PRELOAD": str(self._preload()), "A2A_DEPLOY": str(path.resolve())}
        verdicts = []
        for p in self.config.nprocs:
            for collective in sorted({c for c, n, *_ in made.entries if n == p}):
                sizes = sizes_to_verify(measured_sizes(document, collective, p))
                self.say(f"{step}: {collective} on {p} ranks at {len(sizes)} sizes, {self.config.rounds} launches a "
                         "side")
                verdicts += [unjudged(replace(v, runs=served_by(made, collective, p, v.bytes_per_peer)),
                                      self._floor(p)) for v in
                             verify_sizes(self._launch(p), collective, p, sizes, self.config.rounds, LOOP_ROUNDS,
                                          variables, self.config.alpha, self.config.mpicc or None)]
        self._done(step, {"file": str(path), "verdicts": [vars(v) for v in verdicts]})
        return verdicts

    def _give_back(self, made: Deployment, verdicts: list[Verdict]) -> list[str]:
        """Give the library the sizes the verification found slower (or, unless keep_ties, no faster); what went."""
        said = []
        for collective, p in sorted({(v.collective, v.nprocs) for v in verdicts}):
            mine = [v for v in verdicts if (v.collective, v.nprocs) == (collective, p)]
            if collective == "alltoall":
                ranges = given_back(mine, self.config.keep_ties)
            else:  # one schedule serves every size: it goes if any size is slower, or none faster
                slower = any(v.verdict == SLOWER for v in mine)
                ranges = [(0, -1)] if slower or not (self.config.keep_ties or any(v.verdict == FASTER
                                                                                    for v in mine)) else []
            for low, high in ranges:
                before = list(made.entries)
                made.give_back(collective, p, low, high)
                if made.entries != before:
                    said.append(f"{collective} on {p} ranks, {span_text(low, high)}: {why_back(mine, low, high)}")
        for line in said:
            self.say(f"given back to the library: {line}")
        return said

    def _floor(self, p: int) -> float:
        """The timer's floor (seconds) at p ranks as the sweeps measured it, for calls back to back as the loop
        makes them."""
        measured = (read_meta(self.directory / "sweep-1").get("by_nprocs") or {}).get(str(p)) or {}
        return call_floor(measured.get("harness") or {}, "pipelined")

    def _program(self, made: Deployment) -> Verdict:
        """The user's program, alternately with and without the file, at the largest process count."""
        step = "verify-program"
        if step in self.meta["steps"]:
            return Verdict(**self.meta["steps"][step]["verdict"])
        path = self.directory / f"{step}.a2a"
        path.write_text(made.text())
        p = max(n for _, n, _, _, _, k in made.entries if k >= 0)  # the most ranks it still runs a schedule at
        self.say(f"{step}: {self.config.verify_with} on {p} ranks, {self.config.rounds} launches a side")
        variables = {"LD_PRELOAD": str(self._preload()), "A2A_DEPLOY": str(path.resolve())}
        verdict = verify_program(self._launch(p), self.config.verify_with, self.config.verify_pattern, p,
                                 self.config.rounds, variables, self.config.alpha)
        self._done(step, {"verdict": vars(verdict)})
        return verdict

    def _program_not_run(self, why: str) -> None:
        """Say that --verify-with's program was never launched, and why (kept in meta.json)."""
        if self.config.verify_with:
            said = f"--verify-with {self.config.verify_with}: not run, {why} (no file left to run it with)"
            self.meta["program_not_run"] = said
            self.say(said)

    def _preload(self) -> Path:
        """liba2a for the library the verification launches run."""
        return preload_library(self.config.mpicc or None)

    @functools.cached_property
    def verify_prefix(self) -> list[str]:
        """The verification launches' launcher: the sweeps', or with --mpicc the one beside it (with Open MPI's
        flags where its mpi.h is Open MPI's)."""
        if not self.config.mpicc:
            return self.config.launcher
        launcher = mpicc_launcher(self.config.mpicc)
        _, includes = wrapped(self.config.mpicc)
        header = next((Path(d) / "mpi.h" for d in includes if (Path(d) / "mpi.h").exists()), None)
        if header is None or "#define OPEN_MPI " not in header.read_text(errors="replace"):
            return [launcher]
        return [launcher, "--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]

    def _verifying_library(self) -> str:
        """The MPI library the verification launches run (MPI_Get_library_version): the sweeps' own, or with --mpicc
        what a program built with it says under its launcher (kept in the tune's meta.json)."""
        if not self.config.mpicc:
            return read_meta(self.directory / "sweep-1").get("mpi_library") or ""
        step = "verify-library"
        if step not in self.meta["steps"]:
            source = self.directory / "mpi_library.c"
            source.write_text(LIBRARY_SOURCE)
            program = compiled([source], "mpi_library", ["-O0"], mpicc=self.config.mpicc)
            said = self._launch(1)([str(program)], {}).strip()
            if not said:
                raise HarnessError(f"{program}, built with {self.config.mpicc}, said no MPI library under "
                                   f"{self.verify_prefix[0]}")
            self._done(step, {"library": said, "mpicc": self.config.mpicc, "launcher": self.verify_prefix})
        return self.meta["steps"][step]["library"]

    def _launch(self, p: int) -> Launch:
        """Launches of p ranks as the sweeps' were (with --mpicc, by that library's launcher), each after checking
        for a stop."""
        run = run_launch([*self.verify_prefix, "-n", str(p)], job_environment(), self.config.job_timeout)

        def launch(command: list[str], variables: dict[str, str]) -> str:
            if self.stopped:
                raise Stopped()
            try:
                return run(command, variables)
            except HarnessError:
                if self.stopped:  # the stop ended the launch too: a stop, not a failure (resume goes on)
                    raise Stopped() from None
                raise
        return launch

    # -- the result ---------------------------------------------------------------------------

    def _finish_deploy(self, made: Deployment, verdicts: list[Verdict], back: list[str],
                       program: Verdict | None) -> int:
        path = self._written(made, verdicts, back, program)
        self.meta.update(status="complete", end=now(), file=str(path), given_back=back)
        self._write()
        self.say(verdicts_table(made, verdicts, program))
        library, show = self._preload(), shlex.join([*bench_words(), "deploy", "--show", str(path)])
        executable = self.config.verify_with or "./program"
        mpiexec = self.verify_prefix[0] if self.config.mpicc else "mpiexec"
        self.say(f"\nthe verified file: {path}\nuse it with:\n"
                 f"  {mpiexec} -n {max(self.config.nprocs)} env LD_PRELOAD={library} A2A_DEPLOY={path} {executable}\n"
                 f"  under Slurm: srun --export=ALL,LD_PRELOAD={library},A2A_DEPLOY={path} {executable}\n"
                 f"what it serves and how it was verified: {show}")
        return 0

    def _not_applied(self, made: Deployment, verdicts: list[Verdict], back: list[str], why: str,
                     program: Verdict | None = None) -> int:
        path = self._written(made, verdicts, back, program, "not-applied.a2a")
        self.meta.update(status="complete", end=now(), file=None, given_back=back)
        self._write()
        self.say(verdicts_table(made, verdicts, program))
        self.say(f"\nnot applied: {why}; the file stays for inspection in {path}, and the program's all-to-alls "
                 "stay the library's")
        return 0

    def _written(self, made: Deployment, verdicts: list[Verdict], back: list[str], program: Verdict | None,
                 name: str = "deploy.a2a") -> Path:
        """The file with its verification, in the tune's directory."""
        made.verification = [self._how(), *(v.line() for v in verdicts), *(f"given back: {b}" for b in back),
                             *([program.line() + f" program: {self.config.verify_with}"] if program else [])]
        path = (self.directory / name).resolve()
        path.write_text(made.text())
        return path

    def _how(self) -> str:
        """The verification's machine, library and method, in a line."""
        library = first_line(self._verifying_library()) or "?"
        if self.config.mpicc:
            swept = first_line(read_meta(self.directory / "sweep-1").get("mpi_library") or "") or "?"
            library += f" (liba2a and the loop built with {self.config.mpicc}; the sweeps timed {swept})"
        return (f"on {socket.gethostname()} ({os.cpu_count()} cores), {library}, "
                f"{now()}: {self.config.rounds} alternating launches a side of an IMB-style loop "
                f"(the median of {LOOP_ROUNDS} rounds a size, each launch), each launch with the file paired with the "
                f"one before it, alpha {self.config.alpha}, margin {100 * verdict.MARGIN:g} %, ties "
                f"{'kept' if self.config.keep_ties else 'given back'}")


def serves_calls(made: Deployment) -> bool:
    """Whether the file runs a schedule for any call that moves bytes (liba2a gives 0 B to the library whatever an
    entry says, so an entry of 0 B alone serves nothing)."""
    return any(k >= 0 and high != 0 for *_, high, k in made.entries)


def unjudged(found: Verdict, floor: float) -> Verdict:
    """The verdict withheld where a2a.record.verdict never judges (0 B, which liba2a always gives the library, or
    times below the timer's floor): shown, never given back."""
    why = verdict.unjudged_why(found.bytes_per_peer, (found.with_file * 1e-6, found.without * 1e-6), floor)
    return replace(found, verdict=verdict.NOT_JUDGED) if why else found


def first_line(library: str) -> str:
    """An MPI_Get_library_version text's first line, its spaces and tabs one space."""
    return next((" ".join(line.split()) for line in library.splitlines() if line.strip()), "")


def measured_sizes(document: Decision, collective: str, nprocs: int) -> list[int]:
    """The sizes the decision measured for a collective on nprocs ranks."""
    return sorted({c.bytes_per_peer for t in document.tables if t.nprocs == nprocs
                   and t.column("collective") == collective for c in t.cells})


def why_back(verdicts: list[Verdict], low: int, high: int) -> str:
    """Why a range went back: its verified sizes' verdicts and ratios."""
    inside = [v for v in verdicts if v.bytes_per_peer >= low and (high < 0 or v.bytes_per_peer <= high)] or verdicts
    return "; ".join(f"{human_bytes(v.bytes_per_peer)} {v.verdict} with the file ({pace(v.ratio)}, p={v.p:.2g})"
                     for v in inside)


def verdicts_table(made: Deployment, verdicts: list[Verdict], program: Verdict | None) -> str:
    """The last verification, per process count, collective and size, with what the file ran there (where it ran
    the library, the difference is liba2a's own cost of passing the call on)."""
    ran = [v.runs or served_by(made, v.collective, v.nprocs, v.bytes_per_peer) for v in verdicts]
    body = [[v.nprocs, v.collective, human_bytes(v.bytes_per_peer), runs, f"{v.without:,.2f}", f"{v.with_file:,.2f}",
             *_judged_columns(v)] for v, runs in zip(verdicts, ran)]
    table = tabulate(body, headers=["nprocs", "collective", "bytes/peer", "the file ran", "without us", "with us",
                                    "with the file", "p", "verdict"], disable_numparse=True)
    return table + passed_on_note(verdicts, ran) + ("" if program is None else (
        f"\nthe program: {program.without:.4g} without, {program.with_file:.4g} with ({pace(program.ratio)}, "
        f"p={program.p:.2g}): {program.verdict}"))


FLOOR = "below the timer's floor"  # why a verification row of bytes is not judged


def _judged_columns(found: Verdict) -> list[str]:
    """A row's ratio, p and verdict; a row never judged shows its ratio plain, and why."""
    if found.verdict != verdict.NOT_JUDGED:
        return [pace(found.ratio), f"{found.p:.3f}", found.verdict]
    why = verdict.unjudged_why(found.bytes_per_peer, (found.with_file * 1e-6, found.without * 1e-6))
    return [f"ratio {found.ratio:.2f}", "-", f"not judged ({why or FLOOR})"]


def passed_on_note(verdicts: list[Verdict], ran: list[str]) -> str:
    """Where the file ran the library and the rows read slower: what they read, from the rows themselves (rows never
    judged left out)."""
    passed_on = [v for v, runs in zip(verdicts, ran) if runs == "the library" and v.with_file > v.without
                 and v.verdict != verdict.NOT_JUDGED]
    if not passed_on:
        return ""
    worst = max(passed_on, key=lambda v: v.with_file - v.without)
    called = sum(v.verdict == SLOWER for v in passed_on)
    return (f"\nwhere the file ran the library, liba2a only passed the call on: those sizes read up to "
            f"+{worst.with_file - worst.without:,.2f} us slower (at {human_bytes(worst.bytes_per_peer)}, "
            f"{pace(worst.ratio)}; {called} of {len(passed_on)} called slower), its own cost of a call or the "
            "launches' noise")

