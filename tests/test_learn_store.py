"""A store many jobs share (A2A_LEARN_DIR): each job adds its own evidence file at MPI_Finalize and reads every job's
at MPI_Init; jobs finishing at once lose nothing; evidence of another MPI library or process count is kept apart;
many files are compacted; a folder that cannot be used is said in one line."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import bench_here, built_program, launch_command

from a2a.deploy.file import Deployment, Learned, this_library
from a2a.deploy.learn import learning
from a2a.deploy.store import Evidence, evidence_file, library_key, read_store
from a2a.mpi import clean_launcher_env, library_version

JOBS, CALLS, INTS = 8, 8, 64  # concurrent jobs, all-to-alls each (of 64 ints per peer: the 256-511 B class)
CONTROLS = "control,control,control"
FASTER = " live:-0.69,-0.69,-0.69" * 3  # three rounds at half the library's time, per candidate: nothing paces
OTHERS = ("Open_MPI/1.10.7", "MPICH/3.2.1")  # libraries no test runs


@pytest.fixture(scope="module")
def is_like(tmp_path_factory) -> Path:
    return built_program(tmp_path_factory, "is_like")


def learn_file(tmp_path: Path, collective: str = "alltoall") -> Path:
    """Learn lines of a collective for 2 and 4 ranks whose three candidates are the library's own under other
    names."""
    made = learning(["control"], [2, 4], 0, 1, -1, this_library(), collective)
    made.learning = [(c, p, layout, low, high, (-1,) * 3) for c, p, layout, low, high, _ in made.learning]
    path = tmp_path / f"learn-{collective}.a2a"
    path.write_text(made.text())
    return path


def evidence(library: str, calls: int, rounds: int, nprocs: int = 2, collective: str = "alltoall",
             low: int = 256) -> str:
    """An evidence line of a class (256-511 B) of 2 ranks on one node: `rounds` at half the library's time."""
    times, ratios = ",".join(["1e-05"] * rounds), ",".join(["-0.69"] * rounds)
    return (f"evidence {library} {CONTROLS} {collective} {nprocs} {','.join(['0'] * nprocs)} {low} {2 * low - 1} "
            f"exploring 0 {calls} {calls} 0 0 live:{times}" + f" live:{ratios}" * 3)


def plant(folder: Path, job: str, *lines: str) -> None:
    (folder / f"{job}.a2a-evidence").write_text(evidence_file(f"job {job}\n" + "".join(f"{line}\n" for line in lines)))


def started(n: int, preload: str, program: Path, folder: Path, deploy: Path, out: Path,
            *arguments: str) -> subprocess.Popen:
    """A job of n ranks under liba2a with the store, begun (not waited for): the program with these arguments, by
    default CALLS checked all-to-alls of INTS ints per peer."""
    settings = [f"{k}={v}" for k, v in {"LD_PRELOAD": preload, "A2A_DEPLOY": str(deploy), "A2A_LEARN_DIR": str(folder),
                                        "A2A_LEARN_OUT": str(out), "A2A_LEARN_CAP": "1",
                                        "A2A_DEPLOY_REPORT": "1"}.items()]
    return subprocess.Popen(launch_command(n, "env", *settings, str(program),
                                           *(arguments or [str(INTS)] * (CALLS // 2))),
                            env=clean_launcher_env(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(job: subprocess.Popen) -> str:
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0 and (out.strip() == "ok" or out.strip().endswith("check ok")), out + err
    return err


def own_lines(folder: Path, planted: set[str]) -> dict[str, list[Evidence]]:
    """The jobs' own evidence in the store, by job (the planted ones left out)."""
    return {job: [Evidence.parse(line) for line in lines] for job, lines in read_store(folder)[1].items()
            if job not in planted}


@pytest.mark.launches
def test_jobs_finishing_at_once_lose_nothing_and_other_libraries_and_counts_are_kept_apart(
        tmp_path: Path, preload: str, check_program: Path, capsys):
    """A store with 3 rounds of this library and 30 of two others (their calls 1000 each). 8 jobs of 2 ranks started
    at once, each 8 calls (3 warm-ups, a round, a round begun): every job's file is in the store with its own round
    and calls only, and no job read the other libraries' evidence (its learned file's calls: the store's of this
    library and its own, never 1000 more). A job of 4 ranks then reads none of the 2-rank evidence, and the 2-rank
    classes none of its. `bench deploy --show DIR` merges them per class (9 jobs: the 3 planted rounds and theirs)
    and compacts the store."""
    folder, deploy = tmp_path / "store", learn_file(tmp_path)
    folder.mkdir()
    ours = library_key(library_version())
    plant(folder, "planted", evidence(ours, 24, 3))
    plant(folder, "elsewhere", *(evidence(other, 1000, 30) for other in OTHERS))
    jobs = [started(2, preload, check_program, folder, deploy, tmp_path / f"out{i}.a2a") for i in range(JOBS)]
    for job in jobs:
        finished(job)
    found = own_lines(folder, {"planted", "elsewhere"})
    assert len(found) == JOBS, found
    rounds = 0
    for (line,) in found.values():
        k = line.learned
        assert (line.library, k.nprocs, k.calls, k.explored) == (ours, 2, CALLS, CALLS), line
        # a round of 4 arms; 2 of 3 or 3 of 2 where a job that ended before this one began had its evidence drop
        # candidates (jobs that do not overlap: Open MPI's start-up on 2 cores)
        assert 1 <= len(k.library) <= 3 and all(len(values) == len(k.library) for live, values in k.ratios if live)
        rounds += len(k.library)
    for i in range(JOBS):
        (learned,) = map(Learned.parse, Deployment.read(tmp_path / f"out{i}.a2a").learned)
        assert 24 + CALLS <= learned.calls <= 24 + JOBS * CALLS and learned.state == "exploring", learned
    report = finished(started(4, preload, check_program, folder, deploy, tmp_path / "out4.a2a"))
    four = re.search(r"learn alltoall on 4 ranks, 256-511 B: (.*)", report)
    assert four and "evidence before it" not in four[1], report
    assert [Learned.parse(k).calls for k in Deployment.read(tmp_path / "out4.a2a").learned] == [CALLS]
    code, out, _ = bench_here(capsys, "deploy", "--show", str(folder))
    classes = out.splitlines()[1:]
    assert code == 0 and f"the evidence of {JOBS + 3} jobs from {JOBS + 3} files, compacted into one" in out, out
    assert len(classes) == 4 and len(list(folder.iterdir())) == 1, out
    mine = next(c for c in classes if c.startswith(f"  {ours}, alltoall on 2 ranks"))
    assert f"{JOBS + 1} jobs, {24 + JOBS * CALLS} calls" in mine and f"; {3 + rounds} rounds" in mine, mine
    assert sum(f"{ours}, alltoall on 4 ranks" in c and "1 job, 8 calls" in c for c in classes) == 1, out


@pytest.mark.launches
def test_a_store_of_many_files_is_compacted_and_nothing_lost(tmp_path: Path, preload: str, check_program: Path):
    """40 job files in the store: the next job reads them all, writes one compact file of their sections and removes
    them; the store then holds the compact file and that job's, 41 jobs' evidence."""
    folder, deploy = tmp_path / "store", learn_file(tmp_path)
    folder.mkdir()
    for i in range(40):
        plant(folder, f"job{i}", evidence(library_key(library_version()), 8, 1))
    report = finished(started(2, preload, check_program, folder, deploy, tmp_path / "out.a2a"))
    assert "jobs read 40 (files 40, compacted into one); lines of" in report and "merged 40 (classes 1)" in report, \
        report
    files, jobs = read_store(folder)
    assert len(files) == 2 and sum(f.name.startswith("compact-") for f in files) == 1, files
    assert len(jobs) == 41 and all(f"job{i}" in jobs for i in range(40)), sorted(jobs)


@pytest.mark.launches
@pytest.mark.parametrize("kind", ["a file", "missing"])
def test_a_store_that_cannot_be_used_is_said_once_and_the_program_runs_on(tmp_path: Path, preload: str,
                                                                           check_program: Path, kind: str):
    """A2A_LEARN_DIR naming a file, or a folder that is not there: one line on rank 0 says so, the program runs and
    verifies, and the learned file is still written."""
    deploy = learn_file(tmp_path)
    folder = deploy if kind == "a file" else tmp_path / "missing" / "store"
    report = finished(started(2, preload, check_program, folder, deploy, tmp_path / "out.a2a"))
    said = [line for line in report.splitlines() if line.startswith("a2a: A2A_LEARN_DIR")]
    why = "not a folder" if kind == "a file" else "No such file or directory"
    assert said == [f"a2a: A2A_LEARN_DIR={folder} cannot be used ({why}); learning runs on without the store"], report
    assert Deployment.read(tmp_path / "out.a2a").learned


@pytest.mark.launches
def test_alltoallv_classes_are_stored_and_kept_apart_from_alltoalls(tmp_path: Path, preload: str, check_program: Path,
                                                                    is_like: Path, capsys):
    """A store holding 5 rounds of the 8192-16383 B alltoallv class (candidates priced 0.5x: nothing paces). Two
    IS-like jobs of 12 iterations, one after the other: each adds a file of its own alltoallv rounds (2: completed in
    the block the run ends inside) and 12 calls; each starts from the store's evidence and its report says so. A job
    learning MPI_Alltoall at 8192 B a peer (the same candidates, ranks, layout and size class) reads none of it; `bench
    deploy --show` shows the alltoallv class (by its largest block to one peer) merged from 3 jobs, 9 rounds."""
    folder = tmp_path / "store"
    folder.mkdir()
    ours = library_key(library_version())
    plant(folder, "planted", evidence(ours, 40, 5, collective="alltoallv", low=8192))
    for i in range(2):
        report = finished(started(2, preload, is_like, folder, learn_file(tmp_path, "alltoallv"),
                                  tmp_path / f"out{i}.a2a", "--iterations", "12", "--seed", str(i + 1)))
        assert re.search(r"learn alltoallv on 2 ranks, 8192-16383 B: 12 calls, 12 exploring, 0 revisiting the library "
                         r"\(this run; the store's evidence before it: A2A_LEARN_DIR\)", report), report
    found = own_lines(folder, {"planted"})
    assert len(found) == 2, found
    for (line,) in found.values():
        k = line.learned
        assert (k.collective, k.low, k.calls, len(k.library), [len(v) for _, v in k.ratios]) == \
            ("alltoallv", 8192, 12, 2, [2, 2, 2]), line
    report = finished(started(2, preload, check_program, folder, learn_file(tmp_path), tmp_path / "out.a2a",
                              *["2048"] * (CALLS // 2)))
    alltoall = re.search(r"learn alltoall on 2 ranks, 8192-16383 B: (.*)", report)
    assert alltoall and "evidence before it" not in alltoall[1], report
    assert [Learned.parse(k).calls for k in Deployment.read(tmp_path / "out.a2a").learned] == [CALLS]
    code, out, _ = bench_here(capsys, "deploy", "--show", str(folder))
    shown = [c for c in out.splitlines() if f"{ours}, alltoallv on 2 ranks (nodes 0,0), largest block to one peer "
             "8192..16383 B" in c]
    assert code == 0 and len(shown) == 1 and "3 jobs, 64 calls" in shown[0] and "; 9 rounds" in shown[0], out
