"""What an emulated run measured of its own demand: a calibration's ``RunSample``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from rmptwin.model import LoadedExperiment
from rmptwin.planning.calibration import RunSample
from rmptwin.planning.demand import demand_from_counts


def run_sample(loaded: LoadedExperiment, runtime: dict[str, Any], counts: pa.Table) -> RunSample | None:
    """The sample of an emulated run (summary ``runtime`` and its link counts); None when the
    run did not measure what a calibration needs (an old run, a node without ``run_cpu_s``)."""
    load = runtime.get("load") or {}
    busy, window = load.get("busy_cpus"), load.get("window_s")
    counters = runtime.get("node_counters") or {}
    if busy is None or not window or not counters:
        return None
    role_of = {h.name: h.role for h in loaded.topology.hosts}
    cpu: dict[str, float] = defaultdict(float)
    for name, c in counters.items():
        if not c or c.get("run_cpu_s") is None:
            return None
        cpu[role_of.get(name, "?")] += c["run_cpu_s"]
    run_s = loaded.duration_s
    d = demand_from_counts(counts, loaded, run_s)
    return RunSample(tdf=float(runtime.get("time_dilation") or 1.0), run_s=run_s, window_s=float(window),
                     wall_s=float(runtime.get("wall_s") or 0.0), busy_cpus=float(busy), nodes=d.nodes,
                     datagrams={r: v * run_s for r, v in d.datagrams.items()}, node_cpu_s=dict(cpu),
                     switch_frames=d.switch_frames * run_s, overloaded=bool(runtime.get("overloaded")),
                     path_hops=d.path_hops, switches=d.switches)
