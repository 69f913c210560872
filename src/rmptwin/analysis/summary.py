"""Headline figures of a run (summary.json), computed from the event table alone: the
analysis layer's non-Spark path, run after every experiment.

One definition per metric. The Spark jobs (``job``) compute some of these figures again, at
scale, beside many finer ones. Rather than one code path for both engines, each overlapping
figure is defined once, here, in words; the Spark transform follows the same words, and
tests/spark/test_summary_agrees.py computes both on the same simulated runs (quickstart,
line3-crash) and requires them equal (to float rounding) for every figure both compute:

    summary.json                    Spark (metrics.json)
    events                          events_total
    receivers                       headline.receivers
    messages_sent                   control[type=all].data
    control_per_data                control[type=all].per_data
    delivery_latency_ms             release_latency (latency.release_latency)
    fairness_spread_ms              release_fairness (latency.release_spread)
    reformation_ms                  crashes[].outage_ns (control.crash_recovery)

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
  owes messages from its first gseq after recovering), but for those a run cut short left
  open: ``analysis.drain_state``'s ``ended_before_drain`` counts them.
- control_per_data: CTRL_SENT / messages_sent, counting the control frames sent up to the end
  of the run: the experiment's duration, or the last event that moved a message
  (``MESSAGE_WORK``: a send, ack, delivery, release, customer receipt) if that came later.
  An emulated run goes on past the duration until it is quiescent (``runtime.drain_s``) and
  its ring idles meanwhile, a null token every null_token_ms until the runner's STOP; the
  simulator stops at the duration and sends none of them. Counted, they were 7 of an
  emulated line3's 71 frames at 20 msg/s (1.18 against the simulator's 1.08).
- delivery_latency_ms: RELEASE time - SEND time (the message's first SEND) over every RELEASE
  event of an R_P/R_S; a RELEASE without src names its message by its stripe and gseq.
- fairness_spread_ms: per message, latest minus earliest RELEASE across operable R_T (0 for
  a message one R_T released).
- reformation_ms: per CRASH of a ring member (R_P/R_S), the time until the next ACK_SENT
  after the first REFORM_DONE that follows the crash (the next ACK_SENT at all if no
  reformation is logged); empty if none.
- reformations (each with start_ms, took_ms, cause, ring) and failure_reports_unanswered:
  ``analysis.reformations`` defines them beside the outage above.
- customers: count, and guaranteed_complete: guaranteed-grade customers up at the end that
  received (CUST_RECV, Mold seq = gseq) every gseq released on each of their stripes (edge
  stripes included: ``analysis.stripe_delivery`` defines released and received).
- Percentiles: p50 and p99 interpolate linearly between the two nearest values; with max, mean
  and n they come from ``stats.percentiles``, which every section shares.

Emulated runs only (their nodes log TIMER_LATENESS; a simulated run has none, and its
summary has none of these keys):

- timer_lateness_ms: per role, p50/p99/max/n of the lateness of every timer the role's nodes
  fired (wall time the core's handle_timer ran minus the deadline it asked for), merged from
  the nodes' histograms (``rmptwin.records.timer_lateness``: p50/p99 within 4.4 %, max exact).
- The scheduled release of a RELEASE: the deadline its receiver's timer was set for, i.e. the
  later of its due time (ack ts + Delta_A; in true time, t_ns - detail.late_ns) and the time
  the receiver DELIVERed that gseq (a message placed after its due time is released at once).
- fairness_protocol_ms: per message, latest minus earliest scheduled release across the
  operable R_T: the spread the protocol (and the network's delays) causes.
- fairness_timer_ms: per message, fairness_spread minus fairness_protocol: the part late
  timers add (negative when a late timer happened to narrow the spread).

The stripe of an event comes from ``detail.stripe`` (0 when absent).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rmptwin.analysis.drain_state import cut_ns, open_messages
from rmptwin.analysis.incarnations import lives_at_end
from rmptwin.analysis.reformations import reformation_list
from rmptwin.analysis.sections import summary_sections
from rmptwin.analysis.stats import percentiles
from rmptwin.analysis.stripe_delivery import RT_ROLES, first_send_times, stripe_delivery, stripe_of
from rmptwin.analysis.venue_metrics import venue_summary
from rmptwin.core.events import Kind
from rmptwin.model import HostSpec, LoadedExperiment
from rmptwin.model.queries import customer_stripes
from rmptwin.records.timer_lateness import lateness_by_role

Message = tuple[int, str, int]  # (stripe, src, src_seq)


def _host_stripes(host: HostSpec, n: int) -> set[int]:
    s = getattr(host, "stripes", None)
    return set(s) if s else set(range(n))


@dataclass
class _Deliveries:
    """Who delivered what where: the receivers' DELIVER maps and the reference they agree on."""

    maps: dict[tuple[str, int], dict[int, Message]] = field(default_factory=dict)  # (node, stripe) -> gseq -> msg
    reference: dict[int, dict[int, Message]] = field(default_factory=dict)          # stripe -> gseq -> msg
    conflict: bool = False


def _deliveries(df: pd.DataFrame, rt_names: set[str], crashed_at_end: set[str],
                recovered_at: dict[str, int]) -> _Deliveries:
    dl = df[(df.kind == Kind.DELIVER) & df.node.isin(rt_names)]
    dl = dl.assign(stripe=[stripe_of(d) for d in dl.detail]) if len(dl) else dl.assign(stripe=pd.Series(dtype=int))
    out = _Deliveries()
    for node, stripe, t, gseq, src, sseq in zip(dl.node, dl.stripe, dl.t_ns, dl.gseq, dl.src, dl.src_seq):
        if node in recovered_at and t < recovered_at[node]:
            continue  # before its last recovery: the recovered receiver owes only what follows
        m = out.maps.setdefault((node, stripe), {})
        msg = (int(stripe), src, int(sseq))
        if m.setdefault(int(gseq), msg) != msg:
            out.conflict = True
    for (node, stripe), m in out.maps.items():
        if node in crashed_at_end:
            continue
        ref = out.reference.setdefault(stripe, {})
        for g, msg in m.items():
            if ref.setdefault(g, msg) != msg:
                out.conflict = True
    for ref in out.reference.values():
        inverse: dict[Message, int] = {}
        for g, msg in ref.items():
            if inverse.setdefault(msg, g) != g:
                out.conflict = True
    return out


def _agreement(d: _Deliveries, operable: list[HostSpec], recovered_at: dict[str, int], n_stripes: int) -> bool:
    """No conflict, and every operable receiver holds the reference map of each of its stripes."""
    if d.conflict:
        return False
    for h in operable:
        for stripe in _host_stripes(h, n_stripes):
            ref = d.reference.get(stripe, {})
            mine = d.maps.get((h.name, stripe), {})
            if h.name in recovered_at:
                lo = min(mine) if mine else None
                want = {g: m for g, m in ref.items() if lo is not None and g >= lo}
            else:
                want = ref
            if mine != want:
                return False
    return True


def _messages_of(rows: pd.DataFrame) -> set[Message]:
    return {(stripe_of(d), s, int(q)) for s, q, d in zip(rows.src, rows.src_seq, rows.detail)}


def _message_figures(df: pd.DataFrame, d: _Deliveries, operable: list[HostSpec], recovered_at: dict[str, int],
                     n_stripes: int, still_open: set[Message]) -> dict[str, Any]:
    """messages_sent, messages_acknowledged, messages_delivered_min, messages_lost."""
    sent = _messages_of(df[df.kind == Kind.SEND])
    msg_gseq: dict[Message, int] = {}
    for ref in d.reference.values():
        for g, msg in ref.items():
            msg_gseq.setdefault(msg, g)
    for m in d.maps.values():
        for g, msg in m.items():
            msg_gseq.setdefault(msg, g)
    acked = set(msg_gseq) | _messages_of(df[df.kind == Kind.SRC_ACKED])
    delivered_by: dict[str, set[Message]] = {h.name: set() for h in operable}
    for (node, _stripe_), m in d.maps.items():
        if node in delivered_by:
            delivered_by[node].update(m.values())
    lost: set[Message] = set()
    for h in operable:
        stripes = _host_stripes(h, n_stripes)
        mine = delivered_by[h.name]
        first = {st: min(m) for (n, st), m in d.maps.items() if n == h.name and m}
        for msg in acked:
            if msg[0] not in stripes or msg in mine:
                continue
            if h.name in recovered_at:
                at, lo = msg_gseq.get(msg), first.get(msg[0])
                if at is None or lo is None or at < lo:
                    continue
            lost.add(msg)
    return {"messages_sent": len(sent), "messages_acknowledged": len(acked),
            "messages_delivered_min": int(min((len(v) for v in delivered_by.values()), default=0)),
            "messages_lost": len(lost - still_open)}


def _released(df: pd.DataFrame, d: _Deliveries,
              rt_names: set[str]) -> Iterator[tuple[str, int, int, Message, str]]:
    """(node, t_ns, message, detail) of every RELEASE of an R_P/R_S whose message is known."""
    gseq_msg = {(stripe, g): msg for stripe, ref in d.reference.items() for g, msg in ref.items()}
    rel = df[(df.kind == Kind.RELEASE) & df.node.isin(rt_names)]
    for node, t, gseq, src, sseq, det in zip(rel.node, rel.t_ns, rel.gseq, rel.src, rel.src_seq, rel.detail):
        stripe = stripe_of(det)
        msg = (stripe, src, int(sseq)) if src else gseq_msg.get((stripe, int(gseq)))
        if msg is not None:
            yield node, int(t), int(gseq), msg, det


def _release_figures(df: pd.DataFrame, d: _Deliveries, rt_names: set[str], operable_names: set[str]) -> dict[str, Any]:
    """delivery_latency_ms and fairness_spread_ms, from RELEASE."""
    send_t = first_send_times(df)
    latencies: list[float] = []
    rel_times: dict[Message, list[int]] = {}
    for node, t, _gseq, msg, _det in _released(df, d, rt_names):
        if msg in send_t:
            latencies.append((t - send_t[msg]) / 1e6)
        if node in operable_names:
            rel_times.setdefault(msg, []).append(t)
    spreads = [(max(ts) - min(ts)) / 1e6 for ts in rel_times.values()]
    return {"delivery_latency_ms": percentiles(latencies), "fairness_spread_ms": percentiles(spreads)}


def release_table(events: pa.Table | pd.DataFrame, loaded: LoadedExperiment) -> pd.DataFrame:
    """The samples behind delivery_latency_ms and fairness_spread_ms: one row per RELEASE of an
    R_P/R_S whose message is known (node, stripe, src, src_seq, gseq, send_ns, release_ns,
    latency_ms, operable). delivery_latency_ms is the percentiles of latency_ms (NaN where the
    message's SEND is not in the log); fairness_spread_ms those of, per (stripe, src, src_seq),
    the latest minus the earliest release_ns over the rows with operable true."""
    df = events.to_pandas() if isinstance(events, pa.Table) else events
    rt_names = {h.name for h in loaded.topology.hosts if h.role in RT_ROLES}
    crashed_at_end, recovered_at = lives_at_end(df)
    d = _deliveries(df, rt_names, crashed_at_end, recovered_at)
    send_t = first_send_times(df)
    rows = [(node, msg[0], msg[1], msg[2], gseq, send_t.get(msg), t)
            for node, t, gseq, msg, _det in _released(df, d, rt_names)]
    out = pd.DataFrame(rows, columns=["node", "stripe", "src", "src_seq", "gseq", "send_ns", "release_ns"])
    out["send_ns"] = out.send_ns.astype("Int64")   # NaN-able without float rounding of epoch times
    out["release_ns"] = out.release_ns.astype(np.int64)
    out["latency_ms"] = ((out.release_ns - out.send_ns) / 1e6).astype(float)
    out["operable"] = ~out.node.isin(crashed_at_end)
    return out


def _late_ns(detail: str) -> int:
    try:
        return int(json.loads(detail).get("late_ns", 0)) if detail and "late_ns" in detail else 0
    except (ValueError, TypeError, AttributeError):
        return 0


def fairness_split(df: pd.DataFrame, d: _Deliveries, rt_names: set[str], operable_names: set[str]) -> dict[str, Any]:
    """fairness_protocol_ms and fairness_timer_ms (see the module docstring)."""
    dl = df[(df.kind == Kind.DELIVER) & df.node.isin(rt_names)]
    delivered: dict[tuple[str, int, int], int] = {}
    for node, t, gseq, det in zip(dl.node, dl.t_ns, dl.gseq, dl.detail):
        key = (node, stripe_of(det), int(gseq))
        delivered[key] = max(delivered.get(key, 0), int(t))
    times: dict[Message, list[tuple[int, int]]] = {}   # message -> [(actual, scheduled)]
    for node, t, gseq, msg, det in _released(df, d, rt_names):
        if node in operable_names:
            sched = max(t - _late_ns(det), min(t, delivered.get((node, msg[0], gseq), 0)))
            times.setdefault(msg, []).append((t, sched))
    protocol, timer = [], []
    for pairs in times.values():
        actual = max(a for a, _ in pairs) - min(a for a, _ in pairs)
        scheduled = max(s for _, s in pairs) - min(s for _, s in pairs)
        protocol.append(scheduled / 1e6)
        timer.append((actual - scheduled) / 1e6)
    return {"fairness_protocol_ms": percentiles(protocol), "fairness_timer_ms": percentiles(timer)}


def timer_lateness_by_role(df: pd.DataFrame) -> dict[str, Any]:
    """{role: {p50, p99, max, n}} in ms, from the nodes' TIMER_LATENESS events."""
    rows = df[df.kind == Kind.TIMER_LATENESS]
    return lateness_by_role(zip(rows.role, rows.detail))


def _emulated_figures(df: pd.DataFrame, d: _Deliveries, rt_names: set[str], operable_names: set[str]) -> dict[str, Any]:
    """Timer lateness and the fairness split: only for a run whose nodes measured their timers."""
    if not (df.kind == Kind.TIMER_LATENESS).any():
        return {}
    return {**fairness_split(df, d, rt_names, operable_names), "timer_lateness_ms": timer_lateness_by_role(df)}


def reformation_outages(df: pd.DataFrame, rt_names: set[str]) -> list[float]:
    """Per CRASH of an R_P/R_S in time order: ms until the next ACK_SENT after the first
    REFORM_DONE at or after the crash (after the crash itself if none); crashes no ACK
    follows are left out."""
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
    return outages


def _customer_figures(df: pd.DataFrame, loaded: LoadedExperiment, rt_names: set[str],
                      crashed_at_end: set[str]) -> dict[str, Any]:
    """Customers, guaranteed-grade ones, and those of them complete (``stripe_delivery``)."""
    delivery = stripe_delivery(df, rt_names)
    customers = loaded.topology.hosts_with_role("customer")
    complete = 0
    for c in customers:
        if c.grade != "guaranteed" or c.name in crashed_at_end:
            continue
        if delivery.complete(c.name, customer_stripes(c, loaded)):
            complete += 1
    return {"count": len(customers), "guaranteed_complete": complete,
            "guaranteed": sum(1 for c in customers if c.grade == "guaranteed")}


# Events that move a message towards its receivers; control sent after the last of them, past
# the duration, is an emulated run idling until it is stopped (control_per_data above).
MESSAGE_WORK = (Kind.SEND, Kind.SRC_RETX, Kind.SRC_ACKED, Kind.ACK_SENT, Kind.RECV, Kind.DELIVER,
                Kind.RELEASE, Kind.EDGE_RELEASE, Kind.CUST_RECV, Kind.SEQ_POSITION, Kind.HR_STORE,
                Kind.ORDER_DONE)


def control_window_end_ns(df: pd.DataFrame, duration_s: float) -> int:
    """The end of the window control_per_data counts control frames in (module docstring)."""
    work = df.t_ns[df.kind.isin(MESSAGE_WORK)]
    return max(round(duration_s * 1e9), int(work.max()) if len(work) else 0)


def summarize(events: pa.Table | pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    """summary.json of a run: every figure the module docstring defines."""
    topo = loaded.topology
    n_stripes = loaded.experiment.workload.stripes
    df = events.to_pandas() if isinstance(events, pa.Table) else events
    rt_hosts = [h for h in topo.hosts if h.role in RT_ROLES]
    rt_names = {h.name for h in rt_hosts}
    crashed_at_end, recovered_at = lives_at_end(df)
    operable = [h for h in rt_hosts if h.name not in crashed_at_end]
    d = _deliveries(df, rt_names, crashed_at_end, recovered_at)
    ctrl = int(((df.kind == Kind.CTRL_SENT) & (df.t_ns <= control_window_end_ns(df, loaded.duration_s))).sum())
    still_open = open_messages(df, loaded, cut_ns(df, loaded))
    messages = _message_figures(df, d, operable, recovered_at, n_stripes, still_open)
    sent = messages["messages_sent"]
    outages = reformation_outages(df, rt_names)
    operable_names = {h.name for h in operable}
    out: dict[str, Any] = {
        "receivers": len(rt_hosts),
        "operable_receivers": len(operable),
        "agreement": _agreement(d, operable, recovered_at, n_stripes),
        "order_consistent": not d.conflict,
        **messages,
        "control_per_data": float(ctrl / sent if sent else 0.0),
        **_release_figures(df, d, rt_names, operable_names),
        **_emulated_figures(df, d, rt_names, operable_names),
        "reformation_ms": outages,
        "reformation_median_ms": float(np.median(outages)) if outages else None,
        **reformation_list(df),
        "customers": _customer_figures(df, loaded, rt_names, crashed_at_end),
        "events": int(len(df)),
    }
    if loaded.experiment.venue is not None and topo.hosts_with_role("venue"):
        out.update(venue_summary(df, loaded))
    out.update(summary_sections(df, loaded))
    return out
