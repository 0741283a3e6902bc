"""The layout's rules hold: import contracts checked by lint, one file per built-in algorithm."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import a2a
from a2a.algos.registry import BUILTIN_PACKAGE, builtin_modules

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """lint-imports (import-linter) run on a copy of the project at `tree`."""
    tool = Path(sys.executable).parent / "lint-imports"
    if not tool.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([str(tool), "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=300)


def copy_of_project(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for part in ("a2a", "bench"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    return tree


@pytest.mark.parametrize("module, stray, contract", [
    ("a2a/simulate/capture.py", "import a2a.measure.driver", "never the MPI driver"),
    ("a2a/analysis/decide.py", "import a2a.measure.grid", "each imports only the wings below it"),
    ("a2a/record/results.py", "from a2a.record import report", "No import cycle anywhere"),
    ("a2a/measure/session.py", "import bench.group", "never imports the command line"),
    ("bench/simulate.py", "from . import run", "A command imports no other command"),
])
def test_a_stray_import_fails_lint(tmp_path: Path, module: str, stray: str, contract: str):
    tree = copy_of_project(tmp_path)
    with open(tree / module, "a") as source:
        source.write(f"\n{stray}  # noqa: E402,F401\n")
    done = lint_imports(tree)
    assert done.returncode != 0, done.stdout
    broken = [line for line in done.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(contract in line for line in broken), done.stdout  # a stray import may break more than one


def test_the_project_keeps_its_contracts(tmp_path: Path):
    done = lint_imports(copy_of_project(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:]


def test_each_builtin_file_registers_the_algorithm_it_is_named_after():
    registered = {name: a2a.get(name) for name in a2a.algorithms()}
    files = {module.rsplit(".", 1)[1] for module in builtin_modules()}
    assert files == set(registered)  # no name without its file, no file without its name
    for name, algorithm in registered.items():
        for kind in algorithm.kinds.values():
            assert kind.factory.__module__ == f"{BUILTIN_PACKAGE}.{name}", (name, kind.factory.__module__)


def test_the_console_script_is_python_m_bench(tmp_path: Path):
    """a2a-bench goes through the same entry: a bad option is one line on one rank, exit 2 on every rank."""
    from support import launch_command

    from a2a.mpi import clean_launcher_env

    script = Path(sys.executable).parent / "a2a-bench"
    if not script.exists():
        pytest.skip("the package is not installed with its console script (pip install -e .)")
    done = subprocess.run(launch_command(2, str(script), "run", "--sizes", "7Q", "--output", str(tmp_path / "out")),
                          capture_output=True, text=True, timeout=120, env=clean_launcher_env())
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("size '7Q' is not a byte count") == 1, done.stderr
