"""One profile per MPI library: each recognises its library's real version texts, liba2a tells the libraries apart
as the profiles do, and the exports, the executor and the record read what the profiles say."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from decide_fixtures import minimal_table
from support import is_mpich, mpi_library

from a2a.analysis.export import mpich, ompi
from a2a.analysis.export.formats import formats
from a2a.errors import BadInput
from a2a.mpilib import INTEL_MPI, MPICH, OPEN_MPI, PROFILES, UNKNOWN, Profile, TuningFile, profile_of
from a2a.record.decision import Decision, as_decision

ROOT = Path(__file__).resolve().parent.parent

# MPI_Get_library_version as the libraries say it: the venv's MPICH wheel; Open MPI's of the tests' records and of
# Debian 12's package; Intel MPI's of the tests and of a 2021.8 install
VERSION_TEXTS = [
    ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\nMPICH ABI:          18:2:6\n"
     "MPICH Device:       ch4:ucx ofi\nMPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
     "MPICH CC:           cc\nMPICH CXX:          c++\nMPICH F77:          gfortran\nMPICH FC:           gfortran\n"
     "MPICH features:     threadcomm\nMPICH Custom Information:\thttps://pypi.org/p/mpich/5.0.2/\n", MPICH),
    ("Open MPI v5.0.5, package: Open MPI Distribution", OPEN_MPI),
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022", OPEN_MPI),
    ("Intel(R) MPI Library 2021.10 for Linux", INTEL_MPI),
    ("Intel(R) MPI Library 2021.8 for Linux* OS\n", INTEL_MPI),
    ("", UNKNOWN),
]


@pytest.mark.parametrize("text, profile", VERSION_TEXTS, ids=[f"{p.name}{i}" for i, (_, p) in enumerate(VERSION_TEXTS)])
def test_each_profile_recognises_its_librarys_version_text(text: str, profile):
    assert profile_of(text) is profile


def test_this_jobs_library_has_a_profile():
    assert profile_of(mpi_library()) in PROFILES, mpi_library()


def test_liba2a_tells_the_libraries_apart_as_the_profiles_do():
    """liba2a's family() (the name a deploy file must carry) tries the profiles' marks in their order, and names
    another library as UNKNOWN does; every family it names is a profile's: changing either side fails here."""
    source = "\n".join(p.read_text() for p in sorted((ROOT / "a2a" / "deploy" / "c").glob("liba2a_*.c")))
    body = re.search(r"\bfamily\(const char \*(\w+)\) \{\n(.*?)\n\}", source, re.S)
    assert body, "liba2a_*.c have no family(const char *version) to hold to the profiles"
    version, lines = body[1], body[2].strip().splitlines()
    tried = [re.fullmatch(rf'\s*if \(strstr\({version}, "([^"]+)"\)\) return "([^"]+)";', line) for line in lines[:-1]]
    fallback = re.fullmatch(r'\s*return "([^"]+)";', lines[-1])
    assert all(tried) and fallback, body[0]
    assert [match.groups() for match in tried if match] == [(p.mark, p.name) for p in PROFILES]
    assert fallback[1] == UNKNOWN.name
    named = set(re.findall(r'#define BUILT_FAMILY "([^"]+)"', source))  # the family it was built for
    assert named <= {p.name for p in (*PROFILES, UNKNOWN)}


def test_every_export_format_is_one_librarys_tuning_file():
    named = [file.format for profile in PROFILES for file in profile.files]
    assert sorted(named) == sorted(formats())


def decision_of(collective: str) -> Decision:
    """A decision table of one algorithm with twins everywhere, deciding `collective` (ialltoall: an overlap
    record's alltoall)."""
    document = minimal_table(4, [(0, "pairwise", "schedule=shift")])
    document["tables"][0].update(collective=collective.removeprefix("i"),
                                 **({"timing": "overlap"} if collective.startswith("i") else {}))
    return as_decision(document)


@pytest.mark.parametrize("profile, file", [(p, f) for p in PROFILES for f in p.files], ids=lambda x: x.format
                         if isinstance(x, TuningFile) else x.name)
def test_each_export_selects_the_collectives_its_profile_says(profile: Profile, file: TuningFile):
    """A table of a collective the profile's file selects makes a file of its own; any other is refused, saying why."""
    texts = []
    for collective in ("alltoall", "alltoallv", "ialltoall"):
        if collective not in file.collectives:
            with pytest.raises(BadInput, match=f"decides {collective}; this {profile.name} export covers") as refused:
                formats()[file.format](decision_of(collective))
            if collective.startswith("i"):
                assert profile.no_ialltoall in str(refused.value)
        elif file.format != "mpich" or is_mpich():  # MPICH's file extends the selection tree of MPICH's own libmpi
            texts.append(formats()[file.format](decision_of(collective)).text)
    assert len(set(texts)) == len(texts)


def test_what_exports_and_forced_algorithms_set_is_what_a_record_calls_its_librarys_tuning():
    """The variables of each tuning file and of each forced algorithm are its library's tuning variables, which a
    record's meta.json keeps and bench tune's baseline leaves out."""
    forced = {OPEN_MPI: ompi.forcing(("linear_sync", 2))[1],
              MPICH: {**mpich.forcing(("k_brucks", 4))[1], **mpich.forcing(("scattered", 8))[1]}}
    for profile in PROFILES:
        for file in profile.files:
            if file.format != "mpich" or is_mpich():
                variables = formats()[file.format](decision_of("alltoall")).environment("/x/tuned")
                assert variables and all(v.startswith(profile.tuning_variables) for v in variables), file
        assert all(v.startswith(profile.tuning_variables) for v in forced.get(profile, {}))


def test_the_executor_progresses_through_the_hook_each_profile_names():
    executor = (ROOT / "a2a" / "execute" / "c" / "executor.c").read_text()
    hooks = [p.progress_hook for p in PROFILES if p.progress_hook]
    assert hooks and all(f"{hook}(" in executor for hook in hooks)
