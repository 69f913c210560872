"""Synthetic run directories for tests and benchmarks: a binary multicast tree with known
per-link Bernoulli loss, packet fates drawn with numpy (seeded), and the event log, drops and
link counts a backend would write. Vectorised: tens of millions of events in seconds."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rmptwin.core.events import Kind
from rmptwin.model import Experiment, Topology
from rmptwin.records.tables import DROP_SCHEMA, EVENT_SCHEMA, LINK_COUNT_SCHEMA, detail_arrays
from rmptwin.rundir.run import RunDir

SWITCH_LINKS = [("s1", "s2"), ("s1", "s3"), ("s2", "s4"), ("s2", "s5"), ("s3", "s6"), ("s3", "s7")]
LEAF_SWITCHES = ["s4", "s5", "s6", "s7"]
RECEIVERS = [f"r{i}" for i in range(1, 9)]               # two per leaf switch
CUSTOMERS = {"c1": "s4", "c2": "s5", "c3": "s6", "c4": "s7"}
REGIONS = {"west": ["s1", "s2", "s4", "s5"], "east": ["s3", "s6", "s7"]}
RELEASERS = {"west": "r1", "east": "r5"}                  # the R_T of each region


def default_losses(seed: int = 7) -> dict[tuple[str, str], float]:
    """A loss rate in [1 %, 10 %] for every link of the tree, (parent, child) keyed."""
    rng = np.random.default_rng(seed)
    links = [("src", "s1")] + SWITCH_LINKS + [(LEAF_SWITCHES[i // 2], r) for i, r in enumerate(RECEIVERS)]
    return {lk: round(float(rng.uniform(0.01, 0.10)), 4) for lk in links}


def topology(losses: dict[tuple[str, str], float]) -> Topology:
    acc: Callable[[str, str, float], dict[str, float]] = (
        lambda u, v, d: {"delay_ms": d, "loss": losses.get((u, v), 0.0)})
    hosts: list[dict[str, Any]] = [{"name": "src", "role": "source", "switch": "s1", "link": acc("src", "s1", 1.0)}]
    for i, r in enumerate(RECEIVERS):
        sw = LEAF_SWITCHES[i // 2]
        region = "west" if sw in REGIONS["west"] else "east"
        hosts.append({"name": r, "role": "primary", "switch": sw, "link": acc(sw, r, 1.0),
                      "regions": [region] if r in RELEASERS.values() else []})
    for c, sw in CUSTOMERS.items():
        region = "west" if sw in REGIONS["west"] else "east"
        hosts.append({"name": c, "role": "customer", "switch": sw, "regions": [region], "link": {"delay_ms": 0.5}})
    return Topology.model_validate({
        "name": "synthetic-binary", "switches": [f"s{i}" for i in range(1, 8)], "regions": REGIONS,
        "links": [{"a": u, "b": v, "delay_ms": 5.0, "loss": losses.get((u, v), 0.0)} for u, v in SWITCH_LINKS],
        "hosts": hosts,
    })


def _strings(values: list[str], idx: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(values)).cast(pa.string())


class _Blocks:
    """Accumulates event columns block by block; nodes and details as dictionary indices."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.details: list[str] = []
        self.kinds: list[str] = []
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "node", "kind", "seq", "gseq", "detail")}

    def _ix(self, table: list[str], value: str) -> int:
        if value not in table:
            table.append(value)
        return table.index(value)

    def add(self, t: np.ndarray, node: str, kind: str, seq: np.ndarray, gseq: np.ndarray,
            detail: str | tuple[np.ndarray, str, str] = "{}") -> None:
        n = len(t)
        self.cols["t"].append(np.asarray(t, dtype=np.int64))
        self.cols["node"].append(np.full(n, self._ix(self.names, node), dtype=np.int32))
        self.cols["kind"].append(np.full(n, self._ix(self.kinds, kind), dtype=np.int32))
        self.cols["seq"].append(np.asarray(seq, dtype=np.int64))
        self.cols["gseq"].append(np.asarray(gseq, dtype=np.int64))
        if isinstance(detail, str):
            self.cols["detail"].append(np.full(n, self._ix(self.details, detail), dtype=np.int32))
        else:  # (mask, detail if true, detail if false)
            mask, yes, no = detail
            self.cols["detail"].append(np.where(mask, self._ix(self.details, yes), self._ix(self.details, no)).astype(np.int32))

    def table(self, roles: dict[str, str]) -> pa.Table:
        c = {k: np.concatenate(v) for k, v in self.cols.items()}
        order = np.argsort(c["t"], kind="stable")
        c = {k: v[order] for k, v in c.items()}
        n = len(c["t"])
        kind_is_src = np.array([k in (Kind.SEND, Kind.RECV, Kind.DELIVER, Kind.NACK_SENT) for k in self.kinds])
        has_src = kind_is_src[c["kind"]]
        return pa.Table.from_arrays([
            pa.array(c["t"]), _strings(self.names, c["node"]),
            _strings([roles[x] for x in self.names], c["node"]), _strings(self.kinds, c["kind"]),
            _strings(["", "src"], has_src.astype(np.int32)),
            pa.array(np.where(has_src, c["seq"], -1)), pa.array(c["gseq"]),
            pa.array(np.full(n, 64, dtype=np.int64)), _strings(self.details, c["detail"]),
            *[typed.take(pa.array(c["detail"])) for typed in detail_arrays(json.loads(d) for d in self.details)],
        ], schema=EVENT_SCHEMA)


# The tree below the source host: each node's parent and the delay of the link into it.
PARENT = {"s1": "src", **{v: u for u, v in SWITCH_LINKS}, **{r: LEAF_SWITCHES[i // 2] for i, r in enumerate(RECEIVERS)}}
DELAY_MS = {"s1": 1.0, **{v: 5.0 for _, v in SWITCH_LINKS}, **{r: 1.0 for r in RECEIVERS}}
ROLES = {"src": "source", **{r: "primary" for r in RECEIVERS}, **{c: "customer" for c in CUSTOMERS}}
REPAIR_NS = 200_000_000   # a repaired copy arrives this much later than the first copy would have
NACK_NS = 80_000_000      # a receiver NACKs a loss this long after the copy was due
ACK_NS = 20_000_000       # the token site acknowledges a message this long after its send
RELEASE_NS = 300_000_000  # the west R_T releases this long after the send; the east R_T 2 ms later


@dataclass
class _Fates:
    """Which packet reached which tree node, and the ground truth of every link."""

    seq: np.ndarray                      # packet numbers
    send: np.ndarray                     # send times (ns)
    passed: dict[str, np.ndarray]        # node -> the packets that reached it
    dist_ms: dict[str, float]            # node -> delay from the source
    # per link: (times, link, from, to, seqs) of dropped packets
    drop_rows: list[tuple[np.ndarray, str, str, str, np.ndarray]]
    count_rows: list[tuple[str, str, str, str, int, int]]   # per link: a LINK_COUNT_SCHEMA row


def _draw_fates(rng: np.random.Generator, packets: int, rate: float, losses: dict[tuple[str, str], float]) -> _Fates:
    seq = np.arange(packets, dtype=np.int64)
    send = (0.5e9 + seq * (1e9 / rate) + rng.integers(0, 1000, packets)).astype(np.int64)
    f = _Fates(seq, send, {"src": np.ones(packets, dtype=bool)}, {"src": 0.0}, [], [])
    for node in ["s1", "s2", "s3", "s4", "s5", "s6", "s7", *RECEIVERS]:
        up = PARENT[node]
        p = losses.get((up, node), 0.0)
        f.passed[node] = f.passed[up] & (rng.random(packets) >= p)
        f.dist_ms[node] = f.dist_ms[up] + DELAY_MS[node]
        lost = f.passed[up] & ~f.passed[node]
        f.drop_rows.append((send[lost] + int(f.dist_ms[up] * 1e6), f"{up}-{node}", up, node, seq[lost]))
        f.count_rows.append((f"{up}-{node}", up, node, "DATA", int(f.passed[up].sum()), int(lost.sum())))
    return f


def _receiver_events(b: _Blocks, f: _Fates, rng: np.random.Generator, loss_only: bool) -> None:
    """Each receiver's RECV (repair flagged), and unless ``loss_only`` its DELIVER and NACKs."""
    packets = len(f.seq)
    for r in RECEIVERS:
        first = f.passed[r]
        jitter = rng.integers(0, 200_000, packets)
        t = f.send + int(f.dist_ms[r] * 1e6) + jitter + np.where(first, 0, REPAIR_NS)
        b.add(t, r, Kind.RECV, f.seq, np.full(packets, -1), (first, '{"repair":false}', '{"repair":true}'))
        if loss_only:
            continue
        b.add(t + 10_000, r, Kind.DELIVER, f.seq, f.seq)
        lost = ~first
        nack_t = f.send[lost] + int(f.dist_ms[r] * 1e6) + NACK_NS
        b.add(nack_t, r, Kind.NACK_SENT, f.seq[lost], np.full(lost.sum(), -1))
        b.add(nack_t, r, Kind.CTRL_SENT, f.seq[lost], np.full(lost.sum(), -1), '{"type":"NACK"}')


def _ring_and_customer_events(b: _Blocks, f: _Fates, rng: np.random.Generator) -> None:
    """One ACK per message, the token site rotating over the ring r1..r8; each region's R_T
    releasing every message to the customers of its region."""
    packets = len(f.seq)
    site = f.seq % len(RECEIVERS)
    for i, r in enumerate(RECEIVERS):
        m = site == i
        b.add(f.send[m] + ACK_NS, r, Kind.ACK_SENT, f.seq[m], f.seq[m], '{"token":0,"k":1}')
        b.add(f.send[m] + ACK_NS, r, Kind.CTRL_SENT, f.seq[m], f.seq[m], '{"type":"ACK"}')
    for region, rt in RELEASERS.items():
        rel = f.send + RELEASE_NS + (0 if region == "west" else 2_000_000)
        b.add(rel, rt, Kind.RELEASE, f.seq, f.seq)
        for c, sw in CUSTOMERS.items():
            if sw in REGIONS[region]:
                b.add(rel + int((5.0 + 0.5) * 1e6) + rng.integers(0, 100_000, packets), c, Kind.CUST_RECV,
                      f.seq, f.seq, '{"repair":false,"stripe":0}')


def _link_tables(f: _Fates) -> tuple[pa.Table, pa.Table]:
    """links/: every dropped packet (DROP_SCHEMA) and the packets per link (LINK_COUNT_SCHEMA)."""
    rows = f.drop_rows
    t = np.concatenate([d[0] for d in rows])
    s = np.concatenate([d[4] for d in rows])
    link_ix = np.concatenate([np.full(len(d[0]), i) for i, d in enumerate(rows)])
    drops = pa.Table.from_arrays([
        pa.array(t), _strings([d[1] for d in rows], link_ix), _strings([d[2] for d in rows], link_ix),
        _strings([d[3] for d in rows], link_ix), _strings(["DATA"], np.zeros(len(t))),
        _strings(["src"], np.zeros(len(t))), pa.array(s), pa.array(s), _strings(["rmp/0"], np.zeros(len(t))),
        _strings(["loss"], np.zeros(len(t))), pa.array(np.zeros(len(t), dtype=np.int32)),   # first copies
    ], schema=DROP_SCHEMA)
    counts = pa.Table.from_pylist([dict(zip(LINK_COUNT_SCHEMA.names, r)) for r in f.count_rows],
                                  schema=LINK_COUNT_SCHEMA)
    return drops, counts


def write_run(path: str | Path, packets: int = 20_000, seed: int = 1,
              losses: dict[tuple[str, str], float] | None = None, rate: float = 1000.0,
              loss_only: bool = False) -> Path:
    """A complete run directory for ``packets`` messages from host ``src`` on the binary tree.
    ``loss_only`` logs just SEND and RECV (what loss and MINC read): a smaller log, same fates."""
    losses = losses or default_losses()
    topo = topology(losses)
    rng = np.random.default_rng(seed)
    f = _draw_fates(rng, packets, rate, losses)
    b = _Blocks()
    b.add(f.send, "src", Kind.SEND, f.seq, np.full(packets, -1))
    _receiver_events(b, f, rng, loss_only)
    if not loss_only:
        _ring_and_customer_events(b, f, rng)
    run = RunDir(path)
    run.write_events(b.table(ROLES), name="synthetic")
    drops, counts = _link_tables(f)
    run.write_drops(drops)
    run.write_link_counts(counts)
    exp = Experiment(name="synthetic", topology="synthetic-binary.yaml", seed=seed, duration_s=10.0)
    run.replace_manifest({"experiment": exp.model_dump(mode="json"), "topology": topo.model_dump(mode="json"),
                          "experiment_file": "synthetic", "backend": "synthetic", "seed": seed})
    return run.path


def true_drop_rates(path: str | Path) -> dict[tuple[str, str], float]:
    """Actual fraction dropped on each (parent, child) link: dropped / arrived (links/counts)."""
    t = RunDir(path).read_link_counts().to_pylist()
    return {(r["from_node"], r["to_node"]): r["dropped"] / r["packets"] for r in t}
