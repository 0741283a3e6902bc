"""The simulated machine: links, the software cost of a message, SMPI's network factors, a node's memory, the
platform file.

Local copies cost time at a measured memory bandwidth: `compute` events on hosts of speed
1 Gflop/s (HOST_SPEED). SMPI prints times in whole microseconds, so every latency and rate is
stretched TIME_SCALE-fold here and the printed time divided back.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from a2a.errors import BadOption

HOST_SPEED = 1e9  # flop/s of every simulated host; a copy of B bytes is B / bandwidth * HOST_SPEED flops
# SMPI prints the simulated time in whole microseconds. Every latency times TIME_SCALE and
# every rate over it (copies too) stretch the simulation exactly TIME_SCALE-fold (the model
# is linear in both, and its factors depend on message sizes only), so the printed time
# divided by TIME_SCALE has nanosecond resolution.
TIME_SCALE = 1000
SELECTORS = ("mpich", "ompi", "default")
# SMPI's named MPI_Alltoall algorithms (smpi_coll.cpp; each is in SimGrid 3.32 and 4.1)
SMPI_ALLTOALL = ("2dmesh", "3dmesh", "basic_linear", "bruck", "pair", "pair_rma", "pair_light_barrier",
                 "pair_mpi_barrier", "pair_one_barrier", "ring", "ring_light_barrier", "ring_mpi_barrier",
                 "ring_one_barrier", "mvapich2", "mvapich2_scatter_dest", "ompi", "mpich", "impi")


RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKMGT]?)(bps|Bps)\s*$")
DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us|ns)\s*$")


@dataclass(frozen=True)
class Link:
    """One link's rate (bytes/s) and latency (s), as `100Gbps,1us` spells them."""

    bytes_per_second: float
    latency: float
    text: str

    @classmethod
    def parse(cls, text: str) -> "Link":
        rate, _, delay = str(text).partition(",")
        r, d = RATE.match(rate), DELAY.match(delay)
        if not r or not d:
            raise BadOption(f"--link {text!r}; accepted: RATE,LATENCY such as 100Gbps,1us or 125MBps,50us "
                            "(rates in bps or Bps with k, M, G, T; latencies in s, ms, us, ns)")
        scale = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[r.group(2)]
        per_second = float(r.group(1)) * scale / (8 if r.group(3) == "bps" else 1)
        seconds = float(d.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[d.group(2)]
        if per_second <= 0:
            raise BadOption(f"--link {text!r}: the rate must be above 0")
        return cls(per_second, seconds, f"{rate.strip()},{delay.strip()}")


@dataclass(frozen=True)
class MessageCost:
    """The software time of one eager message, which SMPI charges only when told (smpi/os, ois and or).

    `send` is what a rank spends in one MPI_Send or MPI_Isend, `recv` in taking in one message:
    the cost of the MPI library and of its caller (here mpi4py), which SMPI's network model
    leaves out. SMPI charges `send` to every MPI_Isend and to each MPI_Send below
    smpi/send-is-detached-thresh (64 KiB), and `recv` to each message sent below that
    threshold: it weighs in the latency regime.
    """

    send: float = 0.0  # seconds
    recv: float = 0.0  # seconds
    source: str = "none"

    def config(self) -> list[str]:
        """The SMPI options that charge it, in the simulation's stretched time (TIME_SCALE)."""
        if not (self.send or self.recv):
            return []
        send, recv = self.send * TIME_SCALE, self.recv * TIME_SCALE
        return [f"--cfg=smpi/os:{send:.9g}", f"--cfg=smpi/ois:{send:.9g}", f"--cfg=smpi/or:{recv:.9g}"]

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of it."""
        return {"send_us": self.send * 1e6, "recv_us": self.recv * 1e6, "source": self.source}

    @classmethod
    def of(cls, facts: dict[str, Any] | None) -> "MessageCost":
        """The cost a meta.json records (none in records made before it was)."""
        facts = facts or {}
        return cls(facts.get("send_us", 0.0) / 1e6, facts.get("recv_us", 0.0) / 1e6, facts.get("source", "none"))

    @classmethod
    def parse(cls, text: str) -> "MessageCost":
        """--message-cost SEND[,RECV] in microseconds."""
        parts = [part.strip() for part in str(text).split(",")]
        try:
            values = [float(part) for part in parts]
        except ValueError:
            values = []
        if len(values) not in (1, 2) or min(values, default=-1) < 0:
            raise BadOption(f"--message-cost {text!r}; accepted: microseconds per send and per receive, "
                            "SEND[,RECV] at 0 or more, e.g. 0.85 or 0.6,1.1")
        send, recv = values[0], values[-1]
        return cls(send / 1e6, recv / 1e6, f"--message-cost {text}")


@dataclass(frozen=True)
class BandwidthFactor:
    """The share of a link's rate a message gets (SMPI's smpi/bw-factor, one for every size), fitted to a measured
    record; 0 keeps the network's own factors."""

    factor: float = 0.0
    source: str = "none"

    def config(self) -> list[str]:
        """The SMPI option that applies it (after the network's, which it replaces)."""
        return [f"--cfg=smpi/bw-factor:0:{self.factor:.9g}"] if self.factor else []

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of it."""
        return {"factor": self.factor, "source": self.source}

    @classmethod
    def of(cls, facts: dict[str, Any] | None) -> "BandwidthFactor":
        """The factor a meta.json records (none in records made before it was)."""
        facts = facts or {}
        return cls(facts.get("factor", 0.0), facts.get("source", "none"))


@dataclass(frozen=True)
class NodeMemory:
    """How the ranks of one node reach each other, fitted to a measured record: each through a link of its own at the
    copy rate, which the messages it sends and receives share (its core copies them), then the node's memory link,
    which every rank of the node shares. `bytes_per_second` is that memory's rate as the messages get it: SMPI
    multiplies every link's rate by the bandwidth factor, so the platform's link has `link_rate`, the rate over the
    factor. None (0): every message between ranks of a node has the copy rate to itself (SimGrid's loopback).

    Written on a switch only (platform_xml): the other topologies are SimGrid clusters whose nodes are one host each.
    """

    bytes_per_second: float = 0.0
    link_rate: float = 0.0  # bytes/s of the platform's memory link
    source: str = "none"

    def said(self) -> str:
        """How a simulation's summary names it."""
        if not self.bytes_per_second:
            return ""
        rate = "an unbounded memory" if self.bytes_per_second >= UNBOUNDED else \
            f"{self.bytes_per_second / 1e9:.3g} GB/s of memory"
        return f"; the ranks of a node share {rate}"

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of it."""
        return {"bytes_per_second": self.bytes_per_second, "link_bytes_per_second": self.link_rate,
                "source": self.source}

    @classmethod
    def of(cls, facts: dict[str, Any] | None) -> "NodeMemory":
        """The memory a meta.json records (none in records made before it was)."""
        facts = facts or {}
        return cls(facts.get("bytes_per_second", 0.0), facts.get("link_bytes_per_second", 0.0),
                   facts.get("source", "none"))


NO_MEMORY = NodeMemory()
LOOPBACK_LATENCY = 0.1e-6  # seconds a message between ranks of one node takes before its bytes
UNBOUNDED = 1e18  # bytes/s of a node memory that never holds a message back


def by_rank(fabric: Any, nprocs: int, memory: NodeMemory) -> bool:
    """Whether the platform has a host per rank: a switch whose nodes hold two ranks or more and share a memory."""
    return fabric.kind == "switch" and bool(memory.link_rate) and ppn_of(nprocs, fabric.nodes) > 1


def hostnames(fabric: Any, nprocs: int, memory: NodeMemory = NO_MEMORY) -> list[str]:
    """The host of each rank (block placement): its node n{i}, or its own host n{i}r{slot} on a platform by_rank."""
    ppn = ppn_of(nprocs, fabric.nodes)
    if by_rank(fabric, nprocs, memory):
        return [f"n{r // ppn}r{r % ppn}" for r in range(nprocs)]
    return [f"n{node}" for node in hosts_of(nprocs, fabric.nodes)]


def platform_xml(fabric: Any, link: Link, copy_bandwidth: float, memory: NodeMemory = NO_MEMORY,
                 nprocs: int = 1) -> str:
    """A SimGrid platform of `fabric` (a2a.fabric), every link `link`, full duplex; hosts n0..n{N-1}, or on a switch
    whose `nprocs` ranks share their nodes' `memory`, a host per rank (hostnames)."""
    rate, delay = link.bytes_per_second / TIME_SCALE, link.latency * TIME_SCALE
    if by_rank(fabric, nprocs, memory):
        return _document(_switch_by_rank(fabric.nodes, ppn_of(nprocs, fabric.nodes), rate, delay,
                                         copy_bandwidth / TIME_SCALE, memory.link_rate / TIME_SCALE))
    attributes = {"id": "a2a", "prefix": "n", "suffix": "", "radical": f"0-{fabric.nodes - 1}",
                  "speed": f"{HOST_SPEED:.0f}f", "bw": f"{rate:.9g}Bps", "lat": f"{delay * 1e6:.9g}us",
                  "sharing_policy": "SPLITDUPLEX", "loopback_bw": f"{copy_bandwidth / TIME_SCALE:.9g}Bps",
                  "loopback_lat": f"{LOOPBACK_LATENCY * TIME_SCALE * 1e6:.9g}us"}
    kind = fabric.kind
    if kind == "switch":  # a non-blocking switch: a backbone as fast as all node links together
        attributes.update(bb_bw=f"{rate * fabric.nodes:.9g}Bps", bb_lat="0us",
                          bb_sharing_policy="SHARED")
    elif kind in ("ring", "torus"):
        attributes.update(topology="TORUS", topo_parameters=",".join(map(str, fabric.dims)))
    elif kind == "fattree":
        uplinks = max(1, round(fabric.per_leaf / fabric.oversub))
        attributes.update(topology="FAT_TREE", topo_parameters=f"2;{fabric.per_leaf},{fabric.leaves};1,1;1,{uplinks}")
    elif kind == "dragonfly":
        g, c, r, n = routable(fabric).shape
        attributes.update(topology="DRAGONFLY", topo_parameters=f"{g},1;{c},1;{r},1;{n}")
    else:
        raise BadOption(f"the simulator has no platform for topology {fabric.spec!r}")
    cluster = " ".join(f'{k}="{v}"' for k, v in attributes.items())
    return _document(f"    <cluster {cluster}/>\n")


def _document(zone: str) -> str:
    return ("<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            '<platform version="4.1">\n'
            # in a zone of its own: SimGrid 4.1 crashes on a torus or fat tree cluster at the top level (3.32 does not)
            '  <zone id="world" routing="Full">\n'
            f"{zone}"
            "  </zone>\n"
            "</platform>\n")


def _switch_by_rank(nodes: int, ppn: int, rate: float, delay: float, copy: float, memory: float) -> str:
    """The switch with a host per rank (n{i}r{slot}, each its own core), written out link by link. Between nodes a
    rank's messages take its node's link and the backbone, as on the switch's <cluster>; within a node (a bypass
    route per pair, and one to itself) the sender's link, the node's memory, the receiver's link. Rates in bytes/s
    and delays in seconds, of the stretched time."""
    ranks = [(n, f"n{n}r{k}", f"a2a_rank_{n}_{k}") for n in range(nodes) for k in range(ppn)]
    lines = [f'      <backbone id="a2a_backbone" bandwidth="{rate * nodes:.9g}Bps" latency="0us"/>']
    for n in range(nodes):
        lines += [f'      <link id="a2a_link_{n}" bandwidth="{rate:.9g}Bps" latency="{delay * 1e6:.9g}us" '
                  'sharing_policy="SPLITDUPLEX"/>',
                  f'      <link id="a2a_memory_{n}" bandwidth="{memory:.9g}Bps" '
                  f'latency="{LOOPBACK_LATENCY * TIME_SCALE * 1e6:.9g}us" sharing_policy="SHARED"/>']
    for _, host, own in ranks:
        lines += [f'      <host id="{host}" speed="{HOST_SPEED:.0f}f"/>',
                  f'      <link id="{own}" bandwidth="{copy:.9g}Bps" latency="0us" sharing_policy="SHARED"/>']
    lines += [f'      <host_link id="{host}" up="a2a_link_{n}_UP" down="a2a_link_{n}_DOWN"/>' for n, host, _ in ranks]
    for n, host, own in ranks:  # routes come last
        lines.append(f'      <route src="{host}" dst="{host}"><link_ctn id="{own}"/><link_ctn id="a2a_memory_{n}"/>'
                     "</route>")
        lines += [f'      <bypassRoute src="{host}" dst="{to}"><link_ctn id="{own}"/><link_ctn id="a2a_memory_{n}"/>'
                  f'<link_ctn id="{theirs}"/></bypassRoute>' for m, to, theirs in ranks if m == n and to != host]
    return '    <zone id="a2a" routing="Cluster">\n' + "\n".join(lines) + "\n    </zone>\n"


def routable(fabric: Any) -> Any:
    """`fabric`, if SimGrid can route it: its dragonfly links group g to router g of a chassis."""
    if fabric.kind == "dragonfly" and fabric.shape[2] < fabric.shape[0]:
        g, _, r, _ = fabric.shape
        raise BadOption(f"--platform {fabric.spec}: SimGrid's dragonfly reaches group g through router g of each "
                        f"chassis, so ROUTERS ({r}) must be at least GROUPS ({g})")
    return fabric


def hosts_of(nprocs: int, nodes: int) -> list[int]:
    """Block placement: rank r on node r // ppn, ppn = ceil(nprocs / nodes)."""
    return [r // ppn_of(nprocs, nodes) for r in range(nprocs)]


NETWORKS = {"calibrated": [], "ideal": ["--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
                                        "--cfg=network/crosstraffic:0"]}


def native_config(selector: str, algorithm: str) -> list[str]:
    """SMPI options that make MPI_Alltoall use a selector or one named algorithm."""
    if algorithm:
        return [f"--cfg=smpi/alltoall:{algorithm}"]
    return [] if selector == "default" else [f"--cfg=smpi/coll-selector:{selector}"]


def ppn_of(nprocs: int, nodes: int) -> int:
    """Ranks per node of the block placement."""
    return math.ceil(nprocs / nodes)


def copy_bandwidth(nbytes: int = 8 << 20, repeats: int = 20) -> float:
    """This machine's memory copy rate (bytes/s): the best of `repeats` np.copyto of `nbytes`."""
    source, target = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    np.copyto(target, source)
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        np.copyto(target, source)
        rates.append(nbytes / (time.perf_counter() - began))
    return float(max(rates))  # the least disturbed copy: the machine is shared
