"""Simulator speed, with the real RMP cores and without them, and against SimPy.

Heap events (pops from the scheduler's heap: link hops, timers, publications, arrivals) and
deliveries (one datagram handed to one host's core) are reported apart. One arrival entry
hands a multicast packet to every host behind a switch that it reaches at the same time, so
heap events can be far fewer than deliveries (the 10,000-customer rows): read the two rates
side by side. Rates count the scheduler run only; a separate wall figure includes set-up
(topology, routes, cores) and building the tables.

- the quickstart, and a larger generated tree (``sim.random_trees``), with the real cores;
- the 10,000-customer ticker: the quickstart's tree, sources, ring and servers with its 14
  customers cloned round-robin to 10,000 (same grades, regions, switches and access links),
  at 1,000 msg/s; one window of steady traffic is run and the 10 s figure is projected from
  it (``--quick``: 1,000 customers);
- the network alone (counting stand-in cores, not RMP, 500 receivers);
- the same token-ring workload on our scheduler and on SimPy (``simpy_ring``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmptwin.bench.simpy_ring import RingWorkload, run_heapq, run_ours, run_simpy, simpy_available
from rmptwin.core.events import Event
from rmptwin.core.sansio import Dest, Group
from rmptwin.factories import build_core
from rmptwin.model import Experiment, LoadedExperiment, Topology, load_experiment, load_topology
from rmptwin.model.hosts import HostSpec
from rmptwin.sim.random_trees import loaded_experiment, max_path_delay_ms, random_tree
from rmptwin.sim.simulate import BuildFn, Simulation

REPO = Path(__file__).resolve().parents[3]
GROUP = "tick"


class _Timerless:
    """The core API of a minimal core that never sets a timer or emits an event."""

    __slots__ = ()

    def get_timer(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        pass

    def next_event(self) -> Event | None:
        return None


class _Publisher(_Timerless):
    def __init__(self) -> None:
        self.out: list[tuple[bytes, Dest]] = []
        self.dest = Group(GROUP)

    def publish(self, stripe: int, payload: bytes, now: int) -> None:
        self.out.append((payload, self.dest))

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        out, self.out = self.out, []
        return out

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        pass

    def groups(self) -> frozenset[str]:
        return frozenset()


class _Counter(_Timerless):
    """A customer reduced to what the network costs: it hears the stream and counts."""

    __slots__ = ("n", "_g")
    _EMPTY: tuple[tuple[bytes, Dest], ...] = ()

    def __init__(self) -> None:
        self.n = 0
        self._g = frozenset([GROUP])

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        self.n += 1

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        return self._EMPTY

    def groups(self) -> frozenset[str]:
        return self._g


def _build(host: HostSpec, loaded: LoadedExperiment, rng: random.Random, *,
           recovering: bool = False) -> _Publisher | _Counter:
    return _Publisher() if host.role == "source" else _Counter()


def _fanout_experiment(receivers: int, rate: float, seconds: float, loss: bool) -> LoadedExperiment:
    base = load_topology(REPO / "topologies" / "global.yaml")
    links = [lk.model_dump() for lk in base.links]
    if not loss:
        for lk in links:
            lk["loss"], lk["jitter_ms"], lk["bandwidth_mbps"] = {"model": "bernoulli", "p": 0.0}, 0.0, None
    hosts: list[dict[str, Any]] = [{"name": "src", "role": "source", "switch": "nyc"}]
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


def _load() -> str:
    # The machine may be shared: CPU seconds and the load average say how much wall time meant.
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


class _Clock:
    """Wall and CPU seconds since the last ``lap``."""

    def __init__(self) -> None:
        self.w, self.c = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        out = (w - self.w, c - self.c)
        self.w, self.c = w, c
        return out


def _timed(loaded: LoadedExperiment, build: BuildFn = _build, split_ns: tuple[int, ...] = ()) -> dict[str, Any]:
    """Set-up, the scheduler run (in laps ending at ``split_ns`` and at the end) and the
    tables, each timed apart; heap entries and deliveries counted per lap."""
    clock = _Clock()
    sim = Simulation(loaded, build=build)
    sim.start()
    out: dict[str, Any] = {"setup": clock.lap(), "laps": []}
    for end in (*split_ns, sim.end_ns):
        h0, d0, r0 = sim.sched.processed, sim.net.deliveries, sim.logged_events
        sim.sched.run_until(end)
        out["laps"].append((*clock.lap(), sim.sched.processed - h0, sim.net.deliveries - d0, sim.logged_events - r0))
    sim.event_table(), sim.net.drop_table(), sim.net.count_table()
    out["tables"] = clock.lap()
    run = [sum(lap[i] for lap in out["laps"]) for i in range(5)]
    out.update(run_s=run[0], run_cpu=run[1], heap=run[2], deliveries=run[3], logged=run[4],
               total_s=out["setup"][0] + run[0] + out["tables"][0])
    return out


def _real_rows(name: str, what: str, st: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    heap, dl = st["heap"] / st["run_cpu"], st["deliveries"] / st["run_cpu"]
    cond = (f"{what}; real RMP cores; per CPU second of the scheduler run (the machine is shared); "
            "heap entries (pops) and per-host deliveries counted apart; hosts reached at one time "
            "behind one switch share one arrival entry")
    note = (f"{st['heap']:,} heap entries ({st['deliveries'] / st['heap']:.2f} deliveries per entry), "
            f"{st['deliveries']:,} deliveries, {st['logged']:,} events logged, in "
            f"{st['run_cpu']:.2f} CPU s ({st['run_s']:.2f} s wall: {st['heap'] / st['run_s']:,.0f} heap "
            f"entries/s), {_load()}")
    return [
        {"metric": f"{name}: heap events/s, real cores", "value": heap, "unit": "events/s", "goal": ">= 500k/s",
         "goal_min": 500_000, "better": "higher", "conditions": cond, "note": note},
        {"metric": f"{name}: deliveries/s, real cores", "value": dl, "unit": "deliveries/s", "better": "higher",
         "conditions": cond, "note": note},
        {"metric": f"{name}: wall with set-up and tables", "value": st["total_s"], "unit": "s", "better": "lower",
         "conditions": f"{what}; real RMP cores; building the cores and routes, the run, and the three tables",
         "note": f"set-up {st['setup'][0]:.2f} s, run {st['run_s']:.2f} s, tables {st['tables'][0]:.2f} s"},
    ]


def _generated_tree(quick: bool) -> tuple[LoadedExperiment, str]:
    switches, secs = (20, 1.0) if quick else (40, 4.0)
    topo = random_tree(random.Random(7), switches=switches, primaries=6, sources=3, secondaries=12,
                       reformers=1, max_loss=0.01, delay_ms=(1.0, 10.0), name="bench-tree")
    protocol = {"token_mode": "time_driven", "dn_ms": round(max_path_delay_ms(topo) + 5), "p_ms": 2}
    loaded = loaded_experiment(topo, protocol=protocol, seed=7, duration_s=secs + 1.0, name="bench-tree",
                               workload={"rate_per_source": 100, "start_s": 0.2, "duration_s": secs})
    return loaded, (f"generated tree (random_trees seed 7): {switches} switches, 6 primaries, 12 secondaries, "
                    f"3 sources x 100 msg/s for {secs:g} s, link loss up to 1 %")


def _customers_experiment(n: int, rate: float, traffic_s: float) -> LoadedExperiment:
    """The quickstart with its customers cloned round-robin to ``n`` and ``traffic_s`` seconds at ``rate``."""
    base = load_experiment(REPO / "experiments" / "quickstart.yaml")
    t = base.topology.model_dump(mode="json", exclude_none=True)
    customers = [h for h in t["hosts"] if h["role"] == "customer"]
    t["hosts"] = [h for h in t["hosts"] if h["role"] != "customer"]
    t["hosts"] += [{**customers[i % len(customers)], "name": f"k{i}"} for i in range(n)]
    e = base.experiment.model_dump(mode="json", exclude_none=True)
    start = e["workload"]["start_s"]
    e["workload"].update(rate_per_source=rate / 3, duration_s=traffic_s)
    e["duration_s"] = start + traffic_s
    return LoadedExperiment(experiment=Experiment.model_validate(e), topology=Topology.model_validate(t),
                            path=base.path)


def _ten_thousand(quick: bool) -> list[dict[str, Any]]:
    """10,000 real customers at 1,000 msg/s: one window of steady traffic, timed apart."""
    n, rate, full_s = (1_000 if quick else 10_000), 1000.0, 10.0
    # Customers hear the ticker in bursts, one per token period (300 ms): a window of one period.
    window = 0.3
    base = load_experiment(REPO / "experiments" / "quickstart.yaml").experiment
    # Customers hear a message Delta_A after the ring orders it: measure once they do.
    steady_s = base.workload.start_s + base.protocol.delta_a / 1000 + 0.6
    loaded = _customers_experiment(n, rate, steady_s - base.workload.start_s + window)
    st = _timed(loaded, build_core, split_ns=(round(steady_s * 1e9),))
    setup = st["setup"][1]
    (_, warm, _, _, warm_logged), (_, cpu, heap, dl, logged) = st["laps"]
    scale = full_s / window
    tables = st["tables"][1] * logged / (logged + warm_logged)    # the window's share of the tables
    projected = setup + warm + (cpu + tables) * scale
    fits = rate * max(0.0, 180 - setup - warm) / ((cpu + tables) * scale)
    cond = (f"quickstart tree, sources, ring and servers; its 14 customers cloned to {n:,} (same grade mix, "
            f"regions, access links); {rate:g} msg/s; CPU seconds; customers reached at one time behind one "
            f"switch share one heap entry (heap events << deliveries); {window:g} s of steady traffic measured "
            f"(from {steady_s:g} s, once customers hear the ticker), 10 s projected: set-up + the "
            f"{steady_s:g} s before + (window + its tables) x {scale:g}")
    note = (f"set-up {setup:.1f} s, first {steady_s:g} s {warm:.1f} s, window {cpu:.1f} s: {heap:,} heap entries "
            f"({heap / cpu:,.0f}/s), {dl:,} deliveries ({dl / cpu:,.0f}/s, {dl / max(heap, 1):.1f} per entry), "
            f"{logged:,} events logged ({cpu / max(logged, 1) * 1e6:.1f} us each); tables "
            f"{st['tables'][1]:.1f} s ({tables:.1f} s the window's); wall {st['total_s']:.1f} s; {_load()}")
    return [
        {"metric": f"{n // 1000}k real customers x 10 s x 1,000 msg/s (projected)", "value": projected, "unit": "CPU s",
         "goal": "< 180 s", "goal_max": 180, "better": "lower", "conditions": cond, "note": note},
        {"metric": f"{n // 1000}k real customers: heap events/s in steady traffic", "value": heap / cpu, "unit": "events/s",
         "better": "higher", "conditions": cond, "note": note},
        {"metric": f"{n // 1000}k real customers: deliveries/s in steady traffic", "value": dl / cpu, "unit": "deliveries/s",
         "better": "higher", "conditions": cond, "note": note},
        {"metric": f"{n // 1000}k real customers: rate whose 10 s fit in 3 min", "value": fits, "unit": "msg/s",
         "better": "higher", "conditions": cond + "; linear in the rate (an estimate: at lower rates fewer "
                                                    "messages share a packet)", "note": note},
    ]


def _standin_rows(quick: bool) -> list[dict[str, Any]]:
    rows = []
    n_recv, rate, secs = (200, 1000, 1.0) if quick else (500, 1000, 4.0)
    st = _timed(_fanout_experiment(n_recv, rate, secs, loss=True))
    events = st["heap"] + st["deliveries"]
    rows.append({"metric": "network only (stand-in cores): heap entries + deliveries/s", "value": events / st["run_s"],
                 "unit": "events/s", "better": "higher",
                 "conditions": f"counting stand-in cores (not RMP), {n_recv} receivers, {secs:g} s at {rate:g} msg/s "
                               "on the lossy, jittery global tree",
                 "note": f"{st['heap']:,} heap entries + {st['deliveries']:,} deliveries in {st['run_s']:.2f} s "
                         f"({st['run_cpu']:.2f} CPU s, {_load()})"})
    return rows


def _simpy_rows(quick: bool) -> list[dict[str, Any]]:
    w = RingWorkload(seconds=0.5 if quick else 4.0)
    cond = (f"token ring of {w.members} members, {w.sources} sources x {w.rate:g} msg/s for {w.seconds:g} s, "
            f"every member acks every message: {w.expected_events():,} events, the same in both, same order")
    if not simpy_available():
        return [{"metric": "scheduler vs SimPy, same ring", "value": "skipped", "ok": None, "conditions": cond,
                 "note": "simpy is not installed in this venv (it is in requirements.lock: re-run "
                         "scripts/provision.sh)"}]
    rates = {}
    outcomes = {}
    for name, fn in (("ours", run_ours), ("simpy", run_simpy), ("heapq", run_heapq)):
        c0 = time.perf_counter()
        st = fn(w)
        rates[name] = st.events / (time.perf_counter() - c0)
        outcomes[name] = st.outcome()
        assert st.events == w.expected_events(), (name, st.events)
    assert outcomes["ours"] == outcomes["simpy"] == outcomes["heapq"], outcomes   # the same work in each
    ratio = rates["ours"] / rates["simpy"]
    floor = {"floor": rates["heapq"], "floor_what": "bare heapq loop, inline dispatch"}
    return [
        {"metric": "scheduler on the ring workload", "value": rates["ours"], "unit": "events/s", "better": "higher",
         **floor, "conditions": cond, "note": _load()},
        {"metric": "SimPy 4.1.1 on the ring workload", "value": rates["simpy"], "unit": "events/s",
         "better": "higher", **floor, "conditions": cond + "; sources and token as SimPy processes, deliveries "
                                                             "and acks as timeouts with callbacks", "note": _load()},
        {"metric": "scheduler / SimPy (same ring)", "value": ratio, "unit": "x", "better": "higher",
         "goal": ">= 2 x", "goal_min": 2.0, "conditions": cond,
         "note": f"{rates['ours']:,.0f} vs {rates['simpy']:,.0f} events/s; {_load()}"},
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    quickstart = load_experiment(REPO / "experiments" / "quickstart.yaml")
    rows = _real_rows("quickstart", "experiments/quickstart.yaml (8 s simulated, 150 msg/s, 14 customers)",
                      _timed(quickstart, build_core), quick)
    tree, what = _generated_tree(quick)
    rows += _real_rows("generated tree", what, _timed(tree, build_core), quick)
    rows += _ten_thousand(quick)
    rows += _standin_rows(quick)
    rows += _simpy_rows(quick)
    return rows
