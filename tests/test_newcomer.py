"""A newcomer's path: config files checked against the options, files others can read, hints that run as printed,
and docs in step with the code."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import click
import pytest
import yaml
from decide_fixtures import minimal_table, record, row_for, samples_around
from support import ROOT, bench_here, is_mpich, python

from a2a.algos.facts import library_own, shown
from a2a.analysis import decide
from a2a.analysis.export.common import library_only
from a2a.analysis.export.formats import export_report
from a2a.errors import BadResults
from a2a.record import report
from a2a.record.decision import write_decision
from a2a.record.results import COLUMNS, read_meta, write_atomic, write_meta
from a2a.sweep import naming
from a2a.sweep.config import CONFIG_KEYS, DEFAULTS, SweepConfig, from_options
from a2a.sweep.mesh import mesh_layouts
from a2a.sweep.parsing import load_config
from a2a.sweep.session import StopRequest, SweepState, resume_command
from a2a.sweep.variants import Variant
from a2a.workflows.run import next_steps
from bench.cli import main

EXAMPLE = ROOT / "examples" / "sweep.yaml"


@pytest.fixture
def no_signal_handlers(monkeypatch):
    """`bench run` in this process leaves pytest's signal handlers alone (and starts no thread to hear them)."""
    monkeypatch.setattr(StopRequest, "installed", lambda self: nullcontext(self))


def test_a_misspelt_config_key_is_refused_in_one_line_naming_the_closest(tmp_path, capsys, no_signal_handlers):
    config = tmp_path / "sweep.yaml"
    config.write_text("algorithm: native\nsizes: 8\n")
    code, out, err = bench_here(capsys, "run", "--config", str(config), "--output", str(tmp_path / "run"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "unknown key 'algorithm'; did you mean 'algorithms'?" in err
    assert not (tmp_path / "run").exists()


def test_a_config_key_far_from_every_accepted_one_is_refused_without_a_guess(tmp_path, capsys, no_signal_handlers):
    config = tmp_path / "sweep.yaml"
    config.write_text("zzz: 1\n")
    code, out, err = bench_here(capsys, "run", "--config", str(config), "--output", str(tmp_path / "run"))
    assert code == 2 and err.count("\n") == 1 and "unknown key 'zzz'; accepted: sizes, " in err, err


def test_a_config_file_sets_the_launches_as_the_option_does(tmp_path, capsys, no_signal_handlers):
    """usage.md: the keys are the long options; `launches` too, each launch a record under the file's output."""
    config = tmp_path / "sweep.yaml"
    config.write_text(f"launches: 2\nalgorithms: native\nsizes: 8\niterations: 1\noutput: {tmp_path / 'run'}\n")
    code, out, err = bench_here(capsys, "run", "--config", str(config))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["launch-1", "launch-2"]
    for launch in ("launch-1", "launch-2"):
        assert read_meta(tmp_path / "run" / launch)["status"] == "complete"
    config.write_text("launches: 0\n")
    code, out, err = bench_here(capsys, "run", "--config", str(config), "--output", str(tmp_path / "none"))
    assert code == 2 and "--launches 0; accepted: 1 or more" in err and not (tmp_path / "none").exists(), err


def test_the_by_hand_decide_after_launches_names_every_launch(tmp_path, capsys, no_signal_handlers):
    run = tmp_path / "run"
    code, out, err = bench_here(capsys, "run", "--launches", "3", "--algorithms", "native,linear", "--sizes", "8",
                                "--iterations", "2", "--output", str(run))
    assert code == 0, err
    [line] = [shlex.split(line) for line in out.splitlines() if line.startswith("  ") and " decide " in line]
    words = line[line.index("bench") + 1:]
    assert words == ["decide", *(str(run / f"launch-{k}") for k in (1, 2, 3)), "-o", str(run / "decision.json")]
    code, out, err = bench_here(capsys, *words)
    assert code == 0 and json.loads((run / "decision.json").read_text())["tables"], err


def test_the_example_config_names_every_key_at_its_default():
    assert [k.replace("-", "_") for k in yaml.safe_load(EXAMPLE.read_text())] == list(CONFIG_KEYS)
    assert from_options(load_config(EXAMPLE, CONFIG_KEYS), world=4, memory=1 << 20) == \
        from_options({}, world=4, memory=1 << 20)


def test_usage_lists_every_config_key():
    section = (ROOT / "docs" / "usage.md").read_text().split("**A config file.**")[1].split("\n\n")[0]
    assert re.findall(r"`([a-z][a-z-]*)`", section) == [k.replace("_", "-") for k in CONFIG_KEYS]
    run = bench_command("run")
    assert run is not None
    assert re.findall(r"`(--[a-z-]+)`", section) == [p.opts[0] for p in run.params if p.name not in CONFIG_KEYS]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_written_atomically_get_the_mode_open_would_give(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_meta(tmp_path, {"status": "complete"})
        write_decision(minimal_table(2, [(0, "native", "")]), tmp_path / "decision.json")
        (tmp_path / "kept.json").write_text("{}")
        (tmp_path / "kept.json").chmod(0o640)
        write_atomic(tmp_path / "kept.json", "{}\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "meta.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "decision.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "kept.json").stat().st_mode) == 0o640  # an existing file keeps its mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def hints(directory: Path, **changed) -> list[str]:
    """The commands `bench run` suggests after sweeping `directory` (its config `changed`)."""
    meta = read_meta(directory)
    state = SweepState(replace(SweepConfig.from_dict(meta["config"]), **changed), meta.get("plugins", []))
    lines = next_steps([directory], state, decide.decide([directory]))
    assert all("|" not in line for line in lines), lines  # alternatives go on lines of their own
    return [line.strip() for line in lines if line.startswith("  ")]


def test_the_hints_after_a_sweep_run_as_printed(small_sweep, tmp_path, capsys, monkeypatch):
    record = shutil.copytree(small_sweep, tmp_path / "run")
    tune, decide, export = hints(record)
    assert shlex.split(tune)[:7] == ["python", "-m", "bench", "tune", "--nprocs", "2", "--sizes"]
    bench_command("tune").make_context("tune", shlex.split(tune)[4:])  # every option one `bench tune` takes
    for line in (decide, export):
        code, out, err = bench_here(capsys, *shlex.split(line)[3:])
        assert code == 0, err
    # where native stays everywhere (a loaded machine) the export says there is nothing to apply; where a verdict found
    # an algorithm faster (a quiet machine), it does not
    native_everywhere = library_only(json.loads((record / "decision.json").read_text()))
    assert ("nothing to apply" in err) == native_everywhere, err
    assert f"--format mpich -o {record / 'tuned.json'}" in export or "--format ompi" in export
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    assert shlex.split(hints(record)[0])[-2:] == ["--launcher", "srun"]  # launched as the sweep was
    monkeypatch.setenv("A2A_TOPOLOGY", "switch")
    assert hints(record)[0].endswith(' --launcher "$(python -m bench cluster launcher)"')


def test_after_a_sweep_that_raced_one_candidate_the_tune_races_them_all(small_sweep, tmp_path):
    """docs/decide.md's `auto` block races the table's replay against native alone: a tune of native alone would
    choose nothing, so the hint races every candidate on the sweep's grid, and offers no decide of this record."""
    record = shutil.copytree(small_sweep, tmp_path / "run")
    config = SweepConfig.from_dict(read_meta(record)["config"])
    replayed = [Variant("auto", {"table": "decision.json"}), *(v for v in config.variants if v.name != "linear")]
    [tune] = hints(record, variants=replayed)
    words = shlex.split(tune)
    assert words[3:] == ["tune", "--nprocs", "2", "--sizes", "8"], tune  # no --algorithms: every candidate
    bench_command("tune").make_context("tune", words[4:])


def test_a_plug_in_goes_with_the_tune_and_a_mesh_sweep_is_left_to_decide(small_sweep):
    plugin = str(ROOT / "tests" / "plugins" / "flip.py")
    meta = read_meta(small_sweep)
    state = SweepState(SweepConfig.from_dict(meta["config"]), [plugin])
    document = decide.decide([small_sweep])
    assert f"--plugin={plugin}" in shlex.split(next_steps([small_sweep], state, document)[1])
    config = SweepConfig.from_dict(meta["config"])
    meshed = replace(config, layouts=mesh_layouts("1x2", []))
    lines = next_steps([small_sweep], SweepState(meshed, []), document)
    assert lines[0] == "next (bench tune does not repeat --mesh):" and "bench tune" not in "".join(lines[1:])
    first = document.tables[0]
    two = replace(document, tables=tuple(replace(first, columns={**first.columns, "groups": groups})
                                         for groups in ("1x2", "2x1")))
    assert "--where=groups=2x1" in shlex.split(next_steps([small_sweep], SweepState(meshed, []), two)[1])  # an export
    # serves one value of a context column


def test_a_launch_without_mpirun_says_how_to_launch_it(small_sweep, tmp_path):
    fresh = python("-m", "bench", "run", "--nprocs", "2", "--sizes", "8", "--output", str(tmp_path / "fresh"))
    assert fresh.returncode == 2 and fresh.stderr.count("\n") == 1, fresh.stderr
    assert fresh.stderr.rstrip().endswith("this process runs alone (no launcher): "
                                          "mpirun -n 2 python -m bench run --nprocs 2 --sizes 8 --output "
                                          f"{tmp_path / 'fresh'}")
    record = shutil.copytree(small_sweep, tmp_path / "run")
    resumed = python("-m", "bench", "run", "--resume", str(record))
    assert resumed.returncode == 2 and resumed.stderr.count("\n") == 1, resumed.stderr
    assert resumed.stderr.rstrip().endswith(f"resume it with mpirun -n 2 python -m bench run --resume {record}")
    assert resume_command("mpi", record, 4) == f"mpirun -n 4 python -m bench run --resume {record}"
    assert resume_command("simgrid", record, 64) == f"python -m bench simulate --resume {record}"


def test_tables_head_every_column_and_show_only_the_context_that_varies(tmp_path):
    seconds = samples_around(20.0)
    good = row_for(2, 8, "native", "form=blocking", "float32", 4, seconds)
    headers = report.table([good]).splitlines()[0].split("  ")
    assert headers[-1].strip() == "stalls"  # no flag column, so no column without a header
    bad = replace(good, algorithm="pairwise", options="schedule=shift", valid=False, note="failed on ranks 0-1: X")
    lines = report.explained_table([good, bad], errors=tmp_path / "errors.log").splitlines()
    assert lines[0].split()[-1] == "flag" and lines[-1].endswith(f"(the full text: {tmp_path / 'errors.log'})")
    document = decide.decide([record(tmp_path / "run", {(2, 8): {("native", "form=blocking"): 30}})])
    assert decide.render(document).splitlines()[0].split() == [
        "nprocs", "range", "(B/peer)", "measured", "algorithm", "mean", "us", "runner-up", "by", "vs", "native"]


def test_exports_to_stdout_and_of_the_library_alone_offer_nothing_that_does_not_run(tmp_path):
    run = record(tmp_path / "run", {(2, 8): {("native", "form=blocking"): 30, ("pairwise", "schedule=shift"): 10}})
    write_decision(decide.decide([run]), tmp_path / "d.json")
    _, said = export_report(tmp_path / "d.json", "intel", None)
    assert said == ["apply it with:\n  export I_MPI_ADJUST_ALLTOALL=3:0-2147483647@2-2147483647"]  # no '. FILE'
    _, said = export_report(tmp_path / "d.json", "ompi", None)
    assert said[-1].startswith("to apply it, write it to a file: add --output FILE") and "export" not in said[-1]
    native = record(tmp_path / "native", {(2, 8): {("native", "form=blocking"): 10,
                                                   ("pairwise", "schedule=shift"): 30}})
    write_decision(decide.decide([native]), tmp_path / "native.json")
    text, said = export_report(tmp_path / "native.json", "ompi", tmp_path / "rules")
    assert text == f"wrote {tmp_path / 'rules'}" and "apply it" not in " ".join(said) and "nothing to apply" in said[-1]


def test_a_directory_that_holds_records_names_them(tmp_path):
    for name in ("sweep-1", "sweep-2"):
        record(tmp_path / "tune" / name, {(2, 8): {("native", "form=blocking"): 30}})
    with pytest.raises(BadResults, match=f"give the records it holds instead: {tmp_path}/tune/sweep-1 "
                                         f"{tmp_path}/tune/sweep-2$"):
        decide.decide([tmp_path / "tune"])


def test_usage_lists_every_column_of_results_csv_in_order():
    text = (ROOT / "docs" / "usage.md").read_text()
    paragraph = text[text.index("Columns of\n`results.csv`"):].split("\n\n")[0]
    assert re.findall(r"`([a-z][A-Za-z0-9_]*)`", paragraph) == COLUMNS


def test_usage_documents_every_option_of_bench_run_with_its_default():
    rows = [line for line in (ROOT / "docs" / "usage.md").read_text().splitlines() if line.startswith("| `--")]
    documented = {option: row for row in rows for option in re.findall(r"--[a-z-]+", row.split(" | ")[0])}
    run = bench_command("run")
    assert set(documented) == {o for p in run.params for o in p.opts + p.secondary_opts if o.startswith("--")}
    for key, default in DEFAULTS.items():
        if default not in ("", (), True, False):  # no value to state: nothing, an empty list, a flag on or off
            said = f"{default:g}" if isinstance(default, float) else str(default)
            row = documented[f"--{key.replace('_', '-')}"].replace("`", "")
            assert re.search(rf"[ (]{re.escape(said)}[):,;]", row), (key, said, row)  # e.g. '(25)', '(0: ...'


PAGES = ("README.md", "docs/usage.md", "docs/decide.md", "docs/overlap.md", "docs/library.md")
LAUNCHERS = ("python", "mpirun", ".venv/bin/mpirun", ".venv/bin/python")


def documented() -> list[tuple[str, bool, list[str]]]:
    """Every `python -m bench` line in the pages' code blocks: (page, whether it is a command to type rather than one
    an output excerpt suggests (indented), its words after `bench`)."""
    found = []
    for page in PAGES:
        language = None  # outside a code block
        for line in re.sub(r"\\\n\s*", "", (ROOT / page).read_text()).splitlines():  # continued lines joined
            if line.startswith("```"):
                language = line[3:].strip() if language is None else None
                continue
            words = line.removeprefix("$ ").split()
            if language not in ("", "sh") or not words or words[0] not in LAUNCHERS or "bench" not in words:
                continue
            words = shlex.split(line.removeprefix("$ "), comments=True)
            words = words[:words.index(">")] if ">" in words else words  # the shell's redirection is not bench's
            found.append((page, not line[:1].isspace(), words[words.index("bench") + 1:]))
    return found


def command_of(words: list[str]) -> tuple[click.Command, str, list[str]]:
    """The `bench` (sub)command the words name, its name and its own arguments (no subcommand: `run`)."""
    command: click.Command | None = main
    name, context = "bench", click.Context(main)
    while isinstance(command, click.Group) and words and words[0] in command.list_commands(context):
        command, name, words = command.get_command(context, words[0]), words[0], words[1:]
    assert command is not None, words
    return (bench_command("run"), "run", words) if command is main else (command, name, words)


def bench_command(name: str) -> click.Command:
    """The click command of `bench NAME`."""
    command = main.get_command(None, name)
    assert command is not None, name
    return command


@pytest.mark.parametrize("page, typed, words", documented(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_documented_command_names_options_its_command_takes(page, typed, words):
    for part in [words, *([words[words.index("--") + 1:]] if "--" in words else [])]:  # cluster run -- ARGS
        command, name, args = command_of(part)
        try:
            command.make_context(name, args)  # click refuses an option the command lacks, or a bad value
        except click.BadParameter as refused:
            assert "does not exist" in str(refused)  # a record an earlier command of the page makes


SKIPPED = ("tune", "cluster", "simulate")  # they launch jobs of their own, need root, or take minutes


@pytest.mark.skipif(not is_mpich(), reason="needs MPICH: decide.md exports for MPICH")
def test_the_documented_commands_run_as_written_on_one_rank(tmp_path, monkeypatch, capsys, no_signal_handlers):
    """Every command the pages give to type, in their order, run here on this one rank with one iteration a point
    (what needs more ranks, root or minutes is left out)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the plug-in the page loads is the one other tests load
    monkeypatch.chdir(tmp_path)
    stamps = iter(range(1000))  # records named by the second: launches here come faster than one a second
    monkeypatch.setattr(naming, "utc_stamp", lambda: f"20260101T0000{next(stamps):02d}Z")
    ran = []
    for page, typed, words in documented():
        command, name, args = command_of(words)
        if not typed or words[:1] and words[0] in SKIPPED or "cl_sync" in words or "--mesh" in words \
                or "--launches" in words and name == "compare":  # compare --launches makes launches of its own
            continue
        shrunk = [*words, "--sizes", "8", "--iterations", "1"] if name == "run" else words  # the last one counts
        code, out, err = bench_here(capsys, *shrunk)
        assert code == 0, (page, words, err)
        assert name != "run" or not re.search(r"form=blocking|radix=2\b|window=0\b", out), out  # no defaults
        ran.append(" ".join(words))
    assert len(ran) >= 12, ran


def test_labels_leave_options_at_their_defaults_out():
    assert [shown(*pair) for pair in [("native", "form=blocking"), ("linear_sync", "window=0"), ("bruck", "radix=2"),
                                      ("bruck", "radix=4"), ("native", "form=nonblocking"), ("mine", "depth=3")]] == [
        "native", "linear_sync", "bruck", "bruck:radix=4", "native:form=nonblocking", "mine:depth=3"]
    assert library_own("native", "form=blocking") and library_own("native", "")
    assert not library_own("native", "form=persistent") and not library_own("linear", "")
    # the overlap protocol starts an exchange: the library's own is MPI_Ialltoall, native's non-blocking form
    assert library_own("native", "form=nonblocking", "overlap") and not library_own("native", "", "overlap")
    ranked = [("pairwise", "schedule=shift", 10.0), ("native", "form=nonblocking", 30.0)]
    assert decide.decision_cell(8, ranked, timing="overlap").speedup_vs_native == 3.0
    assert decide.decision_cell(8, ranked).speedup_vs_native is None  # no blocking native measured


def test_suggested_commands_run_from_where_the_user_stands(monkeypatch, tmp_path):
    """In an activated venv the testbed suggests `python -m bench` and `mpirun`; outside it, the paths of this
    Python's own, relative to the working folder where they lie below it (else absolute): each runs as printed."""
    from a2a.mpi import bench_words, launch_command, typed

    here = Path(sys.executable).absolute().parent
    monkeypatch.setenv("PATH", os.pathsep.join([str(here), "/usr/bin", "/bin"]))
    assert bench_words() == ["python", "-m", "bench"]
    assert launch_command(2, ["run"]) == "mpirun -n 2 python -m bench run"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for folder in (here.parent.parent, tmp_path):
        monkeypatch.chdir(folder)
        for name in ("python", "mpirun"):
            said = typed(name)
            assert "/" in said and (folder / said).resolve() == (here / name).resolve(), (folder, said)
    monkeypatch.chdir(here.parent.parent)
    assert launch_command(2, ["run"]).split()[:4] == [typed("mpirun"), "-n", "2", typed("python")]


@pytest.mark.launches
def test_a_python_without_the_testbeds_packages_is_told_to_use_the_venv(tmp_path):
    """`python -m bench` by a Python that lacks the packages (outside the venv): one line naming what is missing and
    how to get the venv's, exit 2, no traceback; under a launcher, on rank 0 only."""
    import subprocess

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    env = {"PATH": "/usr/bin:/bin", "PMI_RANK": "0"}
    done = subprocess.run([str(bare / "bin" / "python"), "-m", "bench", "list"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "`. .venv/bin/activate` first" in done.stderr, done.stderr
    other = subprocess.run([str(bare / "bin" / "python"), "-m", "bench", "list"], cwd=ROOT,
                           env={**env, "PMI_RANK": "1"}, capture_output=True, text=True, timeout=60)
    assert (other.returncode, other.stderr) == (2, "")
