"""Headline figures of a run (summary.json), computed from the event table alone.

Definitions (the same for simulated and emulated runs):

- receivers: number of R_P + R_S hosts. Operable: not crashed at the end (last of
  CRASH/RECOVER is not CRASH).
- agreement: per stripe, every operable receiver's DELIVER map gseq -> (src, src_seq) is
  the same. A receiver that never crashed must hold exactly the reference map; one that
  recovered must match it from its first gseq after recovering on. A gseq mapped to two
  messages, or a message at two gseqs, is a disagreement.
- order_consistent: the safety half of agreement alone: no two operable receivers placed
  different messages at one gseq, and no message sits at two gseqs. A run that ends before a
  slow receiver caught up has agreement false but order_consistent true.
- A message is (stripe, src, src_seq): sources number their messages per stripe.
- messages_sent: distinct messages of SEND.
- messages_delivered_min: least number of distinct messages delivered by an operable receiver.
- messages_lost: acknowledged messages (delivered by some receiver, or SRC_ACKED) that
  some operable receiver serving their stripe did not deliver (a recovered receiver only
  owes messages from its first gseq after recovering).
- control_per_data: CTRL_SENT / messages_sent.
- delivery_latency_ms: RELEASE time - SEND time over every (R_T, message) release.
- fairness_spread_ms: per message, latest minus earliest RELEASE across operable R_T.
- reformation_ms: per CRASH of a ring member (R_P/R_S), the time until the next ACK_SENT
  after the first REFORM_DONE that follows the crash (the next ACK_SENT at all if no
  reformation is logged); empty if none.
- customers: count, and guaranteed_complete: guaranteed-grade customers that received
  (CUST_RECV, Mold seq = gseq) every gseq released on each of their stripes.

The stripe of an event comes from ``detail.stripe`` (0 when absent).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from .events import Kind
from .spec import LoadedExperiment

RT_ROLES = ("primary", "secondary")


def _pct(values) -> dict:
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return {"p50": None, "p99": None, "max": None, "n": 0}
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max()), "n": int(a.size)}


def _stripe(detail: str) -> int:
    if not detail or detail == "{}" or "stripe" not in detail:
        return 0
    try:
        return int(json.loads(detail).get("stripe", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


def _host_stripes(host, n: int) -> set[int]:
    s = getattr(host, "stripes", None)
    return set(s) if s else set(range(n))


def summarize(events: pa.Table, loaded: LoadedExperiment) -> dict:
    from .rmp.customer import customer_stripes  # the stripes a customer joins (bandwidth-limited: fewer)

    topo = loaded.topology
    n_stripes = loaded.experiment.workload.stripes
    df = events.to_pandas() if isinstance(events, pa.Table) else events
    rt_hosts = [h for h in topo.hosts if h.role in RT_ROLES]
    rt_names = {h.name for h in rt_hosts}

    # --- who is operable at the end, and since when (recovered receivers)
    life = df[df.kind.isin([Kind.CRASH, Kind.RECOVER])].sort_values("t_ns", kind="stable")
    crashed_at_end, recovered_at = set(), {}
    for node, g in life.groupby("node", sort=False):
        last = g.iloc[-1]
        if last.kind == Kind.CRASH:
            crashed_at_end.add(node)
        else:
            recovered_at[node] = int(last.t_ns)
    operable = [h for h in rt_hosts if h.name not in crashed_at_end]

    # --- deliveries per receiver and stripe
    dl = df[(df.kind == Kind.DELIVER) & df.node.isin(rt_names)]
    dl = dl.assign(stripe=[_stripe(d) for d in dl.detail]) if len(dl) else dl.assign(stripe=pd.Series(dtype=int))
    maps: dict[tuple[str, int], dict[int, tuple[int, str, int]]] = {}
    conflict = False
    for node, stripe, t, gseq, src, sseq in zip(dl.node, dl.stripe, dl.t_ns, dl.gseq, dl.src, dl.src_seq):
        if node in recovered_at and t < recovered_at[node]:
            continue
        m = maps.setdefault((node, stripe), {})
        msg = (int(stripe), src, int(sseq))
        if m.setdefault(int(gseq), msg) != msg:
            conflict = True
    reference: dict[int, dict[int, tuple[int, str, int]]] = {}
    for (node, stripe), m in maps.items():
        if node in crashed_at_end:
            continue
        ref = reference.setdefault(stripe, {})
        for g, msg in m.items():
            if ref.setdefault(g, msg) != msg:
                conflict = True
    for stripe, ref in reference.items():
        inverse: dict[tuple[int, str, int], int] = {}
        for g, msg in ref.items():
            if inverse.setdefault(msg, g) != g:
                conflict = True
    agreement = not conflict
    for h in operable:
        for stripe in _host_stripes(h, n_stripes):
            ref = reference.get(stripe, {})
            mine = maps.get((h.name, stripe), {})
            if h.name in recovered_at:
                lo = min(mine) if mine else None
                want = {g: m for g, m in ref.items() if lo is not None and g >= lo}
            else:
                want = ref
            if mine != want:
                agreement = False

    # --- messages
    send = df[df.kind == Kind.SEND]
    sent = {(_stripe(d), s, int(q)) for s, q, d in zip(send.src, send.src_seq, send.detail)}
    msg_gseq: dict[tuple[int, str, int], int] = {}
    for stripe, ref in reference.items():
        for g, msg in ref.items():
            msg_gseq.setdefault(msg, g)
    for (node, stripe), m in maps.items():
        for g, msg in m.items():
            msg_gseq.setdefault(msg, g)
    acked_rows = df[df.kind == Kind.SRC_ACKED]
    acked = set(msg_gseq) | {(_stripe(d), s, int(q))
                             for s, q, d in zip(acked_rows.src, acked_rows.src_seq, acked_rows.detail)}
    delivered_by = {h.name: set() for h in operable}
    for (node, stripe), m in maps.items():
        if node in delivered_by:
            delivered_by[node].update(m.values())
    lost = set()
    for h in operable:
        stripes = _host_stripes(h, n_stripes)
        mine = delivered_by[h.name]
        first = {st: min(m) for (n, st), m in maps.items() if n == h.name and m}
        for msg in acked:
            if msg[0] not in stripes or msg in mine:
                continue
            if h.name in recovered_at:
                g, lo = msg_gseq.get(msg), first.get(msg[0])
                if g is None or lo is None or g < lo:
                    continue
            lost.add(msg)
    delivered_min = min((len(v) for v in delivered_by.values()), default=0)

    # --- control overhead
    ctrl = int((df.kind == Kind.CTRL_SENT).sum())
    control_per_data = ctrl / len(sent) if sent else 0.0

    # --- latency and fairness from RELEASE
    send_t = {}
    for s, q, t, d in zip(send.src, send.src_seq, send.t_ns, send.detail):
        send_t.setdefault((_stripe(d), s, int(q)), int(t))
    gseq_msg = {(stripe, g): msg for stripe, ref in reference.items() for g, msg in ref.items()}
    rel = df[(df.kind == Kind.RELEASE) & df.node.isin(rt_names)]
    latencies, rel_times = [], {}
    operable_names = {h.name for h in operable}
    for node, t, gseq, src, sseq, d in zip(rel.node, rel.t_ns, rel.gseq, rel.src, rel.src_seq, rel.detail):
        stripe = _stripe(d)
        msg = (stripe, src, int(sseq)) if src else gseq_msg.get((stripe, int(gseq)))
        if msg is None:
            continue
        if msg in send_t:
            latencies.append((int(t) - send_t[msg]) / 1e6)
        if node in operable_names:
            rel_times.setdefault(msg, []).append(int(t))
    spreads = [(max(ts) - min(ts)) / 1e6 for ts in rel_times.values()]

    # --- reformation outages
    outages = []
    ack_t = np.sort(df[df.kind == Kind.ACK_SENT].t_ns.to_numpy())
    done_t = np.sort(df[df.kind == Kind.REFORM_DONE].t_ns.to_numpy())
    crashes = df[(df.kind == Kind.CRASH) & df.node.isin(rt_names)]
    for t in sorted(int(x) for x in crashes.t_ns):
        after = t
        i = np.searchsorted(done_t, t, side="left")
        if i < len(done_t):
            after = int(done_t[i])
        j = np.searchsorted(ack_t, after, side="left")
        if j < len(ack_t):
            outages.append((int(ack_t[j]) - t) / 1e6)

    # --- customers
    released: dict[int, set[int]] = {}
    for g, d in zip(rel.gseq, rel.detail):
        released.setdefault(_stripe(d), set()).add(int(g))
    cr = df[df.kind == Kind.CUST_RECV]
    got: dict[tuple[str, int], set[int]] = {}
    for node, g, d in zip(cr.node, cr.gseq, cr.detail):
        got.setdefault((node, _stripe(d)), set()).add(int(g))
    customers = topo.hosts_with_role("customer")
    complete = 0
    for c in customers:
        if c.grade != "guaranteed" or c.name in crashed_at_end:
            continue
        if all(released.get(s, set()) <= got.get((c.name, s), set()) for s in customer_stripes(c, loaded)):
            complete += 1

    out = {
        "receivers": len(rt_hosts),
        "operable_receivers": len(operable),
        "agreement": bool(agreement),
        "order_consistent": not conflict,
        "messages_sent": len(sent),
        "messages_acknowledged": len(acked),
        "messages_delivered_min": int(delivered_min),
        "messages_lost": len(lost),
        "control_per_data": float(control_per_data),
        "delivery_latency_ms": _pct(latencies),
        "fairness_spread_ms": _pct(spreads),
        "reformation_ms": outages,
        "reformation_median_ms": float(np.median(outages)) if outages else None,
        "customers": {"count": len(customers), "guaranteed_complete": complete,
                      "guaranteed": sum(1 for c in customers if c.grade == "guaranteed")},
        "events": int(len(df)),
    }
    if loaded.experiment.venue is not None and topo.hosts_with_role("venue"):
        from .venue.summary import venue_summary

        out.update(venue_summary(df, loaded))
    return out


HEADLINE_KEYS = ("receivers", "agreement", "messages_sent", "messages_delivered_min", "messages_lost",
                 "control_per_data", "delivery_latency_ms", "fairness_spread_ms", "reformation_ms", "customers")
VENUE_KEYS = ("ev_agreement", "trades_lost", "sync_ms", "max_gap", "latency_ms")


def summary_table(s: dict, title: str = "summary"):
    """The headline figures of a summary as a rich table (the backend adds its own last row)."""
    from rich.table import Table

    table = Table(title=title, show_header=False)
    for key in HEADLINE_KEYS + tuple(k for k in VENUE_KEYS if k in s):
        val = s.get(key)
        if isinstance(val, float):
            val = f"{val:.3f}"
        elif isinstance(val, dict):
            val = ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in val.items())
        elif isinstance(val, list):
            val = ", ".join(f"{v:.0f}" for v in val) or "-"
        table.add_row(key, str(val))
    return table
