"""An emulated Ethernet cluster on this machine: a network namespace per node, wired as a topology.

Each node namespace `a2a-nK` has one veth `eth0` (address 10.213.0.K+1/24, no route
anywhere else); what is behind it depends on the topology (a2a/fabric.py parses it):

- switch: `eth0`'s peer `pK` is a port of bridge `br0` in the switch namespace `a2a-sw`;
- fattree: the ports are on leaf bridges `leafI` in `a2a-sw`, each joined to bridge
  `spine` by a veth `upI` / `dnI` whose rate is the leaf's nodes' total over the oversubscription;
- ring, torus: `eth0`'s peer `host` is in the node's router namespace `a2a-rK`, which
  forwards (ip_forward=1) over one veth `toJ` per neighbour J (a /30 link subnet each) by
  static per-destination routes in dimension order, and answers ARP for the other nodes.

A `tbf` qdisc on the egress of every link gives its rate and queue: a switch port's or a
router port's buffer is `--queue` (where incast drops happen), a node's own `eth0` toward a
switch gets the host-sized `--nic-queue`. MPICH's hydra reaches the nodes through a
launcher script standing in for ssh. Everything is named with the prefix `a2a-` and
recorded in a state file, so that `down` removes it all, even after a crash.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from tabulate import tabulate

from a2a import fabric
from a2a.errors import BadOption, ClusterError
from a2a.mpi import TOPOLOGY_ENV, clean_launcher_env, mpi_tool
from a2a.netstat import tcp_ext
from a2a.units import human_bytes, parse_size

STATE_DIR = Path("/run/a2a-cluster")
NETNS_ETC = Path("/etc/netns")
SWITCH = "a2a-sw"
BRIDGE = "br0"
NODE_DEVICE = "eth0"
SUBNET = "10.213.0"
LINK_NET = "10.214"
OURS = re.compile(r"^a2a-(sw|n\d+|r\d+)$")
MAX_NODES = 200
BURST_BYTES = 16 * 1024
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
              "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9}


def parse_rate(text: str) -> int:
    """Bits per second from a tc-style rate such as 1gbit, 100mbit or 125mbps."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", str(text).lower())
    if not match or match[2] not in RATE_UNITS:
        raise BadOption(f"rate {text!r} is not a rate; accepted: a number with a unit among "
                        f"{', '.join(RATE_UNITS)} (e.g. 1gbit, 100mbit)")
    bits = round(float(match[1]) * RATE_UNITS[match[2]])
    if not 8000 <= bits <= 100 * 10**9:
        raise BadOption(f"rate {text!r} is out of range; accepted: 8kbit to 100gbit")
    return bits


def parse_queue(text: str, what: str = "queue") -> int:
    """Bytes of a queue from a size such as 32kb, 1mb or 65536 (k = 1024)."""
    size = parse_size(text, what)
    if not 2048 <= size <= 1024**3:
        raise BadOption(f"{what} {text!r} is out of range; accepted: 2kb (more than one "
                        "1500-byte frame) to 1gb")
    return size


def show_rate(bits: int) -> str:
    """The shortest exact tc spelling of a rate."""
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits % RATE_UNITS[unit] == 0:
            return f"{bits // RATE_UNITS[unit]}{unit}"
    return f"{bits}bit"


def show_size(size: int) -> str:
    """A size as tc spells it: 32kb, 1mb, or plain bytes."""
    text = human_bytes(size)
    return text.lower() + "b" if text[-1].isalpha() else text


@dataclass(frozen=True)
class ClusterSpec:
    """What an emulated cluster is: its nodes, ranks per node, topology and links."""

    nodes: int
    slots: int = 2
    rate_bps: int = 10**9
    queue_bytes: int = 32 * 1024
    nic_queue_bytes: int = 1024 * 1024
    rto_min_ms: int = 0  # 0: the kernel's default (200 ms)
    topology: str = "switch"  # a fabric spec, as fabric.parse spells it
    delay_us: int = 0  # per-hop delay; needs the netem qdisc

    def __post_init__(self) -> None:
        check_nodes(self.nodes)
        if not 1 <= self.slots <= 256:
            raise BadOption(f"slots={self.slots}; accepted: 1 to 256 ranks per node")
        if not 0 <= self.rto_min_ms <= 10000:
            raise BadOption(f"rto-min={self.rto_min_ms} ms; accepted: 1 to 10000 (or 0 for "
                            "the kernel's default)")
        if not 0 <= self.delay_us <= 10**7:
            raise BadOption(f"delay={self.delay_us} us; accepted: 0 to 10 s")
        net = self.fabric
        if isinstance(net, fabric.Torus) and len(net.dims) > 2:
            raise BadOption(f"topology {net.spec}: the emulated cluster builds rings and 2-D tori "
                            "only (torus:AxB); more dimensions are for the simulator")
        if not isinstance(net, (fabric.Switch, fabric.Torus, fabric.FatTree)):
            raise BadOption(f"topology {net.spec}: the emulated cluster builds switch, ring, torus:AxB "
                            "and fattree:LEAVESxNODES[,oversub=R]; the others are for the simulator")
        if net.spec != self.topology:
            raise BadOption(f"topology {self.topology!r} is not in its canonical spelling {net.spec!r}")

    @classmethod
    def parse(cls, nodes: int | None, slots: int = 2, rate: str = "1gbit", queue: str = "32kb",
              nic_queue: str = "1mb", rto_min: int = 0, topology: str = "switch",
              delay: str = "0") -> ClusterSpec:
        """A shape from command-line spellings; raise BadOption naming what is accepted."""
        if nodes is not None:
            check_nodes(nodes)
        net = fabric.parse(topology, nodes)
        return cls(net.nodes, slots, parse_rate(rate), parse_queue(queue, "queue"),
                   parse_queue(nic_queue, "nic-queue"), rto_min, net.spec, parse_delay(delay))

    @property
    def fabric(self) -> fabric.Fabric:
        """The topology's nodes, links and routes."""
        return fabric.parse(self.topology, self.nodes)

    @property
    def direct(self) -> bool:
        """Whether nodes forward for each other (ring, torus) rather than hang off switches."""
        return isinstance(self.fabric, fabric.Torus)

    def describe(self) -> str:
        """One line: nodes x slots, topology, rate, queues, rto_min, delay."""
        rto = f"rto_min {self.rto_min_ms} ms" if self.rto_min_ms else "default rto_min (200 ms)"
        slots = f"{self.slots} slot" + ("s" if self.slots > 1 else "")
        where = "" if self.topology == "switch" else f" on {self.fabric.describe()}"
        queues = (f"router port queue {show_size(self.queue_bytes)}" if self.direct else
                  f"switch queue {show_size(self.queue_bytes)} per port, "
                  f"NIC queue {show_size(self.nic_queue_bytes)}")
        delay = f", {self.delay_us} us per hop" if self.delay_us else ""
        return f"{self.nodes} nodes x {slots}{where}, {show_rate(self.rate_bps)} links, {queues}, {rto}{delay}"

    @property
    def hosts(self) -> list[str]:
        """Node (namespace and host) names."""
        return [node_name(k) for k in range(self.nodes)]

    @property
    def namespaces(self) -> list[str]:
        """Every namespace this shape is made of: nodes, then routers or the switch."""
        return self.hosts + ([router_name(k) for k in range(self.nodes)] if self.direct else [SWITCH])


def check_nodes(nodes: int) -> None:
    """Refuse a node count the emulated cluster cannot make."""
    if not 1 <= nodes <= MAX_NODES:
        raise BadOption(f"nodes={nodes}; accepted: 1 to {MAX_NODES}")


def parse_delay(text: str) -> int:
    """Microseconds from a delay such as 0, 50us, 1ms or 0.5ms."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*", str(text).lower())
    if not match:
        raise BadOption(f"delay {text!r} is not a delay; accepted: a number with us, ms or s "
                        "(e.g. 50us, 1ms; 0 for none)")
    if match[2] is None and float(match[1]) != 0:
        raise BadOption(f"delay {text!r} has no unit; accepted: a number with us, ms or s (e.g. 50us)")
    return round(float(match[1]) * {"us": 1, "ms": 1000, "s": 10**6}[match[2] or "us"])


def node_name(k: int) -> str:
    """Namespace and host name of node k."""
    return f"a2a-n{k}"


def node_address(k: int) -> str:
    """IPv4 address of node k's eth0."""
    return f"{SUBNET}.{k + 1}"


def router_name(k: int) -> str:
    """Namespace of node k's router (ring and torus only)."""
    return f"a2a-r{k}"


def cable_addresses(index: int) -> tuple[str, str]:
    """The two ends' addresses of the index-th router-to-router cable (a /30 each)."""
    third, fourth = divmod(4 * index, 256)
    return f"{LINK_NET}.{third}.{fourth + 1}", f"{LINK_NET}.{third}.{fourth + 2}"


# ---------------------------------------------------------------- commands


def require_root() -> None:
    """Refuse clearly unless this process may create namespaces."""
    if os.geteuid() != 0:
        raise ClusterError("the emulated cluster needs root (it creates network namespaces, "
                           "veth links and tc qdiscs); run it as root, e.g. with sudo")
    missing = [tool for tool in ("ip", "tc", "unshare") if not shutil.which(tool)]
    if missing:
        raise ClusterError(f"the emulated cluster needs {', '.join(missing)} on PATH "
                           "(Debian: apt-get install iproute2 util-linux)")


def sh(*argv: str, check: bool = True) -> str:
    """Run one command; return its output, or raise ClusterError with its message."""
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    """Our namespaces that exist now (any a2a-sw / a2a-nK), nodes in order."""
    names = [line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()]
    ours = [name for name in names if OURS.match(name)]
    return sorted(ours, key=lambda n: ("nrs".index(n[4]), int(n[5:]) if n != SWITCH else 0))


# ---------------------------------------------------------------- state


@dataclass
class State:
    """What `up` made: the shape and the files outside the namespaces."""

    shape: ClusterSpec
    status: str  # "building" until up finished, then "up"
    hostfiles: list[str]

    @property
    def launcher(self) -> Path:
        """The ssh stand-in that hydra calls (`-launcher-exec`)."""
        return STATE_DIR / "launch"

    @property
    def run_hostfile(self) -> Path:
        """The MPICH hostfile that `run` uses (a private copy of the one under hostfiles/)."""
        return STATE_DIR / "hosts"


def read_state() -> State | None:
    """The recorded cluster, or None if there is none."""
    path = STATE_DIR / "state.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return State(ClusterSpec(**data["shape"]), data["status"], list(data["hostfiles"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is damaged ({exc}); run `python -m bench cluster down`") from exc


def write_state(state: State) -> None:
    """Record the cluster before and after building it."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    data = {"shape": asdict(state.shape), "status": state.status, "hostfiles": state.hostfiles}
    (STATE_DIR / "state.json").write_text(json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------- up / down


def up(shape: ClusterSpec, hostfile_dir: Path | None = None) -> tuple[State, bool]:
    """Make the cluster (or find it already made); return its state and whether it was made now.

    The hostfiles go to `hostfile_dir`, by default beside the cluster's state (never into the
    project's tracked hostfiles/ folder), and `down` removes them.
    """
    require_root()
    current = read_state()
    if current is not None:
        if current.shape != shape:
            raise ClusterError(f"a different cluster is up ({current.shape.describe()}); "
                               "run `python -m bench cluster down` first")
        if current.status == "up" and not problems(current.shape):
            return current, False
        down()  # same shape, but half-built or damaged: build it again
    elif namespaces():
        raise ClusterError(f"namespaces {', '.join(namespaces())} exist but no state records "
                           "them; run `python -m bench cluster down` to remove them")
    hostfile_dir = (hostfile_dir or STATE_DIR / "hostfiles").resolve()
    state = State(shape, "building", [str(hostfile_dir / "a2a-cluster.hosts"),
                                      str(hostfile_dir / "a2a-cluster.openmpi")])
    write_state(state)
    try:
        build(shape)
        write_files(state, hostfile_dir)
    except BaseException:
        down()
        raise
    state.status = "up"
    write_state(state)
    return state, True


@dataclass(frozen=True)
class Port:
    """Where one direction of a link leaves: a device in a namespace, with its tbf."""

    link: fabric.Link
    namespace: str
    device: str
    rate_bps: int
    queue_bytes: int


def ports(shape: ClusterSpec) -> list[Port]:
    """The egress of every directed link of the shape's fabric, in the fabric's link order."""
    net = shape.fabric
    out = []
    for link in net.links():
        a, b = (fabric.node_of(v) for v in link)
        rate = round(shape.rate_bps * net.capacity(link))
        if a is not None and b is not None:  # router to router
            out.append(Port(link, router_name(a), f"to{b}", rate, shape.queue_bytes))
        elif a is not None:  # a node's NIC toward its switch
            out.append(Port(link, node_name(a), NODE_DEVICE, rate, shape.nic_queue_bytes))
        elif b is not None:  # a switch port toward a node
            out.append(Port(link, SWITCH, f"p{b}", rate, shape.queue_bytes))
        else:  # a leaf's uplink, or the spine's downlink to a leaf
            leaf = link[0] if link[1] == "spine" else link[1]
            way = "up" if link[1] == "spine" else "dn"
            out.append(Port(link, SWITCH, f"{way}{leaf[4:]}", rate, shape.queue_bytes))
    return out


def build(shape: ClusterSpec) -> None:
    """Create the nodes, their switch or routers, the links and their qdiscs."""
    for host in shape.hosts:
        sh("ip", "netns", "add", host)
        sh("ip", "-n", host, "link", "set", "lo", "up")
    if shape.delay_us:
        require_netem(shape.hosts[0])
    if shape.direct:
        build_routers(shape)
    else:
        build_switches(shape)
    for k, host in enumerate(shape.hosts):
        sh("ip", "-n", host, "addr", "add", f"{node_address(k)}/24", "dev", NODE_DEVICE)
        sh("ip", "-n", host, "link", "set", NODE_DEVICE, "up")
        if shape.rto_min_ms:
            sh("ip", "-n", host, "route", "replace", f"{SUBNET}.0/24", "dev", NODE_DEVICE,
               "proto", "kernel", "scope", "link", "src", node_address(k),
               "rto_min", f"{shape.rto_min_ms}ms")
    for port in ports(shape):
        shape_link(port, shape.delay_us)


def bridge_of(vertex: str) -> str:
    """The bridge in the switch namespace that stands for a fabric switch vertex."""
    return BRIDGE if vertex == "sw" else vertex


def build_switches(shape: ClusterSpec) -> None:
    """The switch namespace: a bridge per switch of the fabric, node ports and uplinks."""
    net = shape.fabric
    sh("ip", "netns", "add", SWITCH)
    switches = sorted({v for link in net.links() for v in link if fabric.node_of(v) is None})
    for vertex in switches:
        sh("ip", "-n", SWITCH, "link", "add", bridge_of(vertex), "type", "bridge")
        sh("ip", "-n", SWITCH, "link", "set", bridge_of(vertex), "up")
    for k, host in enumerate(shape.hosts):
        port = f"p{k}"
        sh("ip", "link", "add", NODE_DEVICE, "netns", host, "type", "veth",
           "peer", "name", port, "netns", SWITCH)
        sh("ip", "-n", SWITCH, "link", "set", port, "master", bridge_of(first_switch(net, k)), "up")
    for leaf in (v for v in switches if v.startswith("leaf")):
        up, down = f"up{leaf[4:]}", f"dn{leaf[4:]}"
        sh("ip", "-n", SWITCH, "link", "add", up, "type", "veth", "peer", "name", down)
        sh("ip", "-n", SWITCH, "link", "set", up, "master", leaf, "up")
        sh("ip", "-n", SWITCH, "link", "set", down, "master", "spine", "up")


def first_switch(net: fabric.Fabric, k: int) -> str:
    """The switch vertex node k's own link leads to."""
    return next(b for a, b in net.links() if a == fabric.vertex(k))


def build_routers(shape: ClusterSpec) -> None:
    """A router namespace per node: forwarding, its host's link, a link per neighbour, routes."""
    net = shape.fabric
    assert isinstance(net, fabric.Torus)
    for k, host in enumerate(shape.hosts):
        router = router_name(k)
        sh("ip", "netns", "add", router)
        # forward, and never drop a packet for arriving on another link than the reply would take
        sh("ip", "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
           "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        sh("ip", "-n", router, "link", "set", "lo", "up")
        sh("ip", "link", "add", NODE_DEVICE, "netns", host, "type", "veth",
           "peer", "name", "host", "netns", router)
        sh("ip", "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.conf.host.proxy_arp=1")
        sh("ip", "-n", router, "link", "set", "host", "up")
        sh("ip", "-n", router, "route", "add", f"{node_address(k)}/32", "dev", "host")
    gateway: dict[tuple[int, int], str] = {}  # (router, neighbour) -> the neighbour's address
    for index, (a, b, _) in enumerate(net.cables()):
        near, far = cable_addresses(index)
        sh("ip", "link", "add", f"to{b}", "netns", router_name(a), "type", "veth",
           "peer", "name", f"to{a}", "netns", router_name(b))
        for here, there, address in ((a, b, near), (b, a, far)):
            sh("ip", "-n", router_name(here), "addr", "add", f"{address}/30", "dev", f"to{there}")
            sh("ip", "-n", router_name(here), "link", "set", f"to{there}", "up")
        gateway[a, b], gateway[b, a] = far, near
    for k in range(shape.nodes):
        for j in range(shape.nodes):
            if j != k:
                hop = fabric.node_of(net.route(k, j)[0][1])
                assert hop is not None  # a torus has no switch: every hop is a node's router
                sh("ip", "-n", router_name(k), "route", "add", f"{node_address(j)}/32",
                   "via", gateway[k, hop], "dev", f"to{hop}")


def require_netem(namespace: str) -> None:
    """Refuse a per-hop delay where the kernel has no netem qdisc (as on this project's machines)."""
    done = subprocess.run(["tc", "-n", namespace, "qdisc", "add", "dev", "lo", "root", "netem",
                           "delay", "1ms"], capture_output=True, text=True, check=False)
    if done.returncode:
        raise ClusterError("--delay needs the netem qdisc, which this kernel does not have "
                           f"(tc: {done.stderr.strip()}); per-hop delay cannot be emulated here: "
                           "use --delay 0 (tbf's latency only bounds queueing, it adds no delay)")
    sh("tc", "-n", namespace, "qdisc", "del", "dev", "lo", "root")


def shape_link(port: Port, delay_us: int = 0) -> None:
    """Token bucket at the port's rate with its queue (and netem's delay under it, if asked)."""
    sh("tc", "-n", port.namespace, "qdisc", "replace", "dev", port.device, "root", "handle", "1:",
       "tbf", "rate", f"{port.rate_bps}bit", "burst", str(BURST_BYTES), "limit", str(port.queue_bytes))
    if delay_us:
        sh("tc", "-n", port.namespace, "qdisc", "add", "dev", port.device, "parent", "1:1",
           "handle", "10:", "netem", "delay", f"{delay_us}us")


def write_files(state: State, hostfile_dir: Path) -> None:
    """Hosts tables inside the namespaces, the launcher script and the hostfiles."""
    shape = state.shape
    table = "127.0.0.1 localhost\n" + "".join(
        f"{node_address(k)} {host}\n" for k, host in enumerate(shape.hosts))
    for host in shape.hosts:
        (NETNS_ETC / host).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / host / "hosts").write_text(table)
    state.launcher.write_text(LAUNCHER)
    state.launcher.chmod(0o755)
    hostfile_dir.mkdir(parents=True, exist_ok=True)
    mpich, openmpi = (Path(p) for p in state.hostfiles)
    for path in (mpich, state.run_hostfile):
        path.write_text("".join(f"{host}:{shape.slots}\n" for host in shape.hosts))
    openmpi.write_text("".join(f"{host} slots={shape.slots}\n" for host in shape.hosts))


LAUNCHER = """#!/bin/sh
# ssh stand-in for MPICH hydra on the emulated cluster: LAUNCH [-x ...] HOST COMMAND...
# runs COMMAND inside namespace HOST, with HOST as its host name (own UTS namespace).
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
case "$host" in
  a2a-n[0-9]*) ;;
  *) echo "a2a cluster launcher: unknown host '$host' (expected a2a-nK)" >&2; exit 255 ;;
esac
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
"""


def down() -> list[str]:
    """Remove every namespace, process and file of the cluster; return what was removed."""
    require_root()
    removed = []
    state_hostfiles = []
    try:
        state = read_state()
        state_hostfiles = state.hostfiles if state else []
    except ClusterError:
        pass
    for namespace in namespaces():
        stop_processes(namespace)
        sh("ip", "netns", "del", namespace)
        removed.append(f"namespace {namespace}")
    for folder in sorted(NETNS_ETC.glob("a2a-*")) if NETNS_ETC.is_dir() else []:
        if OURS.match(folder.name):
            shutil.rmtree(folder)
            removed.append(f"{folder}")
    for name in state_hostfiles:
        if Path(name).exists():
            Path(name).unlink()
            removed.append(name)
    for folder in {Path(name).parent for name in state_hostfiles}:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # we made it for the hostfiles
    if STATE_DIR.exists():
        shutil.rmtree(STATE_DIR)
        removed.append(f"{STATE_DIR}")
    return removed


def stop_processes(namespace: str, grace: float = 3.0) -> None:
    """End the processes still inside one of our namespaces (TERM, then KILL)."""
    def alive() -> list[int]:
        return [int(pid) for pid in sh("ip", "netns", "pids", namespace, check=False).split()]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = alive()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = alive()
        if not pids:
            return


# ---------------------------------------------------------------- inspection


def problems(shape: ClusterSpec) -> list[str]:
    """What is missing or wrong in the made cluster (empty if it is whole)."""
    found = set(namespaces())
    missing = [name for name in shape.namespaces if name not in found]
    extra = sorted(found - set(shape.namespaces))
    issues = [f"namespace {name} is missing" for name in missing]
    issues += [f"namespace {name} does not belong to this shape" for name in extra]
    for host in shape.hosts:
        if host in found and "UP" not in sh("ip", "-n", host, "-br", "link", "show",
                                            NODE_DEVICE, check=False):
            issues.append(f"{host}: {NODE_DEVICE} is not up")
    return issues


def link_counters(namespace: str, device: str) -> dict[str, int]:
    """Byte and packet counters of one device (rx_bytes, tx_bytes, ...)."""
    data = json.loads(sh("ip", "-n", namespace, "-s", "-j", "link", "show", device))
    stats = data[0]["stats64"]
    return {f"{way}_{key}": stats[way][key] for way in ("rx", "tx") for key in ("bytes", "packets")}


def qdisc_drops(namespace: str, device: str) -> int:
    """Packets the root qdisc of one device dropped."""
    data = json.loads(sh("tc", "-n", namespace, "-s", "-j", "qdisc", "show", "dev", device))
    return sum(q.get("drops", 0) for q in data if q.get("root"))


def node_tcp_ext(host: str) -> dict[str, int]:
    """TcpExt counters as seen inside one node's namespace."""
    return tcp_ext(sh("ip", "netns", "exec", host, "cat", "/proc/net/netstat"))


def node_report(shape: ClusterSpec) -> list[dict]:
    """Per node: address, eth0 counters, TCP timeouts."""
    rows = []
    for k, host in enumerate(shape.hosts):
        counters = link_counters(host, NODE_DEVICE)
        rows.append({"node": host, "address": node_address(k),
                     "tx_bytes": counters["tx_bytes"], "rx_bytes": counters["rx_bytes"],
                     "tcp_timeouts": node_tcp_ext(host).get("TCPTimeouts", 0)})
    return rows


def link_report(shape: ClusterSpec) -> list[dict]:
    """Per directed link: where it leaves, its rate and queue, bytes and packets sent, drops."""
    rows = []
    for port in ports(shape):
        counters = link_counters(port.namespace, port.device)
        rows.append({"link": f"{port.link[0]} -> {port.link[1]}", "egress": f"{port.namespace}:{port.device}",
                     "rate": show_rate(port.rate_bps), "queue": show_size(port.queue_bytes),
                     "tx_bytes": counters["tx_bytes"], "tx_packets": counters["tx_packets"],
                     "drops": qdisc_drops(port.namespace, port.device)})
    return rows


# ---------------------------------------------------------------- run


def mpiexec_path() -> str:
    """MPICH's mpiexec beside this Python (the venv's wheel), else the one on PATH."""
    found = mpi_tool("mpiexec")
    if "HYDRA" not in sh(found, "--version", check=False):
        raise ClusterError(f"{found} is not MPICH's (hydra) mpiexec, which the emulated cluster "
                           "launches through; use a venv with the mpich extra")
    return found


def run_command(state: State, program: Iterable[str], nprocs: int = 0,
                mpiexec: str = "") -> list[str]:
    """The command that runs `program` on every rank, mpiexec in node 0, TCP forced."""
    nprocs = nprocs or state.shape.nodes * state.shape.slots
    if nprocs < 1:
        raise BadOption(f"nprocs={nprocs}; accepted: 1 or more")
    return [*launcher_prefix(state, mpiexec), "-n", str(nprocs), *program]


def launcher_prefix(state: State, mpiexec: str = "") -> list[str]:
    """mpiexec in node 0 with the cluster's hosts and TCP forced, up to its `-n N PROGRAM` (bench tune's --launcher)."""
    shape = state.shape
    head = shape.hosts[0]
    return ["ip", "netns", "exec", head, "unshare", "--uts",
            "sh", "-c", 'hostname "$0" && exec "$@"', head,
            mpiexec or mpiexec_path(), "-launcher", "ssh", "-launcher-exec", str(state.launcher),
            "-f", str(state.run_hostfile),
            "-genv", "MPIR_CVAR_CH4_NETMOD", "ucx",
            "-genv", "UCX_TLS", "tcp,self", "-genv", "UCX_NET_DEVICES", NODE_DEVICE,
            "-genv", TOPOLOGY_ENV, shape.topology]


def run_env() -> dict[str, str]:
    """This environment less what an enclosing launcher set; the user's MPIR_CVAR_ tuning stays."""
    env = clean_launcher_env()
    env.update({k: v for k, v in os.environ.items() if k.startswith("MPIR_CVAR_")})
    return env


def current() -> State:
    """The cluster that is up, or ClusterError saying how to make one."""
    require_root()
    state = read_state()
    if state is None:
        raise ClusterError("no emulated cluster is up; make one with "
                           "`python -m bench cluster up --nodes N [--topology SPEC]`")
    if state.status != "up":
        raise ClusterError("the emulated cluster was never finished (an interrupted `up`); "
                           "run `python -m bench cluster down`, then `up` again")
    broken = problems(state.shape)
    if broken:
        raise ClusterError(f"the emulated cluster is damaged ({'; '.join(broken)}); "
                           "run `python -m bench cluster down` and `up` again")
    return state


def run(program: Iterable[str], nprocs: int = 0, log: Path | None = None, state: State | None = None) -> int:
    """Run `program` on the cluster's ranks (mpiexec in node 0, TCP forced); its exit code. Its output goes to
    `log` when given, else to this process's."""
    command = run_command(state or current(), program, nprocs)
    if log is None:
        return subprocess.run(command, check=False, env=run_env()).returncode
    with open(log, "w") as out:
        return subprocess.run(command, check=False, env=run_env(), stdout=out, stderr=subprocess.STDOUT).returncode


def fresh(shape: ClusterSpec) -> State:
    """The cluster of `shape` up, whatever was up before."""
    state = read_state()
    if state and state.shape == shape and state.status == "up":
        return current()
    down()
    up(shape)
    return current()


def up_report(shape: ClusterSpec, hostfile_dir: Path | None = None) -> str:
    """Make the cluster (a no-op if the same one is up); what was made, and how to use it."""
    state, made = up(shape, hostfile_dir)
    if not made:
        return f"cluster already up: {shape.describe()}; nothing to do"
    lines = [f"cluster up: {shape.describe()}"]
    if shape.direct:
        lines.append(f"  routers   namespaces {router_name(0)}..{router_name(shape.nodes - 1)} "
                     "(forwarding; one veth toJ per neighbour J, static routes in dimension order)")
    else:
        bridges = BRIDGE if shape.topology == "switch" else "leafI (per leaf) and spine"
        lines.append(f"  switch    namespace {SWITCH}, bridge {bridges}, ports p0..p{shape.nodes - 1}")
    lines += [f"  node {k:<4} namespace {host}, {NODE_DEVICE} {node_address(k)}/24"
              for k, host in enumerate(shape.hosts)]
    lines += [f"  launcher  {state.launcher}", f"  hostfiles {', '.join(state.hostfiles)}",
              "run with: python -m bench cluster run -- <bench arguments>"]
    return "\n".join(lines)


def status_report() -> str:
    """The cluster: its shape, per node bytes and TCP timeouts, per link bytes, packets and drops."""
    require_root()
    state = read_state()
    if state is None:
        leftovers = namespaces()
        return "no emulated cluster is up" + (f" (leftover namespaces: {', '.join(leftovers)}; "
                                               "`cluster down` removes them)" if leftovers else "")
    lines = [f"cluster {state.status}: {state.shape.describe()}"]
    broken = problems(state.shape)
    lines += [f"  problem: {problem}" for problem in broken]
    if not broken:
        lines += [tabulate(node_report(state.shape), headers="keys"), "\nlinks (each direction; drops at its egress "
                  "qdisc):", tabulate(link_report(state.shape), headers="keys")]
    lines.append(f"launcher {state.launcher}; hostfiles {', '.join(state.hostfiles)}")
    return "\n".join(lines)
