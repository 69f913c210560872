"""Figures a sweep can add to each row beyond summary.json, computed from the run's event
table: the counts the seeds' claims are stated in. A probe is named ``NAME`` or ``NAME:ARG``
(``--probe rmp``, ``--probe venue_gap_sampled:5000``); its keys are prefixed ``NAME.``.

- ``rmp``: ``acks`` (ACK_SENT), ``acks_per_message`` (acks / messages sent), ``ack_k_mean``
  (messages one ack acknowledges, mean), ``ring_nacks`` (NACK_SENT by primaries and
  secondaries), of them ``message_nacks`` (asking for messages) and ``ack_nacks`` (for acks),
  ``nacks_per_message``, ``first_copies_missed`` (a ring receiver's first copy
  of a message came as a repair), ``nacks_per_missed``, ``ctrl_sent``.
- ``ring``: ``stable_passes`` (token passes from a message's acknowledgement to STABLE, median)
  and ``token_interval_ms`` (median time between token passes).
- ``layers``: ``layered_passes`` (the seed's L_i: token passes until every ring, primary and
  secondary, holds a message), ``levels``, ``receivers``, ``rings`` (``sweeps.layering_probe``).
- ``venue_gap_sampled:MS``: the EV position gap read at instants MS apart (the venue paper
  samples every 5,000 ms), from the first instant both EVs run: ``max_gap``, ``avg_gap``,
  ``samples``, and the delays the paper gives, the gap over 9,000 req/s (its EVs' top rate):
  ``max_delay_ms``, ``avg_delay_ms``.
- ``minc``: ``first_loss.NODE`` per receiver, ``LINK.estimate`` and ``LINK.configured`` per
  logical link of the first source's tree (``analysis.link_loss``), and ``max_error_pp``.
- ``checks``: every history checker's verdict, the first violation and the outage
  (``rmptwin.checkers.probe_checker``; what `rmptwin chaos` records for each run).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmptwin.core.events import Kind
from rmptwin.errors import UserError
from rmptwin.rmp.wire import WANT_ACKS, WANT_MSGS
from rmptwin.sweeps.layering_probe import layered_passes

if TYPE_CHECKING:
    import pyarrow as pa

    from rmptwin.model import LoadedExperiment

RING_ROLES = ("primary", "secondary")
PAPER_MAX_RATE = 9000.0   # the venue paper divides gaps by its EVs' top rate, 9,000 req/s


def _frame(events: pa.Table | pd.DataFrame) -> pd.DataFrame:
    return events if isinstance(events, pd.DataFrame) else events.to_pandas()


def rmp_counts(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    sent = df[df.kind == Kind.SEND][["src", "src_seq", "detail"]].drop_duplicates().shape[0]
    acks = df[df.kind == Kind.ACK_SENT]
    ks = [json.loads(d).get("k", 0) for d in acks.detail]
    ring = df.role.isin(RING_ROLES)
    ring_nack = df[(df.kind == Kind.NACK_SENT) & ring]
    nacks = int(len(ring_nack))
    wants = [json.loads(d).get("want") for d in ring_nack.detail]
    recv = df[(df.kind == Kind.RECV) & ring]
    missed = int(sum(1 for d in recv.detail if json.loads(d).get("repair")))
    return {
        "acks": int(len(acks)),
        "acks_per_message": len(acks) / sent if sent else None,
        "ack_k_mean": float(np.mean(ks)) if ks else None,
        "ring_nacks": nacks,
        "message_nacks": sum(1 for w in wants if w == WANT_MSGS),
        "ack_nacks": sum(1 for w in wants if w == WANT_ACKS),
        "nacks_per_message": nacks / sent if sent else None,
        "first_copies_missed": missed,
        "nacks_per_missed": nacks / missed if missed else None,
        "ctrl_sent": int((df.kind == Kind.CTRL_SENT).sum()),
    }


def venue_gap_sampled(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    step_ns = int(float(arg or 5000) * 1e6)
    venues = [h.name for h in loaded.topology.hosts_with_role("venue")]
    sp = df[(df.kind == Kind.SEQ_POSITION) & df.node.isin(venues)]
    tracks = [(sp[sp.node == v].t_ns.to_numpy(), sp[sp.node == v].gseq.to_numpy()) for v in venues[:2]]
    if len(tracks) < 2 or any(len(t) == 0 for t, _ in tracks):
        return {"max_gap": None, "avg_gap": None, "samples": 0, "max_delay_ms": None, "avg_delay_ms": None}
    (ta, pa_), (tb, pb) = tracks
    instants = np.arange(max(ta[0], tb[0]) + step_ns, min(ta[-1], tb[-1]) + 1, step_ns)
    gaps = [abs(int(pa_[np.searchsorted(ta, t, "right") - 1]) - int(pb[np.searchsorted(tb, t, "right") - 1]))
            for t in instants]
    if not gaps:
        return {"max_gap": None, "avg_gap": None, "samples": 0, "max_delay_ms": None, "avg_delay_ms": None}
    per_ms = PAPER_MAX_RATE / 1000.0
    return {"max_gap": int(max(gaps)), "avg_gap": float(np.mean(gaps)), "samples": len(gaps),
            "max_delay_ms": max(gaps) / per_ms, "avg_delay_ms": float(np.mean(gaps)) / per_ms}


def ring_passes(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    """Token passes from a message's acknowledgement until a receiver knows every ring member
    holds it (STABLE), median over STABLE events: the seed's L_1 = m counts them, m - 1 after
    the acknowledging pass. Also the median interval between consecutive token passes."""
    tau_t = loaded.experiment.protocol.tau_t
    acks = df[df.kind == Kind.ACK_SENT]
    starts = pd.DataFrame({"gseq": acks.gseq.to_numpy(), "first": acks.gseq.to_numpy(), "t_ack": acks.t_ns.to_numpy(),
                           "k": [json.loads(d).get("k", 0) for d in acks.detail]}).sort_values("gseq")
    stable = df[df.kind == Kind.STABLE][["gseq", "t_ns"]].sort_values("gseq")
    token_ms = np.diff(np.sort(acks.t_ns.unique())) / 1e6 if len(acks) > 1 else np.array([])
    if stable.empty or starts.empty:
        return {"stable_passes": None, "token_interval_ms": float(np.median(token_ms)) if token_ms.size else None}
    joined = pd.merge_asof(stable, starts, on="gseq", direction="backward").dropna()
    joined = joined[joined.gseq < joined["first"] + joined.k]   # the ack that covered this position
    passes = (joined.t_ns - joined.t_ack) / 1e6 / tau_t
    return {"stable_passes": float(np.median(passes)) if len(passes) else None,
            "token_interval_ms": float(np.median(token_ms)) if token_ms.size else None}


def history_checks(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    """Every history checker's verdict and the outage (``rmptwin.checkers.probe_checker``)."""
    from rmptwin.checkers.probe_checker import checks

    return checks(df, loaded, arg)



def minc_links(df: pd.DataFrame, loaded: LoadedExperiment, arg: str | None) -> dict[str, Any]:
    """Per-receiver first-copy loss and each link's MINC estimate beside its configured loss
    (``analysis.link_loss``: the figures `rmptwin analyze` gives, without Spark)."""
    from rmptwin.analysis.link_loss import link_loss_figures

    return link_loss_figures(df, loaded)


# (events, experiment, the ARG of NAME:ARG) -> {figure: value}
Probe = Callable[[pd.DataFrame, "LoadedExperiment", str | None], dict[str, Any]]

PROBES: dict[str, Probe] = {"rmp": rmp_counts, "ring": ring_passes, "venue_gap_sampled": venue_gap_sampled,
                            "minc": minc_links, "checks": history_checks, "layers": layered_passes}


def check(names: list[str]) -> None:
    for name in names:
        if name.partition(":")[0] not in PROBES:
            raise UserError(f"--probe {name}: unknown; choose from {', '.join(PROBES)}")


def measure(names: list[str], events: pa.Table | pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    """{probe name: {figure: value}} for each named probe (nothing when none is named)."""
    if not names:
        return {}
    df = _frame(events)
    out: dict[str, Any] = {}
    for name in names:
        base, _, arg = name.partition(":")
        out[base] = PROBES[base](df, loaded, arg or None)
    return out
