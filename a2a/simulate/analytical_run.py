"""`bench simulate --backend analytical`: every point's schedule timed on the analytical network
(a2a.simulate.analytical) instead of replayed on SimGrid, into the same record.

Each variant is read once per process count (its steps, rank by rank, or its captured schedule where it states
none) into a table of rounds, and timed at every size at once, both variants; the record's rows carry the
variant asked (`--congestion`, congestion-aware unless told), `analytical.csv` beside them both, and the parts
of each time. meta.json's backend is `analytical`, with the congestion variant and the network model, so no
reader takes its rows for SimGrid's; the run says its wall time and peak memory there and on stderr.
"""
from __future__ import annotations

import csv
import resource
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from a2a.algos.facts import steps_for
from a2a.algos.schedule import Batches, Exchanges
from a2a.errors import A2AError, BadConfig
from a2a.record.results import NATIVE, Row
from a2a.record.stats import bandwidths
from a2a.simulate import analytical
from a2a.simulate.capture import capture_unit, rank_events
from a2a.simulate.machine import Machine, simulated_variants
from a2a.simulate.rounds import RankRounds, RoundTable, rank_rounds, table
from a2a.simulate.wires import wires
from a2a.sweep.config import OVERLAP
from a2a.sweep.grid import Point
from a2a.sweep.launch import fresh_sweep, refuse_with_resume
from a2a.sweep.session import Backend, Output, Session, SweepState, resume_state
from a2a.sweep.workload import imbalance, parse_workload

ANALYTICAL = "analytical"
CONGESTION = ("aware", "unaware")
CAPTURE_LIMIT = 1024  # ranks up to which a schedule without steps is captured by running its plans
SIDECAR = "analytical.csv"
SIDECAR_COLUMNS = ("nprocs", "algorithm", "options", "bytes_per_peer", "mesh", "groups", "workload", "aware_us",
                   "unaware_us", "busiest_us", "latency_us", "copy_us", "software_us", "rounds", "messages",
                   "cpu_seconds")  # cpu_seconds: this process's, to read and time the variant at every size
RESUMABLE = ("resume", "quiet", "fmt", "backend", "replay_timeout", "force_resume")
REFUSED = ("calibrate", "keep_traces", "replayer", "jobs", "memory", "schedule_cache", "force_resume")


def simulate_analytical(values: dict[str, Any], output: Output) -> int:
    """`bench simulate --backend analytical` as one call; the exit code."""
    given = sorted(k for k in REFUSED if values.get(k) not in (None, "", (), False))
    if given:
        raise BadConfig(f"--{given[0].replace('_', '-')} is SimGrid's; the analytical backend takes --platform, "
                        "--link, --network, --message-cost, --copy-bandwidth, --ppn and --congestion")
    if values.get("resume"):
        directory = Path(values["resume"])
        refuse_with_resume(directory, values, set(values) - set(RESUMABLE))
        state = resume_state(directory, ANALYTICAL)
        machine, congestion = Machine.of(state.meta), state.meta["analytical"]["congestion"]
    else:
        congestion = values.get("congestion") or CONGESTION[0]
        directory, state = fresh_sweep(values, "simgrid", choose=simulated_variants, suffix="-sim")
        if state.config.timing == OVERLAP:
            raise BadConfig("--timing overlap needs SimGrid (messages that move while ranks compute); the analytical "
                            "backend times --timing simulated")
        machine = Machine.from_options(values, state.config)
    return AnalyticalRun(directory, state, machine, congestion, output).run()


def facts(machine: Machine, congestion: str) -> dict[str, Any]:
    """What meta.json keeps of the machine and the model (the keys Machine.of reads back)."""
    return {"platform": machine.platform, "link": machine.link.text, "copy_bandwidth": machine.copy_bandwidth,
            "ppn_option": machine.ppn, "network": machine.network, "message_cost": machine.message_cost.facts(),
            "bandwidth_factor": machine.bandwidth.facts(), "node_memory": machine.memory.facts(),
            "analytical": {"congestion": congestion, "model": "rounds in series; a round: copies, software, the "
                           "slowest latency plus the busiest link (aware) or the slowest message alone (unaware)"}}


class AnalyticalRun:
    """One launch: the points not yet recorded, a variant's sizes timed together."""

    def __init__(self, directory: Path, state: SweepState, machine: Machine, congestion: str, output: Output):
        self.state, self.machine, self.congestion = state, machine, congestion
        network = analytical.Network.of(machine.network)
        cost = machine.message_cost
        self.costs = analytical.Costs(machine.link.bytes_per_second, machine.link.latency, machine.copy_bandwidth,
                                      cost.send, cost.recv, network)
        said = f"analytical, congestion-{congestion}, {machine.network} network; {machine.link.text}"
        said += f"; {cost.send * 1e6:.3g} us a send, {cost.recv * 1e6:.3g} us a receive" if cost.config() else ""
        backend = Backend(ANALYTICAL, facts(machine, congestion), f"{said}; times in microseconds",
                          where=lambda rows: f", simulated analytically on {rows[0].platform}")
        self.session = Session(directory, state, backend, output)
        self.sidecar = directory / SIDECAR
        self.began = time.process_time()  # when the variant being timed began (CPU seconds)

    def run(self) -> int:
        began = time.monotonic()
        try:
            for nprocs, batch in _by_nprocs(self.state.todo):
                self._nprocs(nprocs, batch)
            status = "complete"
        except KeyboardInterrupt as stop:
            status = f"terminated by {stop.args[0] if stop.args else 'SIGINT'}"
        wall = time.monotonic() - began
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.session.add("analytical_wall_seconds", wall)
        self.session.meta["analytical_peak_memory_bytes"] = max(peak, self.session.meta.get(
            "analytical_peak_memory_bytes", 0))
        self.session.say(f"analytical: {wall:.1f} s wall, peak memory {peak / 2**30:.2f} GiB (this process)")
        return self.session.finish(status)

    def _nprocs(self, nprocs: int, batch: list[Point]) -> None:
        shape, ppn = self.machine.placement(nprocs)
        nnodes = -(-nprocs // ppn)
        self.session.start_nprocs(nprocs, {"nnodes": nnodes, "ppn": ppn, "platform": shape.spec})
        links = wires(shape)
        for points in _by_variant(batch):
            self._variant(points, links, ppn, nnodes, shape.spec)
        self.session.end_nprocs(nprocs, [r for r in self.session.rows if r.nprocs == nprocs])

    def _variant(self, points: list[Point], links: Any, ppn: int, nnodes: int, platform: str) -> None:
        """Time one variant's points (one layout, every size) from one table of its rounds."""
        first, self.began = points[0], time.process_time()
        rows = [p.row(nnodes, ppn, iterations=1, warmup=0, platform=platform) for p in points]
        try:
            if first.collective == "alltoallv":
                for point, row in zip(points, rows):
                    rounds = self._rounds(point, ppn, matrix=self._matrix(point, row))
                    self._record([row], rounds, analytical.timed(rounds, links, ppn, self.costs, [1]))
                return
            rounds = self._rounds(first, ppn)
            itemsize = np.dtype(first.dtype).itemsize
            counts = [p.bytes_per_peer // itemsize for p in points]
            self._record(rows, rounds, analytical.timed(rounds, links, ppn, self.costs, counts))
        except A2AError as refused:
            for row in rows[len([r for r in rows if r.valid]):]:
                row.note = f"not simulated: {refused}"
                self.session.end_point(row, [])

    def _record(self, rows: list[Row], rounds: RoundTable, timings: list[analytical.Timing]) -> None:
        for row, timing in zip(rows, timings):
            seconds = timing.aware if self.congestion == "aware" else timing.unaware
            us = seconds * 1e6
            row.t_min_us = row.t_p50_us = row.t_p90_us = row.t_p95_us = row.t_p99_us = row.t_mean_us = us
            row.t_max_us, row.t_std_us = us, 0.0
            row.algbw_GBps, row.busbw_GBps = bandwidths(row.bytes_per_peer, row.group_size or row.nprocs, seconds)
            row.valid = True
            self._sidecar(row, timing, rounds)
            self.session.end_point(row, [seconds])

    def _sidecar(self, row: Row, timing: analytical.Timing, rounds: RoundTable) -> None:
        fresh = not self.sidecar.exists()
        with self.sidecar.open("a", newline="") as out:
            writer = csv.writer(out)
            if fresh:
                writer.writerow(SIDECAR_COLUMNS)
            writer.writerow([row.nprocs, row.algorithm, row.options, row.bytes_per_peer, row.mesh, row.groups,
                             row.workload, *(f"{x * 1e6:.9g}" for x in (timing.aware, timing.unaware, timing.busiest,
                                                                        timing.latency, timing.copy, timing.software)),
                             rounds.count, rounds.messages, f"{time.process_time() - self.began:.3f}"])

    def _matrix(self, point: Point, row: Row) -> np.ndarray:
        itemsize = np.dtype(point.dtype).itemsize
        counts = parse_workload(point.workload).counts(point.nprocs, point.bytes_per_peer, itemsize,
                                                       point.config.seed)
        row.imbalance = imbalance(counts)
        return counts

    def _rounds(self, point: Point, ppn: int, matrix: np.ndarray | None = None) -> RoundTable:
        """The point's schedule as rounds: its steps read rank by rank, or its capture where it states none."""
        if point.variant.name == NATIVE:
            raise A2AError("the analytical backend does not model SMPI's own MPI_Alltoall (native); SimGrid does")
        return schedule_rounds(point.variant.name, point.variant.options, point.nprocs, point.dtype,
                               self.machine.node_ranks(point.nprocs), point.layout, matrix)


def schedule_rounds(name: str, options: dict[str, Any], nprocs: int, dtype: str, nodes: list[list[int]],
                    layout: Any = None, matrix: np.ndarray | None = None) -> RoundTable:
    """A variant's rounds on `nprocs` ranks placed on `nodes`: in replica groups (`layout`) every group's at once; with
    `matrix` (elements from row to column) an alltoallv of the direct schedules, each message its block's bytes."""
    width = np.dtype(dtype).itemsize
    groups = layout.groups() if layout else [list(range(nprocs))]
    size = len(groups[0])
    node_of = {rank: k for k, ranks in enumerate(nodes) for rank in ranks}
    inner = [_local_nodes([node_of[m] for m in members]) for members in groups]
    steps = steps_for(name, options, inner[0])
    if matrix is not None and not _direct(steps, size):
        raise A2AError(f"{name}'s alltoallv is not a direct schedule of whole blocks: the analytical backend times "
                       "linear, pairwise, throttled and node_aware (as SimGrid's replays take direct ones)")
    if steps is None or any(steps(size, r) is None for r in (0, size - 1)):
        if nprocs > CAPTURE_LIMIT:
            raise A2AError(f"{name} states no steps, and capturing its plans at {nprocs} ranks is out of reach "
                           f"(the analytical backend captures up to {CAPTURE_LIMIT})")
        captured = capture_unit(name, options, size, dtype, nodes=inner[0])
        events: Any = lambda r: captured.events[r]  # noqa: E731
    else:
        events = lambda r: rank_events(steps(size, r), width)  # noqa: E731
    found = table(_placed(groups, events), nprocs)
    if matrix is not None:
        found.with_matrix(np.asarray(matrix), width)
    return found


def _placed(groups: list[list[int]], events: Any) -> Iterator[tuple[int, RankRounds]]:
    """Every group's ranks' rounds, destinations as ranks of the whole job, in the order of the job's ranks."""
    order = sorted((m, k, local) for k, members in enumerate(groups) for local, m in enumerate(members))
    mapped = [np.asarray(members, np.int64) for members in groups]
    cache: dict[int, RankRounds] = {}
    for rank, k, local in order:
        mine = cache.get(local) if len(groups) > 1 else None
        if mine is None:
            mine = rank_rounds(events(local), local)
            if len(groups) > 1:
                cache[local] = mine
        yield rank, RankRounds(mapped[k][mine.dests], mine.nbytes, mine.rounds, mine.copies, mine.count)


def _local_nodes(node_of_member: list[int]) -> list[list[int]]:
    """The members of a group by node, as group ranks."""
    found: dict[int, list[int]] = {}
    for local, node in enumerate(node_of_member):
        found.setdefault(node, []).append(local)
    return list(found.values())


def _direct(steps: Any, size: int) -> bool:
    """Whether the steps send every block straight to its destination (Exchanges or Batches)."""
    return steps is not None and isinstance(steps(size, 0), (Exchanges, Batches))


def _by_nprocs(todo: list[Point]) -> list[tuple[int, list[Point]]]:
    found: dict[int, list[Point]] = {}
    for point in sorted(todo, key=lambda p: (p.nprocs, str(p.layout), p.variant.label, p.bytes_per_peer)):
        found.setdefault(point.nprocs, []).append(point)
    return list(found.items())


def _by_variant(points: list[Point]) -> list[list[Point]]:
    found: dict[tuple, list[Point]] = {}
    for point in points:
        found.setdefault((point.variant.label, str(point.layout), point.call), []).append(point)
    return list(found.values())


def read_sidecar(directory: Path) -> list[dict[str, str]]:
    """The rows of a record's analytical.csv (none where it has none)."""
    path = Path(directory) / SIDECAR
    if not path.exists():
        return []
    with path.open(newline="") as source:
        return list(csv.DictReader(source))

