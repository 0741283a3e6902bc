"""The simulated machine of a simulation: platform, links, copy rate, ranks per node, message cost, replayer; and
the variants a simulation runs (our schedules, and SMPI's own MPI_Alltoall for native)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from a2a import fabric
from a2a.algos.registry import candidates
from a2a.errors import BadConfig, BadOption
from a2a.record.results import NATIVE
from a2a.simulate import platforms, simgrid
from a2a.sweep.config import SweepConfig
from a2a.sweep.variants import Variant, parse_variant, variants

# The machine's options at their defaults (`bench simulate` prints them in its help)
MACHINE_DEFAULTS = {"platform": "switch", "link": "100Gbps,1us", "network": "calibrated",
                    "replayer": simgrid.REPLAYERS[0]}


@dataclass(frozen=True)
class Machine:
    """What the simulated calls run on: the topology, its links, the memory copy rate, ranks per node, the
    software cost of a message, the replayer, the share of a link's rate a message gets, and the memory bandwidth
    the ranks of a node share."""

    platform: str
    link: platforms.Link
    copy_bandwidth: float
    ppn: int
    network: str = MACHINE_DEFAULTS["network"]
    message_cost: platforms.MessageCost = platforms.MessageCost()
    replayer: str = MACHINE_DEFAULTS["replayer"]
    bandwidth: platforms.BandwidthFactor = platforms.BandwidthFactor()
    memory: platforms.NodeMemory = platforms.NodeMemory()

    @classmethod
    def from_options(cls, values: dict[str, Any], config: SweepConfig) -> "Machine":
        """The machine `bench simulate`'s options describe, checked against every process count (a platform too
        small, or a bad spec, is refused now); --calibrate is applied by a2a.simulate.calibrate."""
        def value(key: str) -> str:
            return values.get(key) or MACHINE_DEFAULTS[key]

        if values.get("message_cost") and values.get("calibrate"):
            raise BadConfig("--message-cost and --calibrate both set the cost of a message; give one")
        cost = platforms.MessageCost.parse(values["message_cost"]) if values.get("message_cost") else None
        machine = cls(value("platform"), platforms.Link.parse(value("link")), _bandwidth(values.get("copy_bandwidth")),
                      config.ppn, value("network"), cost or platforms.MessageCost(), value("replayer"))
        for n in config.nprocs:
            machine.placement(n)
        return machine

    def placement(self, nprocs: int) -> tuple[Any, int]:
        """The fabric for `nprocs` ranks and the ranks per node (block placement)."""
        ppn = self.ppn or 1
        kind = self.platform.split(":")[0].strip().lower()
        if kind in ("switch", "ring"):
            return fabric.parse(self.platform, nodes=math.ceil(nprocs / ppn)), ppn
        shape = platforms.routable(fabric.parse(self.platform))
        ppn = self.ppn or math.ceil(nprocs / shape.nodes)
        if math.ceil(nprocs / ppn) > shape.nodes:
            raise BadConfig(f"{nprocs} ranks at --ppn {ppn} need {math.ceil(nprocs / ppn)} nodes; "
                            f"{shape.spec} has {shape.nodes} (raise --ppn or leave it out)")
        return shape, ppn

    def node_ranks(self, nprocs: int) -> list[list[int]]:
        """The ranks of each node (block placement)."""
        ppn = self.placement(nprocs)[1]
        return [list(range(start, min(start + ppn, nprocs))) for start in range(0, nprocs, ppn)]

    def facts(self) -> dict[str, Any]:
        """What meta.json keeps of the machine and the simulator."""
        return {"platform": self.platform, "link": self.link.text, "copy_bandwidth": self.copy_bandwidth,
                "ppn_option": self.ppn, "network": self.network, "message_cost": self.message_cost.facts(),
                "bandwidth_factor": self.bandwidth.facts(), "node_memory": self.memory.facts(),
                "simgrid": simgrid.version(), "smpirun": simgrid.smpirun(), "replayer": simgrid.replayer(),
                "replay": self.replayer,
                "s4u_replayer": simgrid.s4u_replayer() if self.replayer == "s4u" else None}

    @classmethod
    def of(cls, meta: dict[str, Any]) -> "Machine":
        """The machine a simulated record's meta.json describes."""
        return cls(meta["platform"], platforms.Link.parse(meta["link"]), meta["copy_bandwidth"], meta["ppn_option"],
                   meta.get("network", "calibrated"), platforms.MessageCost.of(meta.get("message_cost")),
                   meta.get("replay", "smpi"), platforms.BandwidthFactor.of(meta.get("bandwidth_factor")),
                   platforms.NodeMemory.of(meta.get("node_memory")))

    def config(self) -> list[str]:
        """The SMPI options of every replay on it: the network model's, the message cost's and the bandwidth's."""
        return platforms.NETWORKS[self.network] + self.message_cost.config() + self.bandwidth.config()


def simulated_variants(text: str, assignments: dict[str, dict[str, str]], ppn: int, collective: str = "alltoall",
                       workload: str = "uniform") -> list[Variant]:
    """Our algorithms as `bench run` resolves them; native's options pick SMPI's MPI_Alltoall (or MPI_Alltoallv)."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if specs == ["all"]:
        specs = candidates(collective)
    natives = [s for s in specs if parse_variant(s)[0] == NATIVE]
    ours = [s for s in specs if s not in natives]
    chosen = (variants(",".join(ours), {k: v for k, v in assignments.items() if k != NATIVE}, ppn, collective,
                       workload) if ours else [])
    for spec in natives:
        given = {**assignments.get(NATIVE, {}), **parse_variant(spec)[1]}
        chosen += [Variant(NATIVE, o) for o in native_options(given, collective)]
    if not chosen:
        raise BadConfig("no algorithms to simulate; name some with --algorithms (see `bench list`)")
    return chosen


def native_options(given: dict[str, str], collective: str = "alltoall") -> list[dict[str, str]]:
    """native -> the mpich and ompi selectors; selector=S, algorithm=NAME or algorithm=all as asked (an alltoall's:
    an alltoallv goes by its selector)."""
    unknown = sorted(set(given) - {"selector", "algorithm"})
    if unknown:
        raise BadOption(f"native: unknown option {', '.join(unknown)} in the simulator; accepted: "
                        f"selector ({', '.join(platforms.SELECTORS)}) or algorithm (SMPI's alltoall names, or all)")
    if "algorithm" in given:
        if collective != "alltoall":
            raise BadOption(f"native:algorithm={given['algorithm']} names one of SMPI's MPI_Alltoall algorithms; an "
                            f"{collective} goes by its selector: native:selector={'|'.join(platforms.SELECTORS)}")
        names = platforms.SMPI_ALLTOALL if given["algorithm"] == "all" else [given["algorithm"]]
        bad = [n for n in names if n not in platforms.SMPI_ALLTOALL]
        if bad:
            raise BadOption(f"native: algorithm={bad[0]!r}; accepted: {', '.join(platforms.SMPI_ALLTOALL)} or all")
        return [{"algorithm": n} for n in names]
    selectors = [given["selector"]] if "selector" in given else ["mpich", "ompi"]
    bad = [s for s in selectors if s not in platforms.SELECTORS]
    if bad:
        raise BadOption(f"native: selector={bad[0]!r}; accepted: {', '.join(platforms.SELECTORS)}")
    return [{"selector": s} for s in selectors]


def _bandwidth(text: str | None) -> float:
    """--copy-bandwidth, or this machine's measured copy rate."""
    if not text:
        return platforms.copy_bandwidth()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise BadConfig(f"--copy-bandwidth {text!r}; accepted: bytes per second above 0, e.g. 5e9")
    return value
