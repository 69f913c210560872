"""The twin verdict: does run B (emulated) tell the same story as run A
(simulated, same experiment and seed)? One rule per metric, each with its tolerance:

- agreement, messages_lost: equal.
- control_per_data: |B - A| <= 10 % of A. The note gives the control frames by type where the
  runs differ (B - A) and both runs' first-copy data delay p50 (SEND to each receiver's first
  RECV). Control beyond the first copies is re-sends, each a timer that fired before an answer
  came: when B's frames take longer than A's (p50 more than ``PATH_SLACK_MS``) or B's timers
  are that late, a differing count is the machine's (measured on generated tree seed 2:
  +4.9 ms p50 through the relays, 6 DATA and 35 RETX against 2 and 29), else the protocol's.
  Where a run has no drop log (netem: the kernel draws the losses), the runs lose other first
  copies, so B is judged against the simulator's spread instead: A's value and the same
  experiment's over other seeds (``control_spread``, made by ``analysis.seed_spread``), B
  inside the interval where one more seed falls but for 1 draw in 1,000 (a log-normal fitted
  to them; at least 10 % each side); without a spread, 'not comparable'.
- delivery latency p50 (summary.json ``delivery_latency_ms``): |B - A| <= 10 % of A plus
  B's measured timer lateness: the largest p99 of ``timer_lateness_ms`` over the receiving
  roles (primary, secondary; every role if those are absent). A release fires on a timer, so
  a late timer delays it by that much; a run without ``timer_lateness_ms`` counts 0 and the
  rule's note says so.
- fairness spread p99 of B <= 5 ms (the twin's target; A's value is shown beside it: what
  the protocol itself spreads, 0 on the quickstart).
- per-link first-copy loss: per link direction, first copies lost / first copies offered.
  A message's first copy is lost on a direction when the link model dropped its DATA frame
  there as that frame's copy 0 (the drop log's ``copy``, the same count in both backends;
  where none was kept, a drop before the source's first SRC_RETX): later drops may be of
  re-sends, which a loaded emulation makes many more of. It is offered
  to every direction of its (source, stripe) multicast tree (tree.multicast_tree to the hosts that
  received the stripe, with the access links) that no upstream first-copy drop cut it off
  from. The denominator therefore does not count re-sends, and is the same in both backends
  when they lose the same first copies. Every direction must agree within 1 percentage point.
  A run without a drop log (the netem backend keeps none) makes the rule 'not comparable'.
- delivered order: the DELIVER sequence (messages in gseq order) of one reference receiver
  (the first primary by name), per stripe, restricted to the messages both runs delivered.
  A token site sequences waiting messages in their arrival order (rmp.token_ring
  choose_batch), so where several sources feed a stripe their relative order depends on
  arrival times that differ between backends by a few hundred microseconds: not
  deterministic, the rule is skipped (its note gives the fraction of positions that agree
  anyway). Where every stripe has one source, in both runs, the sequence is fixed by the
  protocol and must be identical.
- reformations: ring reformations completed (distinct (stripe, epoch) of REFORM_DONE) must be
  equal; the note gives both runs' failure reports (FAILURE_REPORT) and B's timer lateness.
  A reformation no crash fault explains is a false failure: k_r token-pass (or request)
  tries all failed. With the same seed the first copy of a token pass meets the same loss
  draw in both backends, but its retries are copies (arrival-order draws; with
  Gilbert-Elliott, the arrival-order chain), which the backends interleave differently, and
  an emulated retry or token timer that fires late stretches the window the pass had: so
  the emulation may report a member the simulator never suspects. The rule fails rather
  than excuse it, and its note says whose the difference is: the machine's when B's timer
  lateness p99 reaches the pass margin (dN minus the longest path between primaries, the
  slack before a pass is re-sent: ``pass_margin_ms``), else false failures of the protocol
  at this loss and k_r.

``twin_verdict`` is pure over two ``TwinInputs`` (summary.json and small tables); ``inputs_of``
builds one from a run directory. Rules that cannot be judged say 'not comparable' or 'not
deterministic'; only 'fail' fails the verdict.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rmptwin.analysis.seed_spread import FALSE_FAIL, MIN_DRAWS, prediction_interval
from rmptwin.analysis.summary import control_window_end_ns
from rmptwin.core.events import Kind
from rmptwin.model import Topology
from rmptwin.model.tree import multicast_tree, worst_delay_ms
from rmptwin.rundir.run import RunDir

PASS, FAIL = "pass", "fail"
NOT_COMPARABLE, NOT_DETERMINISTIC = "not comparable", "not deterministic"

RELATIVE_TOLERANCE = 0.10     # control_per_data, latency p50
FAIRNESS_P99_MAX_MS = 5.0
LINK_LOSS_TOLERANCE = 0.01    # one percentage point
PATH_SLACK_MS = 1.0           # data delay or timer lateness beyond this makes B's re-sends the machine's
RECEIVING_ROLES = ("primary", "secondary")

Direction = tuple[str, str]                 # (from_node, to_node)
Delivered = tuple[str, int]                 # (src, src_seq) within a stripe
Message = tuple[int, str, int]              # (stripe, src, src_seq)


@dataclass(frozen=True)
class TwinInputs:
    """What the verdict reads of one run."""

    summary: dict[str, Any]
    link_loss: dict[Direction, tuple[int, int]] | None = None   # direction -> (first copies lost, offered); None: no drop log
    order: dict[int, list[Delivered]] = field(default_factory=dict)  # stripe -> reference receiver's DELIVERs
    one_source_per_stripe: bool = False
    reformations: tuple[int, int] = (0, 0)                     # (reformations done, failure reports)
    pass_margin_ms: float | None = None   # dN - the longest path between primaries: slack before a pass is re-sent
    control_types: dict[str, int] = field(default_factory=dict)  # control frames counted, by frame type
    data_delay_ms: float | None = None    # first-copy data delay p50 (SEND -> first RECV per receiver)
    repaired_first: int = 0               # (receiver, message) pairs whose first copy came as a repair
    control_spread: tuple[float, ...] = ()  # A's control_per_data over other seeds (``seed_spread``)


@dataclass(frozen=True)
class Rule:
    metric: str
    a: str
    b: str
    tolerance: str
    status: str
    note: str = ""


def passed(rules: list[Rule]) -> bool:
    return all(r.status != FAIL for r in rules)


def _num(v: object) -> str:
    if v is None:
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _status(ok: bool) -> str:
    return PASS if ok else FAIL


def _equal(metric: str, a: dict[str, Any], b: dict[str, Any]) -> Rule:
    va, vb = a.get(metric), b.get(metric)
    return Rule(metric, _num(va), _num(vb), "equal", _status(va is not None and va == vb))


def _control(a: TwinInputs, b: TwinInputs) -> Rule:
    va, vb = a.summary.get("control_per_data"), b.summary.get("control_per_data")
    if a.link_loss is None or b.link_loss is None:
        # Where one run's losses are another process's draw (netem: the kernel), the runs lose
        # other first copies and a different number of them, and every loss costs re-sends.
        # Scaling A's loss-driven frames by the repaired first copies does not hold either: one
        # multicast RETX repairs a whole region (the quickstart under netem: 193 repaired against
        # the simulator's 133, control per data 1.29 against 1.13, and 1.49 scaled). Judging it
        # needs the simulator's spread over seeds (``control_spread``, which the driver makes).
        which = " and ".join(n for n, x in (("A", a), ("B", b)) if x.link_loss is None)
        if a.control_spread and va is not None:
            return _control_within_spread(a, b, which, float(va))
        return Rule("control_per_data", _num(va), _num(vb), "within 10 %", NOT_COMPARABLE,
                    f"{which}: losses are its own draw (netem keeps no drop log); first copies repaired: "
                    f"A {a.repaired_first}, B {b.repaired_first}")
    ok = va is not None and vb is not None and abs(vb - va) <= RELATIVE_TOLERANCE * va + 1e-12
    types = sorted(set(a.control_types) | set(b.control_types))
    diff = {t: b.control_types.get(t, 0) - a.control_types.get(t, 0) for t in types}
    parts = [", ".join(f"{t} {d:+d}" for t, d in diff.items() if d) or "no type differs"]
    if a.data_delay_ms is not None and b.data_delay_ms is not None:
        parts.append(f"first-copy data delay p50 {a.data_delay_ms:.3g} vs {b.data_delay_ms:.3g} ms")
    note = "by type, B - A: " + "; ".join(parts)
    if not ok:
        slower = (b.data_delay_ms - a.data_delay_ms) if a.data_delay_ms is not None and b.data_delay_ms is not None else None
        late = timer_lateness_ms(b.summary)
        if (slower is not None and slower > PATH_SLACK_MS) or (late is not None and late > PATH_SLACK_MS):
            note += ("; the machine's: B's frames arrive later than the modelled links deliver them (or its "
                     "timers fire late), so re-send timers fire before answers the simulator gets in time")
        else:
            note += "; the protocol's: same data delay, timers on time, yet different re-sends"
    return Rule("control_per_data", _num(va), _num(vb), "within 10 %", _status(ok), note)


def _control_within_spread(a: TwinInputs, b: TwinInputs, which: str, va: float) -> Rule:
    """Where the runs lose other first copies, B is judged against the simulator's own seed to
    seed spread: A's value and the other seeds' (``TwinInputs.control_spread``), B inside the
    interval where one more seed falls but for 1 draw in 1,000 (``seed_spread.prediction_interval``,
    never narrower than the rule's 10 %)."""
    vb = b.summary.get("control_per_data")
    values = sorted([va, *a.control_spread])
    note = (f"{which}: losses are its own draw (netem keeps no drop log), so B is judged against A's "
            f"{len(values)} seeds: {values[0]:.4g} to {values[-1]:.4g} (median {statistics.median(values):.4g}); first copies "
            f"repaired: A {a.repaired_first}, B {b.repaired_first}")
    bounds = prediction_interval(values, at_least=RELATIVE_TOLERANCE)
    if bounds is None:
        return Rule("control_per_data", _num(va), _num(vb), "in A's seed spread", NOT_COMPARABLE,
                    note + f"; fewer than {MIN_DRAWS} seeds to judge by")
    lo, hi = bounds
    ok = vb is not None and lo - 1e-12 <= vb <= hi + 1e-12
    draws = f"{round(1 / FALSE_FAIL):,}"   # one draw in this many misses the interval
    if not ok and vb is not None:
        note += f"; B has {'more' if vb > hi else 'fewer'} re-sends than one seed in {draws}"
    return Rule("control_per_data", _num(va), _num(vb), f"{lo:.3g} to {hi:.3g} ({len(values)} seeds, 1 in {draws})",
                _status(ok), note)


def timer_lateness_ms(summary: dict[str, Any]) -> float | None:
    """The largest p99 timer lateness of the receiving roles (every role if none of them is
    listed), in ms; None when the summary has no ``timer_lateness_ms``."""
    per_role = summary.get("timer_lateness_ms")
    if not isinstance(per_role, dict) or not per_role:
        return None
    chosen = {r: v for r, v in per_role.items() if r in RECEIVING_ROLES} or per_role
    p99s = [v.get("p99") if isinstance(v, dict) else v for v in chosen.values()]
    values = [float(v) for v in p99s if isinstance(v, (int, float))]
    return max(values) if values else None


def _latency(a: dict[str, Any], b: dict[str, Any]) -> Rule:
    pa_, pb = (s.get("delivery_latency_ms", {}).get("p50") for s in (a, b))
    late = timer_lateness_ms(b)
    note = (f"timer lateness {late:.3g} ms (B's p99, receiving roles)" if late is not None
            else "B's summary has no timer_lateness_ms: lateness taken as 0")
    if pa_ is None or pb is None:
        return Rule("delivery_latency_p50_ms", _num(pa_), _num(pb), "within 10 % + lateness", FAIL, "no releases")
    allowed = RELATIVE_TOLERANCE * pa_ + (late or 0.0)
    return Rule("delivery_latency_p50_ms", _num(pa_), _num(pb), f"±{allowed:.3g} ms (10 % + lateness)",
                _status(abs(pb - pa_) <= allowed + 1e-9), note)


def _fairness(a: dict[str, Any], b: dict[str, Any]) -> Rule:
    pa_, pb = (s.get("fairness_spread_ms", {}).get("p99") for s in (a, b))
    ok = pb is not None and pb <= FAIRNESS_P99_MAX_MS
    return Rule("fairness_spread_p99_ms", _num(pa_), _num(pb), f"B <= {FAIRNESS_P99_MAX_MS:g} ms", _status(ok))


def _loss_rates(a: dict[Direction, tuple[int, int]],
                b: dict[Direction, tuple[int, int]]) -> dict[Direction, tuple[float, float]]:
    """(rate in A, rate in B) per direction some run offered first copies on."""
    out: dict[Direction, tuple[float, float]] = {}
    for d in sorted(set(a) | set(b)):
        (da, oa), (db, ob) = a.get(d, (0, 0)), b.get(d, (0, 0))
        if oa or ob:
            out[d] = (da / oa if oa else 0.0, db / ob if ob else 0.0)
    return out


def _link_loss(a: TwinInputs, b: TwinInputs) -> Rule:
    metric, tol = "first_copy_loss_per_link", "within 1 point per direction"
    if a.link_loss is None or b.link_loss is None:
        which = " and ".join(n for n, x in (("A", a), ("B", b)) if x.link_loss is None)
        return Rule(metric, "–", "–", tol, NOT_COMPARABLE, f"{which}: no drop log (netem keeps none)")
    rates = _loss_rates(a.link_loss, b.link_loss)
    if not rates:
        return Rule(metric, "–", "–", tol, NOT_COMPARABLE, "no first copy crossed a link in either run")
    worst = max(rates, key=lambda d: (abs(rates[d][1] - rates[d][0]), max(rates[d])))  # ties: the lossiest
    bad = [d for d, (ra, rb) in rates.items() if abs(rb - ra) > LINK_LOSS_TOLERANCE + 1e-12]
    note = f"worst {worst[0]}>{worst[1]}; {len(rates)} directions"
    if bad:
        note += "; off by more than 1 point: " + ", ".join(
            f"{u}>{v} {100 * rates[(u, v)][0]:.2f} % vs {100 * rates[(u, v)][1]:.2f} %"
            for u, v in bad[:5]) + (" …" if len(bad) > 5 else "")
    return Rule(metric, f"{100 * rates[worst][0]:.2f} %", f"{100 * rates[worst][1]:.2f} %", tol,
                _status(not bad), note)


def _common_sequences(a: dict[int, list[Delivered]],
                      b: dict[int, list[Delivered]]) -> dict[int, tuple[list[Delivered], list[Delivered]]]:
    out: dict[int, tuple[list[Delivered], list[Delivered]]] = {}
    for stripe in sorted(set(a) | set(b)):
        sa, sb = a.get(stripe, []), b.get(stripe, [])
        both = set(sa) & set(sb)
        out[stripe] = ([m for m in sa if m in both], [m for m in sb if m in both])
    return out


def _order(a: TwinInputs, b: TwinInputs) -> Rule:
    metric, tol = "delivered_order_across_sources", "identical per stripe"
    seqs = _common_sequences(a.order, b.order)
    positions = sum(len(x) for x, _ in seqs.values())
    same = sum(p == q for x, y in seqs.values() for p, q in zip(x, y))
    shown = f"{same}/{positions} positions agree"
    if not positions:
        return Rule(metric, "–", "–", tol, NOT_COMPARABLE, "no message delivered in both runs")
    if not (a.one_source_per_stripe and b.one_source_per_stripe):
        return Rule(metric, "–", "–", tol, NOT_DETERMINISTIC,
                    f"several sources per stripe: token sites sequence in arrival order; {shown}")
    return Rule(metric, "–", shown, tol, _status(same == positions), "one source per stripe")


def _reformations(a: TwinInputs, b: TwinInputs) -> Rule:
    (ra, fa), (rb, fb) = a.reformations, b.reformations
    late = timer_lateness_ms(b.summary)
    note = f"failure reports {fa} vs {fb}"
    if ra != rb:
        margin = a.pass_margin_ms
        note += "; B's timer lateness p99 " + (f"{late:.3g} ms" if late is not None else "unknown")
        if late is not None and margin is not None and late >= margin:
            note += (f" >= the {margin:.3g} ms a token pass has before it is re-sent (dN - longest path): the "
                     "machine's timers re-send passes the simulator does not, and re-sent copies meet other loss draws")
        else:
            note += ": unequal reformations without a crash are false failures (all k_r tries of a pass failed)"
    return Rule("reformations", str(ra), str(rb), "equal", _status(ra == rb), note)


def twin_verdict(a: TwinInputs, b: TwinInputs) -> list[Rule]:
    """One Rule per metric of the module docstring, A the simulated run and B the emulated one."""
    sa, sb = a.summary, b.summary
    return [_equal("agreement", sa, sb), _equal("messages_lost", sa, sb), _control(a, b),
            _latency(sa, sb), _fairness(sa, sb), _link_loss(a, b), _order(a, b), _reformations(a, b)]


def pass_margin_ms(manifest: dict[str, Any], topo: Topology) -> float | None:
    """dN minus the longest one-way delay between two primaries: how late the next site's ack
    may come (a late timer, a recovery) before the previous site re-sends its pass."""
    dn = ((manifest.get("experiment") or {}).get("protocol") or {}).get("dn_ms")
    rps = topo.hosts_with_role("primary")
    if dn is None or len(rps) < 2:
        return None
    return float(dn) - max(worst_delay_ms(topo, a, b) for a in rps for b in rps if a is not b)


def reformation_counts(events: pa.Table) -> tuple[int, int]:
    """(ring reformations done: distinct (stripe, epoch) of REFORM_DONE, FAILURE_REPORT events).
    Redundant reformation servers may each log one reformation: it counts once."""
    kinds = events["kind"]
    done = events.filter(pc.equal(kinds, Kind.REFORM_DONE)).column("detail").to_pylist()
    epochs: set[tuple[Any, Any]] = set()
    for det in done:
        d = json.loads(det) if det else {}
        epochs.add((d.get("stripe", 0), d.get("epoch")))
    reports = pc.sum(pc.equal(kinds, Kind.FAILURE_REPORT)).as_py() or 0
    return len(epochs), int(reports)


# ----------------------------------------------------------------------------- from a run directory


TreeEdges = list[tuple[Direction, Direction | None]]   # (direction, the direction above it), parents first


def first_copies_lost(drops: pa.Table, sends: dict[Message, int], resends: dict[Message, int],
                      trees: dict[tuple[int, str], TreeEdges]) -> dict[Direction, tuple[set[Message], int]]:
    """Per link direction: (the messages whose first copy was lost there, how many first
    copies were offered to it), from the drop log, each message's first SEND and first
    SRC_RETX time (``message_times``) and the (stripe, src) trees.

    A drop is of a first copy when the link model counted it as the identity's copy 0 on that
    direction (the drop log's ``copy``); where it kept no count (``copy`` -1, or a drop log
    from before the column), when it came before the source's first re-send. The copy index
    needs no clock: on an overloaded machine a source may log a re-send before its stalled
    first copy has reached the link (measured: 100 messages sent in one burst after a 500 ms
    stall, each first copy dropped 110 ms after its SEND, 2 ms after its SRC_RETX). A message
    lost above a direction is not offered to it: a re-send that reaches it is its copy 0 there,
    and is left out."""
    d = drops.to_pydict()
    copies = d.get("copy") or [-1] * drops.num_rows
    lost: dict[tuple[int, str, Direction], set[int]] = {}
    for t, u, v, frame, group, src, seq, copy in zip(d["t_ns"], d["from_node"], d["to_node"], d["frame"],
                                                     d["group"], d["src"], d["src_seq"], copies):
        msg = (_group_stripe(group), src, int(seq))
        if frame.upper() != "DATA" or msg not in sends:
            continue
        if copy == 0 or (copy < 0 and int(t) < resends.get(msg, int(t) + 1)):
            lost.setdefault((msg[0], src, (u, v)), set()).add(int(seq))
    sent: dict[tuple[int, str], int] = {}
    for stripe, src, _ in sends:
        sent[(stripe, src)] = sent.get((stripe, src), 0) + 1
    lost_here: dict[Direction, set[Message]] = {}
    offered: dict[Direction, int] = {}
    for (stripe, src), edges in trees.items():
        cut_above: dict[Direction, set[int]] = {}   # messages lost on or above a direction
        for e, up in edges:
            above = cut_above.get(up, set()) if up else set()
            here = lost.get((stripe, src, e), set()) - above
            cut_above[e] = above | here
            lost_here.setdefault(e, set()).update((stripe, src, q) for q in here)
            offered[e] = offered.get(e, 0) + sent.get((stripe, src), 0) - len(above)
    return {e: (lost_here[e], offered[e]) for e in offered}


def first_copy_loss(drops: pa.Table, sends: dict[Message, int], resends: dict[Message, int],
                    trees: dict[tuple[int, str], TreeEdges]) -> dict[Direction, tuple[int, int]]:
    """Per link direction: (first copies lost there, first copies offered to it)."""
    return {e: (len(msgs), offered) for e, (msgs, offered) in first_copies_lost(drops, sends, resends, trees).items()}


def multicast_edges(topo: Topology, source: str, members: set[str]) -> TreeEdges:
    """The directions a source's multicast to ``members`` (host names) crosses, parents first:
    its access link, the switch tree, the members' access links."""
    src = topo.host(source)
    hosts = [topo.host(m) for m in sorted(members) if m != source]
    tree = multicast_tree(topo, src.switch, {h.switch for h in hosts})
    up: dict[str, Direction] = {src.switch: (source, src.switch)}
    edges: TreeEdges = [((source, src.switch), None)]
    todo = [src.switch]
    while todo:
        sw = todo.pop(0)
        for child in tree.children.get(sw, ()):
            edges.append(((sw, child), up[sw]))
            up[child] = (sw, child)
            todo.append(child)
    edges += [((h.switch, h.name), up[h.switch]) for h in hosts if h.switch in up]
    return edges


def stripe_trees(topo: Topology, events: pa.Table) -> dict[tuple[int, str], TreeEdges]:
    """(stripe, src) -> multicast_edges to the hosts that received that stripe's messages."""
    ev = events.filter(pc.equal(events["kind"], Kind.RECV)).to_pydict()
    members: dict[int, set[str]] = {}
    for node, det in zip(ev["node"], ev["detail"]):
        members.setdefault(_stripe(det), set()).add(node)
    names = {h.name for h in topo.hosts}
    pairs = {(stripe, src) for stripe, src, _ in message_times(events) if src in names}
    return {(stripe, src): multicast_edges(topo, src, members.get(stripe, set())) for stripe, src in sorted(pairs)}


def _group_stripe(group: str) -> int:
    """The stripe of an RMP data group, rmp/<stripe> (groups.py); -1 for any other."""
    head, _, tail = (group or "").partition("/")
    return int(tail) if head == "rmp" and tail.isdigit() else -1


def message_times(events: pa.Table, kind: str = Kind.SEND) -> dict[Message, int]:
    """(stripe, src, src_seq) -> time of the message's first ``kind`` event (SEND; SRC_RETX for
    its first re-send)."""
    ev = events.filter(pc.equal(events["kind"], kind)).to_pydict()
    out: dict[Message, int] = {}
    for t, src, seq, det in zip(ev["t_ns"], ev["src"], ev["src_seq"], ev["detail"]):
        key = (_stripe(det), src, int(seq))
        out[key] = min(out.get(key, int(t)), int(t))
    return out


def _stripe(detail: str) -> int:
    try:
        return int(json.loads(detail or "{}").get("stripe", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


def delivered_order(events: pa.Table, receiver: str) -> dict[int, list[Delivered]]:
    """Per stripe, ``receiver``'s delivered (src, src_seq) in gseq order (its last delivery of a gseq)."""
    ev = events.filter(pc.and_(pc.equal(events["kind"], Kind.DELIVER),
                                       pc.equal(events["node"], receiver))).to_pydict()
    by_stripe: dict[int, dict[int, Delivered]] = {}
    for g, src, seq, det in zip(ev["gseq"], ev["src"], ev["src_seq"], ev["detail"]):
        by_stripe.setdefault(_stripe(det), {})[int(g)] = (src, int(seq))
    return {k: [m[g] for g in sorted(m)] for k, m in by_stripe.items()}


def one_source_per_stripe(events: pa.Table) -> bool:
    ev = events.filter(pc.equal(events["kind"], Kind.SEND)).to_pydict()
    sources: dict[int, set[str]] = {}
    for src, det in zip(ev["src"], ev["detail"]):
        sources.setdefault(_stripe(det), set()).add(src)
    return all(len(s) <= 1 for s in sources.values())


def reference_receiver(manifest: dict[str, Any]) -> str | None:
    names = sorted(h["name"] for h in (manifest.get("topology") or {}).get("hosts", []) if h.get("role") == "primary")
    return names[0] if names else None


def has_drop_log(run: RunDir, manifest: dict[str, Any]) -> bool:
    return manifest.get("impair") != "netem" and run.drops_path.exists()


def control_end_ns(events: pa.Table, manifest: dict[str, Any]) -> int:
    """Where control_per_data stops counting (summary.control_window_end_ns, the one rule)."""
    duration_s = float((manifest.get("experiment") or {}).get("duration_s") or 0.0)
    return control_window_end_ns(events.select(["t_ns", "kind"]).to_pandas(), duration_s)


def control_types(events: pa.Table, end_ns: int) -> dict[str, int]:
    """The control frames control_per_data counts (sent up to ``end_ns``), by frame type."""
    ev = events.filter(pc.and_(pc.equal(events["kind"], Kind.CTRL_SENT), pc.less_equal(events["t_ns"], end_ns)))
    out: dict[str, int] = {}
    for det in ev["detail"].to_pylist():
        t = _detail_type(det)
        out[t] = out.get(t, 0) + 1
    return out


def _detail_type(detail: str | dict[str, Any] | None) -> str:
    try:
        return str((json.loads(detail) if isinstance(detail, str) else detail or {}).get("type", "?"))
    except (ValueError, TypeError, AttributeError):
        return "?"


def _first_recvs(events: pa.Table) -> dict[tuple[str, Message], tuple[int, bool]]:
    """Per (receiver, message): the first RECV's time and whether it was a repair. A message is
    (stripe, src, src_seq): a striped source numbers each stripe from 1."""
    ev = events.filter(pc.equal(events["kind"], Kind.RECV)).select(["t_ns", "node", "src", "src_seq", "detail", "d_repair"]).to_pydict()
    first: dict[tuple[str, Message], tuple[int, bool]] = {}
    for t, node, src, seq, det, rep in zip(ev["t_ns"], ev["node"], ev["src"], ev["src_seq"], ev["detail"], ev["d_repair"]):
        key = (node, (_stripe(det), src, int(seq)))
        if key not in first or int(t) < first[key][0]:
            first[key] = (int(t), bool(rep))
    return first


def data_delay_ms(events: pa.Table) -> float | None:
    """p50 over (message, receiver) of the first RECV's time minus the message's first SEND, in ms."""
    sent = message_times(events)
    delays = sorted(t - sent[msg] for (_, msg), (t, _) in _first_recvs(events).items() if msg in sent)
    return delays[len(delays) // 2] / 1e6 if delays else None


def repaired_first_copies(events: pa.Table) -> int:
    """(receiver, message) pairs whose first RECV was a repair: one per first copy lost on the way."""
    return sum(rep for _, rep in _first_recvs(events).values())


def inputs_of(run: RunDir) -> TwinInputs:
    """TwinInputs of a finished run directory (summary.json, events, links/)."""
    manifest, topo, _ = run.check()
    events = run.read_events()
    ref = reference_receiver(manifest)
    loss: dict[Direction, tuple[int, int]] | None = None
    if has_drop_log(run, manifest):
        loss = first_copy_loss(run.read_drops(), message_times(events), message_times(events, Kind.SRC_RETX),
                               stripe_trees(topo, events))
    return TwinInputs(summary=run.read_summary(), link_loss=loss,
                      order=delivered_order(events, ref) if ref else {},
                      one_source_per_stripe=one_source_per_stripe(events),
                      reformations=reformation_counts(events), pass_margin_ms=pass_margin_ms(manifest, topo),
                      control_types=control_types(events, control_end_ns(events, manifest)),
                      data_delay_ms=data_delay_ms(events), repaired_first=repaired_first_copies(events))
