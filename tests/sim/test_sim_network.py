"""The simulated network does what the topology says: delays, serialization, queues, loss
(independent per link, correlated down a multicast tree), faults, clocks, determinism."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sim_stubs import Group, StubCore, Unicast, builder, line_topo, loaded, recv_rows

from rmptwin.analysis.summary import summarize
from rmptwin.core.linkmodel import WIRE_HEADER_BYTES
from rmptwin.sim.scheduler import Scheduler
from rmptwin.sim.simulate import Simulation, simulate


def _fanout(source_dest=Group("g"), period_ns=None):
    def make(h, recovering):
        if h.role == "source":
            return StubCore(h.name, dest=source_dest, period_ns=period_ns)
        return StubCore(h.name, groups=["g"])
    return builder(make)


def test_scheduler_runs_equal_times_in_the_order_scheduled():
    s = Scheduler()
    seen = []
    for i in range(5):
        s.at(100, lambda t, a, b: seen.append((t, a)), i)
    s.at(50, lambda t, a, b: seen.append((t, a)), "early")
    s.run_until(1000)
    assert seen == [(50, "early")] + [(100, i) for i in range(5)]


def test_same_seed_same_run_and_another_seed_another_run():
    topo = line_topo(3, delay_ms=1.0, loss=0.1, jitter_ms=0.5, hosts=[
        {"name": "src", "role": "source", "switch": "s0"},
        {"name": "r1", "role": "primary", "switch": "s1"},
        {"name": "r2", "role": "primary", "switch": "s2"}])
    exp = loaded(topo, duration_s=2, workload={"rate_per_source": 500, "start_s": 0.1, "duration_s": 1.5})
    a = simulate(exp, seed=7, build=_fanout())
    b = simulate(exp, seed=7, build=_fanout())
    c = simulate(exp, seed=8, build=_fanout())
    assert a.events.equals(b.events) and a.drops.equals(b.drops) and a.link_counts.equals(b.link_counts)
    assert summarize(a.events, exp) == summarize(b.events, exp)
    assert not a.drops.equals(c.drops)


def test_adding_a_link_does_not_change_another_links_drops():
    hosts = [{"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}]
    small = line_topo(2, loss=0.2, hosts=hosts)
    big = line_topo(2, loss=0.2, hosts=hosts + [{"name": "r9", "role": "primary", "switch": "s9"}])
    big["switches"].append("s9")
    big["links"].append({"a": "s1", "b": "s9", "delay_ms": 1.0, "loss": 0.3})
    wl = {"rate_per_source": 1000, "start_s": 0.0, "duration_s": 1.0}
    d1 = simulate(loaded(small, duration_s=1.5, workload=wl), build=_fanout()).drops.to_pandas()
    d2 = simulate(loaded(big, duration_s=1.5, workload=wl), build=_fanout()).drops.to_pandas()
    on_s0s1 = d2[d2.link == "s0-s1"].reset_index(drop=True)
    assert len(d1) > 100
    pd.testing.assert_frame_equal(d1, on_s0s1)


@pytest.mark.parametrize("loss", [
    0.05,
    {"model": "gilbert_elliott", "p_gb": 0.02, "p_bg": 0.25, "loss_good": 0.0, "loss_bad": 0.8},
])
def test_measured_link_loss_matches_the_configured_rate(loss):
    n = 20000
    topo = line_topo(2, delay_ms=1.0, loss=loss, hosts=[
        {"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}])
    exp = loaded(topo, duration_s=2.5, workload={"rate_per_source": n / 2, "arrival": "constant",
                                                  "start_s": 0.0, "duration_s": 2.0})
    res = simulate(exp, build=_fanout())
    sent = res.events.to_pandas().query("kind == 'send'").shape[0]
    got = recv_rows(res, "r1").shape[0]
    assert sent == n
    mean = loss if isinstance(loss, float) else 0.02 / 0.27 * 0.8
    # Bursty loss has a larger variance than Bernoulli: allow 5 sigma of a Bernoulli estimate
    # for p, and 1.5 percentage points for the Gilbert-Elliott stationary mean.
    tol = 5 * math.sqrt(mean * (1 - mean) / n) if isinstance(loss, float) else 0.015
    assert abs((sent - got) / sent - mean) < tol
    counts = res.link_counts.to_pandas().set_index(["from_node", "to_node"])
    assert counts.loc[("s0", "s1"), "packets"] == n
    assert counts.loc[("s0", "s1"), "dropped"] == sent - got == len(res.drops)


def test_delay_and_serialization_are_exact():
    size = 1000
    topo = {
        "name": "t", "switches": ["a", "b"],
        "links": [{"a": "a", "b": "b", "delay_ms": 7.25, "bandwidth_mbps": 10}],
        "hosts": [
            {"name": "src", "role": "source", "switch": "a", "link": {"delay_ms": 0.5, "bandwidth_mbps": 100}},
            {"name": "r1", "role": "primary", "switch": "b", "link": {"delay_ms": 1.5}},
        ],
    }
    exp = loaded(topo, duration_s=1, workload={"rate_per_source": 2, "arrival": "constant",
                                                "start_s": 0.1, "duration_s": 0.5})

    def make(h, rec):
        return StubCore(h.name, dest=Group("g"), size=size) if h.role == "source" else StubCore(h.name, groups=["g"])

    res = simulate(exp, build=builder(make))
    ev = res.events.to_pandas()
    sends = ev[ev.kind == "send"].t_ns.tolist()
    recvs = recv_rows(res, "r1").t_ns.tolist()
    bits = (size + WIRE_HEADER_BYTES) * 8
    # 100 Mbit/s access: bits/100 ns... 1 bit at 1 Mbit/s is 1000 ns.
    per_packet = 0.5e6 + bits * 1000 / 100 + 7.25e6 + bits * 1000 / 10 + 1.5e6
    assert len(sends) == 1 and sends[0] == 100_000_000  # constant rate 2/s from 0.1 s for 0.5 s
    assert recvs == [sends[0] + round(per_packet)]


def test_queue_drops_only_when_the_link_is_overloaded():
    # 1 Mbit/s bottleneck with a 10-packet queue; 125-byte wire packets take exactly 1 ms.
    payload = 125 - WIRE_HEADER_BYTES
    def run(rate):
        topo = {
            "name": "t", "switches": ["a", "b"],
            "links": [{"a": "a", "b": "b", "delay_ms": 1.0, "bandwidth_mbps": 1, "queue_packets": 10}],
            "hosts": [{"name": "src", "role": "source", "switch": "a"},
                      {"name": "r1", "role": "primary", "switch": "b"}],
        }
        exp = loaded(topo, duration_s=2, workload={"rate_per_source": rate, "arrival": "constant",
                                                    "start_s": 0.0, "duration_s": 1.0})
        def make(h, rec):
            if h.role == "source":
                return StubCore(h.name, dest=Group("g"), size=payload)
            return StubCore(h.name, groups=["g"])
        return simulate(exp, build=builder(make))

    under = run(900)   # 0.9 ms of work every 1.11 ms: never queues beyond one packet
    assert len(under.drops) == 0 and len(recv_rows(under)) == 900
    over = run(2000)   # twice what the link carries: about half must be dropped at the queue
    drops = over.drops.to_pandas()
    assert set(drops.reason) == {"queue"} and set(drops.link) == {"a-b"}
    got = len(recv_rows(over))
    # In 1 s the link sends ~1000 packets (+ the 10 queued); the rest are dropped.
    assert 995 <= got <= 1012 and got + len(drops) == 2000
    # Delivery times are spaced exactly by the 1 ms transmission time once the queue is full.
    t = recv_rows(over).t_ns.diff().dropna()
    assert (t.iloc[20:] == 1_000_000).all()


def test_a_drop_is_missed_by_exactly_the_receivers_below_it():
    from rmptwin.model import Topology
    from rmptwin.model.tree import multicast_tree

    sw = [f"s{i}" for i in range(1, 16)]
    links = [{"a": f"s{p}", "b": f"s{c}", "delay_ms": 1.0, "loss": 0.02 + 0.01 * (c % 5)}
             for p in range(1, 8) for c in (2 * p, 2 * p + 1)]
    hosts = [{"name": "src", "role": "source", "switch": "s1"}] + [
        {"name": f"r{i}", "role": "primary", "switch": f"s{i}"} for i in range(8, 16)]
    topo_d = {"name": "bt", "switches": sw, "links": links, "hosts": hosts}
    exp = loaded(topo_d, duration_s=2, workload={"rate_per_source": 1000, "start_s": 0.0, "duration_s": 1.5})
    res = simulate(exp, build=_fanout())
    tree = multicast_tree(Topology.model_validate(topo_d), "s1", {f"s{i}" for i in range(8, 16)})
    receivers = {f"r{i}" for i in range(8, 16)}
    sent = set(res.events.to_pandas().query("kind == 'send'").src_seq)
    got = recv_rows(res).groupby("src_seq").node.apply(set).to_dict()
    drops = res.drops.to_pandas()
    assert len(drops) > 100 and (drops.gseq >= 0).all()
    below = {}
    for row in drops.itertuples():
        below.setdefault(row.gseq, set()).update({f"r{s[1:]}" for s in tree.below(row.to_node)} & receivers)
    for seq in sent:
        missing = receivers - got.get(seq, set())
        assert missing == below.get(seq, set())
    # Correlation is visible: some packets are missed by 2+ receivers at once.
    assert any(len(m) >= 2 for m in below.values())


def test_link_down_up_and_loss_change_mid_run():
    topo = line_topo(2, delay_ms=1.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}])
    faults = [
        {"at_s": 1.0, "action": "link_down", "link": "s1-s0"},
        {"at_s": 2.0, "action": "link_up", "link": "s0-s1"},
        {"at_s": 3.0, "action": "loss", "link": "s0-s1", "loss": 0.5},
        {"at_s": 4.0, "action": "loss", "link": "s0-s1", "loss": 0},
    ]
    exp = loaded(topo, duration_s=5.5, faults=faults,
                 workload={"rate_per_source": 1000, "arrival": "constant", "start_s": 0.0, "duration_s": 5.0})
    res = simulate(exp, build=_fanout())
    ev = res.events.to_pandas()
    sends = ev[ev.kind == "send"].set_index("src_seq").t_ns
    got = set(recv_rows(res).src_seq)
    lost_at = sends[~sends.index.isin(got)] / 1e9
    def lost_in(a, b):
        return int(((lost_at >= a) & (lost_at < b)).sum())
    assert lost_in(0, 1) == 0 and lost_in(2, 3) == 0 and lost_in(4, 5) == 0
    assert lost_in(1, 2) == 1000          # down: everything sent in that second
    assert 430 <= lost_in(3, 4) <= 570    # 50 % loss: 1000 packets, ~4.5 sigma
    reasons = res.drops.to_pandas().groupby("reason").size().to_dict()
    assert reasons == {"down": 1000, "loss": lost_in(3, 4)}


def test_unicast_follows_the_path_and_the_sender_does_not_hear_its_multicast():
    topo = line_topo(3, delay_ms=2.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"},
        {"name": "r1", "role": "primary", "switch": "s1"},
        {"name": "r2", "role": "primary", "switch": "s2"}])
    exp = loaded(topo, duration_s=1, workload={"rate_per_source": 10, "arrival": "constant",
                                                "start_s": 0.0, "duration_s": 0.5})

    def make(h, rec):
        if h.role == "source":
            return StubCore(h.name, dest=Unicast("r2"), groups=["g"])
        return StubCore(h.name, groups=["g"])

    res = simulate(exp, build=builder(make))
    rows = recv_rows(res)
    assert set(rows.node) == {"r2"} and len(rows) == 5
    sends = res.events.to_pandas().query("kind == 'send'").t_ns.to_numpy()
    assert (rows.t_ns.to_numpy() - sends == 4_000_000).all()   # two 2 ms links, zero-delay access
    counts = res.link_counts.to_pandas()
    assert set(counts.link) == {"src-s0", "s0-s1", "s1-s2", "r2-s2"}


def test_clock_offset_and_drift_are_what_the_core_sees():
    off_ms, ppm = 5.0, 200.0
    topo = line_topo(2, delay_ms=3.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}])
    exp = loaded(topo, duration_s=3, clocks={"r1": {"offset_ms": off_ms, "drift_ppm": ppm},
                                              "src": {"offset_ms": -2.0}},
                 workload={"rate_per_source": 0})

    def make(h, rec):
        if h.role == "source":
            return StubCore(h.name, dest=Group("g"), period_ns=250_000_000)  # timer in src's local time
        return StubCore(h.name, groups=["g"])

    sim = Simulation(exp, build=builder(make))
    res = sim.run()
    ev = res.events.to_pandas()
    sends = ev[ev.kind == "send"].t_ns.tolist()
    # src's clock reads true - 2 ms, so its local deadlines k x 250 ms fire at true k x 250 ms + 2 ms.
    assert sends == [k * 250_000_000 + 2_000_000 for k in range(1, len(sends) + 1)]
    assert len(sends) == 11
    for row in recv_rows(res, "r1").itertuples():
        import json
        d = json.loads(row.detail)
        assert d["now"] == row.t_ns + round(off_ms * 1e6) + round(row.t_ns * ppm * 1e-6)
        assert row.t_ns == d["sent"] + 2_000_000 + 3_000_000  # sender stamped its local time


def test_a_crashed_core_hears_nothing_and_a_recovered_one_is_rebuilt():
    topo = line_topo(2, delay_ms=1.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}])
    exp = loaded(topo, duration_s=3.5, faults=[{"at_s": 1.0, "action": "crash", "node": "r1"},
                                               {"at_s": 2.0, "action": "recover", "node": "r1"}],
                 workload={"rate_per_source": 100, "arrival": "constant", "start_s": 0.0, "duration_s": 3.0})
    built = []

    def make(h, rec):
        built.append((h.name, rec))
        return StubCore(h.name, dest=Group("g")) if h.role == "source" else StubCore(h.name, groups=["g"])

    res = simulate(exp, build=builder(make))
    ev = res.events.to_pandas()
    t = recv_rows(res, "r1").t_ns / 1e9
    assert ((t > 1.0) & (t < 2.0)).sum() == 0 and (t < 1.0).sum() >= 99 and (t > 2.0).sum() >= 99
    assert ev[ev.kind.isin(["crash", "recover"])][["node", "kind"]].values.tolist() == [["r1", "crash"], ["r1", "recover"]]
    assert built == [("src", False), ("r1", False), ("r1", True)]


def test_link_counts_add_up_when_the_sender_is_a_member_and_links_differ():
    topo = line_topo(2, delay_ms=1.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"},
        {"name": "a", "role": "primary", "switch": "s0", "link": {"delay_ms": 1.0}},
        {"name": "b", "role": "primary", "switch": "s0", "link": {"delay_ms": 1.0}},
        {"name": "c", "role": "primary", "switch": "s1", "link": {"delay_ms": 2.0, "loss": 0.2}},
        {"name": "d", "role": "primary", "switch": "s1", "link": {"delay_ms": 1.0}}])
    exp = loaded(topo, duration_s=1.5, workload={"rate_per_source": 1000, "arrival": "constant",
                                                  "start_s": 0.0, "duration_s": 1.0})

    def make(h, rec):
        if h.role == "source":
            return StubCore(h.name, dest=Group("g"), groups=["g"])
        return StubCore(h.name, groups=["g"])

    res = simulate(exp, build=builder(make))
    c = res.link_counts.to_pandas().set_index(["from_node", "to_node"])
    got = recv_rows(res).groupby("node").size().to_dict()
    assert "src" not in got and got["a"] == got["b"] == got["d"] == 1000
    assert c.loc[("src", "s0"), "packets"] == 1000
    assert ("s0", "src") not in c.index or c.loc[("s0", "src"), "packets"] == 0
    for to in ("a", "b"):
        assert c.loc[("s0", to), "packets"] == 1000
    assert c.loc[("s1", "d"), "packets"] == 1000 and c.loc[("s0", "s1"), "packets"] == 1000
    assert c.loc[("s1", "c"), "packets"] == 1000 and c.loc[("s1", "c"), "dropped"] == 1000 - got["c"] > 100
    # Arrival times follow each host's own access delay.
    rows = recv_rows(res)
    sends = res.events.to_pandas().query("kind == 'send'").set_index("src_seq").t_ns
    lag = {n: set((g.t_ns.to_numpy() - sends.loc[g.src_seq].to_numpy()) // 1000) for n, g in rows.groupby("node")}
    assert lag == {"a": {1000}, "b": {1000}, "c": {3000}, "d": {2000}}


def test_jitter_varies_delay_within_bounds_and_never_reorders():
    topo = line_topo(2, delay_ms=10.0, jitter_ms=5.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"}, {"name": "r1", "role": "primary", "switch": "s1"}])
    exp = loaded(topo, duration_s=2.5, workload={"rate_per_source": 1000, "arrival": "constant",
                                                  "start_s": 0.0, "duration_s": 2.0})
    res = simulate(exp, build=_fanout())
    rows = recv_rows(res, "r1")
    sends = res.events.to_pandas().query("kind == 'send'").set_index("src_seq").t_ns
    assert len(rows) == len(sends) == 2000
    assert rows.src_seq.tolist() == sorted(rows.src_seq)           # arrival order = send order
    delay = (rows.t_ns.to_numpy() - sends.loc[rows.src_seq].to_numpy()) / 1e6
    assert delay.min() >= 10.0 and delay.max() <= 15.0
    assert delay.std() > 0.5                                      # the jitter is really there


def test_a_scoped_group_stays_inside_its_region():
    topo = line_topo(3, delay_ms=1.0, hosts=[
        {"name": "rt", "role": "source", "switch": "s1"},
        {"name": "out", "role": "source", "switch": "s2"},
        {"name": "c0", "role": "primary", "switch": "s0"},
        {"name": "c1", "role": "primary", "switch": "s1"},
        {"name": "c2", "role": "primary", "switch": "s2"}])
    topo["regions"] = {"west": ["s0", "s1"]}
    exp = loaded(topo, duration_s=1, workload={"rate_per_source": 10, "arrival": "constant",
                                                "start_s": 0.0, "duration_s": 0.5})
    group = "region/west/0"

    def make(h, rec):
        if h.role == "source":
            return StubCore(h.name, dest=Group(group))
        return StubCore(h.name, groups=[group])

    res = simulate(exp, build=builder(make))
    got = recv_rows(res).groupby(["src", "node"]).size().to_dict()
    # From inside the region: every member inside it, none outside (c2 joined but is on s2).
    # From outside (s2): nobody at all.
    assert got == {("rt", "c0"): 5, ("rt", "c1"): 5}
    assert "s1-s2" not in set(res.link_counts.to_pandas().link)


class _Leaver(StubCore):
    """Listens, then leaves the group at its first timer."""

    def handle_timer(self, now: int) -> None:
        self.set_groups([])
        self.timer = None


def test_membership_change_mid_run_keeps_link_counts_exact():
    topo = line_topo(2, delay_ms=100.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"},
        {"name": "r1", "role": "primary", "switch": "s1", "link": {"delay_ms": 1.0}},
        {"name": "r2", "role": "primary", "switch": "s1", "link": {"delay_ms": 1.0}}])
    exp = loaded(topo, duration_s=2, workload={"rate_per_source": 1000, "arrival": "constant",
                                                "start_s": 0.0, "duration_s": 1.0})

    def make(h, rec):
        if h.role == "source":
            return StubCore(h.name, dest=Group("g"))
        if h.name == "r2":
            return _Leaver(h.name, groups=["g"], period_ns=500_000_000)
        return StubCore(h.name, groups=["g"])

    res = simulate(exp, build=builder(make))
    got = recv_rows(res).groupby("node").size().to_dict()
    c = res.link_counts.to_pandas().set_index(["from_node", "to_node"]).packets
    assert got["r1"] == c[("s1", "r1")] == 1000
    # r2 left at 0.5 s: it got what was sent before (the route at sending time), 100 of them
    # still in flight on the 100 ms link when it left; its access link counted exactly those.
    assert got["r2"] == 500 and c[("s1", "r2")] == 500
    late = recv_rows(res, "r2").t_ns > 500_000_000
    assert late.sum() == 100
