"""The emulated Gigabit cluster: made and removed whole, bytes on its links, stalls with TCP timeouts."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, mpiexec, python

from a2a import cluster
from a2a.errors import BadOption
from a2a.results import Recorder, Row, read_rows
from a2a.seed import seed_table, stall_summary


def netns_unavailable() -> str | None:
    """Why the emulated cluster cannot be made here (None if it can)."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (CI runs as root)"
    missing = [tool for tool in ("ip", "tc", "unshare") if not shutil.which(tool)]
    if missing:
        return f"needs {', '.join(missing)} (apt-get install iproute2 util-linux; see .ci/setup.d/cluster.sh)"
    if subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False).returncode:
        return "this machine does not allow network namespaces"
    if cluster.read_state() or cluster.namespaces():
        return "an emulated cluster is already up; `python -m bench cluster down` frees the a2a- names"
    return None


@pytest.fixture
def netns():
    """A machine where the cluster can be made; whatever a test leaves is taken down after it."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    try:
        yield
    finally:
        cluster.down()


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a fresh process."""
    return python("-m", "bench", *args, timeout=timeout)


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


def test_down_removes_what_a_crash_left(netns):
    cluster.sh("ip", "netns", "add", "a2a-sw")
    cluster.sh("ip", "netns", "add", "a2a-n0")  # a crashed up: namespaces, no state
    assert "leftover namespaces: a2a-n0, a2a-sw" in ok(bench("cluster", "status"))
    refused = bench("cluster", "up", "--nodes", "1")
    assert refused.returncode == 2 and "cluster down" in refused.stderr
    ok(bench("cluster", "down"))
    assert cluster.namespaces() == []

    cluster.write_state(cluster.State(cluster.Shape(1), "building", []))  # up killed mid-way
    cluster.sh("ip", "netns", "add", "a2a-sw")
    unfinished = bench("cluster", "run", "--", "run")
    assert unfinished.returncode == 2 and "never finished" in unfinished.stderr
    ok(bench("cluster", "down"))
    assert cluster.namespaces() == [] and not cluster.STATE_DIR.exists()


def test_bytes_cross_the_emulated_links(netns, tmp_path: Path):
    ok(bench("cluster", "up", "--nodes", "2", "--slots", "2", "--hostfiles", str(tmp_path / "h")))
    shape = cluster.read_state().shape
    before = {h: cluster.link_counters(h, "eth0") for h in shape.hosts}
    size, calls = 64 * 1024, 1 + 5  # warm-up + timed (the check's call is extra)
    ok(bench("cluster", "run", "--", "run", "--sizes", "64K", "--algorithms", "native", "--nprocs", "4",
             "--warmup", "1", "--iterations", "5", "--quiet", "--output", str(tmp_path / "r")))
    after = {h: cluster.link_counters(h, "eth0") for h in shape.hosts}
    # each of the 4 ranks sends a block to each of the 2 ranks on the other node, per call
    inter_node = 4 * 2 * size * calls
    for way in ("tx_bytes", "rx_bytes"):
        moved = sum(after[h][way] - before[h][way] for h in shape.hosts)
        assert moved >= inter_node, f"{way}: {moved} B crossed the emulated links, payload {inter_node} B"
    [row] = read_rows(tmp_path / "r")
    assert (row.nnodes, row.ppn, row.valid) == (2, 2, True)
    assert row.tcp_timeouts is not None


POINTS = ("--sizes", "256K,512K", "--algorithms", "native,linear", "--nprocs", "4",
          "--warmup", "1", "--iterations", "15", "--quiet")


def test_shallow_switch_queue_stalls_with_tcp_timeouts(netns, tmp_path: Path):
    ok(bench("cluster", "up", "--nodes", "4", "--slots", "1", "--queue", "32kb",
             "--hostfiles", str(tmp_path / "h")))
    shape = cluster.read_state().shape
    before = sum(cluster.node_tcp_ext(h)["TCPTimeouts"] for h in shape.hosts)
    ok(bench("cluster", "run", "--", "run", *POINTS, "--output", str(tmp_path / "emulated")))
    after = sum(cluster.node_tcp_ext(h)["TCPTimeouts"] for h in shape.hosts)
    emulated = read_rows(tmp_path / "emulated")
    assert any(r.stalls and r.tcp_timeouts for r in emulated), seed_table(emulated, "emulated")
    assert all(r.nnodes == 4 for r in emulated)
    # the points' counts are the nodes' own counters (read in each namespace), not the host's
    assert 0 < sum(r.tcp_timeouts for r in emulated) <= after - before
    cluster.down()

    ok(mpiexec(4, "-m", "bench", "run", *POINTS, "--output", str(tmp_path / "plain"), timeout=120))
    plain = read_rows(tmp_path / "plain")
    assert [r.stalls for r in plain] == [0] * 4, seed_table(plain, "one host")


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, message", [
    (("--nodes", "0"), "nodes=0; accepted: 1 to 200"),
    (("--nodes", "2", "--rate", "fast"), "rate 'fast' is not a rate"),
    (("--nodes", "2", "--rate", "1gbps!"), "is not a rate"),
    (("--nodes", "2", "--queue", "1x"), "queue '1x' is not a byte count"),
    (("--nodes", "2", "--queue", "100"), "queue '100' is out of range"),
    (("--nodes", "2", "--slots", "0"), "slots=0"),
    (("--nodes", "2", "--rto-min", "-1"), "rto-min=-1"),
])
def test_bad_shapes_are_refused(args: tuple[str, ...], message: str):
    done = bench("cluster", "up", *args)
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("error:") == 1


def test_not_root_is_refused():
    command = [sys.executable, "-m", "bench", "cluster", "up", "--nodes", "2"]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("needs setpriv (util-linux) to drop root")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "needs root" in done.stderr


def test_run_without_a_cluster_is_refused(netns):
    done = bench("cluster", "run", "--", "run", "--sizes", "8")
    assert done.returncode == 2
    assert "no emulated cluster is up; make one with `python -m bench cluster up --nodes N`" in done.stderr


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
    state = cluster.State(cluster.Shape(3, slots=2), "up", [])
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
    text = seed_table(seed_rows(), "native")
    lines = text.splitlines()
    assert lines[3] == "#CPUs     floats  average   std.dev.    min.      max.     TCP timeouts"
    assert lines[4] == "   8           1  0.000450  0.000050    0.000300  0.000600          0"
    assert lines[5] == "   8       16384  0.043252  0.067756    0.015191  0.219695 !        1"
    assert stall_summary(seed_rows()) == "1 of 2 sizes stalled (3 stalled iterations), 1 TCP timeouts"


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
