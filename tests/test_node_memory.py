"""The memory a node's ranks share: a switch with a host per rank (its own link, then the node's memory), the times
it gives, and the memory `bench simulate --calibrate` fits from linear at the most ranks per node."""
from __future__ import annotations

import json
import re

import pytest
from support import bench_here, needs_simgrid
from test_simulate import measured_linear, simulated

from a2a import fabric
from a2a.simulate import platforms, replay
from a2a.simulate.capture import capture_unit
from a2a.simulate.machine import Machine

LINK = platforms.Link.parse("10Gbps,1us")
MEMORY = platforms.NodeMemory(2e9, 2e9, "by hand")


def test_a_switch_whose_nodes_share_their_memory_has_a_host_per_rank():
    """6 ranks on 2 nodes: a host each; between ranks of a node a bypass route through the sender's link, the node's
    memory and the receiver's link (3 x 2 ordered pairs a node), to itself its link and the memory; between nodes
    the node's link. Without a memory, on one rank per node, or on a torus: SimGrid's cluster as before."""
    switch = fabric.parse("switch", nodes=2)
    xml = platforms.platform_xml(switch, LINK, 1e10, MEMORY, nprocs=6)
    assert platforms.hostnames(switch, 6, MEMORY) == ["n0r0", "n0r1", "n0r2", "n1r0", "n1r1", "n1r2"]
    assert len(re.findall(r'<host id="n\dr\d"', xml)) == 6 and "<cluster" not in xml
    assert xml.count("<bypassRoute") == 12
    assert ('<bypassRoute src="n1r2" dst="n1r0"><link_ctn id="a2a_rank_1_2"/><link_ctn id="a2a_memory_1"/>'
            '<link_ctn id="a2a_rank_1_0"/></bypassRoute>') in xml
    assert '<route src="n0r1" dst="n0r1"><link_ctn id="a2a_rank_0_1"/><link_ctn id="a2a_memory_0"/></route>' in xml
    assert '<host_link id="n1r1" up="a2a_link_1_UP" down="a2a_link_1_DOWN"/>' in xml
    assert 'id="a2a_memory_0" bandwidth="2000000Bps"' in xml  # 2 GB/s, stretched TIME_SCALE-fold
    plain = platforms.platform_xml(switch, LINK, 1e10, nprocs=6)
    assert "<cluster " in plain and 'loopback_bw="10000000Bps"' in plain and "bypassRoute" not in plain
    assert platforms.hostnames(switch, 6) == ["n0"] * 3 + ["n1"] * 3
    alone = fabric.parse("switch", nodes=6)
    assert platforms.platform_xml(alone, LINK, 1e10, MEMORY, nprocs=6) == platforms.platform_xml(alone, LINK, 1e10)
    torus = fabric.parse("torus:2x1")
    assert platforms.platform_xml(torus, LINK, 1e10, MEMORY, nprocs=6) == platforms.platform_xml(torus, LINK, 1e10)


def replayed_us(memory: platforms.NodeMemory, copy: float = 1e10) -> float:
    """linear at 1 MiB per peer, 4 ranks on one node, on an ideal network (no factors, no cross traffic)."""
    schedule = capture_unit("linear", {}, 4, "uint8", nodes=[[0, 1, 2, 3]]).scaled(1 << 20)
    job = replay.ReplayJob(schedule, fabric.parse("switch", nodes=1), LINK, copy, memory=memory)
    return job.start(platforms.NETWORKS["ideal"]).result().seconds * 1e6


@needs_simgrid
def test_each_rank_copies_its_messages_and_the_node_shares_its_memory():
    """4 ranks of linear, 1 MiB per peer, copy rate C: each rank copies its own block on its own host (1 MiB), then
    its link carries its 3 sends and 3 receives (6 MiB): 7 MiB / C. A memory of C / 2 carries all 12 MiB the node's
    ranks exchange: 1 MiB / C + 12 MiB / (C / 2). Without a memory (one host a node): the 4 own blocks copied on
    the node's one host, then every message at C of its own over SimGrid's loopback: 4 MiB / C + 1 MiB / C."""
    mib, copy = (1 << 20) / 1e10 * 1e6, 1e10
    assert replayed_us(platforms.NodeMemory()) == pytest.approx(5 * mib, rel=0.02)
    assert replayed_us(platforms.NodeMemory(platforms.UNBOUNDED, platforms.UNBOUNDED)) == \
        pytest.approx(7 * mib, rel=0.02)
    assert replayed_us(platforms.NodeMemory(copy / 2, copy / 2)) == pytest.approx(25 * mib, rel=0.02)


@needs_simgrid
def test_calibration_fits_the_memory_at_the_most_ranks_per_node(tmp_path, capsys):
    """linear measured at 2 and 8 ranks of one node, 1 MiB: the factor fitted at 2 and the memory at 8 give both
    measured times on later replays; meta.json names the memory and the point it came from. On a torus, where nodes
    are one host each, no memory is fitted, and the record says why."""
    record = measured_linear(tmp_path / "run", {2: 4.0, 4: 7.4, (2, 1 << 20): 1000.0, (8, 1 << 20): 8000.0})
    args = ("--platform", "switch", "--ppn", "8", "--nprocs", "2,8", "--sizes", "1M", "--algorithms", "linear")
    rows, out = simulated(tmp_path, capsys, *args, "--calibrate", str(record))
    assert [float(r["t_p50_us"]) for r in rows] == [pytest.approx(1000.0, rel=2e-3), pytest.approx(8000.0, rel=2e-3)]
    meta = json.loads((tmp_path / "sim" / "meta.json").read_text())
    memory = meta["node_memory"]
    own_copy = (1 << 20) / 5e9  # seconds: before the messages
    assert memory["bytes_per_second"] == pytest.approx(56 * (1 << 20) / (8000e-6 - own_copy), rel=0.1)  # its bytes
    assert memory["link_bytes_per_second"] == pytest.approx(memory["bytes_per_second"] / meta["bandwidth_factor"]
                                                            ["factor"])
    assert "linear at 8 ranks (1 node(s) of 8) and 1048576 B per peer took 8000.0 us" in memory["source"]
    assert f"share {memory['bytes_per_second'] / 1e9:.3g} GB/s of memory" in out
    assert Machine.of(meta).memory == platforms.NodeMemory.of(memory)
    code, _, err = bench_here(capsys, "simulate", "--platform", "torus:2x2", "--nprocs", "2", "--sizes", "1M",
                              "--algorithms", "linear", "--copy-bandwidth", "5e9", "--calibrate", str(record),
                              "--output", str(tmp_path / "torus"))
    assert code == 0, err
    torus = json.loads((tmp_path / "torus" / "meta.json").read_text())["node_memory"]
    assert torus["bytes_per_second"] == 0 and "modelled on a switch only" in torus["source"]
