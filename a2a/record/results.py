"""The record of a run: results.csv (one row per point), samples.csv (every sample), meta.json."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import stat
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from a2a.errors import BadResults
from a2a.record.outputs import Unwritable, file_refusal, folder_refusal, reason

OVERLAP = "overlap"  # the timing that measures how much of an exchange hides behind computation
NATIVE = "native"  # the algorithm name of the MPI library's own MPI_Alltoall(v): every comparison's baseline
CONTROL = "control"  # another algorithm (native by default) under a second name: a cell's noise floor
RESULTS_CSV = "results.csv"
SAMPLES_CSV = "samples.csv"
META_JSON = "meta.json"
FAILED = "failed on "  # how the note of a point that raised an exception begins (errors.log has the full text)


@dataclass
class Row:
    """One measured (or skipped) point: a line of results.csv."""

    nprocs: int
    nnodes: int
    ppn: int
    algorithm: str
    options: str
    dtype: str
    count: int
    bytes_per_peer: int
    iterations: int = 0
    warmup: int = 0
    t_min_us: float = math.nan
    t_p50_us: float = math.nan
    t_p90_us: float = math.nan
    t_p95_us: float = math.nan
    t_p99_us: float = math.nan
    t_mean_us: float = math.nan
    t_max_us: float = math.nan
    t_std_us: float = math.nan
    stalls: int = 0
    outliers: int = 0
    algbw_GBps: float = math.nan
    busbw_GBps: float = math.nan
    valid: bool = False
    note: str = ""
    tcp_timeouts: int | None = None
    mesh: str = ""
    groups: str = ""
    group_size: int | None = None
    ngroups: int | None = None
    timing: str = "sync"
    platform: str = ""  # the simulated topology (bench simulate); empty for measured rows
    topology: str = ""  # the emulated cluster's topology spec ('' on a real machine)
    collective: str = "alltoall"
    workload: str = "uniform"
    imbalance: float = math.nan  # the workload's largest block over its mean block
    cache: str = "warm"
    tcp_loss_probes: int | None = None
    # the overlap protocol's (empty in other rows): what the point was measured under (key columns, as text) ...
    tests: str = ""  # progress calls spread through the compute phase
    progress: str = ""  # poll (the program's own calls), or thread (the library's asynchronous progress)
    compute_ratio: str = ""  # the compute phase over the library's own non-blocking pure time ('' with compute_us)
    compute_us: str = ""  # the compute phase in microseconds, when given rather than sized from compute_ratio
    # ... and what came out: medians of per-iteration maxima over ranks, and the two published overlap figures
    t_pure_us: float = math.nan
    t_overall_us: float = math.nan
    t_compute_us: float = math.nan
    t_exposed_us: float = math.nan  # overall less compute, per iteration: the time the program waits for the exchange
    compute_phase_us: float = math.nan  # the compute phase as sized, the same for every contestant at the point
    overlap_osu_pct: float = math.nan
    overlap_imb_pct: float = math.nan
    recorded_calls: int | None = None  # a recorded workload's: how often the recorded program made this call

    @property
    def key(self) -> tuple:
        """Identify the point: what was measured, not what came out."""
        return point_key(self)

    @property
    def measured(self) -> bool:
        """A valid point with at least one timed call: what decisions and comparisons may use."""
        return self.valid and self.iterations > 0

    @property
    def label(self) -> str:
        """The series it belongs to: algorithm and options, e.g. bruck:radix=4."""
        return label(self.algorithm, self.options)

    def as_csv(self) -> dict[str, str]:
        """Render every field as CSV text (empty for NaN)."""
        return {k: _format(v) for k, v in asdict(self).items()}

    @classmethod
    def from_csv(cls, record: dict[str, str]) -> "Row":
        """Parse one CSV record; missing trailing columns take their defaults."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in record or record[f.name] is None:
                continue
            values[f.name] = _parse(record[f.name], f.type)
        return cls(**values)


COLUMNS: list[str] = [f.name for f in fields(Row)]
KEY_COLUMNS: list[str] = ["nprocs", "algorithm", "options", "dtype", "bytes_per_peer", "timing", "mesh", "groups",
                          "collective", "workload", "cache", "tests", "progress", "compute_ratio", "compute_us"]
# key columns added since samples.csv had its first columns go after them, so older files still read; `quantity`
# names what a sample times where a point keeps more than its calls' times ('' for those; the overlap protocol's:
# OVERLAP_QUANTITIES); `round` is the interleaved round of its cell the sample was timed in, `launch` the start stamp
# of the launch that timed it (both empty in records written before rounds: a2a.record.verdict)
SAMPLE_COLUMNS: list[str] = KEY_COLUMNS[:8] + ["iteration", "seconds"] + KEY_COLUMNS[8:] + ["quantity", "round",
                                                                                           "launch"]
OVERLAP_QUANTITIES = ("pure", "compute", "phase", "testing")


# The key columns' defaults, as Row declares them: a record may lack columns added since it was written
KEY_DEFAULTS = {f.name: f.default for f in fields(Row) if f.name in KEY_COLUMNS and f.default is not MISSING}


def point_key(row: Any) -> tuple:
    """Key of a point given a Row, a dict (a CSV record) or any object with the key columns."""
    if isinstance(row, dict):
        return tuple(str(row.get(k, KEY_DEFAULTS.get(k, ""))) for k in KEY_COLUMNS)
    return tuple(str(getattr(row, k)) for k in KEY_COLUMNS)


CALL = ":call="  # what a replayed point's workload adds to a recorded one: recorded:DIR:call=N


def program_workload(workload: str) -> str:
    """The workload of the program a recorded call belongs to (recorded:DIR:call=3 -> recorded:DIR); any other as it
    is."""
    return workload.rpartition(CALL)[0] if workload.startswith("recorded:") and CALL in workload else workload


def label(algorithm: str, options: str) -> str:
    """An algorithm with its results-style options as one name: ('bruck', 'radix=4') -> 'bruck:radix=4'."""
    return ":".join([algorithm, *(o for o in options.split(";") if o)])


Defaults = dict[str, dict[str, str]]  # algorithm -> option -> default, as the run's meta.json records them


def short_label(row: Row, defaults: Defaults | None) -> str:
    """The row's series as tables and their notes name it: its label without options at their defaults.

    An algorithm missing from `defaults` (a record without them) keeps every option.
    """
    return short(row.algorithm, row.options, defaults)


def short(algorithm: str, options: str, defaults: Defaults | None) -> str:
    """An algorithm's label without the options at their defaults: ('bruck', 'radix=2', {'bruck': {'radix': '2'}})
    -> 'bruck'. An algorithm missing from `defaults` keeps every option."""
    own = (defaults or {}).get(algorithm, {})
    changed = [kv for kv in options.split(";") if kv.partition("=")[::2] not in own.items()]
    return label(algorithm, ";".join(changed))


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(float(value))  # every digit: what is read back is what was printed
    return str(value)


def _parse(text: str, kind: Any) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    if kind.endswith("| None"):
        return _parse(text, kind[: -len("| None")].strip()) if text.strip() else None
    if kind == "bool":
        return text.strip().lower() in ("true", "1", "yes")
    if kind == "int":
        return int(text) if text.strip() else 0
    if kind == "float":
        return float(text) if text.strip() else math.nan
    return text


# Tests set it to N to kill this process after the Nth point's samples reach the disk, before its row
KILL_BEFORE_ROW = "A2A_TEST_KILL_BEFORE_ROW"


class Recorder:
    """Append rows and samples to a results directory, flushing after every point.

    A point's samples reach the disk before its row, so a kill in between leaves samples
    without a row; opening the directory again drops them (the point is measured anew). A write that fails (a full
    disk) is cut off again, so the points before it stay whole and resume; Unwritable says so.
    """

    def __init__(self, directory: Path, launch: str = ""):
        self.directory, self.launch = Path(directory), launch
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise self._refused(folder_refusal(self.directory) or reason(error, self.directory, self.directory)) \
                from None
        self.dropped = drop_orphan_samples(self.directory)
        self._results = self._appender(RESULTS_CSV, COLUMNS)
        self._samples = self._appender(SAMPLES_CSV, SAMPLE_COLUMNS)
        self._added = 0

    def add(self, row: Row, samples: Iterable[float] | dict[str, Iterable[float]] = (),
            rounds: Iterable[int] | None = None) -> None:
        """Write one point's samples (its calls' times, or by quantity: '' for those) with the round each was timed
        in (None: no rounds), then its row, each flushed."""
        key = dict(zip(KEY_COLUMNS, point_key(row)))
        round_of = list(rounds) if rounds is not None else None
        for quantity, series in (samples if isinstance(samples, dict) else {"": samples}).items():
            for i, seconds in enumerate(series):
                self._samples.writer.writerow({**key, "iteration": i, "seconds": repr(float(seconds)),
                                               "quantity": quantity, "round": "" if round_of is None else round_of[i],
                                               "launch": self.launch if round_of is not None else ""})
        self._flush(self._samples)
        self._added += 1
        if os.environ.get(KILL_BEFORE_ROW) == str(self._added):
            os.kill(os.getpid(), signal.SIGKILL)
        self._results.writer.writerow(row.as_csv())
        self._flush(self._results)

    def close(self) -> None:
        """Close both files."""
        for appender in (self._results, self._samples):
            appender.close()

    def _appender(self, name: str, columns: list[str]) -> "Appender":
        try:
            return Appender(self.directory / name, columns)
        except OSError as error:
            raise self._refused(reason(error, self.directory, self.directory)) from None

    def _flush(self, appender: "Appender") -> None:
        try:
            appender.flush()
        except OSError as error:
            raise self._refused(f"{reason(error, self.directory, self.directory)}; the points recorded before are kept "
                                "whole (--resume goes on from them)") from None

    def _refused(self, why: str) -> Unwritable:
        """The error that says the results cannot be written here, and why."""
        return Unwritable(f"cannot write the results to {self.directory}: {why}")


class Appender:
    """A CSV file written a batch of lines at a time, each batch on the disk whole or not at all (cut off again when
    a write fails). A file written before later columns keeps its header: what it lacks is not written."""

    def __init__(self, path: Path, columns: list[str]):
        fresh = not path.exists() or path.stat().st_size == 0
        header = columns if fresh else check_header(path, columns)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self.text = io.StringIO()
        self.writer = csv.DictWriter(self.text, fieldnames=header, extrasaction="ignore")
        if fresh:
            self.writer.writeheader()
            self.flush()  # a launch killed before its first row still leaves a record that resumes

    def flush(self) -> None:
        """Write the lines buffered, then sync; on an OSError, cut the file back to where it was and raise it."""
        data = memoryview(self.text.getvalue().encode())
        self.text.seek(0)
        self.text.truncate()
        size = os.fstat(self.fd).st_size
        try:
            while data:
                data = data[os.write(self.fd, data):]
            os.fsync(self.fd)
        except OSError:
            os.ftruncate(self.fd, size)
            raise

    def close(self) -> None:
        """Close the file."""
        os.close(self.fd)


def drop_orphan_samples(directory: Path) -> int:
    """Remove samples (and torn lines) of points that have no row in results.csv; return how many."""
    path = Path(directory) / SAMPLES_CSV
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    header = check_header(path, SAMPLE_COLUMNS)
    results = Path(directory) / RESULTS_CSV
    done = {row.key for row in read_rows(directory)} if results.is_file() else set()
    with open(path, newline="") as handle:
        records = list(csv.reader(handle))[1:]
    kept = [r for r in records if len(r) == len(header) and point_key(dict(zip(header, r))) in done]
    if len(kept) < len(records):
        text = io.StringIO()
        csv.writer(text).writerows([header, *kept])
        write_atomic(path, text.getvalue())
    return len(records) - len(kept)


def check_header(path: Path, columns: list[str]) -> list[str]:
    """Return the header of a CSV file, or raise BadResults if it is not ours."""
    with open(path, newline="") as handle:
        header = next(csv.reader(handle), [])
    if header[: len(columns)] != columns[: len(header)] or not header:
        raise BadResults(
            f"{path}: unexpected CSV header {','.join(header[:6])}...; "
            f"expected {','.join(columns[:6])}... (a results file written by `bench run`)"
        )
    return header


def read_rows(directory: Path) -> list[Row]:
    """Read results.csv of a results directory."""
    path = Path(directory) / RESULTS_CSV
    if not path.is_file():
        inside = sorted(str(p.parent) for p in Path(directory).glob(f"*/{RESULTS_CSV}"))
        held = f"; give the records it holds instead: {' '.join(inside)}" if inside else ""
        raise BadResults(f"{directory}: not a results directory (no {RESULTS_CSV}){held}")
    check_header(path, COLUMNS)
    with open(path, newline="") as handle:
        return [Row.from_csv(record) for record in csv.DictReader(handle)]


def read_samples(directory: Path, quantity: str = "") -> dict[tuple, list[float]]:
    """Read samples.csv into {point key: [seconds in iteration order]}: the calls' times, or another `quantity`."""
    return {key: [seconds for _, _, seconds in found] for key, found in read_rounds(directory, quantity).items()}


def read_rounds(directory: Path, quantity: str = "") -> dict[tuple, list[tuple[str, int, float]]]:
    """Read samples.csv into {point key: [(launch, round, seconds)]}; samples of a record written before rounds are
    each their launch's round -1 (one block per point: a2a.record.verdict says what that allows)."""
    path = Path(directory) / SAMPLES_CSV
    found: dict[tuple, list[tuple[str, int, float]]] = {}
    if not path.is_file():
        return found
    check_header(path, SAMPLE_COLUMNS)
    with open(path, newline="") as handle:
        for record in csv.DictReader(handle):
            if (record.get("quantity") or "") == quantity:
                number = record.get("round") or ""
                found.setdefault(point_key(record), []).append(
                    (record.get("launch") or "", int(number) if number else -1, float(record["seconds"])))
    return found


def read_meta(directory: Path) -> dict[str, Any]:
    """Read meta.json of a results directory ({} if absent)."""
    path = Path(directory) / META_JSON
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BadResults(f"{path}: not valid JSON ({exc})") from exc


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see either the old or the new content, never a part; with the mode `open` would
    give it (the old file's, else what the umask leaves of rw-rw-rw-). Unwritable names `path`, never the temporary
    file beside it, which is removed."""
    path = Path(path)
    tmp = ""
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else 0o666 & ~umask()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            os.fchmod(fd, mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        why = file_refusal(path) or reason(error, path.parent, path.parent)
        kept = f" ({path} keeps what it held)" if path.is_file() else ""
        raise Unwritable(f"cannot write {path}: {why}{kept}") from None


def umask() -> int:
    """This process's umask: as Linux tells it, else set and set back (where no other thread creates a file)."""
    try:
        return next(int(line.split()[1], 8) for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o077)
        os.umask(mask)
        return mask


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    """Write meta.json atomically."""
    write_atomic(Path(directory) / META_JSON, json.dumps(meta, indent=2, default=str) + "\n")


@dataclass
class Run:
    """A results directory read back: rows, samples by point key, and metadata."""

    directory: Path
    rows: list[Row] = field(default_factory=list)
    samples: dict[tuple, list[float]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def load(directory: Path) -> Run:
    """Read a whole results directory."""
    directory = Path(directory)
    return Run(directory, read_rows(directory), read_samples(directory), read_meta(directory))
