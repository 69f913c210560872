"""A run's work, counted the same way for a simulated and an emulated run: from the link
counts table (``records.tables.LINK_COUNT_SCHEMA``) both write.

What costs CPU in an emulated run is a datagram handled by a node (sent, or received: its
access link's rows) and a frame carried by a switch-switch link (a relay, the switch and any
capture on its way). A node's timers cost too, but they come with its datagrams (a token pass,
a NACK round) and grow with the run's virtual length, as datagrams do: the calibration folds
them in per role. The simulator predicts these counts exactly for a run without overload
(docs/virtual-time.md measures how near the emulated counts come).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from rmptwin.model import LoadedExperiment
from rmptwin.model.tree import path_links
from rmptwin.planning.calibration import network_elements


@dataclass(frozen=True)
class Demand:
    """Work per virtual second of a run, per role, and what the network carried."""

    run_s: float                                   # the run's length in virtual seconds
    nodes: dict[str, int]                          # role -> how many hosts
    datagrams: dict[str, float]                    # role -> datagrams handled (sent + received) per virtual s
    switch_frames: float                           # frames over switch-switch links per virtual s
    switch_links: int                              # switch-switch links (each a relay when impaired)
    per_node: dict[str, float] = field(default_factory=dict)   # host -> datagrams per virtual s
    path_hops: float = 0.0                         # median links from a source to a receiver
    path_delay_ms: float = 0.0                     # median configured delay (+ jitter) of those paths
    switches: int = 0                              # the topology's switches

    @property
    def elements(self) -> int:
        return network_elements(self.nodes, self.switches)

    def to_dict(self) -> dict[str, Any]:
        return {"run_s": round(self.run_s, 3), "nodes": dict(self.nodes), "path_hops": self.path_hops,
                "path_delay_ms": round(self.path_delay_ms, 3),
                "datagrams_per_s": {r: round(v, 1) for r, v in sorted(self.datagrams.items())},
                "switch_frames_per_s": round(self.switch_frames, 1), "switch_links": self.switch_links,
                "switches": self.switches}


def demand_from_counts(counts: pa.Table, loaded: LoadedExperiment, run_s: float) -> Demand:
    """The work a run's link counts show, per virtual second of its ``run_s`` seconds."""
    topo = loaded.topology
    role_of = {h.name: h.role for h in topo.hosts}
    switches = set(topo.switches)
    handled: dict[str, int] = defaultdict(int)
    switch_frames = 0
    cols = counts.select(["from_node", "to_node", "packets", "dropped"]).to_pydict()
    for frm, to, packets, dropped in zip(cols["from_node"], cols["to_node"], cols["packets"], cols["dropped"]):
        if frm in switches and to in switches:
            switch_frames += packets
        elif frm in role_of:          # a host sent it onto its access link
            handled[frm] += packets
        elif to in role_of:           # its access link delivered it to the host
            handled[to] += packets - dropped
    span = max(run_s, 1e-9)
    nodes: dict[str, int] = defaultdict(int)
    per_role: dict[str, float] = defaultdict(float)
    for h in topo.hosts:
        nodes[h.role] += 1
        per_role[h.role] += handled.get(h.name, 0) / span
    hops, delay = path_shape(loaded)
    return Demand(run_s=run_s, nodes=dict(nodes), datagrams=dict(per_role), switch_frames=switch_frames / span,
                  switch_links=len(topo.links), per_node={h: n / span for h, n in handled.items()},
                  path_hops=hops, path_delay_ms=delay, switches=len(switches))


def path_shape(loaded: LoadedExperiment) -> tuple[float, float]:
    """The median number of links and the median configured delay (each link at its delay plus
    its jitter) from a source to a receiver (primary or secondary): where data first goes, and
    what the emulated path's own latency per hop is held against."""
    topo = loaded.topology
    sources = [h for h in topo.hosts if h.role == "source"]
    receivers = [h for h in topo.hosts if h.role in ("primary", "secondary")]
    paths = [path_links(topo, a, b) for a in sources for b in receivers if a.name != b.name]
    if not paths:
        return 0.0, 0.0
    return (float(statistics.median(len(p) for p in paths)),
            float(statistics.median(sum(lk.delay_ms + lk.jitter_ms for lk in p) for p in paths)))


def simulated_demand(loaded: LoadedExperiment, seed: int | None = None) -> Demand:
    """The work the simulator predicts for ``loaded`` (its own seed unless ``seed``)."""
    from rmptwin.sim.simulate import simulate  # the simulator: only when planning

    result = simulate(loaded, loaded.experiment.seed if seed is None else seed)
    return demand_from_counts(result.link_counts, loaded, loaded.duration_s)
