"""A fabric's directed links as numbered arrays, and the links of many messages at once, routed as the platform
`bench simulate` writes for SimGrid routes them: the analytical backend's network (a2a.simulate.analytical).

Every kind numbers its links 0..n-1, gives each one's capacity relative to one link's rate and the link of the
same cable the other way (`twin`, which SMPI's cross traffic loads with 5 % of the bytes), and turns arrays of
source and destination nodes into link numbers, never a Python object per message:

- switch: each node's cable to the switch, up and down, and the backbone (SimGrid's cluster: as fast as every node
  link together);
- fattree: each node's cable to its leaf, and `uplinks` parallel cables from each leaf to the spine, chosen d-mod-k
  as SimGrid's FatTreeZone does: up by the destination's number, down by the source's;
- torus (and ring): a link each way per node and dimension, numbered as SimGrid's TorusZone numbers nodes (the
  first dimension varies fastest and is routed first, the shorter way round, + on a tie). a2a.fabric numbers the
  same torus row-major, so its torus:AxB is this one's dimensions reversed; the loads of a round are found per
  dimension as segments on rings (a difference array, then a running sum), not hop by hop;
- dragonfly: node cables, then SimGrid's DragonflyZone minimal route: to the router of the source's chassis whose
  blade is the destination group, to chassis 0, over that router's one global link, then blade and chassis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from a2a.errors import BadOption
from a2a.fabric import Dragonfly, Fabric, FatTree, Switch, Torus

# each link crossing: (which messages, None for all; link numbers; sign, one for all or one per message)
Pieces = list[tuple[np.ndarray | None, np.ndarray, float | np.ndarray]]


@dataclass
class Wires:
    """A fabric's links: `capacity[k]` (relative to one link's rate) and `twin[k]` of each, and the routes."""

    fabric: Fabric
    capacity: np.ndarray = field(init=False)
    twin: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        """Each kind numbers its links here (and keeps the per-node tables its routes read)."""

    @property
    def links(self) -> int:
        return len(self.capacity)

    def route(self, src: np.ndarray, dst: np.ndarray) -> tuple[Pieces, np.ndarray]:
        """Where messages from nodes `src` to nodes `dst` (distinct, same length) load links, as signed crossings
        (summing each message's bytes over them with their signs, then `finish`, gives the bytes on each link), and
        how many links each crosses (each adds one link latency)."""
        raise NotImplementedError

    def finish(self, summed: np.ndarray) -> np.ndarray:
        """The bytes on each link (last axis) from the signed sums of `route`'s crossings."""
        return summed


def wires(fabric: Fabric) -> Wires:
    """The numbered links of a fabric of any kind."""
    kinds: dict[str, type[Wires]] = {"switch": SwitchWires, "fattree": FatTreeWires, "torus": TorusWires,
                                     "ring": TorusWires, "dragonfly": DragonflyWires}
    if fabric.kind not in kinds:
        raise BadOption(f"the analytical backend has no routes for topology {fabric.spec!r}")
    return kinds[fabric.kind](fabric)


def _all(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


class SwitchWires(Wires):
    """Links 0..N-1 up, N..2N-1 down, 2N the backbone (its latency 0)."""

    fabric: Switch

    def __post_init__(self) -> None:
        n = self.fabric.nodes
        self.capacity = np.append(np.ones(2 * n), float(n))
        self.twin = np.concatenate([_all(n) + n, _all(n), [2 * n]])

    def route(self, src: np.ndarray, dst: np.ndarray) -> tuple[Pieces, np.ndarray]:
        n = self.fabric.nodes
        pieces: Pieces = [(None, src, 1.0), (None, dst + n, 1.0), (None, np.full(len(src), 2 * n), 1.0)]
        return pieces, np.full(len(src), 2, np.int64)


class FatTreeWires(Wires):
    """Links: 0..N-1 node up, N..2N-1 node down, then per leaf `uplinks` cables up, then as many down."""

    fabric: FatTree

    def __post_init__(self) -> None:
        tree = self.fabric
        n, cables = tree.nodes, tree.leaves * self.uplinks
        self.capacity = np.ones(2 * n + 2 * cables)
        self.twin = np.concatenate([_all(n) + n, _all(n), _all(cables) + 2 * n + cables, _all(cables) + 2 * n])
        nodes = _all(n)
        leaf = nodes // tree.per_leaf
        self.leaf = leaf
        self.up = 2 * n + leaf * self.uplinks  # + the cable: the destination's number mod uplinks
        self.down = 2 * n + cables + leaf * self.uplinks  # + the cable: the source's number mod uplinks
        self.cable = nodes % self.uplinks

    @property
    def uplinks(self) -> int:
        """Parallel cables between a leaf and the spine (a2a.simulate.platforms writes the same count)."""
        return max(1, round(self.fabric.per_leaf / self.fabric.oversub))

    def route(self, src: np.ndarray, dst: np.ndarray) -> tuple[Pieces, np.ndarray]:
        n = self.fabric.nodes
        far = np.flatnonzero(self.leaf[src] != self.leaf[dst])
        a, z = src[far], dst[far]
        hops = np.full(len(src), 2, np.int64)
        hops[far] = 4
        return ([(None, src, 1.0), (None, dst + n, 1.0), (far, self.up[a] + self.cable[z], 1.0),
                 (far, self.down[z] + self.cable[a], 1.0)], hops)


class TorusWires(Wires):
    """Links: per dimension j, N links + (node k to its next along j) then N links - (node k to its previous);
    node k's coordinate j is k // stride[j] % dims[j], stride[0] = 1."""

    fabric: Torus

    def __post_init__(self) -> None:
        dims, n = self.fabric.dims, self.fabric.nodes
        self.capacity = np.ones(2 * len(dims) * n)
        nodes = _all(n)
        strides = [math.prod(dims[:j]) for j in range(len(dims))]
        twin, self.tables = [], []
        for j, size in enumerate(dims):
            stride, base = strides[j], 2 * j * n
            coord = nodes // stride % size
            ahead, behind = nodes + ((coord + 1) % size - coord) * stride, nodes + ((coord - 1) % size - coord) * stride
            twin += [base + n + ahead, base + behind]  # + link of k is the - link of k's next node, the other way
            # per node: its coordinate, the part of its number below dimension j and above it (a run's ring)
            self.tables.append((coord, nodes % stride, nodes - nodes % (stride * size), stride, size, base,
                                _moves(size)))
        self.twin = np.concatenate(twin) if twin else np.zeros(0, np.int64)

    def route(self, src: np.ndarray, dst: np.ndarray) -> tuple[Pieces, np.ndarray]:
        """Per dimension, each message's run of links as a difference array along its ring: + at the run's first
        link, - past its last, and + at the ring's first link where it wraps; `finish` sums along the rings. A
        message that stays put in a dimension adds and takes away at one link."""
        n, pieces = self.fabric.nodes, []  # type: tuple[int, Pieces]
        hops = np.zeros(len(src), np.int64)
        for coord, below, above, stride, size, base, (steps_of, plus_of, first_of) in self.tables:
            pair = coord[src] * size + coord[dst]
            steps, first = steps_of[pair], first_of[pair]
            hops += steps
            # the run's ring: the destination's coordinates below j (routed already), the source's above it
            ring = below[dst] + above[src] + base + np.where(plus_of[pair], 0, n)
            past = first + steps
            pieces += [(None, ring + first * stride, 1.0), (None, ring + past % size * stride, -1.0),
                       (None, ring, (past >= size).astype(np.float64))]
        return pieces, hops

    def finish(self, summed: np.ndarray) -> np.ndarray:
        """Running sums along each ring, both ways, every dimension."""
        n, lead, dims = self.fabric.nodes, summed.shape[:-1], self.fabric.dims
        out = np.empty_like(summed)
        shape = (*lead, *reversed(dims))  # C order: the last axis is dimension 0
        for j in range(len(dims)):
            axis = len(lead) + len(dims) - 1 - j
            for half in (0, 1):
                where = slice((2 * j + half) * n, (2 * j + half + 1) * n)
                out[..., where] = np.cumsum(summed[..., where].reshape(shape), axis=axis).reshape(*lead, n)
        return out


def _moves(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every (coordinate, target) pair of a ring of `size`, as mine * size + target: the steps taken, whether
    the + way, and the position of the first link of the run (+: the node's own links c..c+steps-1; -: the - links
    of c-steps+1..c). TorusZone's rule, ties included: + when the target is ahead by at most half the ring."""
    mine, target = np.divmod(_all(size * size), size)
    half = size // 2
    plus = ((target > mine) & (target <= mine + half)) | ((mine > half) & ((mine + half) % size >= target))
    ahead = (target - mine) % size
    steps = np.where(plus, ahead, (size - ahead) % size)
    return steps, plus, np.where(plus | (steps == 0), mine, (mine - steps + 1) % size)


class DragonflyWires(Wires):
    """Links: node up, node down, then per router its green links (one per blade of its chassis), its black links (one
    per chassis of its group) and its one blue link. A router's number is (group x chassis + chassis) x blades +
    blade."""

    fabric: Dragonfly

    def __post_init__(self) -> None:
        g, c, b, _ = self.fabric.shape
        n, routers = self.fabric.nodes, g * c * b
        self.base = (2 * n, 2 * n + routers * b, 2 * n + routers * b + routers * c)
        self.capacity = np.ones(self.base[2] + routers)
        r = _all(routers)
        group, chassis, blade = r // (c * b), r // b % c, r % b
        to = np.arange(b)
        green_twin = self.base[0] + (((group * c + chassis) * b)[:, None] + to) * b + blade[:, None]
        black_twin = self.base[1] + (((group[:, None] * c + np.arange(c)) * b + blade[:, None]) * c + chassis[:, None])
        wired = (chassis == 0) & (blade < g)  # the routers with a global link: to router (blade, 0, group)
        blue_twin = self.base[2] + np.where(wired, (blade * c) * b + group, r)
        self.twin = np.concatenate([_all(n) + n, _all(n), green_twin.ravel(), black_twin.ravel(), blue_twin])

    def route(self, src: np.ndarray, dst: np.ndarray) -> tuple[Pieces, np.ndarray]:
        g, c, b, per = self.fabric.shape
        n = self.fabric.nodes
        here, there = src // per, dst // per
        hg, hc, hb = here // (c * b), here // b % c, here % b
        tg, tc, tb = there // (c * b), there // b % c, there % b
        at = [hg.copy(), hc.copy(), hb.copy()]
        hops = np.full(len(src), 2, np.int64)
        pieces: Pieces = [(None, src, 1.0), (None, dst + n, 1.0)]

        def move(mask: np.ndarray, link: np.ndarray, coords: tuple[np.ndarray, ...]) -> None:
            chosen = np.flatnonzero(mask)
            pieces.append((chosen, link[chosen], 1.0))
            hops[chosen] += 1
            for now, new in zip(at, coords):
                now[chosen] = new[chosen]

        def router() -> np.ndarray:
            return (at[0] * c + at[1]) * b + at[2]

        zero = np.zeros_like(tc)
        away = tg != hg
        move(away & (at[2] != tg), self.base[0] + router() * b + tg, (at[0], at[1], tg))  # green: blade = dest group
        move(away & (at[1] != 0), self.base[1] + router() * c, (at[0], zero, at[2]))  # black: to chassis 0
        move(away, self.base[2] + router(), (tg, zero, hg))  # blue: to (dest group, 0, source group)
        move(at[2] != tb, self.base[0] + router() * b + tb, (at[0], at[1], tb))
        move(at[1] != tc, self.base[1] + router() * c + tc, (at[0], tc, at[2]))
        return pieces, hops


def link_bytes(wires_: Wires, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The bytes on each link when every message (src node, dst node, bytes) goes at once (no twins, no capacity)."""
    summed = np.zeros(wires_.links)
    pieces, _ = wires_.route(src, dst)
    for chosen, links, sign in pieces:
        weights = (nbytes if chosen is None else nbytes[chosen]) * sign
        summed += np.bincount(links, weights, minlength=wires_.links)
    return wires_.finish(summed)
