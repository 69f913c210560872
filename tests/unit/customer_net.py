"""The in-test network the customer tests drive the real cores through: a fixed delay, seeded
per-receiver loss, an R_T reduced to its remulticast half (FakeRT), and a two-region
experiment to build customers and retransmit servers from (make_loaded)."""

from __future__ import annotations

import heapq
import random

from rmptwin.core.sansio import Unicast
from rmptwin.core.trade_report import TradeReport
from rmptwin.model import Experiment, LoadedExperiment, Topology
from rmptwin.rmp.remulticast import Remulticaster
from rmptwin.rmp.repair import FIRST_MOLD_SEQ

MS = 1_000_000


def make_loaded(customers=(), retransmits=(), rts=(), stripes=1, dn_ms=20.0, k_r=3):
    """Two regions (eu on s1, us on s2); R_T hosts given as (name, regions)."""
    hosts = [{"name": "src", "role": "source", "switch": "s1"}]
    for name, regions in rts:
        hosts.append({"name": name, "role": "primary", "switch": "s1", "regions": regions})
    for name, regions in retransmits:
        hosts.append({"name": name, "role": "retransmit", "switch": "s1", "regions": regions})
    for c in customers:
        hosts.append({"switch": "s2", "role": "customer", **c})
    topo = Topology.model_validate({
        "name": "t", "switches": ["s1", "s2"], "regions": {"eu": ["s1"], "us": ["s2"]},
        "links": [{"a": "s1", "b": "s2"}], "hosts": hosts})
    exp = Experiment.model_validate({
        "name": "e", "topology": "t.yaml", "workload": {"stripes": stripes},
        "protocol": {"dn_ms": dn_ms, "k_r": k_r, "p_ms": 0.0}})
    return LoadedExperiment(experiment=exp, topology=topo, path="/tmp/e.yaml")


def trade(i: int) -> bytes:
    return TradeReport(f"S{i % 7:04d}", 1_000_000 + i, 100 + i, "NYSE", i).encode(pad_to=64)


class FakeRT:
    """An R_T reduced to its remulticast half: releases ``schedule`` [(t_ns, gseq, payload)]."""

    def __init__(self, regions, stripe, schedule, heartbeat_ns=50 * MS):
        self.rm = Remulticaster(regions, stripe, heartbeat_ns=heartbeat_ns)
        self.schedule = list(schedule)
        self.crashed = False

    def groups(self):
        return frozenset()

    def receive_datagram(self, data, src, now):
        self._pending = getattr(self, "_pending", []) + self.rm.serve_rerequest(data, src)

    def datagrams_to_send(self, now):
        while self.schedule and self.schedule[0][0] <= now:
            _, g, p = self.schedule.pop(0)
            self.rm.release(g, p)
        out = getattr(self, "_pending", []) + self.rm.datagrams(now)
        self._pending = []
        return out

    def get_timer(self):
        times = [t for t in (self.schedule[0][0] if self.schedule else None, self.rm.get_timer()) if t is not None]
        return min(times) if times else None

    def handle_timer(self, now):
        self.rm.handle_timer(now)

    def next_event(self):
        return None


class Net:
    """Delivers datagrams after 1 ms; ``loss(src, dst, data)`` decides drops. Runs until ``end``."""

    def __init__(self, nodes, loss=lambda s, d, data: False, delay_ns=MS):
        self.nodes = nodes
        self.loss = loss
        self.delay = delay_ns
        self.q = []
        self.n = 0
        self.events = {name: [] for name in nodes}

    def _drain(self, name, now):
        core = self.nodes[name]
        for data, dest in core.datagrams_to_send(now):
            if isinstance(dest, Unicast):
                targets = [dest.node]
            else:
                targets = [n for n, c in self.nodes.items() if n != name and dest.name in c.groups()]
            for t in targets:
                if t in self.nodes and not self.loss(name, t, data):
                    self.n += 1
                    heapq.heappush(self.q, (now + self.delay, self.n, "pkt", t, name, data))
        while (ev := core.next_event()) is not None:
            self.events[name].append((now, ev))

    def run(self, end):
        now = 0
        for name in self.nodes:
            self._drain(name, now)
        while True:
            timers = [(t, n) for n, c in self.nodes.items() if (t := c.get_timer()) is not None]
            t_timer, who = min(timers) if timers else (None, None)
            t_pkt = self.q[0][0] if self.q else None
            if t_timer is not None and (t_pkt is None or t_timer < t_pkt):
                now = max(now, t_timer)
                if now > end:
                    break
                self.nodes[who].handle_timer(now)
                self._drain(who, now)
            elif t_pkt is not None:
                now, _, _, dst, src, data = heapq.heappop(self.q)
                if now > end:
                    break
                self.nodes[dst].receive_datagram(data, src, now)
                self._drain(dst, now)
            else:
                break

    def kinds(self, name, kind):
        return [ev for _, ev in self.events[name] if ev.kind == kind]


def releases(n, first=FIRST_MOLD_SEQ, every_ns=2 * MS, start_ns=5 * MS):
    return [(start_ns + i * every_ns, first + i, trade(i)) for i in range(n)]


def dropper(rate, seed, links):
    """Seeded Bernoulli loss on the (src, dst) pairs in ``links``, multicast data only."""
    rng = random.Random(seed)

    def loss(src, dst, data):
        return (src, dst) in links and rng.random() < rate
    return loss
