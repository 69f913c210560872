"""Is the machine, not the protocol, making the emulated figures?

Dozens of node processes, relays, captures and a user-space switch share a few CPUs. When
they want more than there is, timers fire late and releases spread: figures that would be
wrongly read as the protocol's. The runner samples the kernel's run queue while the run
runs (``LoadSampler``); ``overload_verdict`` puts that beside the nodes' timer lateness:
the run is *overloaded* when the run queue exceeded the CPUs and some role's timers fired more
than ``LATENESS_P99_LIMIT_MS`` late at the 99th percentile (summary.json's timer_lateness_ms).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa

from rmptwin.core.events import Kind
from rmptwin.records.timer_lateness import lateness_by_role

SAMPLE_EVERY_S = 0.1
LATENESS_P99_LIMIT_MS = 5.0


def cpu_jiffies(stat_text: str) -> tuple[int, int] | None:
    """(busy, steal) clock ticks of all CPUs so far from a /proc/stat text: busy is user, nice,
    system, irq and softirq (guests count in user); steal is time the hypervisor gave away."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            return f[0] + f[1] + f[2] + f[5] + f[6], f[7]
    return None


def procs_running(stat_text: str) -> int | None:
    """``procs_running`` of a /proc/stat text (tasks runnable now, the running ones included)."""
    for line in stat_text.splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    return None


class LoadSampler:
    """A thread reading the run queue from /proc/stat every ``SAMPLE_EVERY_S`` until stopped."""

    def __init__(self, every_s: float = SAMPLE_EVERY_S) -> None:
        self.every_s = every_s
        self.samples: list[int] = []
        self._first: tuple[float, tuple[int, int]] | None = None   # (monotonic s, cpu_jiffies) at start
        self._last: tuple[float, tuple[int, int]] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> LoadSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def busy_cpus(self) -> dict[str, float | None]:
        """CPUs busy on average between start and stop (what every process of the machine used,
        the run's and anyone else's), and CPUs stolen by the hypervisor; None before two reads."""
        if self._first is None or self._last is None or self._last[0] <= self._first[0]:
            return {"busy_cpus": None, "steal_cpus": None, "window_s": None}
        span = self._last[0] - self._first[0]
        hz = os.sysconf("SC_CLK_TCK")
        busy, steal = (b - a for a, b in zip(self._first[1], self._last[1]))
        return {"busy_cpus": round(busy / hz / span, 3), "steal_cpus": round(steal / hz / span, 3),
                "window_s": round(span, 2)}

    def _read(self) -> int | None:
        with open("/proc/stat") as f:
            text = f.read()
        jiffies = cpu_jiffies(text)
        if jiffies is not None:
            self._last = (time.monotonic(), jiffies)
            if self._first is None:
                self._first = self._last
        return procs_running(text)

    def _sample(self) -> None:
        try:
            self._read()
        except OSError:
            return
        while not self._stop.wait(self.every_s):
            try:
                n = self._read()
            except OSError:
                return
            if n is not None:
                self.samples.append(max(0, n - 1))  # not counting this sampler itself
        try:
            self._read()
        except OSError:
            pass


def run_lateness(events: pa.Table) -> dict[str, Any]:
    """Timer lateness per role, as summary.json's ``timer_lateness_ms`` has it (one definition:
    ``records.timer_lateness.lateness_by_role``), so the overload line and the summary give the
    same figure for the same run."""
    cols = events.select(["kind", "role", "detail"]).to_pandas()
    rows = cols[cols.kind == Kind.TIMER_LATENESS]
    return lateness_by_role(zip(rows.role, rows.detail))


def overload_verdict(samples: list[int], lateness_by_role: dict[str, dict[str, Any]], cpus: int | None = None,
                     limit_ms: float = LATENESS_P99_LIMIT_MS, cpu_use: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary ``runtime.overloaded`` and its evidence. The lateness judged is the latest role's
    p99 in summary.json's ``timer_lateness_ms`` (``timer_lateness_role`` names it): a role whose
    timers fire late is what spreads releases, even where most of the run's timers (relays,
    customers) fire on time. ``cpu_use`` (``LoadSampler.busy_cpus``): the machine's mean busy
    CPUs over the same window, what the planner's prediction is measured against."""
    cpus = cpus or os.cpu_count() or 1
    a = np.asarray(samples, dtype=float)
    queue: dict[str, Any] = (
        {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "max": int(a.max()), "n": int(a.size)}
        if a.size else {"p50": None, "p90": None, "max": None, "n": 0})
    judged = {role: f["p99"] for role, f in (lateness_by_role or {}).items() if f.get("p99") is not None}
    role = max(judged, key=judged.__getitem__) if judged else None
    p99 = judged[role] if role else None
    busy = a.size > 0 and queue["p90"] > cpus
    late = p99 is not None and p99 > limit_ms
    return {"overloaded": bool(busy and late),
            "load": {"cpus": cpus, "run_queue": queue, **(cpu_use or {}), "loadavg": [round(x, 2) for x in os.getloadavg()],
                     "timer_lateness_p99_ms": p99, "timer_lateness_role": role, "lateness_limit_ms": limit_ms}}
