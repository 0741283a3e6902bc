"""The layout's rules hold: import contracts checked by lint, no import cycle, one file per built-in algorithm, and a
new algorithm is one file."""
from __future__ import annotations

import ast
import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import a2a
from a2a.algos.registry import BUILTIN_PACKAGE, builtin_modules, candidates

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """lint-imports (import-linter) run on a copy of the project at `tree`."""
    tool = Path(sys.executable).parent / "lint-imports"
    if not tool.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([str(tool), "--no-cache"], cwd=tree, capture_output=True, text=True, timeout=300)


def copy_of_project(tmp_path: Path, parts: tuple[str, ...] = ("a2a", "bench")) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for part in parts:
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    return tree


# (file, the import planted in it, importer -> imported as lint names them, a contract it must break)
STRAYS = [
    ("a2a/sweep/grid.py", "import a2a.simulate.capture", "a2a.sweep.grid", "a2a.simulate.capture",
     "Wings are layered"),
    ("a2a/analysis/decide.py", "import a2a.sweep.grid", "a2a.analysis.decide", "a2a.sweep.grid", "Wings are layered"),
    ("a2a/record/results.py", "from a2a.record import report", "a2a.record.results", "a2a.record.report",
     "No import cycle anywhere"),
    ("a2a/sweep/session.py", "import bench.group", "a2a.sweep.session", "bench.group",
     "never imports the command line"),
    ("bench/simulate.py", "from . import run", "bench.simulate", "bench.run", "A command imports no other command"),
    ("a2a/algos/plugins.py", "import a2a.execute.planning", "a2a.algos.plugins", "a2a.execute.planning",
     "Wings are layered"),
    ("a2a/schedules/tracer.py", "import a2a.execute.engine", "a2a.schedules.tracer", "a2a.execute.engine",
     "Wings are layered"),
    ("a2a/execute/engine.py", "import a2a.analysis.decide", "a2a.execute.engine", "a2a.analysis.decide",
     "never read analysis"),
    ("a2a/analysis/compare.py", "import a2a.schedules.world", "a2a.analysis.compare", "a2a.schedules.world",
     "Analysis reads records and algorithms only"),
    ("a2a/deploy/file.py", "import a2a.emulate.cluster", "a2a.deploy.file", "a2a.emulate.cluster",
     "Only workflows use the emulated cluster"),
]


def broken_contracts(report: str) -> dict[str, list[tuple[str, str]]]:
    """lint-imports' "Broken contracts" section: each contract's violations as (importer, imported), absolute."""
    lines = report.split("Broken contracts", 1)[1].splitlines()
    found: dict[str, list[tuple[str, str]]] = {}
    contract, package = "", ""
    for line, underline in zip(lines, lines[1:] + [""]):
        if underline.startswith("---") and len(underline) == len(line):
            contract, package = line, ""
            found[contract] = []
        elif match := re.match(r"No cycles are allowed in ([\w.]+)\.", line):
            package = match[1]
        elif match := re.match(r"-\s+(\S+) -> (\S+)", line):
            importer, imported = (package + name if name.startswith(".") else name for name in match.groups())
            found[contract].append((importer, imported))
    return found


@pytest.fixture(scope="module")
def lint_report(tmp_path_factory) -> subprocess.CompletedProcess:
    """One lint-imports run over one copy of the project with every stray of STRAYS planted at once."""
    tree = copy_of_project(tmp_path_factory.mktemp("strays"))
    for module, stray, *_ in STRAYS:
        with open(tree / module, "a") as source:
            source.write(f"\n{stray}  # noqa: E402,F401\n")
    return lint_imports(tree)


@pytest.mark.launches
@pytest.mark.parametrize("module, stray, importer, imported, contract", STRAYS)
def test_a_stray_import_fails_lint(lint_report, module: str, stray: str, importer: str, imported: str, contract: str):
    assert lint_report.returncode != 0, lint_report.stdout
    broken = broken_contracts(lint_report.stdout)
    named = [violations for name, violations in broken.items() if contract in name]
    assert named and any(planted_explains((importer, imported), v) for v in named[0]), lint_report.stdout


def planted_explains(stray: tuple[str, str], violation: tuple[str, str]) -> bool:
    """The violation lint reports (module or package level) is the stray import."""
    return all(mine == theirs or mine.startswith(theirs + ".") for mine, theirs in zip(stray, violation))


@pytest.mark.launches
def test_the_project_keeps_its_contracts():
    """The project as it is breaks no contract (the planted copy above shows each contract can break)."""
    done = lint_imports(ROOT)
    assert done.returncode == 0 and "BROKEN" not in done.stdout, done.stdout
    assert len(re.findall(r" KEPT$", done.stdout, re.M)) >= 10, done.stdout


def test_each_builtin_file_registers_the_algorithm_it_is_named_after():
    registered = {name: a2a.get(name) for name in a2a.algorithms()}
    files = {module.rsplit(".", 1)[1] for module in builtin_modules()}
    assert files == set(registered)  # no name without its file, no file without its name
    for name, algorithm in registered.items():
        for kind in algorithm.kinds.values():
            assert kind.factory.__module__ == f"{BUILTIN_PACKAGE}.{name}", (name, kind.factory.__module__)


def test_each_command_is_found_in_the_module_its_name_maps_to():
    """bench.group.COMMANDS, which the command line imports by, names every command's module: importing every
    module of bench adds no command it lacks, and each command it names is defined where it says."""
    import importlib
    import pkgutil

    import bench
    from bench.group import COMMANDS, main

    for module in pkgutil.iter_modules(bench.__path__):
        if module.name != "__main__":
            importlib.import_module(f"bench.{module.name}")
    assert set(main.commands) == set(COMMANDS)
    assert {name: command.callback.__module__ for name, command in main.commands.items()} == {
        name: f"bench.{module}" for name, module in COMMANDS.items()}


@pytest.mark.launches
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


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports, counting imports inside functions (a package is its __init__)."""
    modules = {".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
               for part in ("a2a", "bench") for path in (root / part).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                    else []))
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def project_graph() -> dict[str, set[str]]:
    """The project's import graph, parsed once for the tests that read it."""
    return import_graph(ROOT)


def test_no_module_imports_itself_back_even_from_inside_a_function(tmp_path: Path,
                                                                   project_graph: dict[str, set[str]]):
    """No cycle among any modules, a package and its members included, counting every import statement; a stray
    import inside a function makes one."""
    assert cycles(project_graph) == []
    tree = copy_of_project(tmp_path)
    with open(tree / "a2a/analysis/export/mpich.py", "a") as source:
        source.write("\n\ndef stray():\n    from a2a.analysis.export import formats  # noqa: F401\n")
    assert cycles(import_graph(tree)) == [["a2a.analysis.export.formats", "a2a.analysis.export.mpich"]]


def test_no_command_holds_more_than_its_options_and_one_call():
    """Each command's body is a few lines: the longest command function (its decorators and docstring aside)."""
    longest: dict[str, int] = {}
    for path in (ROOT / "bench").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) or "group" in ast.unparse(d)
                                                         for d in node.decorator_list):
                body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
                longest[f"{path.name}:{node.name}"] = sum((n.end_lineno or n.lineno) - n.lineno + 1 for n in body)
    assert max(longest.values()) <= 8, sorted(longest.items(), key=lambda item: -item[1])[:5]


def algorithm_table_names(text: str, heading: str) -> set[str]:
    """The algorithm names in the first column of the table under `heading` (a Markdown table)."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])}


@pytest.mark.parametrize("page, heading, collective", [("README.md", "## The algorithms", None),
                                                       ("docs/algorithms.md", "## The catalogue", "alltoall"),
                                                       ("docs/alltoallv.md", "## The algorithms", "alltoallv")])
def test_the_algorithm_tables_name_every_registered_algorithm(page: str, heading: str, collective: str | None):
    """The hand-written tables of the README and the docs list exactly the registry's algorithms (candidates, where a
    page is about one collective: auto, which replays a table, is named in its text)."""
    expected = set(a2a.algorithms()) if collective is None else set(candidates(collective))
    assert algorithm_table_names((ROOT / page).read_text(), heading) == expected


NEW_ALGORITHM = '''"""Pairwise exchange with the shifts in reverse: a test's algorithm, one file and nothing else."""
import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula
from a2a.algos.prebuilt import copier, sendrecv_steps, spec
from a2a.algos.registry import register
from a2a.algos.schedule import Exchanges


def steps(p, r):
    """Step k sends to r + (p-1-k) and receives from r - (p-1-k)."""
    shifts = np.arange(p - 1, 0, -1)
    return Exchanges(r, (r + shifts) % p, (r - shifts) % p)


@register("reversed_pairwise", cost=Formula("(p-1) (alpha + m beta)", ("alpha", "beta"),
                                            lambda s, m, o: {"alpha": s.nprocs - 1, "beta": (s.nprocs - 1) * m}),
          steps=steps, simplicity=60)
def reversed_pairwise(comm, sendbuf, recvbuf):
    """p-1 Sendrecv steps, the largest shift first."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    mine = steps(p, r)
    calls = [(spec(send[d]), d, spec(recv[q]), q) for d, q in zip(mine.dests.tolist(), mine.sources.tolist())]
    return sendrecv_steps(comm, copier(recv[r], send[r]), calls)
'''


@pytest.mark.launches
def test_a_new_algorithm_is_one_file(tmp_path: Path):
    """A file dropped into a2a/algos/builtin is in `bench list`, the correctness and schedule tests' parameters,
    a measured sweep and its decision, and a simulation, with no other file edited."""
    from support import launch_command

    from a2a.mpi import clean_launcher_env

    tree = copy_of_project(tmp_path, ("a2a", "bench", "tests"))
    (tree / "a2a/algos/builtin/reversed_pairwise.py").write_text(NEW_ALGORITHM)
    env = clean_launcher_env({**os.environ, "PYTHONPATH": str(tree)})
    run = lambda *args, n=0: subprocess.run(  # noqa: E731
        launch_command(n, sys.executable, *args) if n else [sys.executable, *args], cwd=tree, env=env,
        capture_output=True, text=True, timeout=600)
    listed = run("-m", "bench", "list")
    assert "reversed_pairwise" in listed.stdout, listed.stderr
    # one pytest both collects the new algorithm's tests in the three files and runs them (here at one rank)
    checked = run("-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/test_algorithms.py", "tests/test_capture.py",
                  "tests/test_mesh.py", "-k", "reversed_pairwise")
    assert checked.returncode == 0 and " passed" in checked.stdout, checked.stdout[-2000:]
    for test in ("test_algorithms.py::test_matches_mpi_alltoall[reversed_pairwise]",
                 "test_capture.py::test_the_simulator_reads_the_steps_the_plan_runs[reversed_pairwise-options",
                 "test_mesh.py::test_concurrent_groups_give_correct_data[reversed_pairwise]"):
        assert any(test in line and "PASSED" in line for line in checked.stdout.splitlines()), test
    swept = run("-m", "bench", "run", "--sizes", "8,1K", "--algorithms", "reversed_pairwise,native", "--iterations",
                "3", "--output", str(tmp_path / "run"), "--quiet", n=2)
    assert swept.returncode == 0, swept.stderr
    decided = run("-m", "bench", "decide", str(tmp_path / "run"))
    assert decided.returncode == 0 and "reversed_pairwise" in decided.stdout, decided.stdout + decided.stderr
    from a2a.simulate.simgrid import missing

    if missing():
        pytest.skip(f"the simulation part needs SimGrid: {missing()}")
    simulated = run("-m", "bench", "simulate", "--nprocs", "4", "--sizes", "8", "--algorithms", "reversed_pairwise",
                    "--output", str(tmp_path / "sim"), "--quiet", "--format", "csv")
    assert simulated.returncode == 0, simulated.stderr
    rows = list(csv.DictReader(io.StringIO(simulated.stdout)))
    assert [(r["algorithm"], r["valid"]) for r in rows] == [("reversed_pairwise", "true")], simulated.stdout


def wings() -> list[Path]:
    """The packages directly under a2a."""
    return sorted(p.parent for p in (ROOT / "a2a").glob("*/__init__.py"))


SOURCE_SUFFIXES = (".py", ".c", ".h", ".cpp", ".sbatch")


def source_lines(folder: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in folder.rglob("*") if p.suffix in SOURCE_SUFFIXES)


def test_each_wing_names_what_it_holds_in_its_docstring():
    """A package's docstring says what it holds: every module and folder in it is named there, so a module that
    belongs elsewhere is noticed where it is added (a2a.algos: the interface and builtin/ only)."""
    for wing in wings():
        doc = ast.get_docstring(ast.parse((wing / "__init__.py").read_text())) or ""
        held = [p.stem for p in wing.glob("*.py") if p.stem != "__init__"]
        held += [p.name for p in wing.iterdir() if p.is_dir() and p.name != "__pycache__"]
        assert [h for h in held if not re.search(rf"\b{h}\b", doc)] == [], wing.name
        assert "Imports" in doc, wing.name


def test_no_wing_holds_more_than_30_percent_of_the_source():
    total = source_lines(ROOT / "a2a")
    shares = {wing.name: source_lines(wing) / total for wing in wings()}
    assert max(shares.values()) <= 0.30, shares


def test_the_interface_names_the_module_that_makes_plans(project_graph: dict[str, set[str]]):
    """algos.registry reaches the planner by name (no import up into execute): the name resolves to `planned`, and
    no module of a2a.algos imports a2a.execute, a2a.schedules or a2a.deploy, even inside a function."""
    import importlib

    from a2a.algos.registry import PLANNING

    assert callable(importlib.import_module(PLANNING).planned)
    upward = {(m, i) for m, imported in project_graph.items() if m.startswith("a2a.algos") for i in imported
              if i.split(".")[1] in ("execute", "schedules", "deploy")}
    assert upward == set()


# What the docs may name: a path of the repository (a2a/..., tests/..., examples/..., mk/..., docs/...) or a module
# (a2a.wing.module[.name]); each must exist.
NAMED_PATH = re.compile(r"(?<![\w/.-])((?:a2a|bench|tests|examples|mk|docs)/[\w./-]*\w)")
NAMED_MODULE = re.compile(r"(?<![\w/.-])(a2a(?:\.\w+)+)")


def is_module(parts: list[str]) -> bool:
    path = ROOT.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def stale_names(text: str) -> set[str]:
    """The repository paths and a2a modules (or module.attribute) `text` names that do not exist."""
    import importlib

    stale = {p for p in NAMED_PATH.findall(text) if not (ROOT / p).exists() and not any(ROOT.glob(p))}
    for name in set(NAMED_MODULE.findall(text)):
        parts = name.split(".")
        cut = max((n for n in range(1, len(parts) + 1) if is_module(parts[:n])), default=0)
        if cut < len(parts) - 1 or (cut == len(parts) - 1
                                    and not hasattr(importlib.import_module(".".join(parts[:cut])), parts[cut])):
            stale.add(name)
    return stale


def test_the_docs_name_no_path_or_module_that_does_not_exist():
    """README, docs (findings too), examples, mk and the Makefile name paths and modules that exist: a move that
    leaves a stale one fails here."""
    pages = [ROOT / "README.md", ROOT / "Makefile", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*"),
             *(ROOT / "mk").glob("*")]
    stale = {page.relative_to(ROOT).as_posix(): sorted(stale_names(page.read_text())) for page in pages
             if page.is_file() and page.suffix not in (".png", ".svg")}
    assert {page: names for page, names in stale.items() if names} == {}


def test_a_stale_name_is_found():
    assert stale_names("see a2a/algos/executor.py and a2a.algos.tracer, a2a.execute.planning.planned") == {
        "a2a/algos/executor.py", "a2a.algos.tracer"}
    assert stale_names("a2a.execute.planning.nothing_here") == {"a2a.execute.planning.nothing_here"}


def test_the_readme_stays_a_front_page():
    """What the testbed is, the two commands, one screen of output, the features with links: at most 250 lines."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
