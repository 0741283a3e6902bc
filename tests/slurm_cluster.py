"""A private single-node Slurm (munged, slurmctld, slurmd) for tests, under one temporary directory.

Everything it needs lives in that directory: the munge key and socket, slurm.conf, state,
spool and logs; free ports are picked, so it leaves the machine's own Slurm (if any) alone.
Client commands find it through SLURM_CONF in `env`. The daemons run as root (SlurmUser=root).
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from a2a.mpi import clean_launcher_env

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel", "srun")


class SlurmUnavailable(Exception):
    """Slurm cannot run here at all (missing programs, not root): a reason to skip."""


def missing() -> str | None:
    """Why a private Slurm cannot be started here, or None if it can."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if not _which(name)]
    if absent:
        return (f"Slurm is not installed ({', '.join(absent)} not found); "
                "`apt-get install slurm-wlm munge` (.ci/setup.d/slurm.sh) provides it")
    if os.geteuid() != 0:
        return "a private Slurm needs root (slurmd runs jobs as their user; SlurmUser=root)"
    return None


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


@dataclass
class Cluster:
    """A running private Slurm: its directory, client environment and daemons."""

    root: Path
    env: dict[str, str]
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def start(cls, partition: str = "test") -> Cluster:
        """Start munged, slurmctld and slurmd; return once the node is idle."""
        reason = missing()
        if reason:
            raise SlurmUnavailable(reason)
        root = Path(tempfile.mkdtemp(prefix="a2a-slurm-"))
        root.chmod(0o755)  # munged insists that every directory above its socket is searchable
        env = {k: v for k, v in clean_launcher_env().items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
        env["SLURM_CONF"] = str(root / "slurm.conf")
        cluster = cls(root, env)
        try:
            cluster._configure(partition)
            cluster._launch()
            cluster._wait_until_idle()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _configure(self, partition: str) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(mode=0o700 if sub == "munge" else 0o755)
        (self.root / "munge").chmod(0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        node = _node_line()
        host = node.split()[0].split("=", 1)[1]
        ctld_port, slurmd_port = _free_ports(2)
        (self.root / "slurm.conf").write_text(SLURM_CONF.format(
            root=self.root, host=host, node=node, partition=partition,
            ctld_port=ctld_port, slurmd_port=slurmd_port))

    def _launch(self) -> None:
        munge = self.root / "munge"
        self._daemon("munged", "-F", f"--key-file={munge / 'munge.key'}", f"--socket={munge / 'socket'}",
                     f"--pid-file={munge / 'pid'}", f"--seed-file={munge / 'seed'}",
                     f"--log-file={self.root / 'log' / 'munged.log'}")
        _wait_for(lambda: (munge / "socket").exists(), 10, "munged did not create its socket", self)
        self._daemon("slurmctld", "-D", "-i")
        self._daemon("slurmd", "-D")

    def _daemon(self, name: str, *args: str) -> None:
        with open(self.root / "log" / f"{name}.out", "w") as log:
            self.daemons.append(subprocess.Popen([_which(name) or name, *args], env=self.env, stdout=log,
                                                 stderr=subprocess.STDOUT, start_new_session=True))

    def _wait_until_idle(self) -> None:
        def idle() -> bool:
            for daemon in self.daemons:
                if daemon.poll() is not None:
                    raise RuntimeError(f"{daemon.args!r} exited with {daemon.returncode}\n{self.logs()}")
            state = self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
            return state == "idle"
        _wait_for(idle, 60, "the Slurm node did not become idle", self)

    def run(self, *command: str, check: bool = True, timeout: float = 60,
            cwd: Path | str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        done = subprocess.run(command, env={**self.env, **(env or {})}, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def sbatch(self, *args: str, cwd: Path | str, env: dict[str, str] | None = None) -> str:
        """Submit a batch job; return its id."""
        return self.run("sbatch", "--parsable", *args, cwd=cwd, env=env).stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, ExitCode, ...)."""
        text = self.run("scontrol", "show", "job", "-o", job_id).stdout
        return dict(re.findall(r"(\S+?)=(\S*)", text))

    def wait(self, job_id: str, timeout: float = 300) -> dict[str, str]:
        """Wait until a job has ended; return its final `scontrol show job` fields."""
        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
        _wait_for(lambda: self.job(job_id).get("JobState") in ended, timeout,
                  f"job {job_id} did not end within {timeout:g} s", self)
        return self.job(job_id)

    def logs(self) -> str:
        """The daemons' log tails, for failure messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel every job, stop the daemons this object started, and remove the directory."""
        if self.daemons and all(d.poll() is None for d in self.daemons):
            self.run("scancel", "--full", "--user=root", check=False)
            _wait_for(lambda: not self.run("squeue", "-h", check=False).stdout.strip(), 30, None, self)
        for daemon in reversed(self.daemons):
            if daemon.poll() is None:
                daemon.terminate()
                try:
                    daemon.wait(15)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        self.daemons.clear()
        shutil.rmtree(self.root, ignore_errors=True)


SLURM_CONF = """\
ClusterName=a2atest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ReturnToService=2
MinJobAge=600
KillWait=10
InactiveLimit=0
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={partition} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _node_line() -> str:
    """This machine's NodeName line as `slurmd -C` sees it (without RealMemory, which varies)."""
    text = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, timeout=30,
                          check=False).stdout
    line = next((row for row in text.splitlines() if row.startswith("NodeName=")), None)
    if line is None:
        raise RuntimeError(f"slurmd -C printed no NodeName line: {text!r}")
    return " ".join(w for w in line.split() if not w.startswith("RealMemory="))


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait_for(ready, seconds: float, failure: str | None, cluster: Cluster) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            if failure is None:
                return
            raise RuntimeError(f"{failure}\n{cluster.logs()}")
        time.sleep(0.3)
