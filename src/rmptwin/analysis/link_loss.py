"""Per-receiver first-reception loss, joint losses and MINC per logical link of one run,
from its event table in pandas (no Spark): what `rmptwin analyze` computes at scale
(``loss.fates``, ``loss.loss_correlation``, ``minc.minc_links``), by the same words, for the
labs' checks and the sweep probe ``minc``. tests/spark/test_link_loss_agrees.py requires
the two equal on the same run.

The words (loss.py and minc.py say them too):

- A packet is a distinct (src, stripe, src_seq) SEND; its send time is the first SEND's.
- A receiver (R_P/R_S) expects every packet of a stripe it serves that was sent while it was
  not down (between a CRASH and the next RECOVER).
- Its first copy is its earliest RECV of the packet, when that has no repair flag and comes
  no later than the receiver's first-copy window after the send (``minc.receiver_windows``
  with ``first_copy.first_copy_slack_ms``): a later copy may be the source's re-send.
- MINC reads the packets every receiver of their (src, stripe) expected, and each link's
  truth is the distinct first copies dropped on its hops within the hop's window
  (``minc.hop_windows``) over the packets that reached it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rmptwin.analysis.first_copy import first_copy_slack_ms
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment

RECEIVER_ROLES = ("primary", "secondary")


def _detail_column(df: pd.DataFrame, typed: str, key: str, default: object) -> np.ndarray:
    """A detail value per row: the typed column when the event file has it, else the JSON's."""
    if typed in df:
        values: np.ndarray = df[typed].where(df[typed].notna(), default).to_numpy()
        return values
    return np.array([json.loads(d).get(key, default) if d and d != "{}" else default for d in df.detail],
                    dtype=object)


def _sends(df: pd.DataFrame) -> pd.DataFrame:
    send = df[df.kind == Kind.SEND]
    send = send.assign(stripe=_detail_column(send, "d_stripe", "stripe", 0).astype(np.int64))
    return send.groupby(["src", "stripe", "src_seq"], as_index=False).t_ns.min().rename(columns={"t_ns": "send_ns"})


def _down_intervals(df: pd.DataFrame) -> list[tuple[str, int, float]]:
    """(node, down_ns, up_ns or inf) for each CRASH and the node's first RECOVER after it."""
    life = df[df.kind.isin([Kind.CRASH, Kind.RECOVER])].sort_values("t_ns", kind="stable")
    out: list[tuple[str, int, float]] = []
    for node, g in life.groupby("node"):
        ups = g[g.kind == Kind.RECOVER].t_ns.to_numpy()
        for t in g[g.kind == Kind.CRASH].t_ns:
            later = ups[ups >= t]
            out.append((node, int(t), float(later.min()) if len(later) else float("inf")))
    return out


def fates(df: pd.DataFrame, loaded: LoadedExperiment) -> pd.DataFrame:
    """Every expected (packet, receiver): src stripe src_seq node send_ns received first."""
    from rmptwin.analysis.minc import receiver_windows

    topo = loaded.topology
    sent = _sends(df)
    rows: list[pd.DataFrame] = []
    for h in topo.hosts:
        if h.role not in RECEIVER_ROLES:
            continue
        mine = sent if not (stripes := getattr(h, "stripes", None)) else sent[sent.stripe.isin(list(stripes))]
        rows.append(mine.assign(node=h.name))
    exp = pd.concat(rows, ignore_index=True) if rows else sent.assign(node=pd.Series(dtype=str))
    for node, down, up in _down_intervals(df):
        exp = exp[~((exp.node == node) & (exp.send_ns >= down) & (exp.send_ns < up))]
    recv = df[df.kind == Kind.RECV]
    recv = recv.assign(stripe=_detail_column(recv, "d_stripe", "stripe", 0).astype(np.int64),
                       plain=~_detail_column(recv, "d_repair", "repair", False).astype(bool))
    keys = ["src", "stripe", "src_seq", "node"]
    earliest = recv.groupby(keys, as_index=False).t_ns.min().rename(columns={"t_ns": "recv_ns"})
    plain = recv[recv.plain].groupby(keys, as_index=False).t_ns.min().rename(columns={"t_ns": "plain_ns"})
    got = earliest.merge(plain, on=keys, how="left")
    got["repair"] = ~(got.plain_ns == got.recv_ns)
    fate = exp.merge(got[keys + ["recv_ns", "repair"]], on=keys, how="left")
    windows = pd.DataFrame(receiver_windows(topo, first_copy_slack_ms(loaded.experiment.protocol.model_dump())),
                           columns=["src", "node", "window_ns"])
    fate = fate.merge(windows, on=["src", "node"], how="left")
    fate["received"] = fate.recv_ns.notna()
    late = (fate.recv_ns - fate.send_ns) > fate.window_ns
    fate["first"] = fate.received & ~(fate.repair.fillna(True).astype(bool) | late.fillna(False))
    return fate[["src", "stripe", "src_seq", "node", "send_ns", "received", "first"]]


def receiver_loss(fate: pd.DataFrame) -> dict[str, float]:
    """{receiver: first_loss}: the fraction of its expected packets whose first copy it missed."""
    per = fate.groupby("node")["first"].agg(["size", "sum"])
    return {str(n): float(1 - r["sum"] / r["size"]) for n, r in per.iterrows()}


def joint_loss(fate: pd.DataFrame, a: str, b: str) -> dict[str, int]:
    """Over the packets both ``a`` and ``b`` expected: loss_a, loss_b, loss_both (counts), packets."""
    keys = ["src", "stripe", "src_seq"]
    both = fate[fate.node == a][keys + ["first"]].merge(fate[fate.node == b][keys + ["first"]], on=keys)
    miss_a, miss_b = ~both.first_x, ~both.first_y
    return {"packets": int(len(both)), "loss_a": int(miss_a.sum()), "loss_b": int(miss_b.sum()),
            "loss_both": int((miss_a & miss_b).sum())}


def _complete(fate: pd.DataFrame) -> pd.DataFrame:
    """The fates of packets every receiver of their (src, stripe) expected (minc.complete_packets)."""
    n = fate.groupby(["src", "stripe", "src_seq"]).node.transform("size")
    most = n.groupby([fate.src, fate.stripe]).transform("max")
    return fate[n == most]


def _first_drops(drops: pd.DataFrame, complete_sent: pd.DataFrame,
                 windows: list[tuple[str, str, str, int]]) -> dict[tuple[str, int, str, str], int]:
    """Distinct first-copy DATA drops per (src, stripe, from_node, to_node) (minc.hop_drops)."""
    data = drops[drops.frame.str.upper() == "DATA"]
    stripe = data.group.str.extract(r"^rmp/(\d+)$")[0]
    data = data[stripe.notna()].assign(stripe=stripe[stripe.notna()].astype(np.int64))
    w = pd.DataFrame(windows, columns=["src", "from_node", "to_node", "window_ns"])
    j = data.merge(complete_sent, on=["src", "stripe", "src_seq"]).merge(w, on=["src", "from_node", "to_node"])
    j = j[j.t_ns - j.send_ns <= j.window_ns]
    counts = j.groupby(["src", "stripe", "from_node", "to_node"]).src_seq.nunique()
    return {k: int(v) for k, v in counts.items()}


def minc_rows(fate: pd.DataFrame, loaded: LoadedExperiment,
              drops: pa.Table | pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """One row per logical link of every (source, stripe) tree: link, parent, child, depth,
    packets, gamma, estimate, configured and (with the run's drops) truth, as
    ``minc.minc_links`` gives them (by the same function, ``minc.link_rows``)."""
    from rmptwin.analysis.minc import gamma, hop_windows, link_rows, receiver_bits, trees_for

    topo = loaded.topology
    receivers = sorted(h.name for h in topo.hosts if h.role in RECEIVER_ROLES)
    complete = _complete(fate)
    trees = {k: t for k, t in trees_for(topo, sorted({(s, int(k)) for s, k in zip(complete.src, complete.stripe)})).items()
             if t.receivers}
    if not trees:
        return []
    bits = receiver_bits(receivers)
    firsts = complete[complete["first"]]
    words = 1 + (len(receivers) - 1) // 63
    masks = {f"first_{w}": [(1 << bits[n][1]) if bits[n][0] == w else 0 for n in firsts.node] for w in range(words)}
    per_packet = firsts.assign(**masks).groupby(["src", "stripe", "src_seq"])[list(masks)].agg(np.bitwise_or.reduce)
    packets = complete[["src", "stripe", "src_seq"]].drop_duplicates()
    per_packet = packets.merge(per_packet.reset_index(), how="left").fillna({m: 0 for m in masks})
    patterns = [{**dict(zip(["src", "stripe", *masks], k)), "packets": int(v)}
                for k, v in per_packet.groupby(["src", "stripe", *masks]).size().items()]
    for p in patterns:
        p.update({m: int(p[m]) for m in masks})
    gam, npk = gamma(patterns, trees, receivers)
    dropped: dict[tuple[str, int, str, str], int] | None = None
    if drops is not None:
        drops = drops.to_pandas() if isinstance(drops, pa.Table) else drops
        sent = _sends_of(fate, packets)
        dropped = _first_drops(drops, sent, hop_windows(topo, trees, first_copy_slack_ms(
            loaded.experiment.protocol.model_dump())))
    return link_rows(topo, trees, gam, npk, dropped)


def _sends_of(fate: pd.DataFrame, packets: pd.DataFrame) -> pd.DataFrame:
    return packets.merge(fate[["src", "stripe", "src_seq", "send_ns"]].drop_duplicates(), how="left")


def link_loss_figures(events: pa.Table | pd.DataFrame, loaded: LoadedExperiment,
                      drops: pa.Table | pd.DataFrame | None = None) -> dict[str, Any]:
    """The sweep probe ``minc``: per receiver ``first_loss.NODE``, per link ``LINK.estimate``,
    ``LINK.configured`` (and ``LINK.truth`` with drops), and ``max_error_pp`` (largest
    |estimate - configured| in points). Links of a source's first stripe only, named by label."""
    df = events.to_pandas() if isinstance(events, pa.Table) else events
    fate = fates(df, loaded)
    out: dict[str, Any] = {f"first_loss.{n}": v for n, v in receiver_loss(fate).items()}
    rows = minc_rows(fate, loaded, drops)
    first_tree = min(((r["src"], r["stripe"]) for r in rows), default=None)
    errors: list[float] = []
    for r in rows:
        if (r["src"], r["stripe"]) != first_tree:
            continue
        out[f"{r['link']}.estimate"] = r["estimate"]
        out[f"{r['link']}.configured"] = r["configured"]
        if r["truth"] is not None:
            out[f"{r['link']}.truth"] = r["truth"]
        if not np.isnan(r["estimate"]):
            errors.append(abs(r["estimate"] - r["configured"]))
    out["max_error_pp"] = 100 * max(errors) if errors else None
    return out
