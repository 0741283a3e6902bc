"""executor=c: every algorithm whose schedule is exact data, run by the C executor, against the library's own exchange.

The `mpi`-marked tests run on every subcommunicator (p = 1 .. the job's size): plain pytest runs them at p = 1,
`mpirun -n 4 python -m pytest` at p = 1..4, and test_every_exact_algorithm_above_four_ranks at p = 5..9.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from support import ROOT, assert_collective_tests_passed, launch_command, sizes_to_test, subcommunicators

import a2a
from a2a.algos.plugins import load_plugin
from a2a.algos.registry import get
from a2a.execute.executor import PROGRESS, C, executor_library, library_path, parsed
from a2a.mpi import clean_launcher_env, mpi_tool
from a2a.schedules.program import ScheduleFileError, checksum, dumps, loads, read, write
from a2a.schedules.tracer import NotExact, traced

# the library's own, a choice among others, RMA (no messages to trace), and `control`, which plans as its `of` does
NOT_EXACT = ("native", "auto", "onesided", "control")
EXACT = [name for name in a2a.algorithms("alltoall") if "executor" in get(name).options]
DIRECT_V = ("linear", "pairwise", "throttled")  # alltoallv schedules that send each block straight to its place
DTYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "complex64", "complex128")
PLUGIN = ROOT / "tests" / "plugins" / "mirrored.py"


def test_every_alltoall_but_the_library_s_own_takes_the_executor():
    """Every built-in alltoall declares its schedule as data, but native, auto, onesided and control."""
    assert sorted(set(a2a.algorithms("alltoall")) - set(EXACT)) == sorted(NOT_EXACT)
    assert all(get(name).options["executor"].default == "c" for name in EXACT)


def filled(p: int, rank: int, count: int, dtype: str) -> np.ndarray:
    values = np.arange(p * count) + 1000 * rank
    return (values % 100 if dtype == "int8" else values * (1 + 1j if "complex" in dtype else 1)).astype(dtype)


def reference(comm, send: np.ndarray) -> np.ndarray:
    want = np.empty_like(send)
    comm.Alltoall(send, want)
    return want


def started_together(plans: list) -> None:
    """Start every plan, then test each in turn until all are complete: exchanges in flight at once."""
    for plan in plans:
        plan.start()
    pending = list(plans)
    while pending:
        pending = [plan for plan in pending if not plan.test()]
        time.sleep(1e-4)  # ranks may outnumber the cores: the peers these exchanges wait on get them sooner


FORMS = ("in flight", "in place", "python")  # the forms each algorithm also runs in, besides blocking
SIZES_ABOVE_FOUR = 5  # the nested job runs p = 5 .. 9


def in_turn(choices: tuple, p: int, i: int) -> tuple:
    """Every one of `choices` (at most five) for the i-th algorithm up to 4 ranks; above, where only the schedule's
    shape is new, each once across p = 5 to 9 (the nested job runs every p of them): at p, the one whose turn it is,
    or none."""
    if p <= 4:
        return choices
    turn = (i + p) % SIZES_ABOVE_FOUR
    return choices[turn:turn + 1]


@pytest.mark.mpi
def test_every_exact_algorithm_matches_mpi_alltoall_in_c(comm):
    """Per p and algorithm: an odd count blocking; then (in turn) started and tested beside a count-0 exchange in
    flight, MPI.IN_PLACE blocking and started, and Python's executor; dtypes from int8 to complex128 in turn: the C
    executor ran each, and each gives what MPI_Alltoall gives."""
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        for i, name in enumerate(EXACT):
            dtype, other = DTYPES[(i + p) % len(DTYPES)], DTYPES[(i + p + 3) % len(DTYPES)]
            send = filled(p, sub.rank, 3, dtype)
            want, forms = reference(sub, send), in_turn(FORMS, p, i)
            results, ran = forms_run(sub, name, send, filled(p, sub.rank, 0, other), forms)
            if ran != {"c"} or any(not np.array_equal(r, want) for r in results):
                wrong.append((p, name, dtype, forms, ran, [np.array_equal(r, want) for r in results]))
    assert not wrong, wrong


def forms_run(sub, name: str, send: np.ndarray, empty: np.ndarray, forms: tuple[str, ...]) -> tuple[list, set]:
    """What the algorithm received blocking and in each of `forms`, and the executors its C plans ran."""
    from mpi4py import MPI

    got = np.zeros_like(send)
    with a2a.get(name).plan(sub, send, got) as plan:
        plan()
        results, ran = [got.copy()], {plan.executor}
        if "in flight" in forms:
            nothing = np.zeros_like(empty)
            with a2a.get(name).init(sub, empty, nothing) as idle:
                got[:] = 0
                started_together([plan, idle])
                results.append(got.copy())
                ran.add(idle.executor)
    if "in place" in forms:
        inplace = send.copy()
        with a2a.get(name).plan(sub, MPI.IN_PLACE, inplace) as plan:
            plan()
            results.append(inplace.copy())
            inplace[:] = send
            plan.start()
            plan.wait()
            results.append(inplace.copy())
            ran.add(plan.executor)
    if "python" in forms:
        python = np.zeros_like(send)
        with a2a.get(name).plan(sub, send, python, executor="python") as plan:
            plan()
        results.append(python)
    return results, ran


def uneven(p: int, rng: np.random.Generator) -> np.ndarray:
    """A count matrix (row = sender) with zeros, and one row and column all zero when p > 2."""
    matrix = rng.integers(0, 4, (p, p)) * rng.integers(0, 2, (p, p))
    if p > 2:
        matrix[1, :] = matrix[:, 2] = 0
    return matrix


@pytest.mark.mpi
def test_direct_alltoallv_matches_mpi_alltoallv_in_c(comm):
    """The alltoallv schedules that send each block straight to its place, with random and zero counts, blocking and
    two in flight, in C; against comm.Alltoallv."""
    wrong = []
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        matrix = uneven(p, np.random.default_rng(p))
        sends, recvs = matrix[sub.rank], matrix[:, sub.rank]
        send = (np.arange(sends.sum()) + 100 * sub.rank).astype(np.float64)
        want = np.zeros(recvs.sum())
        sub.Alltoallv((send, sends), (want, recvs))
        for name in DIRECT_V:
            got, again = np.full_like(want, -1), np.full_like(want, -1)
            with a2a.get(name).plan_v(sub, send, sends, got, recvs) as plan, \
                    a2a.get(name).init_v(sub, send, sends, again, recvs) as other:
                plan()
                results = [got.copy()]
                got[:] = -1
                started_together([plan, other])
                results += [got, again]
                if {plan.executor, other.executor} != {"c"} or any(not np.array_equal(r, want) for r in results):
                    wrong.append((p, name, plan.executor, plan.note))
    assert not wrong, wrong


@pytest.mark.mpi
def test_an_algorithm_in_one_new_file_runs_in_c(comm):
    """A plug-in that declares its steps runs with executor=c (its schedule traced from its code), the executor's
    C unchanged: the library is the one its sources already gave."""
    kept = library_path()
    load_plugin(PLUGIN)
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        send = filled(p, sub.rank, 2, "float32")
        got = np.zeros_like(send)
        with a2a.get("mirrored").plan(sub, send, got, executor="c") as plan:
            plan()
            assert (plan.executor, plan.note) == ("c", "")
        assert np.array_equal(got, reference(sub, send))
    assert library_path() == kept


@pytest.mark.mpi
def test_a_started_exchange_completes_inside_unrelated_mpi_calls(comm):
    """Where MPI progresses the executor (MPICH's MPIX_Async_start): every exact algorithm, started at 8 B and 128 KiB
    per peer (above 4, each at one p in turn) and never tested, completes while each rank only probes another
    communicator (MPI_Iprobe finds nothing there): its state says so before any test(), and that first test() finds
    it complete and right."""
    if PROGRESS[executor_library(comm).a2ax_progress_mode()][0] != "mpi":
        pytest.skip("this MPI library offers no progress hook: test() and wait() post the executor's rounds here")
    wrong, deadline = [], time.monotonic() + 120  # a hook that never ran fails here; every plan's free() completes it
    for p, sub in subcommunicators(comm):
        if sub is None:
            continue
        other = sub.Dup()
        for i, name in enumerate(EXACT):
            for count in in_turn((2, 1 << 15), p, i):  # 8 B (eager), 128 KiB (rendezvous)
                send = filled(p, sub.rank, count, "float32")
                want, got = reference(sub, send), np.zeros_like(send)
                with a2a.get(name).init(sub, send, got) as plan:
                    plan.start()
                    executed = plan.progression._request  # the C executor's exchange: its state, read with no call
                    while not executed.peek() and time.monotonic() < deadline:
                        other.Iprobe()
                        time.sleep(1e-4)  # as in started_together
                    seen = executed.peek()
                    if not (plan.executor == "c" and seen and plan.test() and np.array_equal(got, want)):
                        wrong.append((p, name, count, plan.executor, seen))
        other.Free()
    assert not wrong, wrong


@pytest.mark.launches
def test_the_executor_s_own_thread_completes_what_no_call_polls(tmp_path: Path):
    """A2A_EXECUTOR_PROGRESS=thread under MPI_THREAD_MULTIPLE (mpi4py's default level): started exchanges of pairwise
    and bruck complete while the program makes no MPI call at all, with MPICH and Open MPI alike. A value that
    names no way is refused by bench run in one line, before MPI starts."""
    def run(asked: str, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(launch_command(2, "env", f"A2A_EXECUTOR_PROGRESS={asked}", mpi_tool("python"), *command),
                              env=clean_launcher_env(None), capture_output=True, text=True, timeout=300)

    done = run("thread", str(ROOT / "tests" / "programs" / "executor_unattended.py"), "pairwise", "bruck")
    assert done.returncode == 0 and done.stdout.split() == ["thread", "ok"], done.stdout + done.stderr
    done = run("sometimes", "-m", "bench", "run", "--sizes", "8", "--algorithms", "pairwise", "--output",
               str(tmp_path / "run"))
    said = [line for line in done.stderr.splitlines() if "A2A_EXECUTOR_PROGRESS" in line]
    assert done.returncode != 0 and said == ["error: A2A_EXECUTOR_PROGRESS=sometimes is not a way the executor "
                                             "progresses; accepted: test, thread, mpi"], done.stderr


@pytest.mark.nested
def test_every_exact_algorithm_above_four_ranks(above_four):
    """The collective tests above at p = 5 to 9, in the shared nested job (`mpirun -n 4` runs them at 1 to 4): so
    every p from 1 to 9, odd ones included, as the issue that brought the executor asks."""
    assert_collective_tests_passed(above_four, __file__)


@pytest.mark.mpi
def test_a_schedule_that_is_not_exact_data_runs_in_python_and_says_so(comm):
    """linear_sync with a window refills in the order requests complete (Waitany): no fixed schedule, so the tracer
    refuses it, and the plan runs its Python, its note saying why."""
    with pytest.raises(NotExact, match="Waitany"):
        traced(get("linear_sync"), (("window", 1),), 3, ((0,), (1,), (2,)), "alltoall")
    for p, sub in subcommunicators(comm):
        if sub is None or p < 3:
            continue
        send = filled(p, sub.rank, 2, "float64")
        got = np.zeros_like(send)
        with a2a.get("linear_sync").plan(sub, send, got, window=1) as plan:
            plan()
        assert np.array_equal(got, reference(sub, send))
        assert plan.executor == "python" and "executor=c unavailable" in plan.note and "Waitany" in plan.note


@pytest.mark.mpi
def test_a_plan_finds_its_nodes_once_per_group(comm, monkeypatch):
    """Each plan runs on a duplicate of its own: what the executor learns of the nodes is kept by the group, found
    in one collective pass the first time it is met, read again after (a duplicate's too); the same ranks in
    another order are another group."""
    from mpi4py import MPI

    from a2a.execute import executor

    passes, found = [], executor._node_facts

    def counted(c):
        passes.append(c.size)
        return found(c)

    monkeypatch.setattr(executor, "_node_facts", counted)
    kept = MPI.COMM_SELF.Get_attr(executor._node_facts_key())
    MPI.COMM_SELF.Set_attr(executor._node_facts_key(), {})  # none known yet
    try:
        for _p, sub in subcommunicators(comm):
            if sub is None:
                continue
            duplicate, reordered = sub.Dup(), sub.Split(0, -sub.rank)
            assert executor._per_node(sub)[1] == executor._per_node(duplicate)[1] == found(sub)[2]
            executor._per_node(reordered)
            duplicate.Free()
            reordered.Free()
    finally:
        MPI.COMM_SELF.Set_attr(executor._node_facts_key(), kept or {})
    assert passes == [n for p in sizes_to_test(comm.size) if comm.rank < p for n in ([p, p] if p > 1 else [p])]


def schedule_text(name: str = "bruck", p: int = 5) -> str:
    return dumps(traced(get(name), (("radix", 2),) if name == "bruck" else (), p,
                        tuple((r,) for r in range(p)), "alltoall"))


def resealed(body: str) -> str:
    """A schedule's body with a valid end line: what is wrong in it is its data, not its checksum."""
    return body + f"end {checksum(body.encode())}\n"


def out_of_bounds(text: str) -> str:
    body = text[:text.rindex("end ")]
    line = next(line for line in body.splitlines() if line.startswith("send "))
    peer, tag, count, *_ = line.split()[1:]
    return resealed(body.replace(line + "\n", f"send {peer} {tag} {count} 1 4 9" + " 0 0 1" * (int(count) - 1) + "\n",
                                 1))


def waiting_too_long(text: str) -> str:
    body = text[:text.rindex("end ")]
    line = next(line for line in body.splitlines() if line.startswith("round ") and line.split()[4] != "0")
    return resealed(body.replace(line + "\n", line.rsplit(" ", 1)[0] + " 99\n", 1))


BROKEN = {  # what is wrong -> (how the file is broken, what the one-line refusal names)
    "foreign": (lambda t: "P6 640 480 255\n" + t, "not an a2a schedule"),
    "another version": (lambda t: t.replace("a2a-schedule 1", "a2a-schedule 2", 1), "version 2"),
    "truncated": (lambda t: t[: len(t) // 2], "truncated"),
    "altered": (lambda t: t.replace("nprocs 5", "nprocs 6", 1), "checksum"),
    "a region outside its buffer": (out_of_bounds, "outside the recv buffer"),
    "a wait for what is not posted": (lambda t: waiting_too_long(t), "not yet posted"),
}


def test_a_schedule_file_round_trips(tmp_path: Path):
    text = schedule_text()
    write(loads(text), tmp_path / "bruck.a2a")
    assert (tmp_path / "bruck.a2a").read_text() == text and read(tmp_path / "bruck.a2a") == loads(text)


@pytest.mark.parametrize("what", BROKEN)
def test_a_broken_schedule_is_refused_in_one_line_by_python_and_c(what: str):
    """Python's reader and the executor's C parser refuse it, in one line naming what is wrong; C makes nothing."""
    from mpi4py import MPI

    breaking, named = BROKEN[what]
    text = breaking(schedule_text())
    assert text != schedule_text()
    with pytest.raises(ScheduleFileError) as refused:
        loads(text)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(a2a.errors.A2AError) as in_c:
        parsed(executor_library(MPI.COMM_SELF), text)
    said = str(in_c.value)
    assert "\n" not in said and (named in said or (what == "a region outside its buffer" and "outside buffer 1"
                                                   in said)), said


@pytest.mark.launches
def test_a_c_program_runs_a_schedule_file_without_python(tmp_path: Path):
    """A C program loads a schedule file with the executor's parser and runs it (blocking, then started and tested)
    correctly; given a corrupted file it prints one line and exits 1, nothing run."""
    program = tmp_path / "schedule_run"
    subprocess.run([mpi_tool("mpicc"), "-O2", "-Wall", "-Wextra", "-Werror", f"-I{C}", "-o", str(program),
                    str(ROOT / "tests" / "programs" / "schedule_run.c"), str(C / "executor.c")], check=True)
    good, bad = tmp_path / "bruck.a2a", tmp_path / "cut.a2a"
    good.write_text(schedule_text("bruck", 3))
    bad.write_text(good.read_text()[:-40])

    def run(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run(launch_command(3, str(program), str(path), "5"), env=clean_launcher_env(None),
                              capture_output=True, text=True, timeout=120)

    done = run(good)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    done = run(bad)
    assert done.returncode != 0 and done.stdout == "", done.stdout
    said = [line for line in done.stderr.splitlines() if "schedule file" in line]  # Open MPI's launcher adds its own
    assert len(said) == 1 and ("checksum" in said[0] or "truncated" in said[0]), done.stderr
