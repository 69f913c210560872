"""Simulator speed: events per second, and the 10,000-customer fan-out.

Both use minimal cores (a source that multicasts each publication, receivers that only
count), so they measure the simulator and its network, not a protocol. A third row runs
the quickstart experiment with the real RMP cores when they are present.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

from ..sansio import Group
from ..spec import Experiment, LoadedExperiment, Topology, load_experiment, load_topology
from ..sim.runner import Simulation

REPO = Path(__file__).resolve().parents[3]
GROUP = "tick"


class _Timerless:
    """The core API of a minimal core that never sets a timer or emits an event."""

    __slots__ = ()

    def get_timer(self):
        return None

    def handle_timer(self, now) -> None:
        pass

    def next_event(self):
        return None


class _Publisher(_Timerless):
    def __init__(self) -> None:
        self.out: list = []
        self.dest = Group(GROUP)

    def publish(self, stripe: int, payload: bytes, now: int) -> None:
        self.out.append((payload, self.dest))

    def datagrams_to_send(self, now: int):
        out, self.out = self.out, []
        return out

    def receive_datagram(self, data, src, now) -> None:
        pass

    def groups(self):
        return frozenset()


class _Counter(_Timerless):
    """A customer reduced to what the network costs: it hears the stream and counts."""

    __slots__ = ("n", "_g")
    _EMPTY: tuple = ()

    def __init__(self) -> None:
        self.n = 0
        self._g = frozenset([GROUP])

    def receive_datagram(self, data, src, now) -> None:
        self.n += 1

    def datagrams_to_send(self, now):
        return self._EMPTY

    def groups(self):
        return self._g


def _build(host, loaded, rng, *, recovering=False):
    return _Publisher() if host.role == "source" else _Counter()


def _fanout_experiment(receivers: int, rate: float, seconds: float, loss: bool) -> LoadedExperiment:
    base = load_topology(REPO / "topologies" / "global.yaml")
    links = [lk.model_dump() for lk in base.links]
    if not loss:
        for lk in links:
            lk["loss"], lk["jitter_ms"], lk["bandwidth_mbps"] = {"model": "bernoulli", "p": 0.0}, 0.0, None
    hosts = [{"name": "src", "role": "source", "switch": "nyc"}]
    for i in range(receivers):
        hosts.append({"name": f"c{i}", "role": "primary", "switch": base.switches[i % len(base.switches)],
                      "link": {"delay_ms": 1.0 + (i % 3) * 0.5}})
    topo = Topology.model_validate({"name": "fanout", "switches": base.switches, "regions": base.regions,
                                    "links": links, "hosts": hosts})
    exp = Experiment.model_validate({
        "name": "fanout", "topology": "global.yaml", "duration_s": seconds + 0.5,
        "workload": {"rate_per_source": rate, "arrival": "constant", "start_s": 0.0, "duration_s": seconds},
    })
    return LoadedExperiment(experiment=exp, topology=topo, path=REPO / "experiments" / "fanout.yaml")


def _timed(loaded: LoadedExperiment, build=_build) -> tuple[float, dict]:
    sim = Simulation(loaded, build=build)
    t0, c0 = time.perf_counter(), time.process_time()
    sim.start()
    sim.sched.run_until(sim.end_ns)
    wall = time.perf_counter() - t0
    return wall, {"scheduler": sim.sched.processed, "deliveries": sim.net.deliveries,
                  "cpu": time.process_time() - c0}


def _load() -> str:
    # The machine may be shared: CPU seconds and the load average say how much wall time meant.
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def run(quick: bool) -> list[dict]:
    rows = []

    # 1. events/s on a lossy, jittery global tree (every hop pays for loss draws and jitter).
    n_recv, rate, secs = (200, 1000, 1.0) if quick else (500, 1000, 4.0)
    wall, st = _timed(_fanout_experiment(n_recv, rate, secs, loss=True))
    events = st["scheduler"] + st["deliveries"]
    rows.append({"metric": "simulator events/s", "value": events / wall, "unit": "events/s", "goal": ">= 500k/s",
                 "ok": events / wall >= 500_000, "goal_min": 500_000, "better": "higher",
                 "conditions": f"counting stand-in cores (not RMP), {n_recv} receivers, {secs:g} s at {rate:g} msg/s; "
                               "events = scheduler entries + packet arrivals",
                 "note": f"{events:,} events (scheduler entries + packet arrivals at hosts) in {wall:.2f} s "
                         f"({st['cpu']:.2f} CPU s, {_load()}); global tree with its 1-3 % loss and jitter, "
                         f"{n_recv} receivers, {rate:g} msg/s"})

    # 2. 10,000 customers x 10 s x 1,000 msg/s (quick: 1 s, extrapolated x10).
    secs = 1.0 if quick else 10.0
    wall, st = _timed(_fanout_experiment(10_000, 1000, secs, loss=False))
    full = wall * 10.0 / secs
    cond = (f"counting stand-in customers (not RMP), lossless global tree, {secs:g} s of traffic"
            + (" scaled x10" if secs < 10 else "") + "; set-up and table building not timed")
    rows.append({"metric": "10k customers x 10 s x 1,000 msg/s", "value": full, "unit": "s", "goal": "< 180 s",
                 "ok": full < 180, "goal_max": 180, "better": "lower", "conditions": cond,
                 "note": (f"measured {secs:g} s of traffic in {wall:.1f} s ({st['cpu']:.1f} CPU s, {_load()})"
                          + (", scaled x10" if secs < 10 else "")
                          + f"; {st['deliveries']:,} deliveries ({st['deliveries'] / wall:,.0f}/s); counting "
                            "customers on the global tree, one multicast source")})
    cpu_full = st["cpu"] * 10.0 / secs
    rows.append({"metric": "10k customers x 10 s x 1,000 msg/s, CPU time", "value": cpu_full, "unit": "CPU s",
                 "goal": "< 180 s", "ok": cpu_full < 180, "goal_max": 180, "better": "lower", "conditions": cond,
                 "note": "the same run's CPU seconds: the wall time on an otherwise idle machine"})

    # 3. the quickstart with the real cores, when they exist.
    if importlib.util.find_spec("rmptwin.factories.rmp") is not None:
        loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
        from ..factories import build_core

        try:
            wall, st = _timed(loaded, build_core)
            rows.append({"metric": "quickstart (real RMP cores)", "value": st["scheduler"] / wall,
                         "unit": "events/s", "ok": None, "better": "higher",
                         "conditions": "experiments/quickstart.yaml, real RMP cores; scheduler entries only",
                         "note": f"{loaded.experiment.duration_s:g} s simulated in {wall:.2f} s; "
                                 f"{st['scheduler']:,} scheduler entries, {st['deliveries']:,} deliveries"})
        except Exception as e:  # noqa: BLE001 - report, do not hide the other rows
            rows.append({"metric": "quickstart (real RMP cores)", "value": "failed", "ok": False,
                         "note": f"{type(e).__name__}: {e}"[:200]})
    return rows
