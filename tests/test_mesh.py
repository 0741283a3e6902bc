"""Meshes and replica groups: membership, concurrent groups, bad shapes, and a sweep over 1D and 2D groups."""
from __future__ import annotations

import json

import numpy as np
import pytest
from support import assert_refused_before_measuring, assert_refused_here, mpiexec

import a2a
from a2a.algos.registry import candidates
from a2a.errors import BadOption
from a2a.record.results import read_rows
from a2a.simulate.capture import capture
from a2a.sweep.mesh import Layout, group_comm, layouts, parse_groups, parse_mesh

MEMBERS = {
    ("2x2x2", "x"): [[0, 4], [1, 5], [2, 6], [3, 7]],
    ("2x2x2", "y"): [[0, 2], [1, 3], [4, 6], [5, 7]],
    ("2x2x2", "z"): [[0, 1], [2, 3], [4, 5], [6, 7]],
    ("2x2x2", "x,y"): [[0, 2, 4, 6], [1, 3, 5, 7]],
    ("2x2x2", "y,z"): [[0, 1, 2, 3], [4, 5, 6, 7]],
    ("2x2x2", "x,z"): [[0, 1, 4, 5], [2, 3, 6, 7]],
    ("2x2x2", "x,y,z"): [[0, 1, 2, 3, 4, 5, 6, 7]],
    ("2x4", "x"): [[0, 4], [1, 5], [2, 6], [3, 7]],
    ("2x4", "y"): [[0, 1, 2, 3], [4, 5, 6, 7]],
    ("2x4", "x,y"): [[0, 1, 2, 3, 4, 5, 6, 7]],
    ("2x4", "1x4"): [[0, 1, 2, 3], [4, 5, 6, 7]],
    ("2x4", "2x1"): [[0, 4], [1, 5], [2, 6], [3, 7]],
}


@pytest.mark.parametrize("mesh,groups", list(MEMBERS))
def test_group_membership_by_hand(mesh, groups):
    layout = Layout(parse_mesh(mesh), parse_groups(groups, parse_mesh(mesh)))
    assert layout.groups() == MEMBERS[(mesh, groups)]
    assert layout.ngroups * layout.group_size == 8


def test_strategy_and_axis_names_agree():
    assert parse_groups("1x1x8", (2, 2, 8)) == parse_groups("z", (2, 2, 8)) == (False, False, True)
    assert Layout((2, 2, 8), (False, True, True)).strategy == "1x2x8"


@pytest.mark.parametrize("mesh", ["2x0", "axb", "2x", "", "2,4"])
def test_bad_meshes(mesh):
    with pytest.raises(BadOption, match="accepted: sizes >= 1 joined by x"):
        parse_mesh(mesh)


@pytest.mark.parametrize("groups,message", [
    ("w", "accepted: axis names among x, y, z"), ("z,z", "axis names"), ("1x1x3", "do not fit mesh 2x2x2"),
    ("2x2", "do not fit mesh 2x2x2"),
])
def test_bad_groups(groups, message):
    with pytest.raises(BadOption, match=message):
        parse_groups(groups, (2, 2, 2))


def meshes_for(size: int) -> list[str]:
    return {8: ["2x2x2", "2x4"], 4: ["2x2", "4"], 2: ["2"], 1: ["1"]}.get(size, [str(size)])


def every_layout(size: int) -> list[Layout]:
    names = "xyz"
    chosen = []
    for mesh in meshes_for(size):
        dims = len(parse_mesh(mesh))
        choices = [",".join(names[i] for i in range(dims) if mask >> i & 1) for mask in range(1, 2 ** dims)]
        chosen += layouts([mesh], choices)
    return chosen


@pytest.mark.mpi
def test_cart_sub_groups_are_the_documented_ones(comm):
    for layout in every_layout(comm.size):
        group = group_comm(comm, layout)
        members = sorted(group.allgather(comm.rank))
        group.Free()
        assert members in layout.groups(), (layout, members)


@pytest.mark.mpi
@pytest.mark.parametrize("name", candidates("alltoall"))
def test_concurrent_groups_give_correct_data(comm, name):
    for layout in every_layout(comm.size):
        group = group_comm(comm, layout)
        send = np.arange(group.size * 5, dtype=np.int32) + 1000 * comm.rank
        want, got = np.empty_like(send), np.zeros_like(send)
        group.Alltoall(send, want)
        a2a.alltoall(group, send, got, name)
        group.Free()
        assert np.array_equal(got, want), (name, layout)


@pytest.mark.parametrize("name", sorted(set(candidates("alltoall")) - {"onesided"}))  # the stand-in has no RMA windows
def test_groups_on_eight_stand_in_ranks(name):
    """The two tests above on 8 ranks, in process (the capture's stand-in MPI, whose data really moves): every layout
    of 2x2x2 and 2x4 gives each rank its documented group, and every algorithm exchanges right in concurrent groups
    of 2 and 4 (`mpirun -n 4` runs the same on real MPI at 4 ranks and fewer)."""
    for layout in every_layout(8):
        members: dict[int, list[int]] = {}

        def grouped(world, layout=layout, members=members):
            group = group_comm(world, layout)
            members[world.rank] = sorted(group.allgather(world.rank))
            return group

        capture(name, {}, 8, 5, "int32", group=grouped)  # raises on a wrong result
        assert sorted(map(tuple, members.values())) == sorted(tuple(g) for g in layout.groups() for _ in g), layout


@pytest.mark.launches
def test_one_sweep_over_1d_and_2d_groups_of_the_same_four_ranks(tmp_path):
    """A 2x2 mesh on 4 ranks (8 ranks cost twice the start-up on 2 cores): its 1D groups (2 of 2) and its 2D group (1
    of 4) differ in size, count and bus bandwidth factor, and y's members tell the axes apart (x's are [[0, 2], [1, 3]];
    every layout's members on 8 ranks are checked in process above)."""
    out = tmp_path / "run"
    done = mpiexec(4, "-m", "bench", "run", "--mesh", "2x2", "--groups", "y", "--groups", "x,y",
                   "--algorithms", "native,pairwise", "--no-control", "--sizes", "8,1K", "--iterations", "3",
                   "--output", str(out), "--format", "tpu", "--allow-oversubscribed", timeout=300,
                   asleep=True)  # 4 ranks on 2 cores: waiting ranks sleep (relations of columns are checked, not times)
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert {(r.mesh, r.groups, r.group_size, r.ngroups) for r in rows} == {("2x2", "1x2", 2, 2), ("2x2", "2x2", 4, 1)}
    assert len(rows) == 8 and all(r.valid and r.nprocs == 4 for r in rows)
    for r in rows:  # nccl-tests' bandwidths of one group's all-to-all
        assert r.group_size is not None
        assert r.algbw_GBps == pytest.approx(r.bytes_per_peer * r.group_size / (r.t_p50_us * 1e-6) / 1e9, rel=1e-4)
        assert r.busbw_GBps == pytest.approx(r.algbw_GBps * (r.group_size - 1) / r.group_size, rel=1e-4)
    groups = json.loads((out / "meta.json").read_text())["by_nprocs"]["4"]["replica_groups"]
    assert {"mesh": "2x2", "groups": "1x2", "members": [[0, 1], [2, 3]]} in groups
    header = done.stdout.split("4 ranks\n", 1)[1].splitlines()[0].split("\t")
    assert header[:7] == ["iteration", "op_type", "rank", "mesh_shape", "op_dimension", "sharding_strategy",
                          "transferred_data (GB)"]
    assert "step_time_ms_p99" in header and "achieved_bw (GB/s)_p50" in header


@pytest.mark.launches
@pytest.mark.parametrize("args,message", [
    (["--mesh", "2x4"], "mesh 2x4 holds 8 ranks, more than the 2 of this job"),
    (["--mesh", "2", "--nprocs", "1"], "mesh 2 holds 2 ranks, not a process count of this sweep (1; the world has 2)"),
])
def test_bad_mesh_options_exit_2(tmp_path, args, message):
    """Refusals that need the job's size: launched on 2 ranks, which also shows a refusal is said once, not per rank."""
    assert_refused_before_measuring([*args, "--sizes", "8"], message, tmp_path / "r")


@pytest.mark.parametrize("args,message", [
    (["--mesh", "2x0"], "mesh '2x0'; accepted"),
    (["--groups", "z"], "--groups needs --mesh"),
    (["--mesh", "2", "--groups", "y"], "groups 'y' for mesh 2; accepted: axis names among x"),
])
def test_bad_mesh_shapes_exit_2(capsys, tmp_path, args, message):
    """Refusals of the options alone, whatever the job's size: in this process (the launched ones above show a
    refusal is said by one rank)."""
    assert_refused_here(capsys, [*args, "--sizes", "8"], message, tmp_path / "r")
