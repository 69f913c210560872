"""Hosts behind one switch that a packet reaches at the same time share one heap entry: the
simulator then pops fewer heap events than it makes deliveries, and each host still hears
the packet at its own arrival time, in the order one entry per host would give."""

from __future__ import annotations

from sim_stubs import Group, StubCore, builder, line_topo, loaded, recv_rows

from rmptwin.sim.simulate import Simulation

MSGS = 400


def _run():
    access = {"delay_ms": 1.0, "bandwidth_mbps": 100}   # serializes: each host's link decides alone
    topo = line_topo(2, delay_ms=1.0, hosts=[
        {"name": "src", "role": "source", "switch": "s0"},
        {"name": "a", "role": "primary", "switch": "s1", "link": access},
        {"name": "c", "role": "primary", "switch": "s1", "link": {**access, "delay_ms": 2.0}},
        {"name": "b", "role": "primary", "switch": "s1", "link": access},
        {"name": "d", "role": "primary", "switch": "s1", "link": {**access, "loss": 0.2}}])
    exp = loaded(topo, duration_s=1.0, workload={"rate_per_source": MSGS / 0.5, "arrival": "constant",
                                                  "start_s": 0.0, "duration_s": 0.5})

    def make(h, recovering):
        return StubCore(h.name, dest=Group("g")) if h.role == "source" else StubCore(h.name, groups=["g"])

    return Simulation(exp, build=builder(make)).run()


def test_equal_arrivals_share_a_heap_entry_and_keep_their_order():
    res = _run()
    rows = recv_rows(res)
    got = rows.groupby("node").size().to_dict()
    assert got["a"] == got["b"] == got["c"] == MSGS and 0.6 * MSGS < got["d"] < MSGS   # d's link loses 20 %
    # Heap entries: each publication, its two switch hops, and per packet one arrival at a, b
    # and d (equal times) and one at c (later): fewer than the deliveries, counted apart.
    # (One entry per host would make it MSGS * 3 + the deliveries.)
    assert res.stats["deliveries"] == sum(got.values())
    assert res.stats["scheduler_events"] == MSGS * (1 + 2 + 2)
    # Each host at its own arrival time; at equal times in route (host) order, as one entry each.
    for seq, g in rows.groupby("src_seq"):
        t = g.set_index("node").t_ns
        assert t["a"] == t["b"] and t["c"] == t["a"] + 1_000_000, seq
        if "d" in t:
            assert t["d"] == t["a"]
        same = g[g.t_ns == t["a"]].node.tolist()
        assert same == sorted(same, key="acbd".index), seq
