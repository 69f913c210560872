"""Random RMP scenarios for the simulator, built in Python (no YAML): random multicast trees
with per-link loss, a ring of primaries, sources, secondaries and reformation servers, and
the loaded experiment around them. Used by the protocol property tests and the benchmark;
every choice comes from the ``random.Random`` given."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from rmptwin.model import Experiment, LoadedExperiment, Topology


def random_tree(
    rng: random.Random, *, switches: int = 6, primaries: int = 3, sources: int = 1, secondaries: int = 0,
    reformers: int = 1, max_loss: float = 0.0, delay_ms: tuple[float, float] = (1.0, 8.0), name: str = "tree",
) -> Topology:
    """A random tree of switches (each joins a random earlier one) with hosts on random
    switches. Link loss is uniform in [0, max_loss]; access links are lossless."""
    sw = [f"s{i}" for i in range(switches)]
    links = []
    for i in range(1, switches):
        links.append({
            "a": sw[rng.randrange(i)], "b": sw[i], "delay_ms": round(rng.uniform(*delay_ms), 3),
            "loss": round(rng.uniform(0.0, max_loss), 4),
        })
    hosts: list[dict[str, Any]] = []

    def place(name: str, role: str, **extra: Any) -> None:
        hosts.append({"name": name, "role": role, "switch": rng.choice(sw), "link": {"delay_ms": 0.1}, **extra})

    for i in range(sources):
        place(f"src{i + 1}", "source")
    for i in range(primaries):
        place(f"rp{i + 1}", "primary")
    for i in range(secondaries):
        place(f"rs{i + 1}", "secondary", primary=f"rp{i % primaries + 1}", ring=f"ring{i % primaries + 1}")
    for i in range(reformers):
        place(f"xr{i + 1}", "reformation")
    return Topology.model_validate({"name": name, "switches": sw, "links": links, "hosts": hosts})


def max_path_delay_ms(topo: Topology) -> float:
    """Longest host-to-host one-way delay over the tree (switch path plus access links)."""
    adj: dict[str, list[tuple[str, float]]] = {s: [] for s in topo.switches}
    for lk in topo.links:
        adj[lk.a].append((lk.b, lk.delay_ms))
        adj[lk.b].append((lk.a, lk.delay_ms))
    worst = 0.0
    for start in topo.switches:
        dist = {start: 0.0}
        todo = [start]
        while todo:
            u = todo.pop()
            for v, d in adj[u]:
                if v not in dist:
                    dist[v] = dist[u] + d
                    todo.append(v)
        worst = max(worst, max(dist.values()))
    access = max((h.link.delay_ms for h in topo.hosts), default=0.0)
    return worst + 2 * access


def loaded_experiment(topo: Topology, *, protocol: dict[str, Any] | None = None, workload: dict[str, Any] | None = None,
                      faults: list[dict[str, Any]] | None = None, duration_s: float = 4.0, seed: int = 1,
                      name: str = "scenario") -> LoadedExperiment:
    exp = Experiment.model_validate({
        "name": name, "topology": f"<{topo.name}>", "seed": seed, "duration_s": duration_s,
        "protocol": protocol or {}, "workload": workload or {}, "faults": faults or [],
    })
    return LoadedExperiment(experiment=exp, topology=topo, path=Path(f"<{name}>"))
