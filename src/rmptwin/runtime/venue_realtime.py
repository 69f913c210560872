"""Real-time, in-process run of the venue cores against the real etcd sequencer (``make bench``).

One thread runs the front (trading clients' load, the gateway with its fsync'd file
log, the history recorder on SQLite in WAL mode); each EV runs in its own thread and
asks etcd for positions synchronously (the seed's XCF call), one transaction per
proposal batch. Datagrams between cores go through in-memory queues (no network: the
emulated-network variant is the asyncio runtime's ``rmptwin run``).
"""

from __future__ import annotations

import queue
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..events import Kind
from ..sansio import Group, Unicast
from ..venue import wire
from ..venue.client import ClientConfig, ClientCore
from ..venue.gateway import GatewayConfig, GatewayCore
from ..venue.history import HistoryConfig, HistoryCore
from ..venue.venue import VenueConfig, VenueCore
from .durable_stores import FileGatewayLog, SqliteHistoryStore
from .etcd_client import EtcdCas, serve_propose

FRONT_START_NS = 50_000_000    # the clients start this long after the set-up
DRAIN_CAP_NS = 2_000_000_000   # after the load, wait at most this long for every completion


class _Router:
    def __init__(self, names: list[str]) -> None:
        self.inbox = {n: queue.SimpleQueue() for n in names}
        self.members = {wire.REQUEST_GROUP: [n for n in names if n.startswith("ev")],
                        wire.HARDENED_GROUP: [n for n in names if n.startswith("ev")]}

    def send(self, src: str, out) -> None:
        for data, dest in out:
            if isinstance(dest, Group):
                for n in self.members.get(dest.name, ()):
                    self.inbox[n].put((data, src))
            elif dest.node in self.inbox:
                self.inbox[dest.node].put((data, src))


def _drain_inbox(ev: VenueCore, inbox: queue.SimpleQueue, wait: float) -> None:
    """Hand the EV what is queued (waiting up to ``wait`` s for the first): bigger etcd batches."""
    try:
        data, src = inbox.get(timeout=wait)
    except queue.Empty:
        return
    ev.receive_datagram(data, src, time.monotonic_ns())
    while True:
        try:
            data, src = inbox.get_nowait()
        except queue.Empty:
            return
        ev.receive_datagram(data, src, time.monotonic_ns())


def _ev_loop(name, ev: VenueCore, cas: EtcdCas, router: _Router, stop: threading.Event, stats: dict) -> None:
    inbox = router.inbox[name]
    executed = 0
    while not stop.is_set():
        now = time.monotonic_ns()
        t = ev.get_timer()
        _drain_inbox(ev, inbox, 0.002 if t is None else max(0.0, min(0.002, (t - now) / 1e9)))
        for _ in range(10_000):   # execute everything due before the next etcd round trip
            now = time.monotonic_ns()
            t = ev.get_timer()
            if t is None or t > now:
                break
            ev.handle_timer(now)
        pending = ev.datagrams_to_send(time.monotonic_ns())
        while pending:   # an answer from etcd may well produce the next proposal at once
            out = []
            for data, dest in pending:
                if dest == Unicast("seq"):
                    answer = serve_propose(cas, data)
                    if answer is not None:
                        ev.receive_datagram(answer, "seq", time.monotonic_ns())
                else:
                    out.append((data, dest))
            router.send(name, out)
            pending = ev.datagrams_to_send(time.monotonic_ns())
        while (e := ev.next_event()) is not None:
            if e.kind == Kind.SEQ_POSITION:
                executed += 1
    stats[name] = executed


@dataclass
class _Bench:
    """One real-time run's cores, stores and etcd clients."""

    gw: GatewayCore
    hr: HistoryCore
    client: ClientCore
    evs: list[VenueCore]
    cas: list[EtcdCas]
    gw_log: FileGatewayLog
    hr_store: SqliteHistoryStore
    tmp: Path
    start: int
    lat: list[float] = field(default_factory=list)

    def close(self) -> None:
        for c in self.cas:
            c.close()
        self.gw_log.close()
        self.hr_store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _set_up(endpoints: list[str], rate: float, duration_s: float, symbols, durable: bool, n_ev: int, seed: int,
            prefix: str, state_dir: str | None) -> _Bench:
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-venue-rt-", dir=state_dir))
    gw_log, hr_store = FileGatewayLog(tmp / "gw1.log"), SqliteHistoryStore(tmp / "hr1.sqlite")
    venues = tuple(f"ev{i + 1}" for i in range(n_ev))
    gw = GatewayCore(GatewayConfig(gw_id=0, venues=venues, symbols=tuple(symbols), fsync_ns=0), gw_log)
    hr = HistoryCore(HistoryConfig(commit_ns=0), hr_store)
    start = time.monotonic_ns() + FRONT_START_NS
    client = ClientCore(ClientConfig(index=0, gateway="gw1", symbols=tuple(symbols), rate=rate, start_ns=start,
                                     stop_ns=start + int(duration_s * 1e9)), random.Random(seed))
    cas = [EtcdCas(endpoints, prefix=prefix, window=100_000) for _ in range(n_ev)]
    cas[0].init()
    evs = [VenueCore(VenueConfig(ev_id=i, symbols=tuple(symbols), gateways=("gw1",), sequencer="seq",
                                 history="hr1", durable=durable, checkpoint_every=4096, lookahead=512, batch=256,
                                 retry_ns=10_000_000_000), lambda: 0) for i in range(n_ev)]
    return _Bench(gw, hr, client, evs, cas, gw_log, hr_store, tmp, start)


def _run_front(b: _Bench, router: _Router, duration_s: float) -> None:
    """The gateway, HR and client until every request completed and the EVs agree (or the cap)."""
    front = {"gw1": b.gw, "hr1": b.hr, "cl1": b.client}
    end = b.start + int(duration_s * 1e9) + DRAIN_CAP_NS
    while True:
        now = time.monotonic_ns()
        if now > end or (now > b.start + duration_s * 1e9 and b.gw.completed >= b.gw.accepted
                         and len({ev.next_pos for ev in b.evs}) == 1):
            return
        busy = False
        for name, core in front.items():
            q = router.inbox[name]
            while True:
                try:
                    data, src = q.get_nowait()
                except queue.Empty:
                    break
                busy = True
                core.receive_datagram(data, src, time.monotonic_ns())
            t = core.get_timer()
            if t is not None and t <= time.monotonic_ns():
                core.handle_timer(time.monotonic_ns())
                busy = True
            router.send(name, core.datagrams_to_send(time.monotonic_ns()))
            while (e := core.next_event()) is not None:
                if e.kind == Kind.ORDER_DONE:
                    b.lat.append(e.detail["latency_ns"] / 1e6)
        if not busy:
            time.sleep(0.0002)


def run_realtime(endpoints: list[str], *, rate: float, duration_s: float, symbols=("IBM",),
                 durable: bool = True, n_ev: int = 2, seed: int = 1, prefix: str | None = None,
                 state_dir: str | None = None) -> dict:
    """Offer ``rate`` requests/s for ``duration_s``; return throughput and latency figures.

    ``state_dir``: where the gateway log and the HR database live (their fsyncs are real);
    default a temporary directory on the root file system.
    """
    sys.setswitchinterval(0.0005)   # threads wait on sockets and queues: hand the GIL over promptly
    router = _Router(["gw1", "hr1", "cl1"] + [f"ev{i + 1}" for i in range(n_ev)])
    b = _set_up(endpoints, rate, duration_s, symbols, durable, n_ev, seed,
                prefix or f"bench/{time.monotonic_ns()}", state_dir)
    stop = threading.Event()
    stats: dict = {}
    threads = [threading.Thread(target=_ev_loop, args=(f"ev{i + 1}", b.evs[i], b.cas[i], router, stop, stats),
                                daemon=True) for i in range(n_ev)]
    for t in threads:
        t.start()
    try:
        _run_front(b, router, duration_s)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        b.close()
    if any(t.is_alive() for t in threads):
        raise RuntimeError("a venue thread did not stop")
    agree = len({ev.state_hash() for ev in b.evs}) == 1 and len({ev.next_pos for ev in b.evs}) == 1
    a = np.asarray(b.lat) if b.lat else np.asarray([np.nan])
    return {
        "offered_rate": rate, "accepted": b.gw.accepted, "completed": b.gw.completed,
        "throughput": b.gw.completed / duration_s, "p50_ms": float(np.nanpercentile(a, 50)),
        "p99_ms": float(np.nanpercentile(a, 99)), "mean_ms": float(np.nanmean(a)),
        "etcd_round_trips": sum(c.round_trips for c in b.cas), "agree": agree,
        "executed": dict(stats),
    }
