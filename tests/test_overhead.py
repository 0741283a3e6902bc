"""`bench overhead`: each of our variants is raced against the twin its library's exporter names."""
from __future__ import annotations

import pytest

from a2a.errors import HarnessError
from a2a.workflows.overhead import forced_twin, library_of, with_twins


def test_mpich_twins_are_forced_through_its_cvars():
    assert forced_twin("MPICH", "bruck_zero_copy:radix=3", 2) == (
        "MPICH k_brucks:k=3", {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "k_brucks", "MPIR_CVAR_ALLTOALL_BRUCKS_KVAL": "3"})
    assert forced_twin("MPICH", "bruck_zero_copy:radix=2", 2) == (
        "MPICH brucks", {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "brucks"})
    assert forced_twin("MPICH", "throttled:window=8", 16) == (
        "MPICH scattered", {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "scattered", "MPIR_CVAR_ALLTOALL_THROTTLE": "8"})


def test_open_mpi_linear_sync_is_coll_tuned_4_with_the_window_as_max_requests():
    assert forced_twin("Open MPI", "linear_sync:window=2", 4) == ("Open MPI linear_sync:reqs=2", {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_alltoall_algorithm": "4",
        "OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": "2"})


def test_every_default_variant_is_raced_against_a_forced_algorithm_not_the_default():
    for library in ("MPICH", "Open MPI"):
        raced = with_twins(library, 4)
        assert "pairwise" in raced and "native" not in raced and "bine" not in raced  # bine: no library has it
        for ours in raced:
            twin = forced_twin(library, ours, 4)
            assert twin, (library, ours)
            name, variables = twin
            forced = variables.get("MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM") or \
                variables["OMPI_MCA_coll_tuned_alltoall_algorithm"]
            assert name.startswith(library) and forced not in ("native", "auto", "0"), (library, ours, name)


def test_a_variant_without_a_twin_at_this_count_is_none():
    assert forced_twin("Open MPI", "throttled:window=2", 8) is None  # batches are not linear_sync


def test_the_library_is_told_by_its_tools(tmp_path):
    (tmp_path / "mpiexec").touch()
    with pytest.raises(HarnessError, match="found neither mpichversion nor ompi_info"):
        library_of(str(tmp_path / "mpiexec"))
    (tmp_path / "ompi_info").touch()
    assert library_of(str(tmp_path / "mpiexec")) == "Open MPI"
