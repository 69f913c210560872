"""The CAS sequencer on a real three-member etcd cluster on loopback.

Two venue cores (the real EV ordering code) race compare-and-swap on positions through
etcd, each with the same requests in a different local order; one etcd member is
killed in the middle of the load and restarted later. The total order must have no gap
and no duplicate, and both venues must execute it identically. The same through the
sequencer host of a real run: the pure proxy core, the etcd client's worker thread, and
the node's adapters, which start and stop the cluster.
"""

from __future__ import annotations

import asyncio
import json
import queue
import random
import socket
import threading
import urllib.request
from pathlib import Path

import pytest

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Unicast
from rmptwin.errors import UserError
from rmptwin.factories import build_core
from rmptwin.model import load_experiment
from rmptwin.node.etcd_client import ETCD_APIS, EtcdCas, EtcdCasClient, etcd_cas, leader_first, serve_propose
from rmptwin.node.etcd_cluster import EtcdCluster
from rmptwin.node.etcd_json import _Http
from rmptwin.node.venue_adapters import node_adapters
from rmptwin.venue import wire
from rmptwin.venue.execution_venue import SEQ_PROBE, VenueConfig, VenueCore
from rmptwin.venue.orderbook import LIMIT
from rmptwin.venue.sequencer import REPLY_MAX, CasLog, CasProxyCore
from rmptwin.venue.wire import Order, Request

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=ETCD_APIS)
def api(request) -> str:
    """Each test runs with both etcd clients: the gRPC one and the JSON gateway's."""
    return request.param

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


def make_ev(i: int, batch: int) -> VenueCore:
    config = VenueConfig(ev_id=i, symbols=("IBM",), gateways=("gw1", "gw2"), sequencer="seq", history=None,
                         durable=False, batch=batch, lookahead=16)
    return VenueCore(config, lambda: 1)


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


def test_one_key_per_batch_a_late_proposer_mid_batch_learns_what_stands_and_too_far_below_the_window(api):
    with EtcdCluster(3) as cluster:
        cas = etcd_cas(cluster.endpoints, api=api, prefix="test/batch", window=8)
        cas.init()
        assert cas.propose(0, [(0, 0), (0, 1), (0, 2)]) == (wire.WON, 3, [(0, 0), (0, 1), (0, 2)])
        assert cas.propose(3, [(1, 7)]) == (wire.WON, 4, [(1, 7)])
        # a proposer that knows only positions 0..1 asks at 2: the middle of the first batch
        assert cas.propose(2, [(1, 9)]) == (wire.LOST, 4, [(0, 2), (1, 7)])
        assert cas.propose(4, []) == (wire.LOST, 4, [])       # a read at the top: nothing stands yet
        assert cas.read_all() == {0: (0, 0), 1: (0, 1), 2: (0, 2), 3: (1, 7)}
        for n in range(4, 16, 4):                             # 12 more positions: the first batches leave the window
            assert cas.propose(n, [(2, n + i) for i in range(4)])[0] == wire.WON
        assert cas.propose(2, [(1, 9)])[0] == wire.TOO_FAR
        assert min(cas.read_all()) >= 16 - 8 - 4              # etcd keeps the window (and one batch), not more
        assert cas.propose(SEQ_PROBE, []) == (wire.LOST, 16, [])   # a restarting EV's probe: where the order stands
        # a proposer that finds its own batch at n (an earlier copy won, its answer lost) is told WON;
        # another proposer with the same keys is told LOST
        assert cas.propose(16, [(3, 1)], owner=1) == (wire.WON, 17, [(3, 1)])
        assert cas.propose(16, [(3, 1)], owner=1) == (wire.WON, 17, [(3, 1)])
        assert cas.propose(16, [(3, 1)], owner=2) == (wire.LOST, 17, [(3, 1)])
        cas.close()
        # a loser is told as many standing keys as CasLog tells (the batches read may hold more)
        wide, log = etcd_cas(cluster.endpoints, api=api, prefix="test/reply", window=1000), CasLog(1000)
        wide.init()
        batch = [(4, i) for i in range(150)]
        assert wide.propose(0, batch) == log.propose(0, batch)
        assert wide.propose(0, [(5, 0)]) == log.propose(0, [(5, 0)])
        assert len(wide.propose(10, [(5, 0)])[2]) == REPLY_MAX
        wide.close()
        lead = leader_first(list(reversed(cluster.endpoints)))
        assert sorted(lead) == sorted(cluster.endpoints)
        status = json.loads(urllib.request.urlopen(urllib.request.Request(
            lead[0] + "/v3/maintenance/status", data=b"{}", method="POST"), timeout=5).read())
        assert status["leader"] == status["header"]["member_id"]   # the first is the raft leader


def test_a_serializable_read_answers_as_a_linearizable_one_at_the_leader_from_its_own_store(api):
    """A promoted standby's read (``serializable=True``, ``bench.venue_procs``): at the leader it
    answers what a linearizable read answers; and it is served from the member's own store:
    with both followers paused (no quorum) the leader still answers it, where a linearizable
    read (etcd's ReadIndex, a quorum round) gets no answer."""
    with EtcdCluster(3) as cluster:
        lead = leader_first(cluster.endpoints)
        cas = etcd_cas(lead, api=api, prefix="test/serial", window=100)
        cas.init()
        for n in range(0, 12, 3):
            assert cas.propose(n, [(0, n + i) for i in range(3)], owner=0)[0] == wire.WON
        for n in (0, 2, 5, 9, 11, 12, 13, SEQ_PROBE):   # from the first position, mid-batch, the top, above, a probe
            assert cas.propose(n, [], serializable=True) == cas.propose(n, [])
        assert cas.propose(0, [], serializable=True) == (wire.LOST, 12, [(0, i) for i in range(12)])
        read = wire.propose_frame(1, 4, [])
        assert serve_propose(cas, read, serializable=True) == serve_propose(cas, read)
        with pytest.raises(ValueError):
            cas.propose(12, [(1, 0)], serializable=True)   # a write is never a serializable read
        cas.close()
        leader = cluster.endpoints.index(lead[0])
        alone = etcd_cas(lead[:1], api=api, prefix="test/serial", window=100, timeout_s=0.5, give_up_s=1.0)
        assert alone.propose(12, []) == (wire.LOST, 12, [])   # connected, quorum there
        followers = [i for i in range(3) if i != leader]
        for i in followers:
            cluster.pause(i)
        try:
            assert alone.propose(9, [], serializable=True) == (wire.LOST, 12, [(0, 9), (0, 10), (0, 11)])
            with pytest.raises(UserError):
                alone.propose(9, [])
        finally:
            for i in followers:
                cluster.resume(i)
        alone.close()


def test_a_warmed_client_has_made_one_round_trip_and_changed_nothing(api):
    """A standby warms its client before it is promoted (``EtcdCas.warm``): one read on an
    open connection, on a sequencer that may not even be initialised yet, writing nothing."""
    with EtcdCluster(3) as cluster:
        cas = etcd_cas(leader_first(cluster.endpoints), api=api, prefix="test/warm", window=100)
        cas.warm()   # before init: nothing stands, nothing is written
        assert cas.round_trips == 1 and cas._conn is not None
        assert cas.propose(0, []) == (wire.LOST, 0, [])
        cas.init()
        assert cas.propose(0, [(0, 1)], owner=0)[0] == wire.WON
        cas.warm()
        assert cas.read_all() == {0: (0, 1)}
        cas.close()


def test_the_http_client_reads_chunked_and_sized_answers_on_one_kept_alive_connection():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"b\"\r\n3\r\n:2}\r\n0\r\n\r\n"]

    def serve():
        conn, _ = srv.accept()
        for a in answers:
            got = b""
            while b"\r\n\r\n" not in got or not got.endswith(b"{}"):
                got += conn.recv(4096)
            conn.sendall(a[:20])                              # in pieces, as TCP may deliver it
            conn.sendall(a[20:])
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    http = _Http("127.0.0.1", srv.getsockname()[1], 5.0)
    assert http.post("/v3/kv/txn", b"{}") == (200, b'{"a":1}')
    assert http.post("/v3/kv/txn", b"{}") == (200, b'{"b":2}')
    http.close()
    srv.close()


def test_member_crash_during_load_no_gap_no_duplicate(api):
    rng = random.Random(3)
    reqs = requests(rng)
    total = len(reqs)
    with EtcdCluster(3) as cluster:
        eps = cluster.endpoints
        cas = [etcd_cas(eps, api=api, prefix="test/seq", window=4 * total, timeout_s=1.0),
               etcd_cas(eps[1:] + eps[:1], api=api, prefix="test/seq", window=4 * total, timeout_s=1.0)]
        cas[0].init()
        evs = [make_ev(i, batch=rng.choice([2, 4, 8])) for i in range(2)]
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


def test_sequencer_host_proxy_asks_etcd_from_its_worker_and_both_venues_agree(api):
    """The sequencer host of a real run: ``CasProxyCore`` hands each PROPOSE to the etcd client's
    worker thread and returns at once; the answers, brought back, become the DECIDEs."""
    rng = random.Random(5)
    reqs = requests(rng)[:120]
    total = len(reqs)
    with EtcdCluster(3) as cluster:
        client = EtcdCasClient(etcd_cas(cluster.endpoints, api=api, prefix="test/proxy", window=4 * total))
        proxy = CasProxyCore(client)
        answers: queue.SimpleQueue = queue.SimpleQueue()
        client.start(lambda request_id, answer: answers.put((request_id, answer)))
        evs = [make_ev(i, batch=4) for i in range(2)]
        for ev in evs:
            for r in local_order(reqs, rng):
                ev.receive_datagram(wire.request_frame(r), "gw", 0)
        logs: list[list] = [[], []]
        now = 0
        while min(ev.next_pos for ev in evs) < total:
            now += 1000
            assert now < 50_000_000, f"venues stuck at {[ev.next_pos for ev in evs]}"
            asked = 0
            for i, ev in enumerate(evs):
                for data, dest in ev.datagrams_to_send(now):
                    if dest == Unicast("seq"):
                        proxy.receive_datagram(data, f"ev{i}", now)
                        asked += 1
            assert proxy.datagrams_to_send(now) == []      # no answer inside receive_datagram
            for _ in range(asked):
                proxy.receive_answer(*_flatten(answers.get(timeout=30)), now)
            for data, dest in proxy.datagrams_to_send(now):
                evs[int(dest.node[2:])].receive_datagram(data, "seq", now)
            for i, ev in enumerate(evs):
                t = ev.get_timer()
                if t is not None and t <= now:
                    ev.handle_timer(now)
                while (e := ev.next_event()) is not None:
                    logs[i].append(e)
        stored = client.cas.read_all()
        client.close()
    orders = [[(e.gseq, e.src, e.src_seq) for e in log if e.kind == Kind.SEQ_POSITION] for log in logs]
    assert orders[0] == orders[1]
    assert [g for g, _, _ in orders[0]] == list(range(total))      # no gap
    assert len({(s, q) for _, s, q in orders[0]}) == total           # no duplicate
    assert sorted(stored) == list(range(total))
    assert evs[0].state_hash() == evs[1].state_hash()


def _flatten(item):
    request_id, (status, nxt, keys) = item
    return request_id, status, nxt, keys


class _LoopDriver:
    """What ``NodeAdapters.attach`` needs of ``node.driver.NodeDriver``: the core, the clocks,
    and ``after`` (here collecting what the core sends)."""

    def __init__(self, core) -> None:
        self.core = core
        self.clock = type("Clock", (), {"local": staticmethod(lambda t: t)})()
        self.sent: list = []
        self.calls_after = asyncio.Event()

    def true_now(self) -> int:
        return 1

    def after(self, t: int) -> None:
        self.sent += self.core.datagrams_to_send(t)
        self.calls_after.set()


def test_a_real_sequencer_node_starts_etcd_answers_on_its_event_loop_and_stops_etcd(tmp_path, api):
    """The sequencer host of ``rmptwin run`` on venue-failover (sequencer: etcd): its adapters start a
    three-member cluster, the factory builds the proxy on it, answers come back on the node's loop,
    and closing the adapters stops the cluster and removes its data."""
    loaded = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    exp = loaded.experiment
    loaded = loaded.model_copy(update={"experiment": exp.model_copy(update={
        "venue": exp.venue.model_copy(update={"etcd_api": api})})})
    host = loaded.topology.host("seq1")
    adapters = node_adapters(host, loaded, tmp_path)
    assert adapters.cluster is not None and all(adapters.cluster.healthy(i) for i in range(3))
    assert adapters.cas_client.cas.api == api   # venue.etcd_api chose the client
    core = build_core(host, loaded, random.Random(1), adapters=adapters)
    assert isinstance(core, CasProxyCore)
    root = adapters.cluster.root

    async def ask() -> list:
        driver = _LoopDriver(core)
        adapters.attach(driver, asyncio.get_running_loop())
        core.receive_datagram(wire.propose_frame(0, 0, [(0, 0), (1, 0)]), "ev1", 0)
        core.receive_datagram(wire.propose_frame(1, 0, [(1, 0)]), "ev2", 0)
        assert core.datagrams_to_send(0) == []     # the node's loop is free while etcd works
        while len(driver.sent) < 2:
            driver.calls_after.clear()
            await asyncio.wait_for(driver.calls_after.wait(), timeout=30)
        return driver.sent

    sent = asyncio.run(ask())
    adapters.close()
    assert [(wire.decode(d)[1], dest) for d, dest in sent] == [
        ((wire.WON, 0, 2, [(0, 0), (1, 0)]), Unicast("ev1")), ((wire.LOST, 0, 2, [(0, 0), (1, 0)]), Unicast("ev2"))]
    assert all(p is None for p in adapters.cluster.procs) and not root.exists()

