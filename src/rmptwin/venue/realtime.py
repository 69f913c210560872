"""Real-time, in-process run of the venue cores against the real etcd sequencer.

One thread runs the front (trading clients' load, the gateway with its fsync'd file
log, the history recorder on SQLite in WAL mode); each EV runs in its own thread and
asks etcd for positions synchronously (the seed's XCF call), one transaction per
proposal batch. Datagrams between cores go through in-memory queues (no network: the
emulated-network variant belongs to the asyncio runtime). Used by ``make bench``.
"""

from __future__ import annotations

import queue
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ..sansio import Group, Unicast
from ..events import Kind
from . import wire
from .client import ClientCore
from .etcd_sequencer import EtcdCas, serve_propose
from .gateway import GatewayCore
from .history import HistoryCore
from .stores import FileGatewayLog, SqliteHistoryStore
from .venue import VenueCore


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


def _ev_loop(name, ev: VenueCore, cas: EtcdCas, router: _Router, stop: threading.Event, stats: dict) -> None:
    inbox = router.inbox[name]
    executed = 0
    while not stop.is_set():
        now = time.monotonic_ns()
        t = ev.get_timer()
        wait = 0.002 if t is None else max(0.0, min(0.002, (t - now) / 1e9))
        try:
            data, src = inbox.get(timeout=wait)
            ev.receive_datagram(data, src, time.monotonic_ns())
            while True:   # drain what is queued before talking to etcd again: bigger batches
                try:
                    data, src = inbox.get_nowait()
                except queue.Empty:
                    break
                ev.receive_datagram(data, src, time.monotonic_ns())
        except queue.Empty:
            pass
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


def run_realtime(endpoints: list[str], *, rate: float, duration_s: float, symbols=("IBM",),
                 durable: bool = True, n_ev: int = 2, seed: int = 1, prefix: str | None = None,
                 state_dir: str | None = None) -> dict:
    """Offer ``rate`` requests/s for ``duration_s``; return throughput and latency figures.

    ``state_dir``: where the gateway log and the HR database live (their fsyncs are real);
    default a temporary directory on the root file system.
    """
    sys.setswitchinterval(0.0005)   # threads wait on sockets and queues: hand the GIL over promptly
    names = ["gw1", "hr1", "cl1"] + [f"ev{i + 1}" for i in range(n_ev)]
    router = _Router(names)
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-venue-rt-", dir=state_dir))
    prefix = prefix or f"bench/{time.monotonic_ns()}"
    gw_log = FileGatewayLog(tmp / "gw1.log")
    hr_store = SqliteHistoryStore(tmp / "hr1.sqlite")
    gw = GatewayCore(0, [f"ev{i + 1}" for i in range(n_ev)], list(symbols), gw_log, fsync_ns=0)
    hr = HistoryCore(hr_store, commit_ns=0)
    start = time.monotonic_ns() + 50_000_000
    client = ClientCore(0, "gw1", list(symbols), rate, random.Random(seed), start_ns=start,
                        stop_ns=start + int(duration_s * 1e9))
    cas = [EtcdCas(endpoints, prefix=prefix, window=100_000) for _ in range(n_ev)]
    cas[0].init()
    evs = [VenueCore(i, list(symbols), ["gw1"], sequencer="seq", history="hr1", service=lambda: 0,
                     durable=durable, checkpoint_every=4096, lookahead=512, batch=256,
                     retry_ns=10_000_000_000) for i in range(n_ev)]
    stop = threading.Event()
    stats: dict = {}
    threads = [threading.Thread(target=_ev_loop, args=(f"ev{i + 1}", evs[i], cas[i], router, stop, stats),
                                daemon=True) for i in range(n_ev)]
    for t in threads:
        t.start()
    lat, done_t = [], []
    front = {"gw1": gw, "hr1": hr, "cl1": client}
    try:
        end = start + int(duration_s * 1e9) + 2_000_000_000
        while True:
            now = time.monotonic_ns()
            if now > end or (now > start + duration_s * 1e9 and gw.completed >= gw.accepted
                             and len({ev.next_pos for ev in evs}) == 1):
                break
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
                        lat.append(e.detail["latency_ns"] / 1e6)
                        done_t.append(time.monotonic_ns())
            if not busy:
                time.sleep(0.0002)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for c in cas:
            c.close()
        gw_log.close()
        hr_store.close()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = duration_s
    if any(t.is_alive() for t in threads):
        raise RuntimeError("a venue thread did not stop")
    agree = len({ev.state_hash() for ev in evs}) == 1 and len({ev.next_pos for ev in evs}) == 1
    a = np.asarray(lat) if lat else np.asarray([np.nan])
    return {
        "offered_rate": rate, "accepted": gw.accepted, "completed": gw.completed,
        "throughput": gw.completed / elapsed, "p50_ms": float(np.nanpercentile(a, 50)),
        "p99_ms": float(np.nanpercentile(a, 99)), "mean_ms": float(np.nanmean(a)),
        "etcd_round_trips": sum(c.round_trips for c in cas), "agree": agree,
        "executed": dict(stats),
    }
