"""A standalone Spark cluster on this machine (`rmptwin spark up` / `down`), from the pyspark
package already installed: no Spark download, no root.

Spark's standalone mode: one master (``org.apache.spark.deploy.master.Master``) and N workers
(``org.apache.spark.deploy.worker.Worker``), each a JVM started with the package's own
``bin/spark-class`` (SPARK_HOME = the pyspark package directory). Everything binds to
127.0.0.1 (``--host``, SPARK_LOCAL_IP): the cluster is reachable from this machine only.
Python tasks run in this venv's Python (PYSPARK_PYTHON). Workers keep their scratch space
and logs in the state directory, never inside the installed package.

The state directory (default ``$XDG_STATE_HOME/rmptwin/spark``, i.e.
``~/.local/state/rmptwin/spark``) holds ``cluster.json`` (master URL, ports, the pid and
command of each JVM), one log per JVM and the workers' work directories. ``down`` stops the
pids recorded there, and only if each still runs the Spark daemon it started (a pid the
kernel gave to another program since is left alone).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rmptwin.errors import UserError

HOST = "127.0.0.1"
DEFAULT_PORT = 7077
DEFAULT_WEBUI_PORT = 8080
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"
DAEMON_MEMORY = "512m"   # the master's and workers' own heaps (executors get --memory)
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0


@dataclass
class Cluster:
    master_url: str
    host: str
    port: int
    webui_port: int
    workers: int
    cores: int
    memory: str
    state_dir: str
    pids: dict[str, int] = field(default_factory=dict)   # "master", "worker-1", ... -> pid

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"


def spark_home() -> Path:
    """The installed pyspark package: it ships Spark's jars and bin/spark-class."""
    try:
        import pyspark
    except ImportError:
        raise UserError("pyspark is not installed: run `make provision` (or pip install pyspark)") from None
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise UserError(f"{home}: this pyspark has no bin/spark-class or jars/ (a pip-installed pyspark has both)")
    return home


def state_dir(given: str | Path | None = None) -> Path:
    if given:
        return Path(given)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rmptwin" / "spark"


def _daemon_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
    })
    return env


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _master_json(webui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=2) as r:
            info: dict[str, Any] = json.loads(r.read().decode())
            return info
    except (OSError, ValueError):
        return None


def _is_spark_daemon(pid: int) -> bool:
    """Whether ``pid`` still runs a Spark master or worker (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return MASTER_CLASS in cmdline or WORKER_CLASS in cmdline


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if "Exception" in ln or "ERROR" in ln]
    return (errors or lines or ["empty log"])[-1][:300]


def read_state(directory: str | Path | None = None) -> Cluster | None:
    path = state_dir(directory) / STATE_FILE
    if not path.exists():
        return None
    try:
        return Cluster(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise UserError(f"{path}: not a cluster state file ({e}); delete it") from None


def up(workers: int = 2, cores: int = 1, memory: str = "1g", port: int = DEFAULT_PORT,
       webui_port: int = DEFAULT_WEBUI_PORT, directory: str | Path | None = None,
       timeout_s: float = START_TIMEOUT_S) -> Cluster:
    """Start a master on HOST:port and ``workers`` workers of ``cores`` cores and ``memory``
    each; return once the master lists every worker alive. On failure, stop what started."""
    if workers < 1 or cores < 1:
        raise UserError("a cluster needs at least one worker of at least one core")
    where = state_dir(directory)
    running = read_state(where)
    if running and any(_is_spark_daemon(p) for p in running.pids.values()):
        raise UserError(f"a Spark cluster is already up at {running.master_url} (state in {where}): "
                        "`rmptwin spark down` first")
    for p, what in ((port, "--port"), (webui_port, "--webui-port")):
        if not _port_free(p):
            raise UserError(f"{what} {p}: {HOST}:{p} is in use; choose another port")
    home = spark_home()
    where.mkdir(parents=True, exist_ok=True)
    env = _daemon_env(home)
    url = f"spark://{HOST}:{port}"
    cluster = Cluster(url, HOST, port, webui_port, workers, cores, memory, str(where))
    spark_class = str(home / "bin" / "spark-class")
    procs: dict[str, subprocess.Popen[bytes]] = {}   # to tell how a daemon that left no log ended

    def start(name: str, argv: list[str]) -> None:
        with open(where / f"{name}.log", "wb") as log:
            proc = subprocess.Popen([spark_class, *argv], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=where, start_new_session=True)
        cluster.pids[name] = proc.pid
        procs[name] = proc
        _write_state(cluster)

    try:
        start("master", [MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(webui_port)])
        _wait(cluster, lambda m: m.get("status") == "ALIVE", "the master", timeout_s, procs)
        for i in range(1, workers + 1):
            work = where / f"work-{i}"
            work.mkdir(exist_ok=True)
            # --webui-port 0: any free port (the workers' pages are reachable from the master's)
            start(f"worker-{i}", [WORKER_CLASS, url, "--host", HOST, "--cores", str(cores), "--memory", memory,
                                  "--webui-port", "0", "--work-dir", str(work)])
        _wait(cluster, lambda m: m.get("aliveworkers", 0) >= workers, f"{workers} workers", timeout_s, procs)
    except BaseException:
        down(where)
        raise
    return cluster


def _ended(proc: subprocess.Popen[bytes] | None) -> str:
    """How a daemon process ended, for an error about it: its exit code or the signal."""
    code = proc.poll() if proc is not None else None
    if code is None:
        return ""
    return f" (killed by signal {-code})" if code < 0 else f" (exit code {code})"


def _wait(cluster: Cluster, ready: Callable[[dict[str, Any]], bool], what: str, timeout_s: float,
          procs: dict[str, subprocess.Popen[bytes]] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = _master_json(cluster.webui_port)
        if info is not None and ready(info):
            return
        for name, pid in cluster.pids.items():
            # A process we started is asked directly: while spark-class execs java, its
            # /proc/<pid>/cmdline reads empty for an instant, which once passed for an exit
            # ("Spark master exited: empty log" in a benchmark, the master fine by hand).
            proc = (procs or {}).get(name)
            if (proc.poll() is not None) if proc is not None else not _is_spark_daemon(pid):
                log = _last_line(Path(cluster.state_dir) / f"{name}.log")
                raise UserError(f"Spark {name} exited{_ended(proc)}: {log}")
        time.sleep(0.5)
    raise UserError(f"{what} not up after {timeout_s:.0f} s (logs in {cluster.state_dir})")


def _write_state(cluster: Cluster) -> None:
    path = Path(cluster.state_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(cluster), indent=2) + "\n")
    os.replace(tmp, path)


def down(directory: str | Path | None = None) -> list[str]:
    """Stop the cluster recorded in the state directory (workers first); the names stopped."""
    where = state_dir(directory)
    cluster = read_state(where)
    if cluster is None:
        return []
    order = sorted(cluster.pids, key=lambda n: n == "master")   # workers, then the master
    stopped = []
    for name in order:
        pid = cluster.pids[name]
        if _is_spark_daemon(pid):
            os.kill(pid, signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for name in stopped:
        pid = cluster.pids[name]
        while _is_spark_daemon(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.2)
        if _is_spark_daemon(pid):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    (where / STATE_FILE).unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    """Collect a daemon this process started (else it lingers as a zombie, still 'running')."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
