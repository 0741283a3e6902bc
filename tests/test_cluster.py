"""The emulated Gigabit cluster: made and removed whole, bytes on its links, stalls with TCP timeouts."""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import ROOT, mpiexec, needs_mpich, python

from a2a import fabric
from a2a.emulate import cluster
from a2a.errors import BadOption
from a2a.record.mail_table import mail_table, stall_summary
from a2a.record.results import Recorder, Row, read_rows

LOCK = Path("/tmp/a2a-cluster.lock")  # one emulated cluster per machine: every user holds this
LOCK_WAIT_SECONDS = 900


# `bench cluster run` launches through MPICH's hydra (an ssh stand-in per namespace) and refuses another mpiexec
HYDRA = needs_mpich("the emulated cluster launches its ranks through MPICH's hydra mpiexec")


def netns_unavailable() -> str | None:
    """Why the emulated cluster cannot be made here (None if it can)."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (CI runs as root)"
    missing = [tool for tool in ("ip", "tc", "unshare") if not shutil.which(tool)]
    if missing:
        return f"needs {', '.join(missing)} (apt-get install iproute2 util-linux; see .ci/setup.d/cluster.sh)"
    if subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False).returncode:
        return "this machine does not allow network namespaces"
    return None


def lock_holders() -> set[int]:
    """Processes holding a flock on the cluster lock file (from /proc/locks)."""
    if not LOCK.exists():
        return set()
    inode = f":{os.stat(LOCK).st_ino}"
    fields = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
    return {int(f[4]) for f in fields if len(f) > 5 and f[1] == "FLOCK" and f[5].endswith(inode)}


def ancestors() -> set[int]:
    """This process and the processes that started it."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return found


@contextmanager
def cluster_lock() -> Iterator[None]:
    """Hold /tmp/a2a-cluster.lock, so that parallel runs take turns (unless our caller holds it)."""
    if lock_holders() & ancestors():  # e.g. `flock /tmp/a2a-cluster.lock pytest ...`
        yield
        return
    with open(LOCK, "a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip(f"{LOCK} was held by another user of the cluster for {LOCK_WAIT_SECONDS} s")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def netns():
    """A machine where the cluster can be made, ours until the test ends; what it leaves is taken down."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with cluster_lock():
        if cluster.read_state() or cluster.namespaces():
            pytest.skip("an emulated cluster is already up; `python -m bench cluster down` frees the a2a- names")
        try:
            yield
        finally:
            cluster.down()


def running_state() -> cluster.State:
    """The cluster `bench cluster up` recorded."""
    state = cluster.read_state()
    assert state is not None, "`bench cluster up` recorded no cluster"
    return state


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a fresh process; ranks on the cluster wait asleep (`cluster run` passes MPICH's
    MPIR_CVAR_ variables on) rather than spin on their TCP sockets in system time the other worker could use
    (docs/findings/test-suite-time.md, fifth pass)."""
    return python("-m", "bench", *args, timeout=timeout, asleep=True)


def ok(done: subprocess.CompletedProcess) -> str:
    """The output of a command that must have succeeded."""
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def root_links() -> set[str]:
    """Names of the links in this (the root) namespace."""
    return {line.split()[0].split("@")[0] for line in cluster.sh("ip", "-br", "link").splitlines()}


def eth0_identity(host: str) -> str:
    """A node's eth0 as `ip` shows it (index, MAC): it changes if the link is made again."""
    return cluster.sh("ip", "-n", host, "-o", "link", "show", "eth0")


# ---------------------------------------------------------------- with namespaces


@pytest.mark.netns
@pytest.mark.launches
@HYDRA
def test_up_run_down_leaves_nothing(netns, tmp_path: Path):
    links_before = root_links()
    hostfiles = tmp_path / "hostfiles"
    made = ok(bench("cluster", "up", "--nodes", "2", "--slots", "2", "--hostfiles", str(hostfiles)))
    assert "cluster up: 2 nodes x 2 slots, 1gbit links, switch queue 32kb" in made
    assert cluster.namespaces() == ["a2a-n0", "a2a-n1", "a2a-sw"]
    assert (hostfiles / "a2a-cluster.hosts").read_text() == "a2a-n0:2\na2a-n1:2\n"
    assert (hostfiles / "a2a-cluster.openmpi").read_text() == "a2a-n0 slots=2\na2a-n1 slots=2\n"
    identity = eth0_identity("a2a-n1")

    again = ok(bench("cluster", "up", "--nodes", "2", "--slots", "2", "--hostfiles", str(hostfiles)))
    assert "already up" in again and "nothing to do" in again
    assert eth0_identity("a2a-n1") == identity  # not rebuilt
    other = bench("cluster", "up", "--nodes", "3")
    assert other.returncode == 2 and "a different cluster is up" in other.stderr

    hosts = ("from mpi4py import MPI; names = MPI.COMM_WORLD.gather(MPI.Get_processor_name()); "
             "MPI.COMM_WORLD.rank or print(*names)")
    ran = ok(bench("cluster", "run", "--raw", "--", sys.executable, "-c", hosts))
    assert ran.split() == ["a2a-n0", "a2a-n0", "a2a-n1", "a2a-n1"]  # -n defaults to nodes x slots
    for host in ("a2a-n0", "a2a-n1", "a2a-sw"):
        assert cluster.sh("ip", "netns", "pids", host).split() == [], f"{host}: a process outlived run"

    stray = subprocess.Popen(["ip", "netns", "exec", "a2a-n1", "sleep", "600"])  # as if a run crashed
    removed = ok(bench("cluster", "down"))
    assert "namespace a2a-n0" in removed and "namespace a2a-sw" in removed
    assert stray.wait(timeout=10) != 0, "down left a process of the cluster running"
    assert cluster.namespaces() == []
    assert not cluster.STATE_DIR.exists() and not list(cluster.NETNS_ETC.glob("a2a-*"))
    assert not hostfiles.exists()
    assert root_links() == links_before
    assert "nothing to remove" in ok(bench("cluster", "down"))


@pytest.mark.netns
@pytest.mark.launches
def test_down_removes_what_a_crash_left(netns):
    cluster.sh("ip", "netns", "add", "a2a-sw")
    cluster.sh("ip", "netns", "add", "a2a-n0")  # a crashed up: namespaces, no state
    assert "leftover namespaces: a2a-n0, a2a-sw" in ok(bench("cluster", "status"))
    refused = bench("cluster", "up", "--nodes", "1")
    assert refused.returncode == 2 and "cluster down" in refused.stderr
    ok(bench("cluster", "down"))
    assert cluster.namespaces() == []

    cluster.write_state(cluster.State(cluster.ClusterSpec(1), "building", []))  # up killed mid-way
    cluster.sh("ip", "netns", "add", "a2a-sw")
    unfinished = bench("cluster", "run", "--", "run")
    assert unfinished.returncode == 2 and "never finished" in unfinished.stderr
    ok(bench("cluster", "down"))
    assert cluster.namespaces() == [] and not cluster.STATE_DIR.exists()


@pytest.mark.netns
@pytest.mark.launches
@HYDRA
def test_bytes_cross_the_emulated_links(netns, tmp_path: Path):
    ok(bench("cluster", "up", "--nodes", "2", "--slots", "2", "--hostfiles", str(tmp_path / "h")))
    shape = running_state().shape
    before = {h: cluster.link_counters(h, "eth0") for h in shape.hosts}
    size, calls = 64 * 1024, 2 * (1 + 1)  # 2 rounds (at most --iterations) of warm-up + timed; the check's is extra
    ok(bench("cluster", "run", "--", "run", "--sizes", "64K", "--algorithms", "native", "--nprocs", "4",
             "--warmup", "1", "--iterations", "2", "--no-control", "--quiet", "--output", str(tmp_path / "r")))
    after = {h: cluster.link_counters(h, "eth0") for h in shape.hosts}
    # each of the 4 ranks sends a block to each of the 2 ranks on the other node, per call
    inter_node = 4 * 2 * size * calls
    for way in ("tx_bytes", "rx_bytes"):
        moved = sum(after[h][way] - before[h][way] for h in shape.hosts)
        assert moved >= inter_node, f"{way}: {moved} B crossed the emulated links, payload {inter_node} B"
    [row] = read_rows(tmp_path / "r")
    assert (row.nnodes, row.ppn, row.valid) == (2, 2, True)
    assert row.tcp_timeouts is not None


POINTS = ("--sizes", "256K,512K", "--algorithms", "native,linear", "--no-control", "--nprocs", "4",
          "--warmup", "1", "--iterations", "15", "--quiet")


@pytest.mark.netns
@pytest.mark.launches
@HYDRA
def test_shallow_switch_queue_stalls_with_tcp_timeouts(netns, tmp_path: Path):
    # 8kb, not the default 32kb: a run this short must stall for sure (docs/cluster.md, "How often a short run stalls")
    ok(bench("cluster", "up", "--nodes", "4", "--slots", "1", "--queue", "8kb",
             "--hostfiles", str(tmp_path / "h")))
    shape = running_state().shape
    before = sum(cluster.node_tcp_ext(h)["TCPTimeouts"] for h in shape.hosts)
    ok(bench("cluster", "run", "--", "run", *POINTS, "--output", str(tmp_path / "emulated")))
    after = sum(cluster.node_tcp_ext(h)["TCPTimeouts"] for h in shape.hosts)
    emulated = read_rows(tmp_path / "emulated")
    assert any(r.stalls and r.tcp_timeouts for r in emulated), mail_table(emulated, "emulated")
    assert all(r.nnodes == 4 for r in emulated)
    # the counts are the nodes' own counters (read in each namespace), not the host's, counted per cell (a size's
    # algorithms interleave in rounds): every row of a cell carries the cell's count
    by_cell = {r.bytes_per_peer: r.tcp_timeouts for r in emulated}
    assert all(r.tcp_timeouts == by_cell[r.bytes_per_peer] for r in emulated)
    assert None not in by_cell.values()
    assert 0 < sum(count or 0 for count in by_cell.values()) <= after - before
    cluster.down()

    ok(mpiexec(4, "-m", "bench", "run", *POINTS, "--output", str(tmp_path / "plain"), timeout=120))
    plain = read_rows(tmp_path / "plain")
    # on one host nothing stalls, unless ranks outnumber cores: a rank off its core for 0.1 s stalls too
    crowded = any("oversubscribed" in r.note for r in plain)
    assert crowded or [r.stalls for r in plain] == [0] * 4, mail_table(plain, "one host")


# ---------------------------------------------------------------- topologies

IP_RECVTTL = 12  # Linux <netinet/in.h>; Python's socket module lacks the name
RECEIVER = f"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, {IP_RECVTTL}, 1)
s.bind(("0.0.0.0", 9999))
s.settimeout(20)
print("ready", flush=True)
data, ancillary, flags, sender = s.recvmsg(16, socket.CMSG_SPACE(4))
print(int.from_bytes(ancillary[0][2][:4], sys.byteorder))
"""
SENDER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 64)
s.sendto(b"x", (sys.argv[1], 9999))
"""


def arriving_ttl(a: int, b: int) -> int:
    """The TTL of a datagram node a sends to node b with TTL 64, as node b receives it."""
    receiver = subprocess.Popen(["ip", "netns", "exec", cluster.node_name(b), sys.executable, "-c", RECEIVER],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout and receiver.stdout.readline().strip() == "ready"
        cluster.sh("ip", "netns", "exec", cluster.node_name(a), sys.executable, "-c", SENDER,
                   cluster.node_address(b))
        return int(receiver.communicate(timeout=30)[0])
    finally:
        receiver.kill()


def walked_route(a: int, b: int, nodes: int) -> list[fabric.Link]:
    """The links from node a to node b, asking each router on the way (`ip route get`)."""
    path: list[fabric.Link] = []
    here = a
    for _ in range(nodes):
        route = cluster.sh("ip", "-n", cluster.router_name(here), "-o", "route", "get", cluster.node_address(b))
        found = re.search(r" dev (\S+)", route)
        assert found, route
        device = found[1]
        if device == "host":
            return path
        path.append((fabric.vertex(here), fabric.vertex(int(device[2:]))))
        here = int(device[2:])
    raise AssertionError(f"the route from {a} to {b} loops: {path}")


def link_bytes(shape: cluster.ClusterSpec) -> dict[str, int]:
    """Bytes sent on each directed link so far."""
    return {row["link"]: row["tx_bytes"] for row in cluster.link_report(shape)}


@pytest.mark.netns
@pytest.mark.launches
@HYDRA
def test_torus_routes_in_dimension_order_and_carries_a_sweep(netns, tmp_path: Path):
    made = ok(bench("cluster", "up", "--topology", "torus:2x4", "--slots", "1"))
    assert "8 nodes x 1 slot on torus:2x4 (8 nodes, 12 cables)" in made
    state = running_state()
    shape = state.shape
    # the generated hostfiles stay with the cluster's state, out of the tracked hostfiles/ folder
    assert all(name.startswith(str(cluster.STATE_DIR)) for name in state.hostfiles)
    assert not list((ROOT / "hostfiles").glob("a2a-cluster.*"))
    torus = fabric.parse("torus:2x4")
    for a in range(8):
        for b in range(8):
            assert walked_route(a, b, 8) == torus.route(a, b), f"{a} -> {b}"
    # each router on the way lowers the TTL: the source's, the forwarders', the destination's
    for a, b in ((0, 4), (0, 6), (5, 3)):
        assert 64 - arriving_ttl(a, b) == torus.hops(a, b) + 1, f"{a} -> {b}"

    before = link_bytes(shape)
    size, calls = 64 * 1024, 2 * (1 + 1) + 1  # 2 rounds (at most --iterations) of warm-up + timed, the check's call
    # one point: the bound below is pairwise's at 64 KiB, which other points only add to; each costs 8 ranks' polling
    ok(bench("cluster", "run", "--", "run", "--sizes", "64K", "--algorithms", "pairwise", "--no-control",
             "--nprocs", "8", "--warmup", "1", "--iterations", "2", "--quiet", "--output", str(tmp_path / "r"),
             timeout=300))
    after = link_bytes(shape)
    rows = read_rows(tmp_path / "r")
    assert len(rows) == 1 and all(r.valid and r.nnodes == 8 and r.topology == "torus:2x4" for r in rows)
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["topology"] == "torus:2x4"
    # pairwise sends each block straight to its owner: every link carries at least the blocks
    # whose dimension-order route crosses it (the other points and headers only add to it)
    expected = fabric.link_loads(torus, [(a, b, size * calls) for a in range(8) for b in range(8)])
    for (u, v), load in expected.items():
        moved = after[f"{u} -> {v}"] - before[f"{u} -> {v}"]
        assert moved >= load, f"{u} -> {v}: {moved} B sent, its routes carry {load:.0f} B of pairwise blocks"
    status = ok(bench("cluster", "status"))
    assert "n0 -> n4" in status and "a2a-r0:to4" in status and "drops" in status


@pytest.mark.netns
@pytest.mark.launches
@HYDRA
def test_ring_and_fattree_connect_every_node(netns):
    ok(bench("cluster", "up", "--topology", "ring", "--nodes", "4", "--slots", "1"))
    ring = fabric.parse("ring", 4)
    for a in range(4):
        for b in range(4):
            assert walked_route(a, b, 4) == ring.route(a, b), f"{a} -> {b}"
    assert 64 - arriving_ttl(0, 2) == 3  # routers 0, 1 and 2
    hosts = ("from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; a = np.full(4 * 4096, c.rank); "
             "b = np.empty_like(a); c.Alltoall(a, b); names = c.gather(MPI.Get_processor_name()); "
             "assert (b.reshape(4, -1) == np.arange(4)[:, None]).all(); c.rank or print(*names)")
    assert ok(bench("cluster", "run", "--raw", "--", sys.executable, "-c", hosts)).split() == \
        ["a2a-n0", "a2a-n1", "a2a-n2", "a2a-n3"]
    ok(bench("cluster", "down"))

    ok(bench("cluster", "up", "--topology", "fattree:2x2,oversub=2", "--slots", "1", "--rate", "100mbit"))
    shape = running_state().shape
    assert shape.namespaces == ["a2a-n0", "a2a-n1", "a2a-n2", "a2a-n3", "a2a-sw"]
    rates = {row["link"]: row["rate"] for row in cluster.link_report(shape)}
    assert rates["leaf0 -> spine"] == "100mbit" and rates["n3 -> leaf1"] == "100mbit"  # 2 nodes x rate / 2
    assert arriving_ttl(0, 3) == 64  # bridged: no router on the way
    before = link_bytes(shape)
    assert ok(bench("cluster", "run", "--raw", "--", sys.executable, "-c", hosts)).split() == \
        ["a2a-n0", "a2a-n1", "a2a-n2", "a2a-n3"]
    after = link_bytes(shape)
    crossing = 2 * 2 * 4096 * 8  # nodes 0 and 1 each send a 32 KiB block to nodes 2 and 3
    assert after["leaf0 -> spine"] - before["leaf0 -> spine"] >= crossing
    assert after["spine -> leaf1"] - before["spine -> leaf1"] >= crossing


@pytest.mark.netns
@pytest.mark.launches
def test_delay_without_netem_is_refused_and_leaves_nothing(netns):
    done = bench("cluster", "up", "--topology", "ring", "--nodes", "3", "--delay", "1ms")
    if done.returncode == 0:
        pytest.skip("this kernel has netem: --delay is applied (the refusal cannot be checked)")
    assert done.returncode == 2 and "--delay needs the netem qdisc" in done.stderr
    assert done.stderr.count("error:") == 1
    assert cluster.namespaces() == [] and not cluster.STATE_DIR.exists()


# ---------------------------------------------------------------- bad input


@pytest.mark.launches
@pytest.mark.parametrize("args, message", [
    (("--nodes", "0"), "nodes=0; accepted: 1 to 200"),
    (("--nodes", "2", "--rate", "fast"), "rate 'fast' is not a rate"),
    (("--nodes", "2", "--rate", "1gbps!"), "is not a rate"),
    (("--nodes", "2", "--queue", "1x"), "queue '1x' is not a byte count"),
    (("--nodes", "2", "--queue", "100"), "queue '100' is out of range"),
    (("--nodes", "2", "--slots", "0"), "slots=0"),
    (("--nodes", "2", "--rto-min", "-1"), "rto-min=-1"),
    (("--topology", "mesh:2"), "topology 'mesh:2' is unknown; accepted: switch, ring, torus:AxB[xC...], "
                               "fattree:LEAVESxNODES[,oversub=R]"),
    (("--topology", "ring"), "topology 'ring' needs a node count (--nodes N)"),
    (("--topology", "torus:2x4", "--nodes", "6"), "torus:2x4 has 8 nodes but --nodes is 6"),
    (("--topology", "torus:2x2x2"), "the emulated cluster builds rings and 2-D tori only"),
    (("--topology", "dragonfly:1x1x2x2"), "the emulated cluster builds switch, ring, torus:AxB and fattree"),
    (("--topology", "fattree:2x4,oversub=-1"), "accepted: fattree:LEAVESxNODES[,oversub=R]"),
    (("--nodes", "2", "--delay", "5"), "delay '5' has no unit"),
    (("--nodes", "2", "--delay", "soon"), "delay 'soon' is not a delay"),
])
def test_bad_shapes_are_refused(args: tuple[str, ...], message: str):
    done = bench("cluster", "up", *args)
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("error:") == 1


@pytest.mark.launches
def test_not_root_is_refused():
    command = [sys.executable, "-m", "bench", "cluster", "up", "--nodes", "2"]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("needs setpriv (util-linux) to drop root")
        if not all(folder.stat().st_mode & 0o001 for folder in (ROOT, *ROOT.parents)):
            pytest.skip(f"user nobody cannot reach this checkout ({ROOT}: a folder on its path is private)")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "needs root" in done.stderr


@pytest.mark.netns
@pytest.mark.launches
def test_run_without_a_cluster_is_refused(netns):
    done = bench("cluster", "run", "--", "run", "--sizes", "8")
    assert done.returncode == 2
    assert "no emulated cluster is up; make one with `python -m bench cluster up --nodes N" in done.stderr


@pytest.mark.launches
def test_seed_repro_rejects_unknown_fixes():
    done = bench("seed-repro", "--fixes", "pray")
    assert done.returncode == 2 and "accepted: throttled, rto-min" in done.stderr


# ---------------------------------------------------------------- no namespaces needed


def test_rates_and_sizes_parse_like_tc():
    assert cluster.parse_rate("1gbit") == 10**9
    assert cluster.parse_rate("100Mbit") == 10**8
    assert cluster.parse_rate("125mbps") == 10**9
    assert cluster.show_rate(10**9) == "1gbit" and cluster.show_rate(1500 * 10**6) == "1500mbit"
    assert cluster.parse_queue("32kb") == 32768 and cluster.parse_queue("1m") == 1 << 20
    assert cluster.show_size(32768) == "32kb" and cluster.show_size(3000) == "3000"
    with pytest.raises(BadOption, match="accepted: 8kbit to 100gbit"):
        cluster.parse_rate("1tbit")


def test_run_command_forces_tcp_inside_node_zero():
    state = cluster.State(cluster.ClusterSpec(3, slots=2), "up", [])
    command = cluster.run_command(state, ["prog"], mpiexec="/x/mpiexec")
    assert command[:4] == ["ip", "netns", "exec", "a2a-n0"]
    text = " ".join(command)
    assert "-launcher ssh -launcher-exec /run/a2a-cluster/launch" in text
    assert "-n 6 " in text and "-genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0" in text
    assert command[-1] == "prog"


def seed_rows() -> list[Row]:
    quick = Row(8, 4, 2, "native", "", "float32", 1, 4, 24, 1, t_min_us=300.0, t_mean_us=450.0,
                t_std_us=50.0, t_max_us=600.0, valid=True, tcp_timeouts=0)
    stalled = Row(8, 4, 2, "native", "", "float32", 16384, 65536, 24, 1, t_min_us=15191.2,
                  t_mean_us=43251.8, t_std_us=67756.4, t_max_us=219695.0, stalls=3, valid=True,
                  tcp_timeouts=1)
    return [stalled, quick]


def test_seed_table_has_the_seed_shape():
    text = mail_table(seed_rows(), "native")
    lines = text.splitlines()
    assert lines[3] == "#CPUs     floats  average   std.dev.    min.      max.     TCP timeouts"
    assert lines[4] == "   8           1  0.000450  0.000050    0.000300  0.000600          0"
    assert lines[5] == "   8       16384  0.043252  0.067756    0.015191  0.219695 !        1"
    assert stall_summary(seed_rows()) == "1 of 2 sizes stalled (3 stalled iterations), 1 TCP timeouts"


@pytest.mark.launches
def test_seed_repro_show_prints_an_earlier_run(tmp_path: Path):
    recorder = Recorder(tmp_path / "seed")
    for row in seed_rows():
        recorder.add(row, [])
    recorder.close()
    (tmp_path / "seed-repro.json").write_text(
        '{"experiments": [{"name": "seed", "title": "4 nodes x 2 slots", "algorithms": "native"},'
        ' {"name": "rto-min-5ms", "title": "rto 5", "algorithms": "native"}]}')
    shown = ok(bench("seed-repro", "--show", str(tmp_path)))
    assert "native, 4 nodes x 2 slots:" in shown and "0.219695 !" in shown
    assert "rto-min-5ms: no results" in shown
