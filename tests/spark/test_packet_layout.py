"""The extraction's layout shuffles names as codes: every event must come out as it went in."""

from __future__ import annotations

from rmptwin.analysis import extract


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_layout_round_trips_known_unknown_and_missing_names(spark, events_df):
    rows = [
        # t_ns node role kind src src_seq gseq bytes detail
        (1, "r1", "primary", "recv", "src", 0, -1, 10, '{"repair":true}'),
        (2, "r1", "primary", "deliver", "src", 0, 5, 0, "{}"),
        (3, "c1", "customer", "cust_recv", "", -1, 5, 0, '{"stripe":1}'),
        (4, "nobody", "primary", "recv", "src", 1, -1, 0, '{"repair":false}'),       # unknown node
        (5, "r1", "new_role", "brand_new_kind", "", -1, -1, 0, "{}"),                 # unknown role, kind
        (6, None, None, None, "src", 2, -1, 0, "{}"),                                  # missing names
    ]
    events = events_df(rows)
    laid = extract.packet_layout(events, node_names=["r1", "c1", "src"])
    assert laid.columns == events.columns
    # as logged, but an unkeyed row's src_seq, which holds its t_ns (see packet_layout)
    expected = [r if r[4] != "" or r[3] in ("send", "recv") else (*r[:5], r[0], *r[6:]) for r in _rows(events)]
    assert _rows(laid) == expected
    # still partitioned by packet: a per-packet aggregation shuffles nothing but the layout's rows
    plan = laid.groupBy("src", "stripe", "src_seq").count()._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan
