"""A newcomer's path: config files checked against the options, files others can read, hints that run as printed,
and docs in step with the code."""
from __future__ import annotations

import re

import pytest
import yaml
from support import ROOT, bench_here

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
