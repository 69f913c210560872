"""Each Docker host's CPU and memory over an emulated run, from the engine's own stats.

``ContainerStatsSampler`` follows one stats stream per container (a thread each; the engine
sends a record a second) from the release to the end of the drain, beside ``hostload``'s
run-queue sampler. ``node_figures`` turns one node's records into summary.json's
``runtime.container_stats[node]``: CPU seconds used in the window, mean and peak CPU in
percent of one CPU (as ``docker stats`` shows it), the seconds the CPU limit throttled it,
and memory (mean and peak MiB, counted as ``docker stats`` does: usage less the inactive
file cache). Namespace hosts have no container: their runs have no such key.

Why streams, not a one-shot request a second: a stats request waits for the engine's next
collection (up to a second), and one-shot requests cost as much as streams. Measured with 30
idle containers over 10 s (dockerd 20.10, cgroup v1, 2 CPUs): streams cost dockerd and
containerd 0.12 CPU-s per second and the sampler 0.008; one-shot rounds every 2 s 0.09 and
0.035. That is the price of the figures: about 0.4 % of a CPU per container.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rmptwin.emulation import docker_engine as engine
from rmptwin.errors import UserError

if TYPE_CHECKING:
    from docker import DockerClient  # untyped (no stubs locked): Any to mypy

MIB = 1 << 20


@dataclass(frozen=True)
class StatsSample:
    t_ns: int                   # when the engine read the counters (its "read" stamp)
    cpu_ns: int | None          # the container's CPU time so far
    mem_bytes: int | None       # memory in use, inactive file cache not counted
    throttled_ns: int | None    # time the CPU limit held it back so far


def read_ns(stamp: str | None) -> int | None:
    """An engine timestamp ("2026-11-26T12:19:55.293746529Z", nanoseconds, UTC) in ns since the
    epoch; None for the zero time the engine writes for "never" or anything unreadable."""
    if not stamp or stamp.startswith("0001-") or not stamp.endswith("Z"):
        return None
    whole, _, frac = stamp[:-1].partition(".")
    try:
        seconds = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
        return int(seconds) * 1_000_000_000 + int((frac + "000000000")[:9])
    except ValueError:
        return None


def mem_bytes(memory_stats: dict[str, Any]) -> int | None:
    """Memory in use as ``docker stats`` counts it: usage less the inactive file cache (cgroup
    v1 ``total_inactive_file``, v2 ``inactive_file``), where that is below the usage."""
    usage: int | None = memory_stats.get("usage")
    if usage is None:
        return None         # a stopped container's record has no memory figures
    stats: dict[str, int] = memory_stats.get("stats") or {}
    if "total_inactive_file" in stats and stats["total_inactive_file"] < usage:
        return usage - stats["total_inactive_file"]
    if stats.get("inactive_file", usage) < usage:
        return usage - stats["inactive_file"]
    return usage


def sample_of(record: dict[str, Any], now_ns: int | None = None) -> StatsSample | None:
    """One engine stats record as a sample; None when it has neither CPU nor memory figures."""
    cpu = (record.get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage")
    mem = mem_bytes(record.get("memory_stats") or {})
    if cpu is None and mem is None:
        return None
    t = read_ns(record.get("read"))
    throttled = (record.get("cpu_stats") or {}).get("throttling_data", {}).get("throttled_time")
    return StatsSample(t if t is not None else (now_ns if now_ns is not None else time.time_ns()), cpu, mem,
                       throttled)


def _r(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def node_figures(samples: list[StatsSample]) -> dict[str, Any]:
    """One node's figures over the sampled window (see the module's docstring); CPU needs two
    samples, memory one."""
    s = sorted(samples, key=lambda x: x.t_ns)
    cpu = [(x.t_ns, x.cpu_ns) for x in s if x.cpu_ns is not None]
    cpu_s = mean_pct = max_pct = throttled_s = None
    if len(cpu) >= 2 and cpu[-1][0] > cpu[0][0]:
        used = max(0, cpu[-1][1] - cpu[0][1])
        cpu_s = used / 1e9
        mean_pct = 100.0 * used / (cpu[-1][0] - cpu[0][0])
        # A counter never goes back; an interval where it seems to (a record out of order) is skipped.
        rates = [100.0 * (c1 - c0) / (t1 - t0) for (t0, c0), (t1, c1) in zip(cpu, cpu[1:]) if t1 > t0 and c1 >= c0]
        max_pct = max(rates) if rates else None
        thr = [x.throttled_ns for x in s if x.throttled_ns is not None]
        throttled_s = max(0, thr[-1] - thr[0]) / 1e9 if len(thr) >= 2 else None
    mem = [x.mem_bytes for x in s if x.mem_bytes is not None]
    return {"cpu_s": _r(cpu_s, 3), "cpu_mean_pct": _r(mean_pct, 1), "cpu_max_pct": _r(max_pct, 1),
            "cpu_throttled_s": _r(throttled_s, 3),
            "mem_mean_mib": _r(sum(mem) / len(mem) / MIB, 1) if mem else None,
            "mem_max_mib": _r(max(mem) / MIB, 1) if mem else None,
            "window_s": _r((s[-1].t_ns - s[0].t_ns) / 1e9, 1) if s else None,
            "samples": len(s)}


class ContainerStatsSampler:
    """Follows the stats stream of every ``{node: container}`` until stopped; ``figures()`` then
    gives ``node_figures`` per node. Without containers it does nothing."""

    def __init__(self, containers: dict[str, str]) -> None:
        self.containers = dict(containers)
        self.samples: dict[str, list[StatsSample]] = {n: [] for n in self.containers}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: dict[str | None, DockerClient] = {}   # per engine (a server's, or this machine's)

    def start(self) -> ContainerStatsSampler:
        by_engine: dict[str | None, list[tuple[str, str]]] = {}
        for node, name in self.containers.items():
            by_engine.setdefault(engine.engine_of(name), []).append((node, name))
        for url, members in by_engine.items():
            try:
                cl = self._clients[url] = engine.stats_client(len(members), url)
            except UserError:
                continue    # those containers go unsampled: their figures say samples 0
            for node, name in members:
                t = threading.Thread(target=self._follow, args=(cl, node, name), daemon=True, name=f"stats-{node}")
                t.start()
                self._threads.append(t)
        return self

    def _follow(self, cl: DockerClient, node: str, name: str) -> None:
        try:
            for record in engine.stream_stats(cl, name):
                if self._stop.is_set():
                    return
                sample = sample_of(record)
                if sample is not None:
                    self.samples[node].append(sample)
        except Exception:
            return

    def stop(self) -> None:
        """Stop following (each stream ends at its next record, within a second)."""
        self._stop.set()
        deadline = time.monotonic() + 2.0
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        for cl in self._clients.values():
            cl.close()
        self._clients.clear()

    def figures(self) -> dict[str, dict[str, Any]]:
        return {node: node_figures(list(samples)) for node, samples in sorted(self.samples.items())}
