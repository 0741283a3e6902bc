"""liba2a under an MPI library it was not built for, or out of memory: one line of refusal and every call the
program's own library's, never a crash, a hang or a wrong answer; and `bench deploy --library --mpicc`, which builds
it for another library."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import ROOT, bench_here, debian_launch, debian_libraries, debian_tool, is_mpich, launch_command
from test_deploy import decision, written

from a2a.deploy.library import preload_library
from a2a.mpi import clean_launcher_env, mpi_tool

REFUSED = re.compile(r"^a2a: A2A_DEPLOY=\S+ refused: liba2a was built for (MPICH|Open MPI) (\S+); this program "
                     r"runs \1 (\S+); every call goes to the MPI library \(build liba2a for it: python -m bench deploy "
                     r"--library --mpicc PATH\)$", re.MULTILINE)


def debian_of_this_family() -> str:
    """Debian's package of the family of this Python's MPI library (its wheel is another version)."""
    return "MPICH" if is_mpich() else "Open MPI"


def runs_debians_own() -> bool:
    """Whether this Python's MPI library is a Debian package's (make test-debian's venvs), not a wheel's."""
    from mpi4py import MPI  # noqa: F401 (loads the library)

    return re.search(r" /usr/lib/\S*/libmpi(ch)?\.so", Path("/proc/self/maps").read_text()) is not None


@pytest.mark.launches
@pytest.mark.parametrize("library", debian_libraries())
def test_a_program_built_with_another_version_gets_one_line_and_its_own_library(tmp_path: Path, library: str):
    """liba2a built for this Python's MPI library (the MPICH 5 or Open MPI 5 wheel), preloaded into programs built with
    Debian's MPICH 4.0.2 or Open MPI 4.1.4, under a file that serves their MPI_Alltoall(v) and MPI_Ialltoall: one line
    on rank 0 says it is refused and why, nothing is served or recorded, every result is right and the job exits 0
    (before: a symbol lookup error in the wheel's UCX at load, exit 127, under Debian's MPICH)."""
    if library != debian_of_this_family():
        pytest.skip(f"this Python's MPI library is not of {library}'s family, and a liba2a of another family cannot "
                    "pass calls on (its handles are of another size): only the version is tried across libraries")
    if runs_debians_own():
        pytest.skip(f"this Python runs Debian's {library} itself: there is no other version to build liba2a for")
    p = 3
    path, _ = written(tmp_path, decision([(0, "pairwise")], "pairwise", [p]), [p])
    preload = preload_library()
    # Debian's Open MPI 4.1.4 predates MPI-4: no MPI_Alltoall_init for ialltoall_recv.c to call
    programs = [("alltoall_check.c", ["2", "300"])] + ([("ialltoall_recv.c", ["3", "3"])] if library == "MPICH" else [])
    for source, args in programs:
        program = tmp_path / Path(source).stem
        subprocess.run([debian_tool(library, "mpicc"), "-O2", "-o", str(program), str(ROOT / "tests" / "programs" /
                                                                                        source)],
                       check=True, capture_output=True)
        settings = [f"LD_PRELOAD={preload}", f"A2A_DEPLOY={path}", "A2A_DEPLOY_REPORT=1",
                    f"A2A_RECORD={tmp_path / 'record'}"]
        done = subprocess.run(debian_launch(library, p, "env", *settings, str(program), *args),
                              env=clean_launcher_env(None), capture_output=True, text=True, timeout=120)
        said = done.stdout + done.stderr
        assert done.returncode == 0 and done.stdout.split("\n")[0] == "ok", said
        refusals = REFUSED.findall(done.stderr)
        assert len(refusals) == 1 and refusals[0][0] == library and refusals[0][1] != refusals[0][2], said
        refused = REFUSED.search(done.stderr)
        assert refused and [line for line in done.stderr.splitlines() if line.startswith("a2a")] == [
            refused[0]], said  # no report: nothing ran but the library
        assert not (tmp_path / "record").exists(), said


@pytest.mark.parametrize("library", debian_libraries())
def test_bench_deploy_library_builds_for_the_mpicc_given(capsys, library: str):
    """`bench deploy --library --mpicc mpicc.mpich` (or .openmpi) prints the library built with that compiler, not
    this Python's."""
    code, out, err = bench_here(capsys, "deploy", "--library", "--mpicc", debian_tool(library, "mpicc"))
    assert code == 0 and out.strip() == str(preload_library(debian_tool(library, "mpicc"))), err
    assert Path(out.strip()).exists() and (runs_debians_own() or out.strip() != str(preload_library()))


def test_an_mpicc_that_is_not_one_is_refused(capsys, tmp_path: Path):
    """--mpicc that does not exist, or that does not say what it compiles with, is refused in one line naming it and
    what is accepted; --mpicc without --library is a usage error."""
    code, _, err = bench_here(capsys, "deploy", "--library", "--mpicc", str(tmp_path / "mpicc"))
    assert code == 2 and f"--mpicc {tmp_path / 'mpicc'}: No such file or directory; accepted: an MPI compiler " \
        "wrapper" in err, err
    code, _, err = bench_here(capsys, "deploy", "--library", "--mpicc", "/bin/true")
    assert code == 2 and "--mpicc /bin/true: `/bin/true -show` did not say what it compiles with" in err, err
    code, _, err = bench_here(capsys, "deploy", "--mpicc", "/bin/true")
    assert code == 2 and "--mpicc goes with --library" in err, err


# Preloaded after liba2a: the allocations made from liba2a.so fail after its first A2A_TEST_ALLOCATIONS (glibc's own
# allocator serves every other). liba2a's mapped segments are found once, on the first allocation, so that telling
# who allocates is a comparison of addresses: asking dladdr on every allocation cost each launch twice its CPU.
FAILING_ALLOCATOR = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
enum { SEGMENTS = 16 };
static long made, limit = -1;
static int scanned, segments;
static uintptr_t starts[SEGMENTS], ends[SEGMENTS];
static int note_segments(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "liba2a")) return 0;
    for (int i = 0; i < info->dlpi_phnum && segments < SEGMENTS; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            starts[segments] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            ends[segments] = starts[segments] + info->dlpi_phdr[i].p_memsz;
            segments++;
        }
    return 0;
}
static int fails(void *caller) {
    if (!scanned) {
        const char *asked = getenv("A2A_TEST_ALLOCATIONS");
        if (asked) limit = atol(asked), dl_iterate_phdr(note_segments, NULL);
        scanned = 1;
    }
    if (limit < 0) return 0;
    for (int i = 0; i < segments; i++)
        if ((uintptr_t)caller >= starts[i] && (uintptr_t)caller < ends[i]) return made++ >= limit;
    return 0;
}
void *malloc(size_t n) { return fails(__builtin_return_address(0)) ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t m) { return fails(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return fails(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n); }
"""


@pytest.mark.launches
def test_a_recording_out_of_memory_never_breaks_the_program(tmp_path: Path):
    """A2A_RECORD with liba2a's allocations failing from its first, then from each later one: every run's results
    right, exit 0, no hang, and what is recorded a part of the whole (a rank that lacks memory for a new alltoallv
    matrix, or for its row, makes every rank skip it: before, the others waited in an allreduce for it forever)."""
    allocator = tmp_path / "failing.so"
    (tmp_path / "failing.c").write_text(FAILING_ALLOCATOR)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(allocator), str(tmp_path / "failing.c")], check=True)
    program = tmp_path / "alltoall_check"
    source = ROOT / "tests" / "programs" / "alltoall_check.c"
    subprocess.run([mpi_tool("mpicc"), "-O2", "-o", str(program), str(source)], check=True, capture_output=True)

    def recorded(*failing: str) -> int:
        record = tmp_path / f"record{failing[0][-2:] if failing else ''}"
        settings = [f"LD_PRELOAD={preload_library()} {allocator}", f"A2A_RECORD={record}", *failing]
        done = subprocess.run(launch_command(3, "env", *settings, str(program), "2", "1000"),
                              env=clean_launcher_env(None), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "ok", f"{failing}: {done.stdout}{done.stderr}"
        return sum(len(path.read_text().splitlines()) for path in record.glob("record.*.jsonl"))

    whole = recorded()
    assert whole == 3  # two alltoall sizes, one alltoallv matrix
    parts = [recorded(f"A2A_TEST_ALLOCATIONS={n}") for n in range(0, 48, 2)]
    assert parts[0] == 0 and parts[-1] == whole and all(part <= whole for part in parts), parts
