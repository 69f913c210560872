"""The CAS sequencer on a real three-member etcd cluster on loopback.

Two venue cores (the real EV ordering code) race compare-and-swap on positions through
etcd, each with the same requests in a different local order; one etcd member is
killed in the middle of the load and restarted later. The total order must have no gap
and no duplicate, and both venues must execute it identically.
"""

from __future__ import annotations

import random
import threading

import pytest

from rmptwin.events import Kind
from rmptwin.venue import wire
from rmptwin.venue.etcd_cluster import EtcdCluster
from rmptwin.venue.etcd_sequencer import EtcdCas, serve_propose
from rmptwin.venue.orderbook import LIMIT
from rmptwin.venue.venue import VenueCore
from rmptwin.venue.wire import Order, Request

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(240)]

N_PER_GW = 300


def requests(rng):
    out = []
    for gw in range(2):
        for s in range(N_PER_GW):
            side = rng.randrange(2)
            out.append(Request(gw, s, 0, Order(wire.NEW, LIMIT, side, "IBM", (gw + 1) << 40 | s,
                                               rng.randint(1, 9) * 100, 1_000_000 + rng.randint(-3, 3) * 100)))
    return out


def local_order(reqs, rng):
    """Per-gateway FIFO (as multicast from one gateway arrives), gateways interleaved at random."""
    a, b = [r for r in reqs if r.gw == 0], [r for r in reqs if r.gw == 1]
    out = []
    while a or b:
        out.append((a if a and (not b or rng.random() < 0.5) else b).pop(0))
    return out


def drive(ev: VenueCore, cas: EtcdCas, stream, total: int, log: list, progress: list, idx: int):
    now = 0
    for r in stream:
        ev.receive_datagram(wire.request_frame(r), "gw", now)
    while ev.next_pos < total:
        now += 1000
        t = ev.get_timer()
        if t is not None and t <= now:
            ev.handle_timer(now)
        for data, dest in ev.datagrams_to_send(now):
            answer = serve_propose(cas, data)
            if answer is not None:
                ev.receive_datagram(answer, "seq", now)
        while (e := ev.next_event()) is not None:
            log.append(e)
        progress[idx] = ev.next_pos


def test_member_crash_during_load_no_gap_no_duplicate():
    rng = random.Random(3)
    reqs = requests(rng)
    total = len(reqs)
    with EtcdCluster(3) as cluster:
        eps = cluster.endpoints
        cas = [EtcdCas(eps, prefix="test/seq", window=4 * total, timeout_s=1.0),
               EtcdCas(eps[1:] + eps[:1], prefix="test/seq", window=4 * total, timeout_s=1.0)]
        cas[0].init()
        evs = [VenueCore(i, ["IBM"], ["gw1", "gw2"], sequencer="seq", history=None, service=lambda: 1,
                         durable=False, batch=rng.choice([2, 4, 8]), lookahead=16) for i in range(2)]
        logs, progress = [[], []], [0, 0]
        threads = [threading.Thread(target=drive, args=(evs[i], cas[i], local_order(reqs, rng), total,
                                                        logs[i], progress, i), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        # crash the member venue 0 talks to once a third of the order is settled
        while max(progress) < total // 3 and all(t.is_alive() for t in threads):
            threading.Event().wait(0.01)
        cluster.kill(0)
        crashed_at = max(progress)
        while max(progress) < 2 * total // 3 and all(t.is_alive() for t in threads):
            threading.Event().wait(0.01)
        cluster.restart(0)
        for t in threads:
            t.join(timeout=180)
        assert not any(t.is_alive() for t in threads), f"venues stuck at {progress}"
        stored = cas[0].read_all()
        failovers = cas[0].failovers
        for c in cas:
            c.close()
    assert crashed_at < total                     # the crash really happened during the load
    assert failovers >= 1                         # venue 0's member died under it
    orders = [[(e.gseq, e.src, e.src_seq) for e in log if e.kind == Kind.SEQ_POSITION] for log in logs]
    assert orders[0] == orders[1]
    positions = [g for g, _, _ in orders[0]]
    assert positions == list(range(total))        # no gap
    keys = [(s, q) for _, s, q in orders[0]]
    assert len(set(keys)) == total                # no duplicate, nothing missing
    assert sorted(stored) == list(range(total))   # etcd holds the same contiguous prefix
    assert [(("gw1", "gw2")[g], s) for _, (g, s) in sorted(stored.items())] == keys
    trades = [[e for e in log if e.kind == Kind.TRADE] for log in logs]
    assert trades[0] == trades[1] and trades[0]
    assert evs[0].state_hash() == evs[1].state_hash()
