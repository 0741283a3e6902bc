"""A newcomer's path: config files checked against the options, files others can read, hints that run as printed,
and docs in step with the code."""
from __future__ import annotations

import os
import re
import stat

import pytest
import yaml
from support import ROOT, bench_here

from a2a.record.decision import write_decision
from a2a.record.results import write_atomic, write_meta
from a2a.sweep.config import CONFIG_KEYS, from_options
from a2a.sweep.parsing import load_config
from a2a.sweep.session import StopRequest

EXAMPLE = ROOT / "examples" / "sweep.yaml"


@pytest.fixture
def no_signal_handlers(monkeypatch):
    """`bench run` in this process leaves pytest's signal handlers alone."""
    monkeypatch.setattr(StopRequest, "install", lambda self: None)


def test_a_misspelt_config_key_is_refused_in_one_line_naming_the_closest(tmp_path, capsys, no_signal_handlers):
    config = tmp_path / "sweep.yaml"
    config.write_text("algorithm: native\nsizes: 8\n")
    code, out, err = bench_here(capsys, "run", "--config", str(config), "--output", str(tmp_path / "run"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "unknown key 'algorithm'; did you mean 'algorithms'?" in err
    assert not (tmp_path / "run").exists()


def test_the_example_config_names_every_key_at_its_default():
    assert [k.replace("-", "_") for k in yaml.safe_load(EXAMPLE.read_text())] == list(CONFIG_KEYS)
    assert from_options(load_config(EXAMPLE, CONFIG_KEYS), world=4, memory=1 << 20) == \
        from_options({}, world=4, memory=1 << 20)


def test_usage_lists_every_config_key():
    section = (ROOT / "docs" / "usage.md").read_text().split("**A config file.**")[1].split("\n\n")[0]
    assert re.findall(r"`([a-z][a-z-]*)`", section) == [k.replace("_", "-") for k in CONFIG_KEYS]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_written_atomically_get_the_mode_open_would_give(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_meta(tmp_path, {"status": "complete"})
        write_decision({"schema": "a2a-decision/1", "tables": []}, tmp_path / "decision.json")
        (tmp_path / "kept.json").write_text("{}")
        (tmp_path / "kept.json").chmod(0o640)
        write_atomic(tmp_path / "kept.json", "{}\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "meta.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "decision.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "kept.json").stat().st_mode) == 0o640  # an existing file keeps its mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
