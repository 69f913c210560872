"""Is the machine, not the protocol, making the emulated figures? (issue 10, item 5)

Dozens of node processes, relays, captures and a user-space switch share a few CPUs. When
they want more than there is, timers fire late and releases spread: figures that would be
wrongly read as the protocol's. The runner samples the kernel's run queue while the run
runs (``LoadSampler``); ``overload_verdict`` puts that beside the nodes' timer lateness:
the run is *overloaded* when the run queue exceeded the CPUs and timers fired more than
``LATENESS_P99_LIMIT_MS`` late at the 99th percentile.
"""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pyarrow as pa

from rmptwin.events import Kind
from rmptwin.timer_lateness import LatenessHistogram

SAMPLE_EVERY_S = 0.1
LATENESS_P99_LIMIT_MS = 5.0


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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> "LoadSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                with open("/proc/stat") as f:
                    n = procs_running(f.read())
            except OSError:
                return
            if n is not None:
                self.samples.append(max(0, n - 1))  # not counting this sampler itself


def run_lateness(events: pa.Table) -> LatenessHistogram:
    """Every node's timer lateness merged (from the TIMER_LATENESS events)."""
    h = LatenessHistogram()
    kinds = events.column("kind").to_pylist()
    details = events.column("detail").to_pylist()
    for kind, detail in zip(kinds, details):
        if kind == Kind.TIMER_LATENESS:
            h.merge(LatenessHistogram.from_detail(json.loads(detail) if isinstance(detail, str) else detail))
    return h


def overload_verdict(samples: list[int], lateness: LatenessHistogram, cpus: int | None = None,
                     limit_ms: float = LATENESS_P99_LIMIT_MS) -> dict:
    """summary ``runtime.overloaded`` and its evidence."""
    cpus = cpus or os.cpu_count() or 1
    a = np.asarray(samples, dtype=float)
    queue = {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "max": int(a.max()),
             "n": int(a.size)} if a.size else {"p50": None, "p90": None, "max": None, "n": 0}
    p99 = lateness.summary_ms()["p99"]
    busy = a.size > 0 and queue["p90"] > cpus
    late = p99 is not None and p99 > limit_ms
    return {"overloaded": bool(busy and late),
            "load": {"cpus": cpus, "run_queue": queue, "loadavg": [round(x, 2) for x in os.getloadavg()],
                     "timer_lateness_p99_ms": p99, "lateness_limit_ms": limit_ms}}
