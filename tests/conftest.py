"""Run the suite as plain pytest or as `mpirun -n N python -m pytest`.

Plain pytest runs every test in one process (MPI on one rank). Under mpirun only the tests
marked `mpi` run: they are collective, every rank runs them in-process on MPI.COMM_WORLD, a
failure on any rank fails the test on every rank, and a watchdog aborts the job if one hangs.
The single-process tests are deselected there: they already ran in plain mode. Only rank 0
prints.
"""
from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: as `python -m bench` has it (bench/__init__.py)
# the suite runs as in an activated venv (`. .venv/bin/activate`): `python` and `mpirun` are this Python's, so the
# commands the testbed suggests read `python -m bench ...` (tests/test_newcomer.py checks them not activated too)
os.environ["PATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(sys.executable)), os.environ.get("PATH", "")])
from a2a.mpi import abort_job, world  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tiers, however this conftest is imported
import tiers  # noqa: E402

WATCHDOG_SECONDS = float(os.environ.get("A2A_TEST_WATCHDOG", "300"))
# session fixtures that launch a job for the first test that needs them
LAUNCHING_FIXTURES = {"small_sweep", "plotted_run"}
GROUP_MAP = "A2A_TEST_GROUP_MAP"  # under pytest-xdist, the file where the workers list the tests run together, and
# what each test costs
GROUP_LIST = pytest.StashKey[str]()  # that file, on the controller that made it


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick", action="store_true",
                     help="the inner loop: only tests of no tier (no launch, nested run, SimGrid, browser, Slurm, "
                          "namespaces or second MPI library); `--markers` lists the tiers")


def pytest_configure(config: pytest.Config) -> None:
    tiers.register(config)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):  # xdist's controller
        config.stash[GROUP_LIST] = os.environ[GROUP_MAP] = tempfile.mkstemp(prefix="a2a-groups-", suffix=".json")[1]
    if config.getoption("quick"):
        config.option.markexpr = f"({config.option.markexpr}) and {tiers.QUICK}" if config.option.markexpr \
            else tiers.QUICK
    comm = world()
    if comm.size > 1 and comm.rank != 0:
        config.option.verbose = -2
        sys.stdout = open(os.devnull, "w")


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUP_LIST in config.stash:
        Path(config.stash[GROUP_LIST]).unlink(missing_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # a test that asks for a recorded run launches it, if it is the first to ask
        if LAUNCHING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.launches)
    if hasattr(config, "workerinput") and os.environ.get(GROUP_MAP):  # an xdist worker (not a pytest it nests)
        listed = {"groups": {item.nodeid: group for item in items if (group := run_together(item))},
                  "costs": {item.nodeid: tiers.cost(item) for item in items}}
        written = f"{os.environ[GROUP_MAP]}.{os.getpid()}"
        Path(written).write_text(json.dumps(listed))
        os.replace(written, os.environ[GROUP_MAP])  # every worker lists the same
    comm = world()
    if comm.size == 1:
        return
    single = [item for item in items if not item.get_closest_marker("mpi")]
    if single:
        items[:] = [item for item in items if item.get_closest_marker("mpi")]
        config.hook.pytest_deselected(items=single)
    # every rank must meet the collective tests in the same order
    names = comm.bcast([item.nodeid for item in items] if comm.rank == 0 else None)
    if names != [item.nodeid for item in items]:
        raise pytest.UsageError("ranks collected different tests; run the same command on every rank")


def pytest_report_header(config: pytest.Config) -> str | None:
    comm = world()
    if comm.size > 1:
        return (f"mpirun mode: {comm.size} ranks run the `mpi`-marked tests; the single-process tests "
                "are deselected (they run in plain `python -m pytest`)")
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # a file with no collective tests, under mpirun: nothing to run is not a failure
    if world().size > 1 and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture
def comm():
    """MPI.COMM_WORLD, for collective (`mpi`-marked) tests."""
    return world()


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-rank sweep of native and linear at 8 B per peer, made once for the session (every pytest-xdist
    worker reads the same): read it, do not change it."""
    from support import bench

    made = shared_directory(tmp_path_factory) / "small-sweep"
    out = made / "run"
    with held(made.with_suffix(".lock")):
        if not (made / "finished").exists():
            shutil.rmtree(made, ignore_errors=True)  # what a worker that failed to make it left
            done = bench(2, "run", "--sizes", "8", "--algorithms", "native,linear", "--iterations", "3", "--output",
                         str(out), "--quiet")
            assert done.returncode == 0, done.stderr
            (made / "finished").touch()
    return out


# Every figure kind needs native (the speed-ups' baseline) and a second series; the series table is as wide as the
# whole registry's with its two longest variants (locality_aware's and multileader's, 54 characters and more without
# a space), so a page that scrolls sideways still fails. The whole registry adds only panels of the same kinds.
PLOTTED_ALGORITHMS = "native,pairwise,bruck,locality_aware,multileader"


@dataclass(frozen=True)
class Plotted:
    """A run's record directory and what `bench plot RECORD` printed (None without matplotlib: not drawn)."""

    run: Path
    stdout: str | None


@pytest.fixture(scope="session")
def plotted_run(tmp_path_factory: pytest.TempPathFactory) -> Plotted:
    """A real 2-rank run of PLOTTED_ALGORITHMS at three sizes, plotted into its default place (RECORD/plots) where
    matplotlib is, made once for the session: test_plot checks its files, test_report_page opens its page."""
    from support import mpiexec, python

    made = shared_directory(tmp_path_factory) / "plotted-run"
    drawn = importlib.util.find_spec("matplotlib") is not None
    with held(made.with_suffix(".lock")):
        if not (made / "finished").exists():
            shutil.rmtree(made, ignore_errors=True)  # what a worker that failed to make it left
            done = mpiexec(2, "-m", "bench", "run", "--sizes", "8,1K,64K", "--iterations", "5", "--algorithms",
                           PLOTTED_ALGORITHMS, "--output", str(made / "results"), "--quiet", timeout=300)
            assert done.returncode == 0, done.stderr
            if drawn:
                done = python("-m", "bench", "plot", str(made / "results"), timeout=600)  # slow on a loaded machine
                assert done.returncode == 0, done.stderr
                (made / "plot.out").write_text(done.stdout)
            (made / "finished").touch()
    return Plotted(made / "results", (made / "plot.out").read_text() if drawn else None)


# The collective tests at more ranks than `mpirun -n 4` has, on real MPI, where a property needs p > 4: an odd count
# above 4 whose partners pair up unevenly (5) and two nodes of 4, a power of two past 4 (pairwise's xor schedule,
# Bine's 3 steps) (8); the C executor at every p to 9, as its tests promise. Only the schedules' shapes are new there,
# so the files run fewer dtypes, counts and forms above 4 (their `cases`, test_executor's `in_turn`), and only the tests
# that loop over subcommunicators of these sizes: the others run on the whole job, whose size is no shape of theirs
# (plan reuse, refusals, one-shot handles, test() advancing rounds: at 1 to 4 under mpirun). Each variant's schedule
# at 5 and 8 runs once, through start/test/wait (test_nonblocking, the same `cases`), not also blocking
# (test_algorithms' test_matches_mpi_alltoall): both run the same schedule, and the blocking entry is the executor's
# at every p to 9. Every shape from 5 to 12 is checked in process on the capture's stand-in MPI (test_algorithms,
# test_alltoallv, test_mesh), whose data moves.
ABOVE_FOUR = (("tests/test_executor.py", (5, 6, 7, 8, 9)),
              ("tests/test_algorithms.py::test_pairwise_xor_matches_at_powers_of_two_and_is_refused_elsewhere", (5, 8)),
              ("tests/test_nonblocking.py::test_start_test_wait_matches_mpi_alltoall_with_two_in_flight", (5, 8)),
              ("tests/test_nonblocking.py::test_alltoallv_start_test_wait_matches_mpi_alltoallv", (5, 8)))


@pytest.fixture(scope="session")
def above_four(tmp_path_factory: pytest.TempPathFactory):
    """The collective tests of ABOVE_FOUR's files at their sizes, in one nested pytest: its JUnit report (run once
    for the whole session, however many workers ask)."""
    from support import collective_tests

    out = shared_directory(tmp_path_factory) / "above-four"
    with held(out.with_suffix(".lock")):
        report = out / "collective.xml"
        if not report.exists():
            out.mkdir(exist_ok=True)
            collective_tests(ABOVE_FOUR, out)
        return report


def shared_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every pytest-xdist worker of this session shares (this session's own without workers)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def held(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created) between processes, for the block."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_together(item: pytest.Item) -> str | None:
    """The group a test goes to a worker with, if any: its tier of tiers.APART (one of them at a time is the rule
    anyway, and a worker waiting on another's tier lock would sit idle), else its file's tests that share a
    module-scoped fixture (a worker makes it once for the tests it runs: a plotted record, a built program)."""
    if tier := tiers.apart_tier(item):
        return tier
    fixtures = item._fixtureinfo.name2fixturedefs.values()  # type: ignore[attr-defined]
    return item.nodeid.split("::")[0] if any(defs[-1].scope == "module" for defs in fixtures) else None


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's load scheduling, but each group of run_together goes to one worker, and the costliest units of
    work go first (tiers.cost): the two workers then end on the short in-process tests, together."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # pytest-xdist ships no types

    class GroupsTogether(LoadScopeScheduling):
        workqueue: OrderedDict[str, dict[str, bool]]  # scope: {nodeid: done}, as LoadScopeScheduling keeps it

        def schedule(self) -> None:
            if self.collection is None:  # the workers listed the groups before their collections reached us
                listed = json.loads(Path(os.environ[GROUP_MAP]).read_text() or "{}")
                self.group_of, self.cost_of = listed.get("groups", {}), listed.get("costs", {})
                self.ordered = False
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.group_of.get(nodeid, nodeid)  # a scope of its own for a test of no group

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is whole now: the costliest units first, ties in collection order
                units = sorted(self.workqueue.items(), key=lambda unit: -sum(
                    self.cost_of.get(nodeid, tiers.QUICK_COST) for nodeid in unit[1]))
                self.workqueue = OrderedDict(units)
                self.ordered = True
            super()._assign_work_unit(node)

    return GroupsTogether(config, log)


@pytest.fixture(autouse=True)
def apart(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist, a test of a tier that shares a daemon, namespaces or both cores (tiers.APART) holds that
    tier's lock, so no other worker runs one of that tier beside it."""
    tier = tiers.apart_tier(request.node)
    if tier is None or not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with held(shared_directory(tmp_path_factory) / f"{tier}.lock"):
        yield


@pytest.fixture(autouse=True)
def registry_as_found(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the algorithms the process had before it: the plug-ins a test loads are gone after it
    (their files' modules too, so that loading one again registers it again), whichever test a worker runs next."""
    from a2a.algos.plugins import FILE_MODULES
    from a2a.algos.registry import REGISTRY

    monkeypatch.setattr(REGISTRY, "_algorithms", dict(REGISTRY.all()))  # built-ins found first, on the kept table
    loaded = {name for name in sys.modules if name.startswith(FILE_MODULES)}
    yield
    for name in [name for name in sys.modules if name.startswith(FILE_MODULES) and name not in loaded]:
        del sys.modules[name]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item):
    item.config.stash[tiers.CURRENT] = item  # setup, call and teardown: what the tier guard checks against
    yield
    del item.config.stash[tiers.CURRENT]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    comm = world()
    if comm.size == 1:
        yield
        return
    timer = threading.Timer(WATCHDOG_SECONDS, _abort_hung, (comm, item))
    timer.daemon = True
    timer.start()
    outcome = yield
    timer.cancel()
    error = outcome.excinfo
    mine = None if error is None else f"{error[0].__name__}: {error[1]}"
    failures = [(rank, text) for rank, text in enumerate(comm.allgather(mine)) if text]
    if failures and error is None:
        lines = "; ".join(f"rank {rank}: {text.splitlines()[0] if text else ''}" for rank, text in failures)
        outcome.force_exception(AssertionError(f"failed on other ranks: {lines}"))


def _abort_hung(comm, item: pytest.Item) -> None:
    capture = item.config.pluginmanager.getplugin("capturemanager")
    if capture:  # pytest holds file descriptors 1 and 2 during a test: the message would be lost
        capture.suspend_global_capture(in_=False)
    abort_job(comm, f"{item.nodeid} did not finish within {WATCHDOG_SECONDS:g} s; aborting the job", 3)


@pytest.fixture(autouse=True, scope="session")
def schedule_cache():
    """Simulations in the tests keep their schedules in a directory of this process, not in the user's cache
    (a plain temporary directory: under mpirun every rank would race on pytest's numbered ones)."""
    with tempfile.TemporaryDirectory(prefix="a2a-schedules-") as directory, pytest.MonkeyPatch.context() as patch:
        patch.setenv("A2A_SCHEDULE_CACHE", directory)
        yield


@pytest.fixture(scope="module")
def preload() -> str:
    """liba2a.so for this Python's MPI library, built once and kept (the deploy and learning tests preload it)."""
    from a2a.deploy.library import preload_library

    return str(preload_library())


@pytest.fixture(scope="module")
def check_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/programs/alltoall_check.c built: a C program that checks every element its MPI_Alltoall calls receive."""
    from support import built_program

    return built_program(tmp_path_factory, "alltoall_check")
