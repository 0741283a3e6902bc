"""A replay of traces on a platform, in the background: smpirun's or our S4U replayer's."""
from __future__ import annotations

import hashlib
import os
import re
import resource
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from a2a.errors import CaptureError
from a2a.schedules.events import Schedule
from a2a.simulate.platforms import HOST_SPEED, NO_MEMORY, TIME_SCALE, Link, NodeMemory, hostnames, platform_xml
from a2a.simulate.simgrid import replayer, smpirun, smpirun_config
from a2a.simulate.traces import Traces, write_traces

TAIL_LINES = 40  # of a failed replay's output, for the record's errors.log (a backtrace included)
SIGNALS = {int(s) for s in signal.Signals}


@dataclass(frozen=True)
class Replay:
    """One simulated call: its time, the replay's wall time until collected, and its CPU time."""

    seconds: float
    wall_seconds: float
    cpu_seconds: float


class ReplayJob:
    """A schedule's platform, hostfile and traces on disk; its replay runs in the background once started.

    The simulator is a process of its own, so the next schedule can be captured meanwhile:
    `s4u` (our S4U replayer's program) unless it is None or the traces hold SMPI's own
    MPI_Alltoall, else smpirun. A Schedule's traces are written in the job's directory; given
    Traces (unit_traces) are replayed at `scale` times their bytes, by the S4U replayer only. `memory`: what the
    ranks of a node share (platforms.NodeMemory).
    """

    def __init__(self, traces: Schedule | Traces, fabric: Any, link: Link, copy_bandwidth: float,
                 keep: Path | None = None, s4u: str | None = None, scale: int = 1, compute: float = 0.0,
                 memory: NodeMemory = NO_MEMORY):
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if keep:
            self.where = Path(keep)
        else:
            self._scratch = tempfile.TemporaryDirectory(prefix="a2a-smpi-")
            self.where = Path(self._scratch.name)
        self.where.mkdir(parents=True, exist_ok=True)
        if isinstance(traces, Schedule):
            traces = write_traces(traces, self.where / "traces", copy_bandwidth, compute=compute)
        self.platform, self.hostfile = self.where / "platform.xml", self.where / "hostfile"
        platform = platform_xml(fabric, link, copy_bandwidth, memory, traces.nprocs)
        hosts = "".join(f"{host}\n" for host in hostnames(fabric, traces.nprocs, memory))
        self.platform.write_text(platform)
        self.hostfile.write_text(hosts)
        self.traces, self.listing, self.scale, self.nprocs = traces, traces.listing, scale, traces.nprocs
        # what decides the simulated time, but for the configuration start() is given
        self.digest = hashlib.sha256(f"{platform}\0{hosts}\0{traces.digest}\0{scale}".encode()).hexdigest()
        self.s4u = None if traces.collective else s4u  # the S4U replayer's program; it has no MPI_Alltoall
        if scale != 1 and not self.s4u:
            raise ValueError("only the S4U replayer scales traces; smpirun replays them as written")
        self.running: subprocess.Popen | None = None

    def identity(self, config: list[str]) -> str:
        """What decides the simulated time: the platform, the placement, the traces, and which replayer runs them
        with what configuration (equal identities, equal times: the simulator is deterministic)."""
        return hashlib.sha256(f"{self.digest}\0{self.s4u is None}\0{chr(0).join(config)}".encode()).hexdigest()

    def memory(self) -> int:
        """About the bytes its replay holds at most."""
        return self.traces.memory()

    def start(self, config: list[str], timeout: float = 3600) -> "ReplayJob":
        """Run the replayer on the traces (output to a file: a full pipe would stall it)."""
        self.config = config
        if self.s4u:
            command = [self.s4u, str(self.platform), str(self.hostfile), str(self.listing), f"--scale={self.scale}",
                       "--log=root.thres:warning", *config]
        else:
            runner, replaying = smpirun(), replayer()
            assert runner is not None and replaying is not None  # simgrid.missing() refuses to simulate without them
            command = [runner, "-np", str(self.nprocs), "-platform", str(self.platform), "-hostfile",
                       str(self.hostfile), "-replay", str(self.listing), replaying,
                       f"--cfg=smpi/host-speed:{HOST_SPEED:.0f}f", "--log=root.thres:warning",
                       "--log=smpi_replay.thres:info", *smpirun_config(config)]
        self.command = command
        self.began, self.timeout, self.expired = time.monotonic(), timeout, False
        with open(self.where / "replay.log", "w") as log:
            # a session of its own: smpirun is a script, and a stopped replay must not leave its simulator running
            self.running = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, "LC_ALL": "C"}, start_new_session=True)
        # the limit holds while this process captures the next point, not only once it waits
        self._limit = threading.Timer(timeout, self._expire)
        self._limit.daemon = True
        self._limit.start()
        return self

    @property
    def _process(self) -> subprocess.Popen:
        """The replayer's process, once started."""
        assert self.running is not None, "the replay was not started"
        return self.running

    def _expire(self) -> None:
        if self._process.poll() is None:
            self.expired = True
            self._kill()

    def result(self) -> Replay:
        """Wait for the replay; the simulated time of the call. The files go unless kept."""
        reaped = _children_cpu()
        try:
            self._process.wait()
            wall, cpu = time.monotonic() - self.began, _children_cpu() - reaped
            output = (self.where / "replay.log").read_text(errors="replace")
        finally:
            self.stop()
        if self.expired:
            raise CaptureError(f"the replay took more than {self.timeout:g} s of wall time; stopped")
        match = re.search(r"Simulation time ([0-9.eE+-]+)", output)
        if self._process.returncode or not match:
            raise CaptureError(self._failure(output))
        return Replay(float(match.group(1)) / TIME_SCALE, wall, cpu)

    def _failure(self, output: str) -> str:
        """Why the replay gave no time: one line (the program and how it ended), then the command and the end of
        its output."""
        code = self._process.returncode
        ended = f"exit {code}" + (f", {signal.Signals(-code).name}" if -code in SIGNALS else "")
        if not code:
            ended += ", no simulated time printed"
        tail = "\n".join(output.strip().splitlines()[-TAIL_LINES:])
        return (f"{'s4u_replay' if self.s4u else 'smpirun'} failed ({ended})\n{shlex.join(self.command)}\n"
                f"its output ends:\n{tail}")

    def stop(self) -> None:
        """End the replay if it still runs, and remove its files unless kept."""
        if self.running:
            self._limit.cancel()
            if self.running.poll() is None:
                self._kill()
        if self._scratch:
            self._scratch.cleanup()

    def _kill(self) -> None:
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended meanwhile
            pass
        self._process.wait()


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (smpirun and its simulator, once waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class OverlapReplay:
    """An overlap point's two replays: its exchange alone (pure), then started, computing `ratio` times the pure
    time, and waited for (overall). SMPI moves a message posted without any call of the rank's: the bound of a
    program that never polls, whose later rounds are posted at its wait."""

    def __init__(self, pure: ReplayJob, overall: Callable[[float], ReplayJob], ratio: float):
        self.pure, self.overall, self.ratio = pure, overall, ratio
        self.second: ReplayJob | None = None

    def identity(self, config: list[str]) -> str:
        """Never one of another point's: the second replay depends on the first."""
        return f"overlap:{self.ratio!r}:{self.pure.identity(config)}"

    def memory(self) -> int:
        return self.pure.memory()

    def start(self, config: list[str], timeout: float) -> "OverlapReplay":
        self.config, self.timeout = config, timeout
        self.pure.start(config, timeout)
        return self

    def result(self) -> tuple[Replay, Replay, float]:
        """The pure replay, the overall one, and the seconds of computation between them."""
        pure = self.pure.result()
        compute = self.ratio * pure.seconds
        self.second = self.overall(compute).start(self.config, self.timeout)
        return pure, self.second.result(), compute

    def stop(self) -> None:
        for job in (self.pure, self.second):
            if job is not None:
                job.stop()
