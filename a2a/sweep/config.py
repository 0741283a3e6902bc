"""The sweep's configuration: every option's default (one place), and its check, for either backend.

`from_options` turns option values (text from the command line, or YAML values) into a checked
SweepConfig; the command line's help reads DEFAULTS. A config is stored in meta.json, so that
--resume rebuilds it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from a2a.algos.registry import COLLECTIVES, get
from a2a.errors import BadConfig
from a2a.mpi import relaunched
from a2a.record.results import CONTROL, KEY_DEFAULTS, NATIVE, OVERLAP
from a2a.sweep.mesh import Layout, mesh_layouts
from a2a.sweep.parsing import (
    as_list,
    as_text,
    at_least_one,
    choice,
    parse_assignments,
    parse_count,
    parse_dtype,
    parse_list,
    seconds,
)
from a2a.sweep.variants import Variant, variants
from a2a.sweep.workload import Workload, parse_workload
from a2a.units import parse_size

TIMINGS = ("sync", "pipelined", "imb", "global", OVERLAP)  # a2a.measure.protocols holds each one's help and visit
CACHES = ("warm", "cold")
SIMULATED = "simulated"  # the timing of a simulated record: one replay per point
PROGRESS_MODES = ("poll", "thread")  # who advances an exchange in flight: the program's calls, or the library's thread
SIMULATED_PROGRESS_MODE = "network"  # a simulated exchange's: SMPI moves posted messages with no call of the rank's

# Every sweep option's default. `nprocs` and `max_memory` of a measured sweep come from the job
# (powers of two up to the world size; a share of the node's memory).
DEFAULTS: dict[str, Any] = {
    "sizes": "4:128K:x2", "dtype": "float32", "algorithms": "all", "collective": KEY_DEFAULTS["collective"],
    "workload": KEY_DEFAULTS["workload"], "warmup": 1, "iterations": 25, "rounds": 25, "control": True, "aa": False,
    "max_time_per_point": 10.0,
    "stall_threshold": 0.1, "check": True, "timeout": 300.0, "ppn": 0, "seed": 0, "timing": KEY_DEFAULTS["timing"],
    "cache": KEY_DEFAULTS["cache"], "mesh": "", "groups": (), "option": (), "plugin": (),
    "compute_ratio": 1.0, "compute_us": 0.0, "tests": "0", "progress": PROGRESS_MODES[0],
}
SIMULATION_DEFAULTS: dict[str, Any] = {**DEFAULTS, "sizes": "8,1K,64K", "nprocs": "64", "timing": SIMULATED}
BACKEND_DEFAULTS = {"mpi": DEFAULTS, "simgrid": SIMULATION_DEFAULTS}
# What a --config YAML file may set: every sweep option, the launches of it, the process counts, the memory cap and
# where the record goes (the rest of `bench run`'s options say how to run or show it: the command line's alone)
CONFIG_KEYS = (*DEFAULTS, "launches", "nprocs", "max_memory", "output")
# What --resume takes from the record instead (--timeout may change from one launch to the next)
SWEEP_OPTIONS = tuple(k for k in (*DEFAULTS, "config", "nprocs", "max_memory") if k != "timeout")

Chooser = Callable[[str, dict[str, dict[str, str]], int, str, str], list[Variant]]


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs; stored in meta.json so that --resume can rebuild it."""

    sizes: list[int]
    dtype: str
    variants: list[Variant]
    nprocs: list[int]
    warmup: int = DEFAULTS["warmup"]  # untimed calls before each visit's timed ones
    iterations: int = DEFAULTS["iterations"]  # timed calls per point, split over its rounds
    rounds: int = 1  # interleaved rounds per cell (a record written before rounds had one block per point)
    control: bool = False  # whether `control` (native under a second name) was added to every cell
    aa: bool = False  # whether the sweep is the A/A self-check (pairwise and two twins of it)
    max_time_per_point: float = DEFAULTS["max_time_per_point"]
    stall_threshold: float = DEFAULTS["stall_threshold"]
    check: bool = DEFAULTS["check"]
    timeout: float = DEFAULTS["timeout"]
    max_memory: int = 1 << 30
    ppn: int = DEFAULTS["ppn"]
    seed: int = DEFAULTS["seed"]
    timing: str = DEFAULTS["timing"]
    layouts: list[Layout] = field(default_factory=list)
    collective: str = DEFAULTS["collective"]
    workload: str = DEFAULTS["workload"]
    cache: str = DEFAULTS["cache"]
    compute_ratio: float = DEFAULTS["compute_ratio"]  # the overlap protocol's
    compute_us: float = DEFAULTS["compute_us"]  # the overlap protocol's compute phase, when given (0: by the ratio)
    tests: list[int] = field(default_factory=lambda: [int(DEFAULTS["tests"])])
    progress: list[str] = field(default_factory=lambda: [DEFAULTS["progress"]])
    # a recorded workload's calls replayed: [call index, nprocs, bytes per peer, how often the program made it]
    calls: list[list[int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepConfig":
        """Rebuild from as_dict() output."""
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["variants"] = [Variant(v["name"], dict(v["options"])) for v in data["variants"]]
        values["layouts"] = [Layout(tuple(m["mesh"]), tuple(m["keep"])) for m in data.get("layouts", [])]
        return cls(**values)


def default_nprocs(size: int) -> str:
    """Powers of two from 2 up to the world size, and the world size itself."""
    counts = {size}
    n = 2
    while n <= size:
        counts.add(n)
        n *= 2
    return ",".join(map(str, sorted(counts)))


def from_options(values: dict[str, Any], backend: str = "mpi", world: int | None = None, memory: int | None = None,
                 choose: Chooser = variants) -> SweepConfig:
    """A checked config from option values, every one not given at its default (BadConfig or BadOption names what
    is wrong). `world`: the ranks of the measuring job (None: a simulation, any count); `memory`: the default
    bytes of buffers per rank; `choose` resolves the algorithms (the simulator's knows SMPI's natives)."""
    defaults = BACKEND_DEFAULTS[backend]
    get = lambda key: defaults.get(key) if values.get(key) in (None, "") else values[key]  # noqa: E731
    workload = parse_workload(str(get("workload")))
    replay = _replayed(values, workload, world, backend) if workload.kind == "recorded" else {}
    dtype = replay["dtype"] if replay and values.get("dtype") in (None, "") else parse_dtype(str(get("dtype")))
    sizes = replay.get("sizes") or parse_list(as_text(get("sizes")), "size")
    check_sizes(sizes, dtype)
    layouts = mesh_layouts(as_text(get("mesh")), as_list(get("groups")))
    nprocs = _process_counts(replay.get("nprocs") or values.get("nprocs"), layouts, world, defaults.get("nprocs"))
    ppn = parse_count(get("ppn"), "--ppn")
    collective = replay.get("collective") or choice(get("collective"), COLLECTIVES, "--collective")
    if collective == "alltoall" and workload.kind not in ("uniform", "recorded"):
        raise BadConfig(f"--workload {workload.text} makes uneven counts; add --collective alltoallv")
    aa = bool(get("aa"))
    if aa and values.get("algorithms") not in (None, ""):
        raise BadConfig("--aa races the library's own and pairwise against twins of them; drop --algorithms")
    chosen = choose(AA_ALGORITHMS if aa else as_text(get("algorithms")), parse_assignments(get("option"), "--option"),
                    ppn, collective, workload.text)
    calls = [call for call in replay.get("calls", []) if call[1] in nprocs]
    if backend == "simgrid":  # one replay per point (two for overlap): no warm-up, no check (the capture checks)
        timing = choice(get("timing"), (SIMULATED, OVERLAP), "--timing")
        ratio = _ratio(get("compute_ratio")) if timing == OVERLAP else DEFAULTS["compute_ratio"]
        return SweepConfig(sizes=sizes, dtype=dtype, nprocs=nprocs, ppn=ppn, variants=chosen, layouts=layouts,
                           collective=collective, workload=workload.text, calls=calls, iterations=1, warmup=0,
                           timing=timing, check=False,
                           compute_ratio=ratio,
                           progress=[SIMULATED_PROGRESS_MODE] if timing == OVERLAP else [DEFAULTS["progress"]])
    timing, cache = choice(get("timing"), TIMINGS, "--timing"), choice(get("cache"), CACHES, "--cache")
    ratio, compute_us, tests, progress = _overlap_options(values, get, timing, cache)
    iterations = at_least_one(get("iterations"), "--iterations")
    control = bool(get("control"))
    swept = _overlapping(chosen, tests, as_text(get("algorithms"))) if timing == OVERLAP else chosen
    return SweepConfig(
        sizes=sizes, dtype=dtype, nprocs=nprocs, ppn=ppn, collective=collective, workload=workload.text,
        calls=calls, layouts=layouts, warmup=parse_count(get("warmup"), "--warmup"),
        iterations=iterations, rounds=min(at_least_one(get("rounds"), "--rounds"), iterations), control=control,
        aa=aa, max_time_per_point=seconds(get("max_time_per_point"), "--max-time-per-point"),
        stall_threshold=seconds(get("stall_threshold"), "--stall-threshold"),
        check=bool(get("check")), timeout=seconds(get("timeout"), "--timeout"),
        max_memory=parse_size(str(values.get("max_memory") or memory or SweepConfig.max_memory), "--max-memory"),
        seed=parse_count(get("seed"), "--seed"), timing=timing, cache=cache, compute_ratio=ratio,
        compute_us=compute_us, tests=tests,
        progress=progress, variants=with_controls(swept, control, aa),
    )


AA_ALGORITHMS = "native,pairwise"  # what --aa races, each beside twins of it (with_controls)
AA_TWINS = 2  # twins of pairwise in the A/A self-check: three names for one schedule


def with_controls(chosen: list[Variant], control: bool, aa: bool) -> list[Variant]:
    """The variants swept: those chosen, a control of the library's own beside its first form (`control`), and
    under --aa two twins of every other algorithm chosen."""
    added = []
    native = next((v for v in chosen if v.name == NATIVE), None)
    if control and native is not None:
        added.append(_control(NATIVE, 1, native.options.get("form")))
    if aa:
        added += [_control(v.name, twin, None) for v in chosen if v.name != NATIVE for twin in range(1, AA_TWINS + 1)]
    return chosen + [v for v in added if v not in chosen]


def _control(of: str, twin: int, form: str | None) -> Variant:
    given = {"of": of, "twin": str(twin), **({"form": form} if form else {})}
    return Variant(CONTROL, get(CONTROL).resolve(given))


def _replayed(values: dict[str, Any], workload: Workload, world: int | None, backend: str) -> dict[str, Any]:
    """What a recorded workload sets: the collective, the dtype of its width, the sizes and process counts of its
    calls, and the calls; BadConfig where an option given contradicts the record."""
    if values.get("sizes") not in (None, ""):
        raise BadConfig(f"--sizes goes with a synthetic workload; {workload.text} replays the sizes of the "
                        "program's own calls: leave --sizes out")
    record = workload.record()
    given = values.get("collective") or None
    collective = record.collective(given, simulated=backend == "simgrid")
    calls = record.replayed(collective)
    made = sorted({call.nprocs for call in calls})
    asked = parse_list(as_text(values["nprocs"]), "process count", parse_count) if values.get("nprocs") else made
    stray = [n for n in asked if n not in made]
    if stray:
        raise BadConfig(f"--nprocs {','.join(map(str, stray))}: {workload.text}'s {collective} calls were made on "
                        f"{', '.join(map(str, made))} ranks; a replay runs at the recorded process counts")
    if world is not None and max(asked) > world:
        raise BadConfig(f"{workload.text}'s {collective} calls were made on {max(asked)} ranks; this job has {world}"
                        f": {relaunched(max(asked))}")
    return {"collective": collective, "dtype": record.dtype(collective), "nprocs": ",".join(map(str, asked)),
            "sizes": sorted({call.bytes_per_peer for call in calls}),
            "calls": [[call.index, call.nprocs, call.bytes_per_peer, call.calls] for call in calls]}


def _overlap_options(values: dict[str, Any], get: Callable[[str], Any], timing: str,
                     cache: str) -> tuple[float, float, list[int], list[str]]:
    """--compute-ratio, --compute-us, --tests and --progress checked: they go with --timing overlap only (and it
    with warm caches: it times one buffer set)."""
    given = [f"--{k.replace('_', '-')}" for k in ("compute_ratio", "compute_us", "tests", "progress")
             if values.get(k) not in (None, "")]
    if timing != OVERLAP:
        if given:
            raise BadConfig(f"{', '.join(given)} go with --timing overlap; accepted there: --compute-ratio R >= 0, "
                            "--compute-us T > 0, --tests N[,N..], --progress poll,thread")
        return DEFAULTS["compute_ratio"], DEFAULTS["compute_us"], [int(DEFAULTS["tests"])], [DEFAULTS["progress"]]
    if cache != "warm":
        raise BadConfig("--cache cold goes with the sync, pipelined, imb and global timings; --timing overlap times "
                        "one buffer set")
    progress = [p.strip() for p in as_text(get("progress")).split(",") if p.strip()]
    for mode in progress:
        choice(mode, PROGRESS_MODES, "--progress")
    if values.get("compute_us") not in (None, "") and values.get("compute_ratio") not in (None, ""):
        raise BadConfig("--compute-ratio and --compute-us both size the compute phase; give one")
    return (_ratio(get("compute_ratio")), _microseconds(get("compute_us")),
            parse_list(as_text(get("tests")), "--tests", parse_count),
            list(dict.fromkeys(progress)))


def _ratio(value: Any) -> float:
    """--compute-ratio: 0 or more."""
    try:
        ratio = float(value)
    except (TypeError, ValueError):
        ratio = -1.0
    if not ratio >= 0:
        raise BadConfig(f"--compute-ratio {value!r}; accepted: 0 or more (the compute phase over the pure exchange "
                        "time)")
    return ratio


def _microseconds(value: Any) -> float:
    """--compute-us: more than 0 (0, the default: sized by --compute-ratio)."""
    try:
        given = float(value)
    except (TypeError, ValueError):
        given = -1.0
    if not given >= 0 or given == float("inf"):
        raise BadConfig(f"--compute-us {value!r}; accepted: microseconds of computation, more than 0")
    return given


def _overlapping(chosen: list[Variant], tests: list[int], algorithms: str) -> list[Variant]:
    """Under --timing overlap, the library's own blocking MPI_Alltoall cannot overlap anything (no test reaches it
    while it runs): `all` means the non-blocking forms, native's non-blocking and persistent ones instead; a blocking
    form named with tests is refused (without tests it is the baseline a program that never overlaps would see)."""
    blocking = [v for v in chosen if v.name == NATIVE and v.options.get("form") == "blocking"]
    if not blocking or algorithms.strip() != "all" and max(tests) == 0:
        return chosen
    if algorithms.strip() != "all":
        raise BadConfig(f"{blocking[0].label} is MPI_Alltoall, which no test reaches while it runs; with --tests "
                        f"{','.join(map(str, tests))} accepted: native:form=nonblocking or native:form=persistent")
    forms = [Variant(NATIVE, {**blocking[0].options, "form": form}) for form in ("nonblocking", "persistent")]
    return [v for v in chosen if v not in blocking] + forms


def _process_counts(given: Any, layouts: list[Layout], world: int | None, default: str | None) -> list[int]:
    """--nprocs checked against the job and the meshes (default: the meshes' sizes, else `default`, else powers of
    two up to the job's size)."""
    for layout in layouts:
        if world is not None and layout.nprocs > world:
            raise BadConfig(f"mesh {layout.mesh_text} holds {layout.nprocs} ranks, more than the {world} of this job")
    fallback = ",".join(str(m.nprocs) for m in layouts) if layouts else default or default_nprocs(world or 1)
    nprocs = parse_list(as_text(given or fallback), "process count", parse_count)
    if world is not None and (nprocs[0] < 1 or nprocs[-1] > world):
        alone = "this process runs alone (no launcher)" if world == 1 else f"this job has {world}"
        launch = f"; {alone}: {relaunched(nprocs[-1])}" if nprocs[0] >= 1 else ""
        raise BadConfig(f"process counts {nprocs} must lie between 1 and the world size {world}{launch}")
    if nprocs[0] < 1:
        raise BadConfig("process counts must be 1 or more")
    for layout in layouts:
        if layout.nprocs not in nprocs:
            job = f"; the world has {world}" if world is not None else ""
            raise BadConfig(f"mesh {layout.mesh_text} holds {layout.nprocs} ranks, not a process count of this sweep "
                            f"({', '.join(map(str, nprocs))}{job})")
    return nprocs


def check_sizes(sizes: list[int], dtype: str) -> None:
    """BadConfig unless every size is a whole number of `dtype` items."""
    itemsize = np.dtype(dtype).itemsize
    odd = [s for s in sizes if s % itemsize]
    if odd:
        raise BadConfig(f"sizes {odd} are not multiples of {dtype}'s {itemsize} bytes")
