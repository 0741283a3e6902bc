"""The analytical network: a schedule's rounds (a2a.simulate.rounds) timed on a fabric's links (a2a.simulate.wires)
with the costs SimGrid charges, for every size at once, congestion-aware and congestion-unaware.

A round of the call ends when its slowest rank is done (the rounds run one after another, as a Sendrecv or a
wait for all ends each rank's round):

- copy: the largest bytes a rank copies before the round, over the copy bandwidth; a copy made while the round's
  messages travel (between posts and their wait: a collective's own block, a Posted phase's copies) overlaps them;
- software: the most a rank pays for its messages, `send` per message it posts, `recv` per message below SMPI's
  eager limit (64 KiB) it receives (--message-cost; 0 unless told, as in SMPI);
- network, congestion-aware: the largest latency of the round's messages (links crossed x link latency x SMPI's
  latency factor at the message's size) plus the busiest link's bytes over its rate. Each message weighs on
  every link of its route by its bytes (with SMPI's 16-byte envelope) over SMPI's bandwidth factor at its size,
  and, on the calibrated network, 5 % of them on each link of the cable's other way (SMPI's cross traffic, the
  acknowledgements); a link shared by the round's messages carries them all. This is the finishing time of the
  round under a fair share when the busiest link stays busy to the end, which is what a max-min share (SimGrid's)
  gives the messages through it; those elsewhere finish earlier and do not lengthen the round;
- network, congestion-unaware: the slowest message alone on its route: its latency plus its bytes over one
  link's rate (each message as if no other were in flight);
- messages between ranks of one node take the node's loopback, which SimGrid does not share (FATPIPE): latency
  0.1 us and the copy bandwidth, in both variants.

The round's time is copy + software + the latest of network, loopback and overlapped copies; the call's time the
sum over rounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from a2a.simulate.platforms import LOOPBACK_LATENCY
from a2a.simulate.rounds import RoundTable
from a2a.simulate.wires import Wires

ENVELOPE = 16  # bytes SMPI adds to every message (a2a/simulate/s4u_replay.cpp does the same)
EAGER_LIMIT = 65536  # bytes: below it SMPI sends detached and charges the receive cost (smpi/send-is-detached-thresh)
CROSS_TRAFFIC = 0.05  # of a message's bytes SMPI puts on the route back (network/crosstraffic)
# SMPI's network model (SimGrid 4.1, network_cm02.cpp): THRESHOLD:FACTOR, the factor of the largest threshold at or
# below a message's size
SMPI_BANDWIDTH = "65472:0.940694;15424:0.697866;9376:0.58729;5776:1.08739;3484:0.77493;1426:0.608902;" \
                 "732:0.341987;257:0.338112;0:0.812084"
SMPI_LATENCY = "65472:11.6436;15424:3.48845;9376:2.59299;5776:2.18796;3484:1.88101;1426:1.61075;732:1.9503;" \
               "257:1.95341;0:2.01467"
CHUNK = 1 << 19  # messages handled at once (their arrays stay in the caches)
AGGREGATE_LIMIT = 1 << 22  # (round, node pair)s counted at once where messages are merged by node pair
WINDOW_VALUES = 1 << 24  # floats the link sums of the rounds handled at once may hold


@dataclass(frozen=True)
class Factors:
    """A step function of the message size, as SMPI's THRESHOLD:FACTOR;... lists spell it."""

    thresholds: np.ndarray
    values: np.ndarray

    @classmethod
    def parse(cls, text: str) -> "Factors":
        pairs = sorted((float(a), float(b)) for a, b in (part.split(":") for part in text.split(";")))
        return cls(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))

    @classmethod
    def one(cls) -> "Factors":
        return cls(np.zeros(1), np.ones(1))

    def at(self, size: np.ndarray | float) -> np.ndarray:
        return self.values[np.searchsorted(self.thresholds, size, side="right") - 1]


@dataclass(frozen=True)
class Network:
    """SMPI's model as `--network` names it: `calibrated` (its factors and cross traffic) or `ideal` (neither)."""

    name: str
    bandwidth: Factors
    latency: Factors
    cross: float

    @classmethod
    def of(cls, name: str) -> "Network":
        if name == "ideal":
            return cls(name, Factors.one(), Factors.one(), 0.0)
        return cls(name, Factors.parse(SMPI_BANDWIDTH), Factors.parse(SMPI_LATENCY), CROSS_TRAFFIC)


@dataclass(frozen=True)
class Costs:
    """The machine's numbers: a link's rate (bytes/s) and latency (s), the copy bandwidth, the software cost of a
    send and of an eager receive (s), the network model."""

    rate: float
    latency: float
    copy_bandwidth: float
    send: float = 0.0
    recv: float = 0.0
    network: Network = field(default_factory=lambda: Network.of("calibrated"))


@dataclass
class Timing:
    """One size's simulated seconds, both variants, and their parts summed over rounds."""

    aware: float = 0.0
    unaware: float = 0.0
    busiest: float = 0.0  # seconds the rounds' busiest links took (aware's bandwidth part)
    latency: float = 0.0
    copy: float = 0.0
    software: float = 0.0


def timed(rounds: RoundTable, wires: Wires, ppn: int, costs: Costs, counts: list[int]) -> list[Timing]:
    """The call's time at each count of elements per peer (the table's bytes are at one element per peer)."""
    scale = np.asarray(counts, np.float64)
    found = [Timing() for _ in counts]
    per_round = 2 * wires.links + 4 * len(scale) * rounds.nprocs
    messages = rounds.messages / max(rounds.count, 1)  # about a round's, for a window of about CHUNK messages
    window = max(1, min(rounds.count, WINDOW_VALUES // per_round, int(CHUNK // max(messages, 1))))
    for first in range(0, rounds.count, window):
        _window(rounds, wires, ppn, costs, scale, first, min(first + window, rounds.count), found)
    return found


@dataclass
class _Window:
    """What the messages of rounds first..last-1 add up to."""

    width: int
    sizes: int
    counted: dict[int, np.ndarray] = field(default_factory=dict)  # bytes at one element -> signed crossings
    sums: np.ndarray | None = None  # (rounds, sizes, links): signed bytes / bandwidth factor, messages of mixed sizes
    latency: np.ndarray = field(init=False)  # (rounds, sizes): the slowest message's latency
    alone: np.ndarray = field(init=False)  # (rounds, sizes): the slowest message alone on its route (unaware)
    loopback: np.ndarray = field(init=False)  # (rounds, sizes): the slowest message within a node
    software: np.ndarray = field(init=False)  # (rounds, sizes): the rank that pays the most for its messages

    def __post_init__(self) -> None:
        self.latency, self.alone, self.loopback, self.software = (np.zeros((self.width, self.sizes))
                                                                  for _ in range(4))


def _window(rounds: RoundTable, wires: Wires, ppn: int, costs: Costs, scale: np.ndarray, first: int, last: int,
            found: list[Timing]) -> None:
    at = _Window(last - first, len(scale))
    paid = np.zeros((at.width, at.sizes, rounds.nprocs)) if costs.send or costs.recv else None
    for where, source, dest, nbytes in rounds.chunks(first, last, CHUNK):
        _messages(wires, ppn, costs, scale, at, where, source, dest, nbytes, paid)
    if paid is not None:
        at.software = paid.max(axis=2)
    busiest = _busiest(wires, costs, scale, at)
    copy, meanwhile = (_copies(rounds, first, last, scale, costs.copy_bandwidth, overlapped) for overlapped in (0, 1))
    aware = np.maximum(np.maximum(at.latency + busiest, at.loopback), meanwhile)
    unaware = np.maximum(np.maximum(at.alone, at.loopback), meanwhile)
    for s, timing in enumerate(found):
        timing.aware += float((copy[:, s] + at.software[:, s] + aware[:, s]).sum())
        timing.unaware += float((copy[:, s] + at.software[:, s] + unaware[:, s]).sum())
        timing.busiest += float(busiest[:, s].sum())
        timing.latency += float(at.latency[:, s].sum())
        timing.copy += float((copy[:, s] + meanwhile[:, s]).sum())
        timing.software += float(at.software[:, s].sum())


def _loads(wires: Wires, costs: Costs, summed: np.ndarray) -> np.ndarray:
    """(rows, links) of signed sums -> each link's load over its capacity, cross traffic included."""
    loads = wires.finish(summed)
    if costs.network.cross:
        loads = loads + costs.network.cross * loads[:, wires.twin]
    return loads / wires.capacity


def _busiest(wires: Wires, costs: Costs, scale: np.ndarray, at: _Window) -> np.ndarray:
    """(rounds, sizes): seconds the busiest link of each round takes to carry its load."""
    net = costs.network
    weights = {nb: (nb * scale + ENVELOPE) / net.bandwidth.at(nb * scale + ENVELOPE) for nb in at.counted}
    if len(at.counted) == 1 and at.sums is None:  # one message size: the busiest link's count times its weight
        (nb, counted), = at.counted.items()
        most = _loads(wires, costs, counted.reshape(at.width, wires.links)).max(axis=1, initial=0.0)
        return most[:, None] * weights[nb][None, :] / costs.rate
    busiest = np.zeros((at.width, at.sizes))
    for s in range(at.sizes):
        summed = np.zeros((at.width, wires.links)) if at.sums is None else at.sums[:, s, :]
        for nb, counted in at.counted.items():
            summed = summed + counted.reshape(at.width, wires.links) * weights[nb][s]
        busiest[:, s] = _loads(wires, costs, summed).max(axis=1, initial=0.0) / costs.rate
    return busiest


def _messages(wires: Wires, ppn: int, costs: Costs, scale: np.ndarray, at: _Window, where: np.ndarray,
              source: np.ndarray, dest: np.ndarray, nbytes: np.ndarray | int, paid: np.ndarray | None) -> None:
    """Add one chunk of messages (round, source rank, dest rank, bytes at one element) to the window."""
    net = costs.network
    src, dst = (source, dest) if ppn == 1 else (source // ppn, dest // ppn)
    if paid is not None:
        _software(costs, scale, paid, where, source, dest, nbytes)
    near = src == dst
    if near.any():
        _loopback(costs, scale, at, where[near], nbytes[near] if isinstance(nbytes, np.ndarray) else nbytes)
        keep = np.flatnonzero(~near)
        where, src, dst = where[keep], src[keep], dst[keep]
        nbytes = nbytes[keep] if isinstance(nbytes, np.ndarray) else nbytes
    if not len(where):
        return
    if not isinstance(nbytes, np.ndarray):  # one size: the links' sums are message counts times it
        if ppn > 1:  # ranks of a node send to the same nodes
            where, src, dst, many = _node_pairs(where, src, dst, wires.fabric.nodes, at.width)
        else:
            many = np.ones(len(where))
        pieces, hops = wires.route(src, dst)
        slot = where * wires.links
        counted = at.counted.setdefault(int(nbytes), np.zeros(at.width * wires.links))
        index = np.concatenate([slot + links if chosen is None else slot[chosen] + links
                                for chosen, links, _ in pieces])
        signs = np.concatenate([np.asarray(sign, np.float64) * (many if chosen is None else many[chosen])
                                for chosen, _, sign in pieces])
        counted += np.bincount(index, signs, minlength=counted.size)
        farthest = _most(where, hops, at.width)
        for s, count in enumerate(scale):
            size = nbytes * count + ENVELOPE
            weight = size / float(net.bandwidth.at(size))
            latency = farthest * costs.latency * float(net.latency.at(size))
            at.latency[:, s] = np.maximum(at.latency[:, s], latency)
            at.alone[:, s] = np.maximum(at.alone[:, s], np.where(farthest > 0, latency + weight / costs.rate, 0.0))
        return
    if at.sums is None:
        at.sums = np.zeros((at.width, at.sizes, wires.links))
    pieces, hops = wires.route(src, dst)
    slot = where * wires.links
    index = np.concatenate([slot + links if chosen is None else slot[chosen] + links for chosen, links, _ in pieces])
    for s, count in enumerate(scale):
        size = nbytes.astype(np.float64) * count + ENVELOPE
        weight = size / net.bandwidth.at(size)
        signed = np.concatenate([(weight if chosen is None else weight[chosen]) * sign for chosen, _, sign in pieces])
        at.sums[:, s, :] += np.bincount(index, signed, minlength=at.width * wires.links).reshape(at.width, wires.links)
        latency = hops * costs.latency * net.latency.at(size)
        np.maximum.at(at.latency[:, s], where, latency)
        np.maximum.at(at.alone[:, s], where, latency + weight / costs.rate)


def _node_pairs(where: np.ndarray, src: np.ndarray, dst: np.ndarray, nodes: int, width: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Messages of one size between the same two nodes in the same round as one of that many (exact: they load the
    same links): worth it where nodes hold several ranks and a chunk has more messages than (round, node pair)s."""
    pairs = width * nodes * nodes
    key = (where * nodes + src) * nodes + dst
    if pairs <= AGGREGATE_LIMIT and pairs <= 16 * len(where):
        counts = np.bincount(key, minlength=pairs)
        found = np.flatnonzero(counts)
        many = counts[found]
    else:
        found, many = np.unique(key, return_counts=True)
    at, pair = np.divmod(found, nodes * nodes)
    return at, pair // nodes, pair % nodes, many.astype(np.float64)


def _most(where: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """The largest of small non-negative integers `values` in each round (0 where a round has none)."""
    top = int(values.max(initial=0)) + 1
    seen = np.bincount(where * top + values, minlength=width * top).reshape(width, top) > 0
    return np.where(seen.any(axis=1), top - 1 - np.argmax(seen[:, ::-1], axis=1), 0).astype(np.float64)


def _loopback(costs: Costs, scale: np.ndarray, at: _Window, where: np.ndarray, nbytes: np.ndarray | int) -> None:
    """Messages within a node: each alone on the node's loopback (SimGrid's FATPIPE), in both variants."""
    net = costs.network
    for s, count in enumerate(scale):
        size = np.asarray(nbytes, np.float64) * count + ENVELOPE
        slow = LOOPBACK_LATENCY * net.latency.at(size) + size / net.bandwidth.at(size) / costs.copy_bandwidth
        np.maximum.at(at.loopback[:, s], where, np.broadcast_to(slow, where.shape))


def _software(costs: Costs, scale: np.ndarray, paid: np.ndarray, where: np.ndarray, source: np.ndarray,
              dest: np.ndarray, nbytes: np.ndarray | int) -> None:
    """Each rank's software time in each round: `send` per message posted, `recv` per eager message received."""
    width, sizes, p = paid.shape
    sent = np.bincount(where * p + source, minlength=width * p).reshape(width, p) * costs.send
    for s, count in enumerate(scale):
        eager = np.asarray(nbytes, np.float64) * count + ENVELOPE < EAGER_LIMIT
        taken = np.broadcast_to(eager, where.shape).astype(np.float64)
        received = np.bincount(where * p + dest, taken, minlength=width * p).reshape(width, p) * costs.recv
        paid[:, s, :] += sent + received


def _copies(rounds: RoundTable, first: int, last: int, scale: np.ndarray, bandwidth: float, overlapped: int
            ) -> np.ndarray:
    """(rounds, sizes): the most bytes a rank copies before each round (`overlapped` 0) or while its messages travel
    (1), over the copy bandwidth."""
    rank, at, nbytes, during = rounds.copies
    inside = np.flatnonzero((at >= first) & (at < last) & (during == overlapped))
    width = last - first
    most = np.zeros(width)
    if len(inside):
        summed = np.bincount((at[inside] - first) * rounds.nprocs + rank[inside], nbytes[inside].astype(np.float64),
                             minlength=width * rounds.nprocs)
        most = summed.reshape(width, rounds.nprocs).max(axis=1)
    return most[:, None] * scale[None, :] / bandwidth
