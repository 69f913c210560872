"""The emulated network: bring-up time and the packet rate one impaired link sustains.

- Bring-up (``start()``: OVS bridges, controller, hosts, links, relays, every switch
  connected and programmed) and teardown of the quickstart experiment's topology, with
  namespace hosts and with Docker hosts (the node image is built first if missing; that
  build is not timed).
- One link of 20 ms and 5 % loss between two switches, probe traffic at rising rates:
  a rate passes when the loss measured at the receiver is within 1.5 points of 5 % and
  the median one-way delay within 2 ms of 20 ms (the tolerances of the emulation tests).
  Goal: >= 5,000 packets/s on the user-space relay.
- On that network, last: the relay's and Open vSwitch's CPU per frame at 5,000 pkt/s, each
  beside its floor measured in the same run (``emulated_floors``).

Needs root; without it the benchmark reports one row saying so (and one per CPU-per-frame figure).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from rmptwin.bench import emulated_floors
from rmptwin.core.groups import group_ip, host_ip, region_group, rmp_group
from rmptwin.emulation import env
from rmptwin.emulation.emulated_network import EmulatedNetwork
from rmptwin.emulation.flows import HostPort, Policy, Wiring, known_group_names
from rmptwin.emulation.measure import run_probe
from rmptwin.model import Topology, load_experiment

REPO = Path(__file__).resolve().parents[3]
LINK = {"delay_ms": 20.0, "loss": 0.05}
LOSS_TOL, DELAY_TOL = 0.015, 2.0


def _bringup(topo: Topology, nodes: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-") as tmp:
        net = EmulatedNetwork(topo, nodes=nodes, state_dir=tmp)
        t0 = time.perf_counter()
        try:
            net.start()
            up = time.perf_counter() - t0
        finally:
            t1 = time.perf_counter()
            net.stop()
            down = time.perf_counter() - t1
    note = f"{len(topo.switches)} switches, {len(topo.hosts)} hosts, {len(topo.links)} links, {net.impair} links"
    return [
        {"metric": f"bring-up {topo.name} ({nodes} hosts)", "value": up, "unit": "s", "better": "lower",
         "conditions": f"{nodes} hosts, no captures", "note": note},
        {"metric": f"teardown {topo.name} ({nodes} hosts)", "value": down, "unit": "s", "better": "lower",
         "conditions": f"{nodes} hosts, no captures"},
    ]


def bench_link() -> Topology:
    """tx on switch a, rx on switch b, one impaired link a-b."""
    return Topology.model_validate({
        "name": "bench-link", "switches": ["a", "b"], "links": [{"a": "a", "b": "b", **LINK}],
        "hosts": [{"name": "tx", "switch": "a", "role": "source"}, {"name": "rx", "switch": "b", "role": "primary"}],
    })


BENCH_LINK_WHAT = "bench-link (tx - a - [20 ms, 5 % loss] - b - rx, namespace hosts)"


def _link_rates(net: EmulatedNetwork, rates: tuple[int, ...], seconds: float) -> list[dict[str, Any]]:
    rows, best = [], 0
    tx, rx = net.host("tx"), net.host("rx")
    for rate in rates:
        r = run_probe(tx, [rx], rx.ip, count=int(rate * seconds), rate=rate, size=100, port=9200)["rx"]
        # a probe that received stamped its first and last arrival
        span = (cast(int, r.last_ns) - cast(int, r.first_ns)) / 1e9 if r.received > 1 else 0.0
        carried = r.received / (1 - LINK["loss"]) / span if span else 0.0
        ok = abs(r.loss - LINK["loss"]) <= LOSS_TOL and abs(r.median_delay_ms - LINK["delay_ms"]) <= DELAY_TOL
        if ok:
            # What the link carried, not what was asked: the Python sender tops out
            # near 15,000 pkt/s on this machine.
            best = max(best, int(min(rate, carried)))
        rows.append({"metric": f"impaired link at {rate:,} pkt/s", "value": r.loss * 100, "unit": "% loss",
                     "ok": ok, "note": f"median delay {r.median_delay_ms:.2f} ms (20 ms configured), "
                                       f"5 % loss configured, offered ~{carried:,.0f} pkt/s, "
                                       f"{r.sent:,} packets, {net.impair} backend"})
    rows.append({"metric": "highest rate one impaired link carried in tolerance", "value": best, "unit": "pkt/s",
                 "goal": ">= 5,000", "ok": best >= 5000, "goal_min": 5000, "better": "higher",
                 "conditions": f"namespace hosts, one 20 ms / 5 % link, {seconds:g} s per rate, Python sender",
                 "note": f"{net.impair} backend; tolerance: loss ±1.5 pts, median delay ±2 ms"})
    return rows


def _bench_link_rows(rates: tuple[int, ...], seconds: float, quick: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-") as tmp, \
            EmulatedNetwork(bench_link(), nodes="ns", state_dir=tmp, seed=11) as net:
        rows = _link_rates(net, rates, seconds)
        # Last on this network: the floors restart its relay and detach its controller.
        return rows + emulated_floors.floor_rows(net, "a-b", "tx", "rx", quick, BENCH_LINK_WHAT)


def _controller_joins(topo: Topology) -> list[dict[str, Any]]:
    """Policy time per IGMP join: every switch's desired state recomputed, as the app does."""

    ports: dict[str, dict[str, int]] = {s: {} for s in topo.switches}
    nxt = {s: 1 for s in topo.switches}
    for lk in topo.links:
        ports[lk.a][lk.b], ports[lk.b][lk.a] = nxt[lk.a], nxt[lk.b]
        nxt[lk.a] += 1
        nxt[lk.b] += 1
    hosts = {h.name: HostPort(h.name, h.switch, nxt[h.switch] + i, host_ip(i)) for i, h in enumerate(topo.hosts)}
    pol = Policy(Wiring(topo, {s: i + 1 for i, s in enumerate(topo.switches)}, ports, hosts,
                        known_group_names(topo)))
    times = []
    for h in topo.hosts:
        for g in [rmp_group(0), rmp_group(1)] + [region_group(r, k) for r in getattr(h, "regions", []) for k in (0, 1)]:
            t0 = time.perf_counter()
            pol.set_member(group_ip(g), h.name, True)
            for s in topo.switches:
                pol.switch_state(s)
            times.append(time.perf_counter() - t0)
    times.sort()
    return [{"metric": f"controller work per IGMP join ({topo.name})", "value": times[len(times) // 2] * 1e3,
             "unit": "ms (median)", "better": "lower",
             "conditions": "policy computation only, in process (no network)", "note": f"{len(times)} joins, all {len(topo.switches)} switches recomputed; "
                                           f"max {times[-1] * 1e3:.1f} ms"}]


def run(quick: bool) -> list[dict[str, Any]]:
    topo = load_experiment(REPO / "experiments" / "quickstart.yaml").topology
    rows: list[dict[str, Any]] = _controller_joins(topo)
    if os.geteuid() != 0:
        why = "needs root (Mininet, Open vSwitch)"
        return rows + [{"metric": "emulation", "value": "skipped", "ok": None, "note": why}] \
            + emulated_floors.skipped_rows(why, LINK["delay_ms"], LINK["loss"])

    rows += _bringup(topo, "ns")
    if env.docker_state() != "missing":
        from rmptwin.emulation.image import ensure_image

        env.ensure_dockerd()
        ensure_image()
        rows += _bringup(topo, "docker")
    else:
        rows.append({"metric": f"bring-up {topo.name} (docker hosts)", "value": "skipped", "note": "no Docker engine"})
    rates = (2000, 5000, 10000) if quick else (2000, 5000, 10000, 15000, 20000)
    rows += _bench_link_rows(rates, 1.5 if quick else 3.0, quick)
    return rows
