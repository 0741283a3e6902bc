"""Network topologies from their specs: nodes, directed links, static routes and link loads.

The one parser and router of topology specs, for the emulated cluster, the cost model and
the simulator. A spec is one of:

- `switch`: every node on one switch (a star);
- `ring`: the nodes in a cycle;
- `torus:AxB[xC...]`: a wrap-around torus of any number of dimensions; node k sits at
  row-major coordinates (with torus:AxB, k = B*x + y), as `--mesh` numbers ranks;
- `fattree:LEAVESxNODES[,oversub=R]`: NODES nodes under each of LEAVES leaf switches, the
  leaves joined through one spine by uplinks that carry 1/R of their nodes' total rate.

Vertices are named `n<k>` (node k) or by their switch (`sw`, `leaf<i>`, `spine`); a link is
a directed (from, to) pair of vertices, and its capacity is relative to a node's own link.
Routes are static and minimal: in a torus, dimension by dimension (first dimension first),
each the shorter way round (the + way on a tie). Node names in the emulated cluster and in
the simulator's platforms come from here too.

Adding a kind: a frozen dataclass with the Fabric methods and a parser, and an entry in KINDS.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from a2a.errors import BadOption

Link = tuple[str, str]
F = TypeVar("F", bound="Fabric")
MAX_NODES = 1 << 20


def vertex(k: int) -> str:
    """The vertex name of node k."""
    return f"n{k}"


def node_of(name: str) -> int | None:
    """Node number of a vertex name, or None for a switch."""
    match = re.fullmatch(r"n(\d+)", name)
    return int(match[1]) if match else None


class Fabric:
    """A topology: `nodes` nodes, its links and the route between any two nodes."""

    kind = ""
    nodes: int

    @property
    def spec(self) -> str:
        """The canonical spec, which `parse` turns back into this fabric."""
        raise NotImplementedError

    def links(self) -> list[Link]:
        """Every directed link, each way of a cable once."""
        raise NotImplementedError

    def route(self, a: int, b: int) -> list[Link]:
        """The directed links a packet from node a to node b crosses, in order."""
        raise NotImplementedError

    def capacity(self, link: Link) -> float:
        """The link's rate relative to a node's own link."""
        return 1.0

    def hops(self, a: int, b: int) -> int:
        """Links crossed from node a to node b (0 to itself)."""
        return len(self.route(a, b))

    def forwarders(self, a: int, b: int) -> list[int]:
        """The nodes that forward a packet from a to b (each one lowers its TTL by one)."""
        inner = [node_of(v) for _, v in self.route(a, b)[:-1]]
        return [k for k in inner if k is not None]

    def describe(self) -> str:
        """One line: the spec and the size."""
        return f"{self.spec} ({self.nodes} nodes, {len(self.links()) // 2} cables)"

    def check_node(self, k: int) -> None:
        """Refuse a node number outside the fabric."""
        if not 0 <= k < self.nodes:
            raise BadOption(f"node {k} is not in {self.spec}; accepted: 0 to {self.nodes - 1}")


@dataclass(frozen=True)
class Switch(Fabric):
    """Every node on one non-blocking switch: node -> sw -> node."""

    nodes: int
    kind = "switch"

    @classmethod
    def parse(cls, args: str, nodes: int | None) -> Switch:
        if args:
            raise BadOption(f"topology 'switch:{args}'; `switch` takes no parameters (set --nodes)")
        return cls(need_nodes("switch", nodes))

    @property
    def spec(self) -> str:
        return "switch"

    def links(self) -> list[Link]:
        return [link for k in range(self.nodes) for link in ((vertex(k), "sw"), ("sw", vertex(k)))]

    def route(self, a: int, b: int) -> list[Link]:
        self.check_node(a)
        self.check_node(b)
        return [] if a == b else [(vertex(a), "sw"), ("sw", vertex(b))]


@dataclass(frozen=True)
class Torus(Fabric):
    """A wrap-around torus (a ring has one dimension); node links only, nodes forward."""

    dims: tuple[int, ...]
    ring: bool = False

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "ring" if self.ring else "torus"

    @classmethod
    def parse(cls, args: str, nodes: int | None) -> Torus:
        if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", args):
            raise BadOption(f"topology 'torus:{args}'; accepted: torus:AxB[xC...], sizes >= 1 "
                            "joined by x (e.g. torus:2x4, torus:8x8x8)")
        return sized(cls(tuple(int(d) for d in args.split("x"))), f"torus:{args}", nodes)

    @classmethod
    def parse_ring(cls, args: str, nodes: int | None) -> Torus:
        if args:
            raise BadOption(f"topology 'ring:{args}'; `ring` takes no parameters (set --nodes)")
        return cls((need_nodes("ring", nodes),), ring=True)

    def __post_init__(self) -> None:
        if not self.dims or min(self.dims) < 1:
            raise BadOption(f"torus dimensions {self.dims}; accepted: one or more sizes >= 1")
        check_size(math.prod(self.dims))

    @property
    def nodes(self) -> int:  # type: ignore[override]
        return math.prod(self.dims)

    @property
    def spec(self) -> str:
        return "ring" if self.ring else "torus:" + "x".join(map(str, self.dims))

    def coords(self, k: int) -> tuple[int, ...]:
        """Row-major coordinates of node k (the last dimension varies fastest)."""
        self.check_node(k)
        out = []
        for d in reversed(self.dims):
            k, c = divmod(k, d)
            out.append(c)
        return tuple(reversed(out))

    def index(self, coords: Iterable[int]) -> int:
        """Node number at row-major coordinates (taken modulo each dimension)."""
        k = 0
        for c, d in zip(coords, self.dims):
            k = k * d + c % d
        return k

    def neighbour(self, k: int, dim: int, step: int) -> int:
        """The node one step (+1 or -1) along dimension `dim` from node k."""
        c = list(self.coords(k))
        c[dim] += step
        return self.index(c)

    def links(self) -> list[Link]:
        out: list[Link] = []
        for k in range(self.nodes):
            for dim, size in enumerate(self.dims):
                for step in (1, -1) if size > 2 else (1,) if size == 2 else ():
                    out.append((vertex(k), vertex(self.neighbour(k, dim, step))))
        return out

    def cables(self) -> list[tuple[int, int, int]]:
        """Each undirected node-to-node link once: (lower node, higher node, dimension)."""
        return sorted({(min(a, b), max(a, b), dim) for a in range(self.nodes)
                       for dim, size in enumerate(self.dims) if size > 1
                       for b in [self.neighbour(a, dim, 1)]})

    def route(self, a: int, b: int) -> list[Link]:
        self.check_node(b)
        path: list[Link] = []
        here = a
        for dim, size in enumerate(self.dims):
            ahead = (self.coords(b)[dim] - self.coords(here)[dim]) % size
            step, count = (1, ahead) if ahead <= size - ahead else (-1, size - ahead)
            for _ in range(count):
                there = self.neighbour(here, dim, step)
                path.append((vertex(here), vertex(there)))
                here = there
        return path


@dataclass(frozen=True)
class FatTree(Fabric):
    """Two-level fat tree: node <-> leaf<i> <-> spine; each uplink carries per_leaf/oversub."""

    leaves: int
    per_leaf: int
    oversub: float = 1.0
    kind = "fattree"

    @classmethod
    def parse(cls, args: str, nodes: int | None) -> FatTree:
        match = re.fullmatch(r"([1-9]\d*)x([1-9]\d*)(?:,oversub=(\d+(?:\.\d+)?))?", args)
        if not match or (match[3] is not None and float(match[3]) <= 0):
            raise BadOption(f"topology 'fattree:{args}'; accepted: fattree:LEAVESxNODES[,oversub=R] "
                            "with R > 0 (e.g. fattree:2x4, fattree:4x8,oversub=2)")
        return sized(cls(int(match[1]), int(match[2]), float(match[3] or 1)), f"fattree:{args}", nodes)

    def __post_init__(self) -> None:
        check_size(self.leaves * self.per_leaf)

    @property
    def nodes(self) -> int:  # type: ignore[override]
        return self.leaves * self.per_leaf

    @property
    def spec(self) -> str:
        ratio = f"{self.oversub:g}"
        return f"fattree:{self.leaves}x{self.per_leaf}" + ("" if ratio == "1" else f",oversub={ratio}")

    def leaf(self, k: int) -> str:
        """The leaf switch of node k."""
        self.check_node(k)
        return f"leaf{k // self.per_leaf}"

    def links(self) -> list[Link]:
        down = [link for k in range(self.nodes) for link in ((vertex(k), self.leaf(k)), (self.leaf(k), vertex(k)))]
        up = [link for i in range(self.leaves) for link in ((f"leaf{i}", "spine"), ("spine", f"leaf{i}"))]
        return down + up

    def capacity(self, link: Link) -> float:
        return self.per_leaf / self.oversub if "spine" in link else 1.0

    def route(self, a: int, b: int) -> list[Link]:
        la, lb = self.leaf(a), self.leaf(b)
        if a == b:
            return []
        if la == lb:
            return [(vertex(a), la), (la, vertex(b))]
        return [(vertex(a), la), (la, "spine"), ("spine", lb), (lb, vertex(b))]


@dataclass(frozen=True)
class Dragonfly(Fabric):
    """Groups of chassis of routers, NODES per router (SimGrid's DRAGONFLY cluster, one link each).

    Routers of a chassis are joined all-to-all, so are the chassis of a group and the groups,
    each pair by the routers at the same position. Routes are minimal: to the same position
    in the destination group, then chassis, then the destination router.
    """

    groups: int
    chassis: int
    routers: int
    per_router: int
    kind = "dragonfly"

    @classmethod
    def parse(cls, args: str, nodes: int | None) -> Dragonfly:
        if not re.fullmatch(r"[1-9]\d*x[1-9]\d*x[1-9]\d*x[1-9]\d*", args):
            raise BadOption(f"topology 'dragonfly:{args}'; accepted: dragonfly:GROUPSxCHASSISxROUTERSxNODES, "
                            "each >= 1 (NODES per router, e.g. dragonfly:8x4x4x8)")
        return sized(cls(*(int(d) for d in args.split("x"))), f"dragonfly:{args}", nodes)

    def __post_init__(self) -> None:
        check_size(self.nodes)

    @property
    def nodes(self) -> int:  # type: ignore[override]
        return self.groups * self.chassis * self.routers * self.per_router

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(groups, chassis per group, routers per chassis, nodes per router)."""
        return self.groups, self.chassis, self.routers, self.per_router

    @property
    def spec(self) -> str:
        return "dragonfly:" + "x".join(map(str, self.shape))

    def router(self, k: int) -> tuple[int, int, int]:
        """(group, chassis, router) of node k."""
        self.check_node(k)
        r = k // self.per_router
        return r // (self.chassis * self.routers), r // self.routers % self.chassis, r % self.routers

    def links(self) -> list[Link]:
        g, c, r = self.groups, self.chassis, self.routers
        name = lambda a, b, x: f"r{a}.{b}.{x}"  # noqa: E731
        pairs = {(vertex(k), name(*self.router(k))) for k in range(self.nodes)}
        for a, b, x in ((a, b, x) for a in range(g) for b in range(c) for x in range(r)):
            pairs |= {(name(a, b, x), name(a, b, y)) for y in range(r) if y != x}
            pairs |= {(name(a, b, x), name(a, d, x)) for d in range(c) if d != b}
            pairs |= {(name(a, b, x), name(e, b, x)) for e in range(g) if e != a}
        return sorted({link for pair in pairs for link in (pair, pair[::-1])})

    def route(self, a: int, b: int) -> list[Link]:
        if a == b:
            self.check_node(a)
            return []
        here, there = self.router(a), self.router(b)
        hops = [here, (there[0], here[1], here[2]), (there[0], there[1], here[2]), there]
        routers = [f"r{x}.{y}.{z}" for i, (x, y, z) in enumerate(hops) if i == 0 or hops[i] != hops[i - 1]]
        path = [vertex(a), *routers, vertex(b)]
        return list(zip(path, path[1:]))


# kind -> (how it is spelled, its parser(arguments after the colon, --nodes or None))
KINDS = {"switch": ("switch", Switch.parse), "ring": ("ring", Torus.parse_ring),
         "torus": ("torus:AxB[xC...]", Torus.parse),
         "fattree": ("fattree:LEAVESxNODES[,oversub=R]", FatTree.parse),
         "dragonfly": ("dragonfly:GROUPSxCHASSISxROUTERSxNODES", Dragonfly.parse)}


def accepted() -> str:
    """The accepted spellings, for error messages."""
    return ", ".join(syntax for syntax, _ in KINDS.values())


def parse(spec: str, nodes: int | None = None) -> Fabric:
    """A fabric from its spec; `nodes` is required by switch and ring, checked by the others."""
    text = str(spec).strip().lower().replace(" ", "")
    kind, _, args = text.partition(":")
    if kind not in KINDS:
        raise BadOption(f"topology {spec!r} is unknown; accepted: {accepted()}")
    if nodes is not None and nodes < 1:
        raise BadOption(f"nodes={nodes}; accepted: 1 or more")
    return KINDS[kind][1](args, nodes)


def need_nodes(kind: str, nodes: int | None) -> int:
    """The node count a kind without a size needs."""
    if nodes is None:
        raise BadOption(f"topology {kind!r} needs a node count (--nodes N)")
    check_size(nodes)
    return nodes


def sized(fabric: F, spec: str, nodes: int | None) -> F:
    """A fabric whose spec sets its size, refused when --nodes was given and differs."""
    if nodes is not None and nodes != fabric.nodes:
        raise BadOption(f"{spec} has {fabric.nodes} nodes but --nodes is {nodes}; leave --nodes out or give "
                        f"{fabric.nodes}")
    return fabric


def check_size(nodes: int) -> None:
    """Refuse fabrics too big to route."""
    if not 1 <= nodes <= MAX_NODES:
        raise BadOption(f"{nodes} nodes; accepted: 1 to {MAX_NODES}")


def link_loads(fabric: Fabric, messages: Iterable[tuple[int, int, float]]) -> dict[Link, float]:
    """Bytes over each link's capacity when every (source node, destination node, bytes) goes at once."""
    loads: dict[Link, float] = {}
    for a, b, size in messages:
        for link in fabric.route(a, b):
            loads[link] = loads.get(link, 0.0) + size / fabric.capacity(link)
    return loads


def max_link_load(fabric: Fabric, messages: Iterable[tuple[int, int, float]]) -> float:
    """The load (bytes over capacity) of the most loaded link; 0 if nothing crosses a link."""
    return max(link_loads(fabric, messages).values(), default=0.0)
