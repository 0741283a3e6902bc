"""node_aware and hierarchical on real (emulated) nodes: node groups come from the hosts, not --ppn."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cluster import HYDRA, bench, netns, ok  # noqa: F401 (netns is a fixture)

from a2a.record.results import read_rows

pytestmark = [pytest.mark.launches, pytest.mark.netns]  # jobs of its own, on the emulated cluster


@HYDRA
def test_node_aware_and_hierarchical_exchange_right_across_uneven_nodes(netns, tmp_path: Path):  # noqa: F811
    ok(bench("cluster", "up", "--nodes", "2", "--slots", "3", "--hostfiles", str(tmp_path / "h")))
    out = tmp_path / "run"
    # 5 ranks fill a2a-n0 with 3 and a2a-n1 with 2: unequal nodes, leaders 0 and 3; one size: the node groups come
    # from the hosts whatever the size (each point is one more round of 5 ranks polling their sockets)
    ok(bench("cluster", "run", "-n", "5", "--", "run", "--sizes", "4K", "--nprocs", "5", "--iterations", "3",
             "--algorithms", "native,node_aware,hierarchical,node_aware:placement=cyclic",
             "--allow-oversubscribed", "--quiet", "--output", str(out), timeout=300))
    rows = read_rows(out)
    assert {(r.algorithm, r.options, r.bytes_per_peer) for r in rows} == {
        (a, o, s) for a, o in [("native", "form=blocking"), ("node_aware", "executor=c;placement=block;ppn=0"),
                               ("node_aware", "executor=c;placement=cyclic;ppn=0"),
                               ("hierarchical", "executor=c;placement=block;ppn=0"),
                               ("control", "form=blocking;of=native;twin=1")]  # beside native, by default
        for s in (4096,)}
    assert all(r.valid and (r.nnodes, r.ppn) == (2, 3) for r in rows), [(r.algorithm, r.note) for r in rows]
    assert json.loads((out / "meta.json").read_text())["by_nprocs"]["5"]["nnodes"] == 2
