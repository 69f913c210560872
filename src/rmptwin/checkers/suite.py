"""Which checkers apply to a run, and running them: on a run directory (``check_run``, what
`rmptwin check` does) or on an event table in memory (``check_events``, what a chaos
campaign does for each run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rmptwin.analysis.drain_state import cut_ns, describe, drain_state
from rmptwin.analysis.stripe_delivery import RELEASE_KINDS
from rmptwin.checkers import OK, SHORT, SKIPPED, VIOLATION, Verdict, Violation
from rmptwin.checkers.apps import floor_verdict, orders_verdict
from rmptwin.checkers.customers import CustomerHistory, gap_free, mold_sequences, pcap_frames
from rmptwin.checkers.histories import RECEIVER_ROLES, lifecycle, rmp_history, rows_of
from rmptwin.checkers.linearizable import linearizable
from rmptwin.checkers.messages_checker import messages
from rmptwin.checkers.order import total_order
from rmptwin.checkers.venue_checker import cas_history, venue, venue_history
from rmptwin.core.events import Kind
from rmptwin.model.queries import customer_stripes
from rmptwin.rundir.run import RunDir

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

CHECKERS = ("total_order", "messages", "customers", "cas_linearizable", "venue", "floor", "orders")
# Not a checker of the protocol: whether the run lasted its work (analysis.drain_state). A short
# run is reported as that; what it left open is owed by no checker above.
DRAIN = "drain"


def _verdict(name: str, fn: Callable[[], Violation | None], note: str = "") -> Verdict:
    v = fn()
    return Verdict(name, VIOLATION if v else OK, v, note)


def customer_history(df: pd.DataFrame, loaded: LoadedExperiment,
                     pcaps: dict[str, Path] | None = None, owed_until_ns: int | None = None) -> CustomerHistory:
    """What the customers checker reads; positions first released after ``owed_until_ns`` (a
    short run's cut) are not owed."""
    topo = loaded.topology
    receivers = {h.name for h in topo.hosts if h.role in RECEIVER_ROLES}
    life = lifecycle(df)
    released: dict[int, dict[int, dict[str, Any]]] = {}
    for stripe, ev in rows_of(df[df.node.isin(list(receivers))], list(RELEASE_KINDS)):
        released.setdefault(stripe, {}).setdefault(ev["gseq"], ev)
    if owed_until_ns is not None:
        released = {k: {g: ev for g, ev in pos.items() if ev["t_ns"] <= owed_until_ns} for k, pos in released.items()}
    received: dict[tuple[str, int], set[int]] = {}
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for stripe, ev in rows_of(df, [Kind.CUST_RECV]):
        received.setdefault((ev["node"], stripe), set()).add(ev["gseq"])
        last[(ev["node"], stripe)] = ev
    gaps: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for stripe, ev in rows_of(df, [Kind.CUST_GAP, Kind.CUST_SKIP]):
        gaps.setdefault((ev["node"], stripe), []).append(ev)
    owed = {c.name: list(customer_stripes(c, loaded)) for c in topo.hosts_with_role("customer")
            if c.grade == "guaranteed" and not life.crashed_at_end(c.name)}
    wire = {name: mold_sequences(pcap_frames(path)) for name, path in (pcaps or {}).items() if name in owed}
    return CustomerHistory(released, received, owed, last, wire, gaps)


def check_events(df: pd.DataFrame, loaded: LoadedExperiment, summary: dict[str, Any] | None = None,
                 pcaps: dict[str, Path] | None = None) -> list[Verdict]:
    """Every checker's verdict on one run (``summary``: its summary.json, for the applications'
    agreement keys; computed if not given and needed)."""
    topo = loaded.topology
    out: list[Verdict] = []
    short = drain_state(df, loaded)
    until = cut_ns(df, loaded) if short else None
    has_ring = any(h.role in RECEIVER_ROLES for h in topo.hosts)
    if has_ring and (df.kind == Kind.DELIVER).any():
        h = rmp_history(df, loaded, until)
        mode = "safe" if h.safe else "agreed"
        out.append(_verdict("total_order", lambda: total_order(h), f"{mode} delivery, {len(h.deliveries)} deliveries"))
        out.append(_verdict("messages", lambda: messages(h), f"{len(h.sent)} sent"))
    else:
        out += [Verdict("total_order", SKIPPED, note="no ring deliveries"), Verdict("messages", SKIPPED, note="no ring")]
    if topo.hosts_with_role("customer") and has_ring:
        ch = customer_history(df, loaded, pcaps, until)
        wire = f"; wire: {len(ch.wire)} pcap(s)" if ch.wire else ""
        out.append(_verdict("customers", lambda: gap_free(ch), f"{len(ch.owed)} guaranteed customers{wire}"))
    else:
        out.append(Verdict("customers", SKIPPED, note="no customers"))
    evs = {h.name for h in topo.hosts_with_role("venue")}
    if evs and loaded.experiment.venue is not None:
        ops = cas_history(df, evs)
        window = loaded.experiment.venue.window
        if ops:
            indeterminate = sum(1 for op in ops if op.output is None)
            out.append(_verdict("cas_linearizable", lambda: linearizable(ops, window),
                                f"{len(ops)} operations, {indeterminate} indeterminate"))
        else:
            out.append(Verdict("cas_linearizable", SKIPPED, note="no CAS operations recorded"))
        vh = venue_history(df, loaded)
        out.append(_verdict("venue", lambda: venue(vh), f"{len(vh.positions)} executions"))
    else:
        out += [Verdict("cas_linearizable", SKIPPED, note="no venue"), Verdict("venue", SKIPPED, note="no venue")]
    if getattr(loaded.experiment, "floor", None) is not None or getattr(loaded.experiment, "orders", None) is not None:
        if summary is None:
            from rmptwin.analysis.sections import summary_sections
            summary = summary_sections(df, loaded)
    if getattr(loaded.experiment, "floor", None) is not None:
        assert summary is not None   # computed above for a floor
        out.append(_verdict("floor", lambda: floor_verdict(summary, df)))
    else:
        out.append(Verdict("floor", SKIPPED, note="no trading floor"))
    # summary is not None: computed above for orders
    if getattr(loaded.experiment, "orders", None) is not None and summary is not None \
            and summary.get("exchanges_agree") is not None:
        out.append(_verdict("orders", lambda: orders_verdict(summary, df)))
    else:
        out.append(Verdict("orders", SKIPPED, note="no unified orders over the ring"))
    out.append(Verdict(DRAIN, SHORT, note=f"ended before its drain: {describe(short)}") if short else
               Verdict(DRAIN, OK, note=f"lasted its work ({loaded.duration_s:g} s)"))
    return out


def check_run(run: RunDir) -> list[Verdict]:
    """Every applicable checker on a finished run directory."""
    from rmptwin.model import LoadedExperiment

    manifest, _topo, _files = run.check()
    if "experiment" not in manifest:
        from rmptwin.errors import UserError
        raise UserError(f"{run.manifest_path}: no resolved experiment (was it written by rmptwin?)")
    loaded = LoadedExperiment.from_manifest(manifest, run.path)
    df = run.read_events().to_pandas()
    summary = run.read_summary() if run.summary_path.exists() else None
    pcaps = {p.stem: p for p in run.pcap_files()}
    return check_events(df, loaded, summary, pcaps)
