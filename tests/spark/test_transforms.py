"""Each analysis transform against values worked out by hand for tiny event logs."""

from __future__ import annotations

import math

import pytest
from spark_eventlog import ev, small_topology

from rmptwin.analysis import control, extract, latency, loss, throughput

pytestmark = pytest.mark.spark


def hosts(spark, **stripes):
    return extract.hosts_frame(spark, small_topology(**stripes))


def by(rows, *keys):
    return {tuple(r[k] for k in keys): r for r in (x if isinstance(x, dict) else x.asDict() for x in rows)}


def test_delivery_latency_per_receiver_stage_and_region(spark, events_df):
    e = events_df([
        ev(1000, "h0", "source", "send", "h0", 0), ev(2000, "h0", "source", "send", "h0", 1),
        ev(1500, "a", "primary", "deliver", "h0", 0, 0), ev(1700, "a", "primary", "deliver", "h0", 0, 0),
        ev(1800, "c", "primary", "deliver", "h0", 0, 0), ev(2600, "a", "primary", "deliver", "h0", 1, 1),
        ev(5000, "a", "primary", "release", gseq=0), ev(5300, "c", "primary", "release", gseq=0),
        ev(5200, "b", "primary", "release", "h0", 1, 1),  # a release naming its message (the cores' own)
        ev(5100, "x", "customer", "cust_recv", gseq=0, stripe=0, repair=False),
        ev(5450, "y", "customer", "cust_recv", gseq=0, stripe=0, repair=False),
    ])
    got = by(latency.delivery_latency(e, hosts(spark)).collect(), "stage", "node", "src_seq")
    expect = {
        ("deliver", "a", 0): (500, "west"), ("deliver", "c", 0): (800, "east"),
        ("deliver", "a", 1): (600, "west"), ("release", "a", 0): (4000, "west"), ("release", "b", 1): (3200, "west"),
        ("release", "c", 0): (4300, "east"), ("customer", "x", 0): (4100, "west"),
        ("customer", "y", 0): (4450, "east"),
    }
    assert {k: (r["latency_ns"], r["region"]) for k, r in got.items()} == expect


def test_fairness_spread_across_rt_and_customers(spark, events_df):
    e = events_df([
        ev(5000, "a", "primary", "release", gseq=0), ev(5300, "c", "primary", "release", gseq=0),
        ev(5100, "b", "primary", "release", gseq=0), ev(5150, "b", "primary", "release", gseq=0),
        ev(6000, "a", "primary", "release", gseq=1),   # one R_T released it: spread 0
        ev(6500, "c", "primary", "release", gseq=2),   # only c, which is down at the end: no row
        ev(100, "b", "primary", "crash"), ev(200, "b", "primary", "recover"),  # b is back: counts
        ev(7000, "c", "primary", "crash"),             # c is down at the end: its releases do not count
        ev(5100, "x", "customer", "cust_recv", gseq=0, stripe=0),
        ev(5450, "y", "customer", "cust_recv", gseq=0, stripe=0),
        ev(5999, "y", "customer", "cust_recv", gseq=0, stripe=0),  # a later copy: first copy counts
    ])
    got = by(latency.fairness_spread(e).collect(), "scope", "gseq")
    assert {k: (r["nodes"], r["first_ns"], r["spread_ns"]) for k, r in got.items()} == {
        ("release", 0): (2, 5000, 150), ("release", 1): (1, 6000, 0), ("customer", 0): (2, 5100, 350)}


def loss_log(events_df):
    """4 packets; a: 0,1 first, 2 repaired, 3 never; b: 2 repaired; c: all first."""
    rows = [ev(1000 * i, "h0", "source", "send", "h0", i) for i in range(4)]
    for i in range(4):
        rows.append(ev(1000 * i + 50, "c", "primary", "recv", "h0", i, repair=False))
    rows += [ev(100, "a", "primary", "recv", "h0", 0, repair=False),
             ev(1100, "a", "primary", "recv", "h0", 1, repair=False),
             ev(2900, "a", "primary", "recv", "h0", 2, repair=True),
             ev(2950, "a", "primary", "recv", "h0", 2, repair=False),  # a duplicate after the repair
             ev(100, "b", "primary", "recv", "h0", 0, repair=False),
             ev(1100, "b", "primary", "recv", "h0", 1, repair=False),
             ev(2400, "b", "primary", "recv", "h0", 2, repair=True),
             ev(3100, "b", "primary", "recv", "h0", 3)]  # no repair key: a first copy
    return events_df(rows)


def test_receiver_first_and_residual_loss_and_repair_latency(spark, events_df):
    fate = loss.fates(loss_log(events_df), hosts(spark))
    got = by(loss.receiver_loss(fate).collect(), "node")
    assert {n: (r["expected"], r["first_received"], r["received"], r["repaired"])
            for (n,), r in got.items()} == {"a": (4, 2, 3, 1), "b": (4, 3, 4, 1), "c": (4, 4, 4, 0)}
    a, b, c = got[("a",)], got[("b",)], got[("c",)]
    assert (a["first_loss"], a["residual_loss"]) == pytest.approx((0.5, 0.25))
    assert (b["first_loss"], b["residual_loss"]) == pytest.approx((0.25, 0.0))
    assert (c["first_loss"], c["residual_loss"], c["repair_median_ns"]) == (0.0, 0.0, None)
    assert a["repair_median_ns"] == 900 and a["repair_extra_median_ns"] == 800  # first copies took 100
    assert b["repair_median_ns"] == 400 and b["repair_extra_median_ns"] == 300


def test_loss_correlation_phi_coefficient(spark, events_df):
    fate = loss.fates(loss_log(events_df), hosts(spark))
    got = by(loss.loss_correlation(fate).collect(), "a", "b")
    ab = got[("a", "b")]
    # a lost {2, 3}, b lost {2}: n=4, n_a=2, n_b=1, n_ab=1 -> (4*1 - 2*1) / sqrt(2*2*1*3)
    assert (ab["packets"], ab["loss_a"], ab["loss_b"], ab["loss_both"]) == (4, 2, 1, 1)
    assert ab["correlation"] == pytest.approx(2 / math.sqrt(12))
    assert got[("a", "a")]["correlation"] == pytest.approx(1.0)
    assert got[("a", "c")]["correlation"] is None  # c lost nothing: undefined, not 0
    # one orientation (the coefficient is symmetric), sorted: a-a a-b a-c b-b b-c c-c
    rows = loss.loss_correlation(fate).collect()
    assert [(r["a"], r["b"]) for r in rows] == [("a", "a"), ("a", "b"), ("a", "c"), ("b", "b"), ("b", "c"),
                                                ("c", "c")]


def test_receivers_expect_only_their_stripes(spark, events_df):
    e = events_df([
        # M_s counts per stripe: (h0, stripe 0, 0) and (h0, stripe 1, 0) are two packets.
        ev(0, "h0", "source", "send", "h0", 0, stripe=0), ev(10, "h0", "source", "send", "h0", 0, stripe=1),
        ev(50, "c", "primary", "recv", "h0", 0, stripe=1, repair=False),
        ev(50, "a", "primary", "recv", "h0", 0, stripe=0, repair=False),
    ])
    got = by(loss.receiver_loss(loss.fates(e, hosts(spark, c=[1], b=[0]))).collect(), "node")
    assert {n: (r["expected"], r["first_received"]) for (n,), r in got.items()} == {
        "a": (2, 1), "b": (1, 0), "c": (1, 1)}


def test_control_messages_per_data_message(spark, events_df):
    e = events_df([
        ev(0, "h0", "source", "send", "h0", 0), ev(1, "h0", "source", "send", "h0", 1),
        ev(2, "h0", "source", "send", "h0", 1),  # the same packet logged twice counts once
        ev(3, "a", "primary", "ctrl_sent", type="ACK"), ev(4, "b", "primary", "ctrl_sent", type="ACK"),
        ev(5, "b", "primary", "ctrl_sent", type="NACK"), ev(6, "b", "primary", "ctrl_sent"),
    ])
    got = {r["type"]: (r["messages"], r["per_data"]) for r in control.control_per_data(e, 10).collect()}
    assert got == {"ACK": (2, 1.0), "NACK": (1, 0.5), "?": (1, 0.5), "all": (4, 2.0)}


def test_control_past_the_duration_counts_only_up_to_the_last_message_work(spark, events_df):
    """An emulated run's drain: the ring idles past the duration (10) until it is stopped."""
    e = events_df([
        ev(0, "h0", "source", "send", "h0", 0), ev(1, "a", "primary", "ctrl_sent", type="NULL_TOKEN"),
        ev(9, "h0", "source", "send", "h0", 1),
        ev(12, "a", "primary", "ctrl_sent", type="ACK"),   # acks the late message: counted
        ev(12, "a", "primary", "ack_sent", gseq=1), ev(13, "h0", "source", "src_acked", "h0", 1),
        ev(20, "b", "primary", "ctrl_sent", type="NULL_TOKEN"), ev(30, "c", "primary", "ctrl_sent", type="NACK"),
    ])
    got = {r["type"]: r["messages"] for r in control.control_per_data(e, 10).collect()}
    assert got == {"NULL_TOKEN": 1, "ACK": 1, "all": 2}


def test_nacks_per_lost_packet(spark, events_df):
    base = loss_log(events_df)
    nacks = events_df([ev(2200, "a", "primary", "nack_sent", "h0", 2), ev(2200, "b", "primary", "nack_sent", "h0", 2),
                       ev(2300, "b", "primary", "nack_sent", "h0", 2), ev(3200, "a", "primary", "nack_sent", "h0", 3),
                       ev(3300, "a", "primary", "nack_sent")])  # names no packet
    e = base.unionByName(nacks)
    fate = loss.fates(e, hosts(spark))
    (s,) = control.nack_summary(e, fate).collect()
    assert (s["nacks"], s["lost_packets"], s["loss_events"]) == (5, 2, 3)
    assert s["nacks_per_lost_packet"] == pytest.approx(2.5)
    assert s["nacks_per_loss_event"] == pytest.approx(5 / 3)
    per = {r["src_seq"]: (r["receivers_lost"], r["nacks"]) for r in control.nacks_per_lost_packet(e, fate).collect()}
    assert per == {2: (2, 3), 3: (1, 1)}


def test_token_rotation_period_and_jitter(spark, events_df):
    e = events_df([ev(t, n, "primary", "ack_sent", gseq=i, token=0)
                   for i, (t, n) in enumerate([(0, "a"), (10, "b"), (25, "c"), (30, "a"), (40, "b")])]
                  + [ev(5, "a", "primary", "ack_sent", stripe=1)])
    got = by(control.token_rotation(control.token_intervals(e)).collect(), "stripe")
    r = got[(0,)]
    assert (r["passes"], r["sites"]) == (5, 3)
    assert r["pass_mean_ns"] == pytest.approx(10.0)            # 10, 15, 5, 10
    assert r["pass_jitter_ns"] == pytest.approx(math.sqrt(50 / 4))
    assert (r["rotation_mean_ns"], r["rotation_jitter_ns"]) == pytest.approx((30.0, 0.0))
    assert got[(1,)]["passes"] == 1


def test_reformation_outages_crashes_and_delivery_gaps(spark, events_df):
    e = events_df([
        ev(90, "a", "primary", "crash"), ev(100, "rf", "reformation", "reform_start"),
        ev(350, "rf", "reformation", "reform_done"), ev(1000, "rf", "reformation", "reform_start"),
        ev(1100, "rf", "reformation", "reform_done"),
        ev(300, "b", "primary", "ack_sent"), ev(420, "b", "primary", "ack_sent"),  # the ring acknowledges again
        ev(500, "h0", "source", "crash"),                 # not a ring member: no ring outage
        ev(1200, "c", "primary", "crash"), ev(1300, "b", "primary", "ack_sent"),  # no re-formation after it
        *[ev(t, "b", "primary", "deliver", "h0", i, i) for i, t in enumerate([0, 100, 400, 450])],
    ])
    out = [(r["start_ns"], r["done_ns"], r["duration_ns"]) for r in control.reformation_outages(e).orderBy("start_ns").collect()]
    assert out == [(100, 350, 250), (1000, 1100, 100)]
    got = [(c["node"], c["crash_ns"], c["reformed_ns"], c["resumed_ns"], c["outage_ns"])
           for c in control.crash_recovery(e).orderBy("crash_ns").collect()]
    assert got == [("a", 90, 350, 420, 330), ("c", 1200, None, 1300, 100)]
    (g,) = control.delivery_gaps(e).collect()
    assert (g["node"], g["max_gap_ns"], g["from_ns"]) == ("b", 300, 100)


def test_throughput_per_source_stripe_and_region(spark, events_df):
    e = events_df([
        ev(0, "h0", "source", "send", "h0", 0, stripe=0), ev(500, "h0", "source", "send", "h0", 1, stripe=0),
        ev(1500, "h0", "source", "send", "h0", 2, stripe=1), ev(700, "h1", "source", "send", "h1", 0, stripe=1),
        ev(100, "x", "customer", "cust_recv", gseq=0), ev(1200, "x", "customer", "cust_recv", gseq=1),
        ev(300, "y", "customer", "cust_recv", gseq=0),
    ])
    got = {(r["dimension"], r["key"], r["bin_ns"]): (r["messages"], r["rate_per_s"])
           for r in throughput.throughput(e, hosts(spark), bin_ns=1000).collect()}
    assert got == {
        ("source", "h0", 0): (2, 2e6), ("source", "h0", 1000): (1, 1e6), ("source", "h1", 0): (1, 1e6),
        ("stripe", "0", 0): (2, 2e6), ("stripe", "1", 0): (1, 1e6), ("stripe", "1", 1000): (1, 1e6),
        ("region", "west", 0): (1, 1e6), ("region", "west", 1000): (1, 1e6), ("region", "east", 0): (1, 1e6),
    }


def test_customer_repairs_and_gaps(spark, events_df):
    e = events_df([
        ev(10, "x", "customer", "cust_recv", gseq=0, repair=False),
        ev(20, "x", "customer", "cust_recv", gseq=1, repair=True),
        ev(30, "x", "customer", "cust_recv", gseq=1, repair=False),  # later copy of gseq 1
        ev(15, "y", "customer", "cust_recv", gseq=0, repair=False),
        ev(12, "x", "customer", "cust_gap", first=1, count=3),
        ev(40, "z", "customer", "cust_gap", first=5),  # no count: one message
    ])
    got = {r["node"]: (r["received"], r["repaired"], r["gaps"], r["gap_messages"], r["repaired_fraction"])
           for r in loss.customer_loss(e).collect()}
    assert got == {"x": (2, 1, 1, 3, 0.5), "y": (1, 0, 0, 0, 0.0), "z": (0, 0, 1, 1, None)}


def test_a_late_copy_without_repair_flag_is_a_resend_not_a_first_reception(spark, events_df):
    from rmptwin.analysis.minc import RECEIVER_WINDOWS

    e = events_df([ev(0, "h0", "source", "send", "h0", 0), ev(1000, "h0", "source", "send", "h0", 1),
                   ev(100, "c", "primary", "recv", "h0", 0, repair=False),
                   ev(1900, "c", "primary", "recv", "h0", 1, repair=False)])  # 900 ns: after the window
    windows = spark.createDataFrame([("h0", "c", 500)], RECEIVER_WINDOWS)
    got = {r["src_seq"]: (r["received"], r["first"], r["repair"])
           for r in loss.fates(e, hosts(spark), windows).filter("node = 'c'").collect()}
    assert got == {0: (True, True, False), 1: (True, False, True)}


def test_a_crashed_receiver_expects_nothing_until_it_recovers(spark, events_df):
    rows = [ev(1000 * i, "h0", "source", "send", "h0", i) for i in range(4)]
    rows += [ev(1000 * i + 50, n, "primary", "recv", "h0", i, repair=False) for i in (0, 3) for n in "abc"]
    rows += [ev(1000 * i + 50, n, "primary", "recv", "h0", i, repair=False) for i in (1, 2) for n in "ab"]
    rows += [ev(1500, "c", "primary", "crash"), ev(2500, "c", "primary", "recover"),
             ev(100, "b", "primary", "crash")]  # b never recovers: it expects only packet 0
    got = {r["node"]: (r["expected"], r["first_received"]) for r in
           loss.receiver_loss(loss.fates(events_df(rows), hosts(spark))).collect()}
    assert got == {"a": (4, 4), "b": (1, 1), "c": (3, 2)}


def test_latency_summary_per_region_and_overall_in_one_pass(spark, events_df):
    rows = [ev(0, "h0", "source", "send", "h0", i) for i in range(5)]
    rows += [ev(100 * (i + 1), "a", "primary", "deliver", "h0", i, i) for i in range(4)]  # west: 100..400
    rows += [ev(800, "c", "primary", "deliver", "h0", 4, 4)]  # east: 800
    lat = latency.delivery_latency(events_df(rows), hosts(spark))
    got = by(latency.latency_summary(lat, [0.0, 0.5, 0.99, 1.0]), "stage", "region")
    assert {k: (r["overall"], r["n"], r["mean_ns"], r["q"], r["max_ns"]) for k, r in got.items()} == {
        ("deliver", "west"): (False, 4, 250.0, [100, 200, 400, 400], 400),
        ("deliver", "east"): (False, 1, 800.0, [800, 800, 800, 800], 800),
        ("deliver", "all"): (True, 5, 360.0, [100, 300, 800, 800], 800),
    }
    # p50 and p99 exact, interpolated between the two nearest values (as summary.json's):
    # west 100..400: p50 at 1.5 -> 250, p99 at 2.97 -> 397; all: p99 at 3.96 -> 400 + 0.96 x 400.
    exact = {("deliver", "west"): (250.0, 397.0), ("deliver", "east"): (800.0, 800.0),
             ("deliver", "all"): (300.0, 784.0)}
    assert set(got) == set(exact)
    for k, (p50, p99) in exact.items():
        assert (got[k]["p50_ns"], got[k]["p99_ns"]) == pytest.approx((p50, p99), rel=1e-12), k
