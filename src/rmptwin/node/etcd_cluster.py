"""A three-member etcd cluster on loopback, started and stopped by the project.

The fault-tolerant sequencer store of the emulated venues (the seed's coupling facility:
one logical, reliable CAS memory). Members listen on free 127.0.0.1 ports, keep their
data in a temporary directory (on /dev/shm when there is one: raft fsyncs then cost
microseconds, and nothing here must outlive the run), and are always stopped and their
data removed by ``stop()`` / the ``with`` block. ``kill(i)`` and ``restart(i)`` crash and
bring back one member, ``pause(i)`` and ``resume(i)`` stop and continue one, for fault experiments.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from rmptwin.errors import UserError
from rmptwin.node.local_ports import free_local_ports

ETCD = "etcd"
HEARTBEAT_MS = 50
ELECTION_MS = 500
# etcd refuses an election timeout of 50 s or more: past a factor of 99 the timers stop
# growing and a dilated run's raft is that much quicker than the undilated one.
MAX_ELECTION_MS = 49_999


def dilated_raft_timers(factor: float) -> tuple[int, int]:
    """etcd's heartbeat and election timeout (ms, wall) at time dilation ``factor``: the
    undilated timers times the factor, so raft's failure detection lasts as long in run time
    as at factor 1 (capped at etcd's limit, the heartbeat kept a tenth of the timeout)."""
    election = min(round(ELECTION_MS * factor), MAX_ELECTION_MS)
    return max(HEARTBEAT_MS, round(election * HEARTBEAT_MS / ELECTION_MS)), election


def _die_with_parent() -> None:
    """Members die with the process that started them, even if it is killed (no finally runs then)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


class EtcdCluster:
    def __init__(self, members: int = 3, *, data_root: str | Path | None = None,
                 heartbeat_ms: int = HEARTBEAT_MS, election_ms: int = ELECTION_MS) -> None:
        if shutil.which(ETCD) is None:
            raise UserError("etcd is not installed (Debian package etcd-server; run scripts/provision.sh)")
        self.n = members
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        base = data_root or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.root = Path(tempfile.mkdtemp(prefix="rmptwin-etcd-", dir=base))
        ports = free_local_ports(2 * members, "etcd")
        self.client_ports, self.peer_ports = ports[:members], ports[members:]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * members
        self.token = f"rmptwin-{os.getpid()}-{self.root.name}"

    @property
    def endpoints(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.client_ports]

    def _cmd(self, i: int, state: str) -> list[str]:
        cluster = ",".join(f"m{j}=http://127.0.0.1:{self.peer_ports[j]}" for j in range(self.n))
        return [
            ETCD, "--name", f"m{i}", "--data-dir", str(self.root / f"m{i}"),
            "--listen-client-urls", self.endpoints[i], "--advertise-client-urls", self.endpoints[i],
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_ports[i]}",
            "--initial-cluster", cluster, "--initial-cluster-state", state,
            "--initial-cluster-token", self.token,
            "--heartbeat-interval", str(self.heartbeat_ms), "--election-timeout", str(self.election_ms),
            "--max-txn-ops", "1024", "--log-level", "warn",
        ]

    def _spawn(self, i: int, state: str) -> None:
        log = open(self.root / f"m{i}.log", "ab")
        try:
            self.procs[i] = subprocess.Popen(self._cmd(i, state), stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()

    def start(self, timeout_s: float = 20.0) -> EtcdCluster:
        try:
            for i in range(self.n):
                self._spawn(i, "new")
            self.wait_healthy(timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def healthy(self, i: int) -> bool:
        try:
            with urllib.request.urlopen(self.endpoints[i] + "/health", timeout=1.0) as r:
                health: object = json.loads(r.read()).get("health")
                return health == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, members: list[int] | None = None, timeout_s: float = 20.0) -> None:
        members = list(range(self.n)) if members is None else members
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i in members:
                p = self.procs[i]
                if p is not None and p.poll() is not None:
                    tail = (self.root / f"m{i}.log").read_text(errors="replace").strip().splitlines()[-1:]
                    raise UserError(f"etcd member m{i} exited ({p.returncode}): {' '.join(tail)[:300]}")
            if all(self.healthy(i) for i in members):
                return
            time.sleep(0.1)
        raise UserError(f"etcd cluster not healthy after {timeout_s:.0f} s (logs in {self.root})")

    def kill(self, i: int) -> None:
        """Crash one member (SIGKILL): no goodbye to its peers."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        self.procs[i] = None

    def pause(self, i: int) -> None:
        """Stop one member (SIGSTOP): it keeps its state and its peers time it out."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGSTOP)

    def resume(self, i: int) -> None:
        """Let a paused member go on (SIGCONT)."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)

    def restart(self, i: int, timeout_s: float = 20.0) -> None:
        """Bring a killed member back with its data directory (it rejoins and catches up)."""
        if self.procs[i] is None:
            self._spawn(i, "existing")
            self.wait_healthy([i], timeout_s=timeout_s)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the running members have used so far (benchmarks: CPU per txn)."""
        total = 0
        for p in self.procs:
            if p is not None and p.poll() is None:
                try:
                    fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                total += int(fields[11]) + int(fields[12])   # utime, stime (clock ticks)
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        for i, p in enumerate(self.procs):
            if p is not None and p.poll() is None:
                p.terminate()
        for i, p in enumerate(self.procs):
            if p is not None:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
            self.procs[i] = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
