"""A deploy file that never makes a program slower: crossovers found, the file read back and given back by range,
process counts the decision never measured refused unless asked, zero-byte calls left to the library, and `bench
tune --deploy` that verifies the file on a real loop (and on the user's program) before it offers it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from decide_fixtures import record
from support import ROOT, bench_here, built_program, launch_command
from test_deploy import decision, deploy_page_block, pasted, report_lines, under_library, written

from a2a.analysis import decide
from a2a.deploy.file import Deployment, deployment, served_by
from a2a.deploy.verify import (
    FASTER,
    SAME,
    SLOWER,
    UNTESTED,
    Verdict,
    given_back,
    judged,
    loop_program,
    run_launch,
    sizes_to_verify,
    verify_program,
    verify_sizes,
)
from a2a.errors import HarnessError
from a2a.mpi import clean_launcher_env
from a2a.record.decision import write_decision
from a2a.record.results import read_rows
from a2a.sweep.parsing import parse_list

CROSSING = ROOT / "tests" / "plugins" / "crossing.py"


def test_a_geometric_range_may_start_at_zero():
    assert parse_list("0:1M:x4", "size") == [0, 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]


def test_crossovers_not_yet_bracketed_get_their_midpoints(tmp_path):
    """A crossover between 8 B and 64 KiB gets its geometric midpoint (whole elements); one within a factor of 2, one
    whose winners are within noise of each other, and one from 0 B get none; a range resting on one point says so."""
    run = record(tmp_path / "run", {(4, 0): {("native", ""): 10, ("pairwise", "schedule=shift"): 30},
                                    (4, 8): {("native", ""): 100, ("pairwise", "schedule=shift"): 40},
                                    (4, 65536): {("native", ""): 100, ("bine", ""): 40,
                                                 ("pairwise", "schedule=shift"): 90},
                                    (4, 98304): {("native", ""): 100, ("bruck", "radix=2"): 40, ("bine", ""): 90},
                                    (4, 1 << 20): {("native", ""): 100, ("bruck", "radix=2"): 70,
                                                   ("linear", ""): 70.2}})
    document = decide.decide([run])
    assert decide.crossover_gaps(document) == [(8, 65536)]
    assert decide.midpoints(document) == [724]  # sqrt(8 x 65536) = 724.1, a whole number of float32
    line = decide.summary(document)[0]
    assert [f"rests on one point, {s}" in line for s in ("8", "64K", "96K", "1M")] == [True] * 4, line
    dense = record(tmp_path / "dense", {(4, size): {("native", ""): 100, (name, ""): 40} for size, name in
                                        [(8, "bine"), (16, "linear"), (32, "bine")]})
    assert "rests on one point" not in decide.summary(decide.decide([dense]))[0]


@pytest.mark.launches
def test_bench_run_refine_brackets_the_crossover_within_a_factor_of_two(tmp_path):
    """Two plug-ins whose winner changes at 4 KiB, swept at 8 B and 256 KiB only: --refine measures midpoints until
    the sizes either side of 4 KiB won by each are within a factor of 2, and the decision's boundary lies between."""
    done = subprocess.run(launch_command(2, sys.executable, "-m", "bench", "run", "--plugin", str(CROSSING),
                                         "--algorithms", "small,large", "--sizes", "8,256K", "--iterations", "8",
                                         "--refine", "--output", str(tmp_path / "run"), "--quiet"),
                          env=clean_launcher_env(None), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = decide.decide([tmp_path / "run"]).tables[0].ranges
    won = {c.bytes_per_peer: c.algorithm for row in rows for c in row.cells}
    below = max(s for s, a in won.items() if a == "small")
    above = min(s for s, a in won.items() if a == "large")
    assert len(won) > 2 and below < 4096 <= above <= 2 * below, won
    assert [r.algorithm for r in rows] == ["small", "large"] and below < rows[1].bytes_min <= above, rows
    assert {r.bytes_per_peer for r in read_rows(tmp_path / "run")} == set(won)


def test_a_deploy_file_reads_back_and_gives_ranges_back_to_the_library(tmp_path):
    """Deployment.read returns what text() wrote; give_back splits an entry around the range, merges the library's
    neighbours, and leaves other counts alone; served_by names what runs at a size."""
    made = deployment(decision([(0, "pairwise"), (1000, "bruck")], "pairwise", [2, 3]), [2, 3], 0, "MPICH", ["test"])
    made.verification = ["on test: by hand", "alltoall 2 8 with 1 without 2 ratio 0.5 p 0.01 faster"]
    path = tmp_path / "d.a2a"
    path.write_text(made.text())
    back = Deployment.read(path)
    assert (back.library, back.entries, back.schedules, back.verification) == (
        "MPICH", made.entries, made.schedules, made.verification)
    back.give_back("alltoall", 2, 100, 199)
    back.give_back("alltoall", 2, 200, 299)
    spans = [(lo, hi, k) for c, p, _, lo, hi, k in back.entries if (c, p) == ("alltoall", 2)]
    assert spans == [(0, 99, spans[0][2]), (100, 299, -1), (300, 999, spans[0][2]), (1000, -1, spans[3][2])]
    assert served_by(back, "alltoall", 2, 150) == "the library" and served_by(back, "alltoall", 2, 50) == "pairwise"
    assert served_by(back, "alltoall", 3, 150) == "pairwise"
    back.give_back("alltoall", 2, 0, -1)
    assert [(lo, hi, k) for c, p, _, lo, hi, k in back.entries if (c, p) == ("alltoall", 2)] == [(0, -1, -1)]
    path.write_text(path.read_text().replace("bruck", "brack"))
    with pytest.raises(Exception, match="altered or cut"):
        Deployment.read(path)


def test_verdicts_and_the_ranges_they_give_back():
    """A verdict is a2a.record.verdict's rule across launches, the sign test over the pairs of launches: faster or
    slower only where the interval of the median ratio lies wholly beyond the margin, untested below 6 pairs at
    alpha 0.05; each verified size stands for the bytes between its geometric midpoints with its neighbours; ties go
    back unless kept, untested sizes always."""
    assert judged("alltoall", 2, 8, [1.0] * 6, [2.0] * 6, 0.05).verdict == FASTER
    assert judged("alltoall", 2, 8, [2.1, 2.0, 2.2, 2.0, 2.1, 2.0], [1.0] * 6, 0.05).verdict == SLOWER
    assert judged("alltoall", 2, 8, [1.0, 2.0], [2.0, 1.0], 0.05).verdict == UNTESTED  # two pairs
    assert judged("alltoall", 2, 8, [1.03] * 6, [1.0] * 6, 0.05).verdict == SAME  # within the 5 % margin
    # the launch with the file faster in each pair, though both sides drift across launches: pairing sees it
    drift = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    assert judged("alltoall", 2, 8, [0.8 * d for d in drift], drift, 0.05).verdict == FASTER
    assert sizes_to_verify([0, 8, 1024]) == [0, 8, 91, 1024]
    verdicts = [Verdict("alltoall", 2, s, 1, 1, p, v) for s, p, v in
                [(0, 1, SAME), (8, 0.01, FASTER), (91, 0.01, SLOWER), (1024, 0.5, SAME), (4096, 1, UNTESTED)]]
    assert given_back(verdicts, keep_ties=False) == [(0, 0), (27, 304), (305, 2047), (2048, -1)]
    assert given_back(verdicts, keep_ties=True) == [(27, 304), (2048, -1)]


def test_a_verification_is_judged_by_the_sign_test_not_a_bootstrap_of_a_few_pairs():
    """1 KiB, where the file ran the library itself, read 2.61x faster over 3 pairs: the bootstrap over them said
    p 0.000; the sign test cannot call 3 pairs different at 0.05, so it is untested. Of 6 pairs, all faster is
    faster at p = 2/64; one pair the other way leaves the interval across 1: the same."""
    three = judged("alltoall", 2, 1024, [3.83, 3.90, 3.80], [10.0, 10.2, 9.9], 0.05)
    assert (three.verdict, three.p) == (UNTESTED, 1.0) and three.ratio < 0.4
    six = judged("alltoall", 2, 1024, [1.0] * 6, [2.0] * 6, 0.05)
    assert six.verdict == FASTER and six.p == pytest.approx(2 / 64)
    assert judged("alltoall", 2, 1024, [1.0] * 5 + [2.2], [2.0] * 6, 0.05).verdict == SAME
    assert judged("alltoall", 2, 1024, [1.0] * 7, [2.0] * 7, 0.01).verdict == UNTESTED  # 8 pairs at 0.01


def test_the_program_and_the_loop_are_judged_by_alternating_launches():
    """verify_program and verify_sizes on launches that print known numbers: the launches alternate without and
    with the file's variables, each side's median is of what the launches printed, and the verdict follows; a
    pattern that matches nothing is named in the error."""
    calls: list[dict[str, str]] = []

    def launch(command: list[str], variables: dict[str, str]) -> str:
        calls.append(variables)
        k = len(calls)
        if command[0] == "./program":
            return f"transpose: N=64 (MPI_Alltoall {(5 if variables else 10) + k / 100} us)\n"
        rounds, sizes = int(command[2]), command[3:]
        return "".join(f"alltoall {s} {' '.join([str(3 if variables and s == '8' else 4)] * rounds)}\n"
                       for s in sizes)

    served = {"A2A_DEPLOY": "f.a2a"}
    verdict = verify_program(launch, "./program --n 64", r"MPI_Alltoall ([\d.]+) us", 2, 6, served, 0.05)
    assert calls == [{}, served] * 6
    assert (verdict.collective, verdict.bytes_per_peer, verdict.verdict) == ("program", -1, FASTER)
    assert (verdict.with_file, verdict.without) == (5.07, 10.06)
    with pytest.raises(HarnessError, match="--verify-pattern 'nowhere' matches nothing"):
        verify_program(launch, "./program", "nowhere", 2, 5, served, 0.05)
    with pytest.raises(HarnessError, match=r"matched 'MPI_Alltoall', whose first group \('MPI_Alltoall'\) is not a"):
        verify_program(launch, "./program", "(MPI_Alltoall)", 2, 5, served, 0.05)
    calls.clear()
    by_size = {v.bytes_per_peer: v for v in verify_sizes(launch, "alltoall", 2, [8, 64], 6, 3, served, 0.05)}
    assert calls == [{}, served] * 6
    assert (by_size[8].with_file, by_size[8].without, by_size[8].verdict) == (3, 4, FASTER)
    assert by_size[64].verdict == SAME


@pytest.mark.launches
def test_the_loop_times_every_size_and_refuses_one_it_cannot_hold():
    """verify_loop prints a line of ROUNDS times per size (0 B included); a size its int counts cannot hold, or one
    that is no number, is refused once, naming what is accepted, with exit 2 and no time printed."""
    done = subprocess.run(launch_command(2, str(loop_program()), "alltoall", "3", "0", "8"), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [["alltoall", "0"], ["alltoall", "8"]]
    assert all(len(line.split()) == 5 for line in done.stdout.splitlines()), done.stdout
    for size in ("1073741824", "8x"):
        done = subprocess.run(launch_command(2, str(loop_program()), "alltoallv", "3", "8", size),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        assert done.stderr.count(f"verify_loop: size {size}; accepted: bytes per peer from 0 to 1073741823 on 2 "
                                 "ranks") == 1, done.stderr


def test_a_stop_that_ends_a_verification_launch_is_a_stop(tmp_path: Path, monkeypatch):
    """A stop signal reaches the launch's ranks too, so the launch fails: that is the stop (the tune ends as stopped,
    to be resumed), while the same failure without a stop is the launch's error."""
    from a2a.workflows import tune_deploy
    from a2a.workflows.tuning import Stopped, TuneConfig

    tune = tune_deploy.DeployTune(tmp_path, TuneConfig(["mpiexec"], [2], "8", deploy=True), say=lambda _: None)

    def failing(stop: str):
        def launch(command, variables):
            tune.stopped = stop
            raise HarnessError("mpiexec -n 2 ./verify_loop failed (exit 143)")
        return lambda prefix, env, timeout: launch

    for stop, raised in (("SIGTERM", Stopped), ("", HarnessError)):
        tune.stopped = ""
        monkeypatch.setattr(tune_deploy, "run_launch", failing(stop))
        with pytest.raises(raised):
            tune._launch(2)(["./verify_loop"], {})


@pytest.mark.launches
def test_a_verification_launch_whose_file_liba2a_refused_is_an_error(tmp_path: Path, preload: str):
    """A file liba2a refuses at MPI_Init leaves the "with" side to the library alone: the launch says so instead of
    giving a verdict on a file that never ran."""
    path, _ = written(tmp_path, decision([(0, "pairwise")], "pairwise", [2]), [2])
    path.write_text(path.read_text().replace("entry alltoall 2 * 0 -1 0", "entry alltoall 2 * 0 -1 1"))
    launch = run_launch(launch_command(2), clean_launcher_env(None), 120)
    command = [str(loop_program()), "alltoall", "2", "8"]
    assert launch(command, {"LD_PRELOAD": preload}).startswith("alltoall 8 ")
    with pytest.raises(HarnessError, match=r"the deploy file was not in use, so it cannot be verified: a2a: "
                                           r"A2A_DEPLOY=.* refused: .*does not match its contents"):
        launch(command, {"LD_PRELOAD": preload, "A2A_DEPLOY": str(path)})


@pytest.mark.launches
def test_zero_byte_calls_go_to_the_library(tmp_path: Path, preload: str, check_program: Path):
    """An MPI_Alltoall of 0 bytes moves nothing: liba2a passes it to the library, whatever the file chose there."""
    path, _ = written(tmp_path, decision([(0, "bruck")], "pairwise", [2]), [2])
    done = under_library(2, preload, str(check_program), "0", "3", A2A_DEPLOY=str(path), A2A_DEPLOY_REPORT="1",
                         asleep=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    seen, served, reasons = report_lines(done.stderr)["alltoall"]
    assert reasons == {"nothing to move (0 bytes)": 4} and served == {"bruck": 4}, done.stderr


@pytest.mark.launches
def test_process_counts_never_measured_are_refused_unless_extrapolated(tmp_path: Path, capsys, preload: str,
                                                                       check_program: Path):
    """bench deploy of a decision measured at 2 ranks, asked for 3: refused in one line; with --extrapolate the file
    marks the entries unverified, and so do `bench deploy --show` and liba2a's report."""
    table = tmp_path / "decision.json"
    write_decision(decision([(0, "pairwise")], "pairwise", [2]), table)
    out = tmp_path / "d.a2a"
    code, _, err = bench_here(capsys, "deploy", str(table), "--nprocs", "3", "-o", str(out))
    assert code != 0 and err.count("\n") == 1 and "--nprocs 3: the decision measured alltoall on 2 ranks" in err
    assert "--extrapolate" in err and not out.exists()
    code, said, _ = bench_here(capsys, "deploy", str(table), "--nprocs", "2,3", "--extrapolate", "-o", str(out))
    assert code == 0 and "unverified: 3 ranks, which the decision never measured: the table of 2 ranks" in said, said
    code, shown, _ = bench_here(capsys, "deploy", "--show", str(out))
    assert code == 0 and "unverified: 3 ranks (the table of 2 ranks)" in shown and "not verified" in shown, shown
    done = under_library(3, preload, str(check_program), "5", A2A_DEPLOY=str(out), A2A_DEPLOY_REPORT="1", asleep=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert "unverified: the entries for 3 ranks, which the decision never measured (it took the table of 2 ranks)" \
        in done.stderr and report_lines(done.stderr)["alltoall"][1] == {"pairwise": 6}, done.stderr


# 4 pairs of verification launches, the fewest the sign test can call different at alpha 0.15 (6 at 0.05): the tests
# check what the tune does with its verdicts, not their power (the verdicts are sound at either alpha), in a third
# fewer launches
TESTED_PAIRS = ("--rounds", "4", "--alpha", "0.15")


def tune_deploy(tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "tune", "--deploy", "--nprocs", "2", "--launches", "1",
                           "--iterations", "15", *TESTED_PAIRS, "--output", str(tmp_path / "tune"), *options],
                          env=clean_launcher_env(None), capture_output=True, text=True, timeout=900)


@pytest.mark.launches
def test_tune_deploy_serves_no_size_its_last_verification_found_slower(tmp_path: Path, capsys):
    """bench tune --deploy end to end at 2 ranks: the file it offers carries its verification (the machine, the
    library, a verdict per size), serves no size whose last verdict was slower (nor, with ties given back, one
    that was not faster), says what went back and why, and ends with the lines that use it or 'not applied'."""
    done = tune_deploy(tmp_path, "--sizes", "0,8,64K", "--algorithms", "linear,pairwise,native")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if "\nnothing to apply: the decision keeps the library's own choice at every size" in done.stdout:
        pytest.skip("the sweep found nothing faster than the library here: nothing to verify")
    directory = tmp_path / "tune"
    name = "deploy.a2a" if (directory / "deploy.a2a").exists() else "not-applied.a2a"
    made = Deployment.read(directory / name)
    how, *lines = made.verification
    assert how.startswith("on ") and "cores)" in how and ("MPICH" in how or "Open MPI" in how), how
    verdicts = [line.split() for line in lines if not line.startswith("given back")]
    sizes = {int(v[2]) for v in verdicts}
    assert {0, 8, 65536} <= sizes and all(v[-1] in (FASTER, SLOWER, SAME) or v[-2:] == ["not", "judged"]
                                          for v in verdicts), lines
    assert next(v for v in verdicts if v[2] == "0")[-2:] == ["not", "judged"], lines  # 0 B: the library's always
    for v in verdicts:
        runs = served_by(made, v[0], int(v[1]), int(v[2]))
        assert runs == "the library" or v[-1] == FASTER, (v, runs)
    assert served_by(made, "alltoall", 2, 0) == "the library"
    for line in (x for x in lines if x.startswith("given back")):
        assert re.search(r"given back: alltoall on 2 ranks, \d+\.\.\d* B per peer: .+ (same|slower) with the file",
                         line), line
    if name == "deploy.a2a":
        assert "use it with:" in done.stdout and f"A2A_DEPLOY={directory / name}" in done.stdout
    else:
        assert "\nnot applied: " in done.stdout
    code, shown, _ = bench_here(capsys, "deploy", "--show", str(directory / name))
    assert code == 0 and "verification:" in shown and how in shown


@pytest.mark.launches
def test_tune_deploy_refuses_a_file_the_program_runs_slower_with(tmp_path: Path, tmp_path_factory):
    """--verify-with: a program that is 1 s slower whenever a deploy file is set: the file is not applied, and the
    tune says the program ran slower with it."""
    program = str(built_program(tmp_path_factory, "slow_with_deploy"))  # C: its 12 launches start no interpreter
    done = tune_deploy(tmp_path, "--sizes", "8,1K", "--algorithms", "linear,pairwise,native", "--keep-ties",
                       "--verify-with", program)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if re.search(r"\n(not applied: every size it served was given back|nothing to apply)", done.stdout):
        pytest.skip("the sweep or the loop's verification left nothing to serve here, so the program was not run")
    assert re.search(r"\nnot applied: the program ran [\d.]+x slower with it", done.stdout), done.stdout[-3000:]
    assert not (tmp_path / "tune" / "deploy.a2a").exists()
    made = Deployment.read(tmp_path / "tune" / "not-applied.a2a")
    assert any(line.startswith("program 2 -1 ") and line.endswith(f"program: {program}") and " slower " in line
               for line in made.verification), made.verification


@pytest.mark.launches
def test_tune_deploy_verifies_with_the_projects_program(tmp_path: Path):
    """--verify-with the project's transpose/sample-sort program, compared by the MPI_Alltoall time it prints: the
    file is kept unless the program is significantly slower with it, and the verdict says which."""
    from a2a.deploy.transpose_sort import transpose_sort

    program = f"{transpose_sort()} --n 48 --keys 300 --iterations 4"
    done = tune_deploy(tmp_path, "--sizes", "8,1K", "--algorithms", "linear,pairwise,native", "--keep-ties",
                       "--verify-with", program, "--verify-pattern", r"transpose: .*\(MPI_Alltoall ([\d.]+) us\)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = re.search(r"the program: [\d.e+]+ without, [\d.e+]+ with \([\d.]+x(?: slower)?, p=[\d.e-]+\): (\w+)",
                     done.stdout)
    if said is None:
        assert re.search(r"\n(not applied: every size it served was given back|nothing to apply)", done.stdout)
        pytest.skip("the sweep or the loop's verification left nothing to serve here, so the program was not run")
    kept = (tmp_path / "tune" / "deploy.a2a").exists()
    assert kept == (said[1] != SLOWER), done.stdout[-2000:]


@pytest.mark.launches
def test_the_deploy_pages_verified_way_runs_as_written(tmp_path: Path):
    """docs/deploy.md's first block, pasted at a checkout's root whose venv is this one, ends as the page says: the
    tune judged by the project's program and --show printing the file's verification, or, where the tune kept
    nothing, its 'nothing to apply' or 'not applied' and no file for --show."""
    done = pasted(tmp_path, deploy_page_block("The verified way"))
    if not (tmp_path / "results" / "tuned" / "deploy.a2a").exists():
        assert re.search(r"\n(not applied|nothing to apply): ", done.stdout), done.stdout[-3000:] + done.stderr[-3000:]
        assert done.returncode != 0 and "results/tuned/deploy.a2a' does not exist" in done.stderr, done.stderr[-2000:]
        pytest.skip("the tune kept nothing here (as the page says it may), so there was no file to --show")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"the program: [\d.e+]+ without, [\d.e+]+ with \([\d.]+x(?: slower)?, p=[\d.e-]+\): (faster|same)",
                     done.stdout)
    shown = done.stdout.split("\nwhat it serves and how it was verified:", 1)[1]
    assert "verification:" in shown and "program: results/program --n 64" in shown, shown[-2000:]
