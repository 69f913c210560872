"""The sequencer taxonomy side by side: one generated topology and one
workload, run in the simulator for every protocol, measured the same way.

Protocols: ``ub``, ``bb``, ``uub``, ``gup`` (``rmptwin.taxonomy``), RMP's token ring
(``rmp_time``, ``rmp_event``) and the venue's CAS sequencer (``cas``), each through its own
roles. The topology (``scenario_topology``) is a random tree of switches; host names and
places are the same for every protocol: senders ``src1..``, the sequencing site ``seq``,
receivers ``r1..rN``; only the roles differ (RMP: ``seq`` and the receivers are the ring's
primaries, plus a reformation server ``xr1``; CAS: the senders are gateways, each fed by a
client beside it, the receivers are execution venues and ``seq`` is the CAS sequencer).

Scenarios: ``steady``; ``lossy`` (5 % loss on receiver r1's access link); ``crash`` (the
sequencing site ``seq`` crashes mid-run; for the taxonomy the successor is r1, for RMP the
ring re-forms without it, the twin's CAS sequencer has no successor); ``partition`` (seq's
access link is down for 0.3 s mid-run: a false suspicion; not in the default sweep).

Measures (``measure``), from the run's events and a count of every datagram each host sent
and received (``CountingCore``; a multicast send counts once):

- msgs_per_delivered: datagrams sent by all hosts / distinct messages delivered;
- rx_per_delivered: datagrams received by all hosts / distinct messages delivered;
- seq_msgs_per_s, seq_bytes_per_s: datagrams (and their UDP payload bytes) in + out of the
  busiest sequencing node per second of workload (RMP: any primary, since the token site
  rotates; the others: ``seq`` or its successor ``r1``); seq_share: its share of all
  datagrams handled;
- ordered_per_s: messages the busiest sequencing node put in order per second (RMP: the
  messages its acks placed, ``ACK_SENT`` k; the others: every message, by one node);
- latency p50/p99: DELIVER (CAS: the EV's SEQ_POSITION) minus the message's SEND (CAS: the
  gateway's ORDER_IN), over every receiver; RMP's delayed release (Delta_A) is not included;
- delivered_pct: least share of the sent messages an operable receiver delivered; lost: sent
  messages some operable receiver did not deliver by the end (the run drains 1.5 s after the
  workload); agree: no two operable receivers put different messages at one gseq;
- naks: repair requests sent (NACK_SENT events: gap NAKs, BB's FIFO NAKs, RMP's requests);
- resume_ms (crash): from the crash to the first delivery, at an operable receiver, of a
  message sent after the crash; None if it never resumes.

lost, agree, latency and resume_ms are ``taxonomy_summary.order_figures`` (defined there once,
also for summary.json's taxonomy section and ``measure_run``).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute

from rmptwin import factories
from rmptwin.analysis.taxonomy_summary import order_figures
from rmptwin.core.events import Kind
from rmptwin.core.sansio import Core, Dest
from rmptwin.model import Experiment, LoadedExperiment, Topology
from rmptwin.model.hosts import HostSpec
from rmptwin.sim.simulate import simulate

PROTOCOLS = ("ub", "bb", "uub", "gup", "rmp_time", "rmp_event", "cas")
TAXONOMY = ("ub", "bb", "uub", "gup")
SCENARIOS = ("steady", "lossy", "crash", "partition")
LOSSY_RECEIVER = "r1"
START_S = 0.3

MessageKey = tuple[str, int]   # (sender, its sequence number); CAS: (gateway, gw_seq)
Delivery = tuple[int, str, MessageKey, int]   # (t, node, message, gseq)


@dataclass(frozen=True)
class Point:
    protocol: str
    receivers: int
    rate: float          # messages per second over all senders
    scenario: str = "steady"
    seed: int = 1
    senders: int = 2
    duration_s: float = 2.0   # of the workload; the run lasts 1.5 s longer (start 0.3 s, drain)
    switches: int = 8
    link_loss: float = 0.0    # Bernoulli loss on every switch-to-switch link (tests)


class CountingCore:
    """A core with a tally of the datagrams (and bytes) it received and sent while the workload
    ran (``window``, true ns; simulated nodes here have no clock offset): the idle heartbeats
    before and after it would otherwise weigh on the per-message figures."""

    def __init__(self, core: Core, window: tuple[int, int]) -> None:
        self._core = core
        self._lo, self._hi = window
        self.rx = self.rx_bytes = self.tx = self.tx_bytes = 0

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self._lo <= now <= self._hi:
            self.rx += 1
            self.rx_bytes += len(data)
        self._core.receive_datagram(data, src, now)

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        out = self._core.datagrams_to_send(now)
        if out and self._lo <= now <= self._hi:
            self.tx += len(out)
            self.tx_bytes += sum(len(d) for d, _ in out)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)


# ---------------------------------------------------------------------------- scenarios

def _roles(protocol: str) -> tuple[str, str, str]:
    """(sender role, sequencing-site role, receiver role)."""
    if protocol in TAXONOMY:
        return "source", "taxonomy_member", "taxonomy_member"
    if protocol.startswith("rmp"):
        return "source", "primary", "primary"
    return "gateway", "sequencer", "venue"


def scenario_topology(p: Point) -> Topology:
    """The same switches, links and host places for every protocol of a (seed, size) point."""
    rng = random.Random(f"taxonomy:{p.seed}:{p.switches}")
    sw = [f"s{i}" for i in range(p.switches)]
    links = [{"a": sw[rng.randrange(i)], "b": sw[i], "delay_ms": round(rng.uniform(0.5, 3.0), 3),
              "loss": p.link_loss} for i in range(1, p.switches)]
    place = random.Random(f"taxonomy:{p.seed}:hosts")
    s_role, q_role, r_role = _roles(p.protocol)
    hosts: list[dict[str, Any]] = []

    def host(name: str, role: str, switch: str, loss: float = 0.0, **extra: str) -> None:
        hosts.append({"name": name, "role": role, "switch": switch,
                      "link": {"delay_ms": 0.05, "loss": loss}, **extra})

    for i in range(p.senders):
        s = place.choice(sw)
        host(f"src{i + 1}", s_role, s)
        if p.protocol == "cas":
            host(f"cl{i + 1}", "client", s, gateway=f"src{i + 1}")
    host("seq", q_role, place.choice(sw))
    for i in range(p.receivers):
        loss = 0.05 if p.scenario == "lossy" and i == 0 else 0.0
        host(f"r{i + 1}", r_role, place.choice(sw), loss)
    if p.protocol.startswith("rmp"):
        host("xr1", "reformation", place.choice(sw))
    return Topology.model_validate({"name": f"taxonomy-{p.receivers}", "switches": sw, "links": links,
                                    "hosts": hosts})


def _max_delay_ms(topo: Topology) -> float:
    from rmptwin.sim.random_trees import max_path_delay_ms
    return max_path_delay_ms(topo)


def scenario(p: Point) -> LoadedExperiment:
    topo = scenario_topology(p)
    start, end = START_S, START_S + p.duration_s
    exp: dict[str, Any] = {"name": f"taxonomy-{p.protocol}", "topology": "<generated>", "seed": p.seed,
                 "duration_s": end + 1.5}
    mid = round(start + p.duration_s / 2, 3)
    if p.scenario == "crash":
        exp["faults"] = [{"at_s": mid, "action": "crash", "node": "seq"}]
    elif p.scenario == "partition":   # a false suspicion: seq is cut off for 0.3 s, then comes back
        link = f"seq-{topo.host('seq').switch}"
        exp["faults"] = [{"at_s": mid, "action": "link_down", "link": link},
                         {"at_s": round(mid + 0.3, 3), "action": "link_up", "link": link}]
    if p.protocol == "cas":
        exp["venue"] = {"rate": p.rate, "sequencer": "cas", "durable_history": False, "ev_service_us": 0,
                        "gw_fsync_us": 0, "start_s": start, "duration_s": p.duration_s}
    else:
        exp["workload"] = {"rate_per_source": p.rate / p.senders, "arrival": "poisson", "message_bytes": 64,
                           "start_s": start, "duration_s": p.duration_s}
    d = _max_delay_ms(topo)
    if p.protocol in TAXONOMY:
        # a gap may stand two crossings of the tree before it is NAKed: the senders' paths differ,
        # and a UUB grant crosses once before its broadcast does
        retry = round(4 * d + 5, 3)
        exp["taxonomy"] = {"protocol": p.protocol, "sequencer": "seq", "nak_ms": round(2 * d + 1, 3),
                           "retry_ms": retry, "suspect_ms": max(50.0, 2 * retry)}
    elif p.protocol.startswith("rmp"):
        dn = round(2 * d + 1.0, 3)   # deltaN: a round trip across the tree and then some
        exp["protocol"] = {"token_mode": "time_driven" if p.protocol == "rmp_time" else "event_driven",
                           "dn_ms": dn, "k_r": 1, "x_ms": 0.0, "p_ms": 1.0}
    loaded = LoadedExperiment(experiment=Experiment.model_validate(exp), topology=topo,
                              path=Path(f"<taxonomy {p.protocol} n={p.receivers}>"))
    return loaded


def run_point(p: Point) -> dict[str, Any]:
    """Simulate one point and measure it: one row of the comparison table."""
    cores: dict[str, CountingCore] = {}

    def build(host: HostSpec, loaded: LoadedExperiment, rng: random.Random, *,
              recovering: bool = False) -> CountingCore:
        core = CountingCore(factories.build_core(host, loaded, rng, recovering=recovering), window)
        cores[host.name] = core
        return core

    loaded = scenario(p)
    window = (round(START_S * 1e9), round((START_S + p.duration_s) * 1e9))
    result = simulate(loaded, build=build)
    row: dict[str, Any] = {"protocol": p.protocol, "receivers": p.receivers, "rate": p.rate,
                           "scenario": p.scenario, "seed": p.seed}
    row.update(measure(p, result.events, cores, loaded))
    row["wall_s"] = round(result.stats["wall_s"], 2)
    return row


# ---------------------------------------------------------------------------- measures

def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _message_events(p: Point, events: pa.Table,
                    receivers: set[str]) -> tuple[dict[MessageKey, int], list[Delivery]]:
    """(send time per message, deliveries as (t, node, message, gseq)) in one shape for every protocol."""
    cols = events.select(["t_ns", "node", "kind", "src", "src_seq", "gseq", "detail"]).to_pydict()
    sent: dict[MessageKey, int] = {}
    deliveries: list[Delivery] = []
    send_kind = Kind.ORDER_IN if p.protocol == "cas" else Kind.SEND
    deliver_kind = Kind.SEQ_POSITION if p.protocol == "cas" else Kind.DELIVER
    for t, node, kind, src, seq, gseq, detail in zip(*cols.values()):
        if kind == send_kind:
            key = (node, json.loads(detail)["gw_seq"]) if p.protocol == "cas" else (src, seq)
            sent.setdefault(key, t)
        elif kind == deliver_kind and node in receivers:
            deliveries.append((t, node, (src, seq), gseq))
    return sent, deliveries


def _crashes(events: pa.Table) -> dict[str, int]:
    cols = events.select(["t_ns", "node", "kind"]).to_pydict()
    out: dict[str, int] = {}
    for t, node, kind in zip(cols["t_ns"], cols["node"], cols["kind"]):
        if kind == Kind.CRASH:
            out[node] = t
        elif kind == Kind.RECOVER:
            out.pop(node, None)
    return out


def measure(p: Point, events: pa.Table, cores: dict[str, CountingCore], loaded: LoadedExperiment) -> dict[str, Any]:
    _, q_role, r_role = _roles(p.protocol)
    receivers = {h.name for h in loaded.topology.hosts if h.role == r_role}
    # RMP: the token site rotates over every primary; the others: the sequencer and its successor
    sequencing = receivers if p.protocol.startswith("rmp") else {"seq", "r1"} & set(cores)
    crashed = _crashes(events)
    operable = receivers - set(crashed)
    sent, deliveries = _message_events(p, events, receivers)
    # lost, agree, latency and resume: one definition, the taxonomy section of summary.json
    f = order_figures(events.to_pandas(), receivers, p.protocol)
    got: dict[str, set[MessageKey]] = defaultdict(set)
    lossy_lat: list[float] = []
    for t, node, msg, _ in deliveries:
        if node not in operable:
            continue
        got[node].add(msg)
        if msg in sent and node == LOSSY_RECEIVER:
            lossy_lat.append((t - sent[msg]) / 1e6)
    union = set().union(*got.values()) if got else set()
    n_sent = len(sent)
    tx = sum(c.tx for c in cores.values())
    rx = sum(c.rx for c in cores.values())
    busiest = max(sequencing & set(cores), key=lambda n: cores[n].rx + cores[n].tx)
    b = cores[busiest]
    row: dict[str, Any] = {
        "sent": n_sent,
        "delivered_pct": round(100 * min((len(got[n] & set(sent)) for n in operable), default=0)
                               / max(n_sent, 1), 2),
        "lost": f["messages_lost"],
        "agree": f["agreement"],
        "msgs_per_delivered": round(tx / max(len(union), 1), 3),
        "rx_per_delivered": round(rx / max(len(union), 1), 3),
        "seq_node": busiest,
        "seq_msgs_per_s": round((b.rx + b.tx) / p.duration_s, 1),
        "seq_bytes_per_s": round((b.rx_bytes + b.tx_bytes) / p.duration_s, 1),
        "seq_share": round((b.rx + b.tx) / max(rx + tx, 1), 4),
        "latency_p50_ms": _round(f["latency_ms"]["p50"]),
        "latency_p99_ms": _round(f["latency_ms"]["p99"]),
        "lossy_p99_ms": _pct(lossy_lat, 99) if p.scenario == "lossy" else None,
        "resume_ms": None,
    }
    row["ordered_per_s"] = _ordered_per_s(p, events, len(union))
    row["naks"] = events.filter(pa.compute.equal(events["kind"], Kind.NACK_SENT)).num_rows
    if p.scenario == "crash" and "seq" in crashed:   # seq is the only node a scenario crashes
        row["resume_ms"] = _round(f["resume_ms"])
    return row


def _ordered_per_s(p: Point, events: pa.Table, delivered: int) -> float:
    if not p.protocol.startswith("rmp"):
        return round(delivered / p.duration_s, 1)
    cols = events.select(["t_ns", "node", "kind", "detail"]).to_pydict()
    lo, hi = round(START_S * 1e9), round((START_S + p.duration_s) * 1e9)
    per_node: dict[str, int] = defaultdict(int)
    for t, node, kind, detail in zip(*cols.values()):
        if kind == Kind.ACK_SENT and lo <= t <= hi:
            per_node[node] += json.loads(detail).get("k", 0)
    return round(max(per_node.values(), default=0) / p.duration_s, 1)


def measure_run(path: Path) -> dict[str, Any]:
    """Latency, loss, agreement and resume of a run directory (simulated or emulated) of a
    taxonomy, RMP or CAS experiment: the figures that need only its events."""
    from rmptwin.rundir.run import RunDir
    run = RunDir(path)
    manifest, topo, _ = run.check()
    exp = manifest["experiment"]
    roles = {h.role for h in topo.hosts}
    if "taxonomy_member" in roles:
        protocol, r_role = exp["taxonomy"]["protocol"], "taxonomy_member"
    elif "primary" in roles:
        protocol, r_role = "rmp_" + exp.get("protocol", {}).get("token_mode", "time_driven").split("_")[0], "primary"
    else:
        protocol, r_role = "cas", "venue"
    receivers = {h.name for h in topo.hosts if h.role == r_role}
    # one definition of every figure: the taxonomy section of summary.json
    f = order_figures(run.read_events().to_pandas(), receivers, protocol)
    lat = f["latency_ms"]
    return {"run": str(path), "backend": manifest.get("backend"), "protocol": protocol, "sent": f["messages_sent"],
            "lost": f["messages_lost"], "agree": f["agreement"],
            "latency_p50_ms": _round(lat["p50"]), "latency_p99_ms": _round(lat["p99"]),
            "resume_ms": _round(f["resume_ms"])}


def _round(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)
