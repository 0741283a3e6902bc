"""What the testbed knows of each MPI library, one profile each, and which profile an MPI_Get_library_version names.

A profile says how the library's version text names it, the tuning files `bench export` writes for it and what each
selects, the variables that tune its collectives from outside, what its non-blocking selection is called where it
has one, its progress hook and thread, and what its Fortran bindings call. liba2a (a2a/deploy/c/liba2a_parser.c)
tells the libraries apart by the same marks in the same order (a test holds the two together). Adding a library is
adding its profile here. Imports the standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TuningFile:
    """One of a library's tuning files, as `bench export --format FORMAT` writes it."""

    format: str
    suffix: str  # of the file that bench tune and bench run's closing lines name
    collectives: tuple[str, ...]  # whose algorithm selection it sets


@dataclass(frozen=True)
class Profile:
    """One MPI library as the testbed knows it."""

    name: str  # as algorithms' twins, deploy files (liba2a) and messages name it
    mark: str  # what its MPI_Get_library_version text holds
    files: tuple[TuningFile, ...] = ()  # the default first
    tuning_variables: tuple[str, ...] = ()  # prefixes of the variables that set its collective tuning from outside
    ialltoall_twins: str = ""  # what algorithms call its MPI_Ialltoall selection when they name their twins in it
    no_ialltoall: str = ""  # why no tuning file of its selects MPI_Ialltoall's algorithm
    tune_verifies: bool = False  # bench tune verifies its tables on it
    progress_hook: str = ""  # the entry point through which the C executor progresses inside the library
    progress_thread: tuple[tuple[str, str], ...] = ()  # the variables (name, value) that start its progress thread
    # What its Fortran bindings call: MPI_* (which a PMPI library in front intercepts), PMPI_* (a PMPI library must
    # define the Fortran entry points itself to see those calls), or '' (not known)
    fortran_calls: str = ""


OPEN_MPI = Profile(
    "Open MPI", "Open MPI",
    files=(TuningFile("ompi", "rules", ("alltoall", "alltoallv")), TuningFile("ompi-json", "json", ("alltoall",))),
    tuning_variables=("OMPI_MCA_coll",),
    no_ialltoall="its libnbc runs its linear Ialltoall always (ompi/mca/coll/libnbc/nbc_ialltoall.c) and has no MCA "
                 "parameter to choose another",
    tune_verifies=True, fortran_calls="PMPI_")
INTEL_MPI = Profile(
    "Intel MPI", "Intel",
    files=(TuningFile("intel", "env", ("alltoall",)),), tuning_variables=("I_MPI_ADJUST",),
    no_ialltoall="this export writes I_MPI_ADJUST_ALLTOALL only")
MPICH = Profile(
    "MPICH", "MPICH",
    files=(TuningFile("mpich", "json", ("alltoall", "alltoallv", "ialltoall")),),
    tuning_variables=("MPIR_CVAR_COLL", "MPIR_CVAR_ALLTOALL"), ialltoall_twins="MPICH Ialltoall", tune_verifies=True,
    progress_hook="MPIX_Async_start", progress_thread=(("MPIR_CVAR_ASYNC_PROGRESS", "1"),), fortran_calls="MPI_")
UNKNOWN = Profile("unknown", "")
PROFILES = (OPEN_MPI, INTEL_MPI, MPICH)  # in the order they are tried: Intel MPI derives from MPICH


def profile_of(version: str) -> Profile:
    """The profile of the library an MPI_Get_library_version text names; UNKNOWN for another library."""
    return next((profile for profile in PROFILES if profile.mark in version), UNKNOWN)


def tuning_file(fmt: str) -> tuple[Profile, TuningFile]:
    """The library that reads export format `fmt`, and its file; ValueError for a format no library reads."""
    for profile in PROFILES:
        for file in profile.files:
            if file.format == fmt:
                return profile, file
    raise ValueError(f"no MPI library reads format {fmt!r}")
