"""Real-time venue run in separate processes: two EVs, the gateway, the history recorder.

Processes (forked, each with its own sockets, ``bench.venue_node``): ``front`` runs the
trading client and the gateway (its log a file, one fdatasync per batch of appended requests:
group commit, in the loop: into preallocated space it takes ~0.1 ms, less than handing it to
a thread and being woken; orders arriving meanwhile form the next batch; a request goes to
the EVs only after the fdatasync that covers it); ``hr`` the history recorder (an
append-only log, ``FileHistoryStore``: one write and one fdatasync per batch, group commit;
HARDENED only after that fdatasync); ``ev1``, ``ev2`` one EV each with its own
etcd client in a worker thread (one etcd transaction per proposal batch; an EV has at most
one proposal in flight, the venue core's rule, and proposes the next batch as soon as the
answer is in, while the loop goes on receiving and executing). ``trace`` in the figures
says where the time went, stage by stage (``bench.venue_trace``).

Figures, all from ``time.monotonic_ns`` (one clock for every process):

* latency: the seed's, gateway send (after its fsync) to the first EV's completion at the
  gateway, which comes only after the HR commit (``durable``);
* throughput: completions within the offered window / the window; completions after the
  load stopped are reported apart (``completed_after``), never counted in it;
* failover sync (the seed's "synchronization time": from when a new EV is started until it
  has recovered the state and is fully operational): an EV process is killed (SIGKILL)
  mid-run and a new one started ``down_s`` later, recovering from the HR's checkpoint and
  hardened requests while the other EV goes on; ``sync_from_start_ms`` runs from the fork of
  the new process to its SYNC_DONE (it has executed everything the sequencer had ordered
  when it first asked), ``sync_core_ms`` from its first datagram (the core's own figure).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import queue
import random
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rmptwin.bench.venue_node import EtcdProposer, EtcdStats, Transport, pump
from rmptwin.bench.venue_trace import StageStamps, stage_breakdown
from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Core, Unicast
from rmptwin.node.durable_stores import FileGatewayLog, FileHistoryStore
from rmptwin.node.etcd_client import ETCD_APIS, etcd_cas, etcd_cas_class, leader_first
from rmptwin.venue import wire
from rmptwin.venue.client import ClientConfig, ClientCore
from rmptwin.venue.execution_venue import VenueConfig, VenueCore
from rmptwin.venue.gateway import GatewayConfig, GatewayCore
from rmptwin.venue.history import HistoryConfig, HistoryCore
from rmptwin.venue.standby import StandbyVenueCore

if TYPE_CHECKING:
    import ctypes
    from multiprocessing.queues import Queue

    Shared = ctypes.Array[ctypes.c_longlong]           # the shared int64 slots below
    Reports = Queue[tuple[str, str, dict[str, Any] | None]]   # (kind, process, payload) to the supervisor

START_DELAY_NS = 200_000_000   # the clients start this long after every process is ready
DRAIN_CAP_S = 2.0              # after the load, wait at most this long for every completion
# shared int64 slots (one RawArray, no locks: each slot has one writer)
GO, STOP, HR_TOP, ACCEPTED, COMPLETED, TARGET, OFFERED, PROMOTE, EV0 = range(9)
_SEQ = Unicast("seq")
_PHASES = ("checkpoint", "hardened", "live")   # a recovering EV's, in order (the HR's one answer ends the first two)


def _groups(n_ev: int) -> dict[str, list[str]]:
    evs = [f"ev{i + 1}" for i in range(n_ev)]
    return {wire.REQUEST_GROUP: evs, wire.HARDENED_GROUP: evs}


def _runqueue_s() -> float:
    """Seconds this process has spent runnable but waiting for a CPU (a shared machine's cost)."""
    try:
        return int(Path("/proc/self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


def _wait_go(sh: Shared) -> None:
    while sh[GO] == 0:
        time.sleep(0.001)


def _fast_thread_handoff() -> None:
    """A process whose loop shares the interpreter with a worker thread (etcd client, fsync)
    hands the GIL over after 0.1 ms, not the default 5 ms: otherwise the loop, back from a
    select, waits up to 5 ms for the worker to let go, on every turn."""
    sys.setswitchinterval(1e-4)


def _front_main(sh: Shared, q: Reports, p: dict[str, Any]) -> None:
    _fast_thread_handoff()
    net = Transport(p["sock_dir"], ["cl1", "gw1"], _groups(p["n_ev"]))
    log = FileGatewayLog(Path(p["state_dir"]) / "gw1.log")   # fdatasync in the loop: 0.1 ms into preallocated space
    gw = GatewayCore(GatewayConfig(gw_id=0, venues=p["evs"], symbols=p["symbols"], fsync_ns=0), log)
    q.put(("ready", "front", None))
    _wait_go(sh)
    start = sh[GO]
    client = ClientCore(ClientConfig(index=0, gateway="gw1", symbols=p["symbols"], rate=p["rate"], start_ns=start,
                                     stop_ns=start + int(p["duration_s"] * 1e9)), random.Random(p["seed"]))
    cores: dict[str, Core] = {"cl1": client, "gw1": gw}
    done_t: list[int]
    lat: list[int]
    done_seq: list[int]
    done_t, lat, done_seq = [], [], []
    stamps = StageStamps()

    def on_event(name: str, e: Event) -> None:
        if e.kind == Kind.ORDER_DONE:
            done_t.append(time.monotonic_ns())
            lat.append(e.detail["latency_ns"])
            done_seq.append(e.src_seq)

    cpu, rq = time.process_time(), _runqueue_s()
    while sh[STOP] < 2:   # serves the EVs until they all stopped (a lagging one may ask for resends)
        pump(net, cores, on_event, tap=stamps.on_complete)
        sh[ACCEPTED], sh[COMPLETED] = gw.accepted, gw.completed
        sh[OFFERED] = client.seq - gw.rejected   # offered and not refused: to be accepted (after the fsync)
    q.put(("result", "front", {"offered": client.seq, "accepted": gw.accepted, "completed": gw.completed,
                               "done_t": np.asarray(done_t, dtype=np.int64), "lat_ns": np.asarray(lat, dtype=np.int64),
                               "done_seq": np.asarray(done_seq, dtype=np.int64), "stamps": stamps.arrays(),
                               "fsyncs": log.fsyncs, "fsync_s": log.fsync_s, "cpu_s": time.process_time() - cpu,
                               "runqueue_s": _runqueue_s() - rq,
                               "datagrams": net.datagrams, "frames": net.frames}))
    net.close()
    log.close()


def _hr_main(sh: Shared, q: Reports, p: dict[str, Any]) -> None:
    net = Transport(p["sock_dir"], ["hr1"], _groups(p["n_ev"]))
    store = FileHistoryStore(Path(p["state_dir"]) / "hr1.log")
    hr = HistoryCore(HistoryConfig(commit_ns=0), store)
    stamps = StageStamps()
    q.put(("ready", "hr", None))
    _wait_go(sh)
    cpu, rq = time.process_time(), _runqueue_s()
    while sh[STOP] < 2:
        pump(net, {"hr1": hr}, stamps.on_hr_event)
        sh[HR_TOP] = hr.top
    q.put(("result", "hr", {"commits": store.commits, "rows": store.rows, "commit_s": store.commit_s,
                            "stamps": stamps.arrays(),
                            "cpu_s": time.process_time() - cpu, "runqueue_s": _runqueue_s() - rq}))
    net.close()
    store.close()


def _ask_first(net: Transport, name: str, ev: VenueCore,
               start_proposer: Callable[[], EtcdProposer]) -> EtcdProposer:
    """Send a new EV's first questions (a recovering one's: the HR's checkpoint, where the
    sequencer stands): the HR's at once, so the HR answers while the etcd client starts
    (``start_proposer()``), then the sequencer's through it. The proposer."""
    first = ev.datagrams_to_send(time.monotonic_ns())
    net.send(name, [(d, dest) for d, dest in first if dest != _SEQ])
    net.flush()
    seq = start_proposer()
    for d, dest in first:
        if dest == _SEQ:
            seq.submit(d)
    return seq


def _send_promotion_read(net: Transport, name: str, ev: StandbyVenueCore, seq: EtcdProposer) -> None:
    """Send what a promote call emitted, its read of the sequencer among it, right away, not
    after a turn of the loop has taken in and executed what waits on the socket. The read goes
    to the worker thread (idle while standing by, blocked on its queue) as a SERIALIZABLE one:
    answered by the member the EV talks to, the raft leader (``leader_first``), from its own
    store, without the quorum round a linearizable read waits for (before: 2.5-3.8 ms of a
    6-11 ms sync, etcd on disk). It sees every position ordered before the promotion (each
    acknowledged proposal was applied at the leader first); were it stale (a leader change),
    the EV's next proposal is answered LOST with what stands: ``EtcdCas.propose``. Only this
    read: the others stay linearizable."""
    out = ev.datagrams_to_send(time.monotonic_ns())
    for d, dest in out:
        if dest == _SEQ:
            ftype, f = wire.decode(d)
            seq.submit(d, serializable=ftype == wire.T_PROPOSE and not f[2])   # (a PROPOSE with no keys: a read)
    net.send(name, [(d, dest) for d, dest in out if dest != _SEQ])
    net.flush()


def _ev_main(sh: Shared, q: Reports, p: dict[str, Any], i: int, recovering: bool, standby: bool = False) -> None:
    """EV ``i``; a ``standby`` one follows the others silently until the supervisor raises PROMOTE."""
    main_at, main_cpu = time.monotonic_ns(), time.process_time()
    _fast_thread_handoff()
    name = f"ev{i + 1}"
    net = Transport(p["sock_dir"], [name], _groups(p["n_ev"]))
    core = StandbyVenueCore if standby else VenueCore
    ev = core(VenueConfig(ev_id=i, symbols=p["symbols"], gateways=("gw1",), sequencer="seq", history="hr1",
                          durable=p["durable"], checkpoint_every=p["checkpoint_every"], lookahead=p["batch"] * 2,
                          batch=p["batch"], retry_ns=p["retry_ns"]), lambda: 0, recovering=recovering)
    promotions_seen = sh[PROMOTE]
    stats = EtcdStats()
    cas = etcd_cas(p["endpoints"], api=p["etcd_api"], prefix=p["prefix"], window=100_000)   # made after the fork
    seq = _ask_first(net, name, ev, lambda: EtcdProposer(cas, p["sock_dir"], name, stats))
    if standby:
        seq.warm()   # its first question may be the promotion's read: not on a cold channel
    stamps = StageStamps()
    executed = [0]
    hashes: dict[int, str] = {}   # checkpoint position -> state hash + trade hash there

    def on_event(_: str, e: Event) -> None:
        if e.kind == Kind.SEQ_POSITION:
            executed[0] += 1
            stamps.mark(e.src_seq)
        elif e.kind == Kind.VENUE_STATE:
            hashes[e.gseq] = f"{e.detail['state_hash']}/{e.detail['trade_hash']}"
        elif e.kind == Kind.SYNC_DONE and isinstance(ev, StandbyVenueCore) and ev.promoted_at is not None:
            q.put(("promoted", name, {"at": time.monotonic_ns(), "promoted_at": ev.promoted_at,
                                      "sync_core_ms": e.detail["sync_ns"] / 1e6, "position": e.detail["position"],
                                      "txns_ms": [((a - ev.promoted_at) / 1e6, (b - ev.promoted_at) / 1e6)
                                                  for a, b in stats.spans if b >= ev.promoted_at]}))
        elif e.kind == Kind.SYNC_DONE:
            at, cpu_at = time.monotonic_ns(), time.process_time()
            mark_phases("live", at, cpu_at)
            q.put(("sync", name, {"at": at, "sync_core_ms": e.detail["sync_ns"] / 1e6, "executed": executed[0],
                                  "position": e.detail["position"], "main_at": main_at, "phases": dict(phases),
                                  "cpu": {**phase_cpu, "in sync": cpu_at}}))

    def mark_phases(phase: str, at: int, cpu_at: float) -> None:
        """``phase`` and any before it not seen yet (passed within one turn of the loop) begin now."""
        for ph in _PHASES[:_PHASES.index(phase) + 1]:
            if ph not in phases:
                phases[ph] = at
                if ph == "live":
                    phase_cpu["replayed"] = cpu_at

    if not recovering:
        q.put(("ready", name, None))
        _wait_go(sh)
    phases = {"looping": time.monotonic_ns()}   # when a recovering EV entered each recovery phase
    phase_cpu = {"code runs": main_cpu, "loop starts": time.process_time()}   # and its CPU time there (s)
    cpu, rq = time.process_time(), _runqueue_s()
    pump(net, {name: ev}, on_event, seq, max_wait_s=0.0)   # a recovering EV's first question goes out at once
    while sh[STOP] < 2 and not (sh[STOP] == 1 and ev.next_pos >= sh[TARGET]):
        if standby and sh[PROMOTE] > promotions_seen and isinstance(ev, StandbyVenueCore) and ev.standby:
            ev.promote(time.monotonic_ns())   # an EV died: take its place; the read goes out at once
            _send_promotion_read(net, name, ev, seq)
        pump(net, {name: ev}, on_event, seq, tap=stamps.on_request)
        sh[EV0 + i] = ev.next_pos
        if recovering and ev.phase not in phases:
            mark_phases(ev.phase, time.monotonic_ns(), time.process_time())
    q.put(("result", name, {"state_hash": ev.state_hash(), "next_pos": ev.next_pos, "trade_hash": ev.trade_hash.hex(),
                            "executed": executed[0], "checkpoints": hashes, "etcd": stats.as_dict(), "cpu_s": time.process_time() - cpu,
                            "runqueue_s": _runqueue_s() - rq, "failovers": seq.cas.failovers,
                            "stamps": stamps.arrays(), "txn_spans": np.asarray(stats.spans, dtype=np.int64)}))
    seq.close()
    net.close()


class _Run:
    """The processes of one run and what they reported."""

    def __init__(self, params: dict[str, Any], n_ev: int) -> None:
        self.ctx = mp.get_context("fork")   # fast start: a restarted EV is a fork, not a new interpreter
        self.p = params
        self.sh = self.ctx.RawArray("q", EV0 + n_ev)
        self.q = self.ctx.Queue()
        self.procs: dict[str, BaseProcess] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.syncs: list[dict[str, Any]] = []
        self.promotions: list[dict[str, Any]] = []
        self.ready: set[str] = set()
        self.stopped_ns = 0

    def spawn(self, name: str, target: Callable[..., None], *args: Any) -> int:
        proc = self.ctx.Process(target=target, args=(self.sh, self.q, self.p, *args), name=name, daemon=True)
        gc.freeze()   # the child's collector then skips what it inherits: no copy-on-write of every object page
        t = time.monotonic_ns()
        proc.start()
        self.procs[name] = proc
        return t

    def collect(self, timeout_s: float) -> None:
        try:
            kind, name, payload = self.q.get(timeout=timeout_s)
        except queue.Empty:
            return
        if kind == "ready":
            self.ready.add(name)
        elif kind == "sync":
            self.syncs.append({"ev": name, **payload})
        elif kind == "promoted":
            self.promotions.append({"ev": name, **payload})
        else:
            self.results[name] = payload

    def wait_for(self, pred: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            if time.monotonic() > deadline:
                raise RuntimeError(f"venue processes: {what} not within {timeout_s:.0f} s")
            dead = [n for n, pr in self.procs.items() if pr.exitcode not in (None, 0, -9)]
            if dead:
                raise RuntimeError(f"venue process {dead[0]} exited with {self.procs[dead[0]].exitcode}")
            self.collect(0.005)

    def stop(self) -> None:
        for pr in self.procs.values():
            if pr.is_alive():
                pr.kill()
            pr.join(timeout=5)


def _failovers(run: _Run, start_ns: int, kill_at: tuple[float, ...], down_s: float,
               victim: int) -> list[dict[str, Any]]:
    """Kill EV ``victim`` at each of ``kill_at`` s into the load, start a recovering one ``down_s`` later."""
    name, out = f"ev{victim + 1}", []
    for at in kill_at:
        while time.monotonic_ns() < start_ns + at * 1e9:
            run.collect(0.002)
        run.procs[name].kill()
        run.procs[name].join(timeout=5)
        time.sleep(down_s)
        before = len(run.syncs)
        forked = run.spawn(name, _ev_main, victim, True)
        run.wait_for(lambda: len(run.syncs) > before, 20.0, f"{name} in sync after a restart")
        s = run.syncs[-1]
        wall, cpu = _sync_phases(forked, s)
        out.append({"sync_from_start_ms": (s["at"] - forked) / 1e6, "sync_core_ms": s["sync_core_ms"],
                    "sync_from_main_ms": (s["at"] - s["main_at"]) / 1e6, "spawn_ms": (s["main_at"] - forked) / 1e6,
                    "position": s["position"], "executed": s["executed"], "phases_ms": wall, "phases_cpu_ms": cpu})
    return out


def _standby_failovers(run: _Run, start_ns: int, kill_at: tuple[float, ...], n: int) -> list[dict[str, Any]]:
    """With a standby (the last EV): at each of ``kill_at`` s into the load kill the EV that took
    over last (first EV n-1), tell the standby (PROMOTE, and a datagram that wakes its loop), and
    start the killed EV again as the new standby (checkpoint + hardened requests, then silent)."""
    victim, standby, out = n - 2, n - 1, []
    for at in kill_at:
        while time.monotonic_ns() < start_ns + at * 1e9:
            run.collect(0.002)
        name = f"ev{victim + 1}"
        run.procs[name].kill()
        run.procs[name].join(timeout=5)
        seen = time.monotonic_ns()   # the supervisor has seen its child exit
        before, synced = len(run.promotions), len(run.syncs)
        run.sh[PROMOTE] += 1
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b"", str(Path(run.p["sock_dir"]) / f"ev{standby + 1}.sock"))
        run.wait_for(lambda: len(run.promotions) > before, 20.0, f"ev{standby + 1} in sync after its promotion")
        pr = run.promotions[-1]
        run.spawn(name, _ev_main, victim, True, True)
        run.wait_for(lambda: len(run.syncs) > synced, 20.0, f"{name} recovered as the new standby")
        out.append({"sync_ms": pr["sync_core_ms"], "seen_to_sync_ms": (pr["at"] - seen) / 1e6,
                    "seen_to_promote_ms": (pr["promoted_at"] - seen) / 1e6, "position": pr["position"],
                    "new_standby_sync_ms": run.syncs[-1]["sync_core_ms"], "txns_ms": pr["txns_ms"]})
        victim, standby = standby, victim
    return out


def _sync_phases(forked: int, s: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A failover's sync, phase by phase (ms): the fork until the EV's code runs (spawn), its
    set-up (sockets, etcd client, its questions to the HR and the sequencer) until its loop,
    the loop until the HR's answer (checkpoint and the hardened requests after it) is
    installed and executed (replayed), and from there until in sync (the sequencer's target
    reached: the positions the HR had not hardened yet come in its live multicasts); and the
    CPU the new EV spent in each (ms; the rest of a phase is waiting: for a CPU, the HR, etcd)."""
    ph, cpu = s["phases"], s["cpu"]
    marks = [("forked", forked), ("code runs", s["main_at"]), ("loop starts", ph.get("looping")),
             ("replayed", ph.get("live")), ("in sync", s["at"])]
    known = [(k, t) for k, t in marks if t is not None]
    wall = {f"{a}->{b}": round((tb - ta) / 1e6, 3) for (a, ta), (b, tb) in zip(known, known[1:])}
    known_cpu = [(k, cpu[k]) for k, _ in marks if k in cpu]
    used = {f"{a}->{b}": round((tb - ta) * 1e3, 3) for (a, ta), (b, tb) in zip(known_cpu, known_cpu[1:])}
    return wall, used


def _stop(run: _Run, n_ev: int) -> None:
    """EVs first, each once at the furthest position any EV reached (so their states compare),
    the gateway and HR serving them meanwhile; after 5 s, everyone as it stands."""
    run.sh[TARGET] = max(run.sh[EV0 + i] for i in range(n_ev))
    run.sh[STOP] = 1
    evs = [f"ev{i + 1}" for i in range(n_ev)]
    try:
        run.wait_for(lambda: all(e in run.results for e in evs), 5.0, "the EVs at the same position")
    except RuntimeError:
        pass   # reported: their positions differ, only checkpoint hashes compare
    run.sh[STOP] = 2
    run.wait_for(lambda: len(run.results) == 2 + n_ev, 10.0, "every process's result")


def _agreement(evs: list[dict[str, Any]]) -> dict[str, Any]:
    """Same position and state at the end, and the same hashes at every checkpoint both passed."""
    same_pos = len({e["next_pos"] for e in evs}) == 1
    common = set.intersection(*(set(e["checkpoints"]) for e in evs))
    return {"agree": same_pos and len({e["state_hash"] for e in evs}) == 1
            and all(len({e["checkpoints"][p] for e in evs}) == 1 for p in common),
            "checkpoints_compared": len(common),
            "checkpoints_agree": all(len({e["checkpoints"][p] for e in evs}) == 1 for p in common)}


def _drained(run: _Run, n_ev: int) -> bool:
    sh = run.sh
    tops = {sh[EV0 + i] for i in range(n_ev)}
    return sh[ACCEPTED] >= sh[OFFERED] and sh[COMPLETED] >= sh[ACCEPTED] and tops == {sh[HR_TOP] + 1}


def run_processes(endpoints: list[str], *, rate: float, duration_s: float, symbols: Sequence[str] = ("IBM",),
                  durable: bool = True,
                  n_ev: int = 2, seed: int = 1, state_dir: str | None = None, kill_at: tuple[float, ...] = (),
                  down_s: float = 0.2, checkpoint_every: int = 128, retry_ns: int = 200_000_000,
                  batch: int = 256, etcd_api: str = ETCD_APIS[0], standby: bool = False) -> dict[str, Any]:
    """Offer ``rate`` requests/s for ``duration_s`` to EVs in separate processes; the figures (module doc).

    ``state_dir``: the file system holding the gateway log and the HR database (their fsyncs
    are real); default a temporary directory under /var/tmp (disk). ``kill_at``: seconds into
    the load at which EV 2 is killed and restarted (failover sync). ``batch``: positions an EV
    proposes in one etcd transaction at most (it looks ahead twice that). ``etcd_api``: how the EVs'
    clients ask etcd (``node.etcd_client.ETCD_APIS``). ``standby``: one EV more, started as a
    standby; a kill then promotes it (``_standby_failovers``), no fork waited for."""
    n_ev += 1 if standby else 0
    # The API's module (grpc: ~100 ms of CPU to import) loaded before the forks, not in each EV
    # forked after a kill (measured: a restarted EV's code-runs-to-loop phase 223 ms, 95 ms of
    # its CPU, with the gRPC client). Only the import: channels are made after the fork.
    etcd_cas_class(etcd_api)
    state = Path(tempfile.mkdtemp(prefix="rmptwin-venue-procs-", dir=state_dir or "/var/tmp"))
    socks = Path(tempfile.mkdtemp(prefix="rv-", dir="/tmp"))   # short: unix socket paths are <= 107 bytes
    prefix = f"bench/{os.getpid()}/{time.monotonic_ns()}"
    endpoints = leader_first(endpoints)   # every EV's client talks to the leader (a follower forwards: a hop more)
    params = {"sock_dir": str(socks), "state_dir": str(state), "n_ev": n_ev, "evs": tuple(f"ev{i + 1}" for i in range(n_ev)),
              "symbols": tuple(symbols), "rate": rate, "duration_s": duration_s, "seed": seed, "endpoints": endpoints,
              "prefix": prefix, "durable": durable, "checkpoint_every": checkpoint_every, "retry_ns": retry_ns,
              "batch": batch, "etcd_api": etcd_api}
    # JSON here whatever the EVs use: no gRPC channel in this process, whose forks become the EVs
    init = etcd_cas(endpoints, api="json", prefix=prefix, window=100_000)
    init.init()
    init.close()
    run = _Run(params, n_ev)
    try:
        run.spawn("front", _front_main)
        run.spawn("hr", _hr_main)
        for i in range(n_ev):
            run.spawn(f"ev{i + 1}", _ev_main, i, False, standby and i == n_ev - 1)
        run.wait_for(lambda: len(run.ready) == 2 + n_ev, 30.0, "every process ready")
        start = run.sh[GO] = time.monotonic_ns() + START_DELAY_NS
        if standby:
            sync = _standby_failovers(run, start, kill_at, n_ev) if kill_at else []
        else:
            sync = _failovers(run, start, kill_at, down_s, n_ev - 1) if kill_at else []
        end = start + int(duration_s * 1e9)
        while time.monotonic_ns() < end or (not _drained(run, n_ev) and time.monotonic_ns() < end + DRAIN_CAP_S * 1e9):
            run.collect(0.005)
        _stop(run, n_ev)
        run.stopped_ns = time.monotonic_ns()
    finally:
        run.sh[STOP] = 2
        run.stop()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(socks, ignore_errors=True)
    return _figures(run, start, end, duration_s, rate, n_ev, sync)


def _figures(run: _Run, start: int, end: int, duration_s: float, rate: float, n_ev: int,
             sync: list[dict[str, Any]]) -> dict[str, Any]:
    f, hr = run.results["front"], run.results["hr"]
    evs = [run.results[f"ev{i + 1}"] for i in range(n_ev)]
    in_window = int(np.count_nonzero(f["done_t"] <= end))
    lat = f["lat_ns"] / 1e6 if len(f["lat_ns"]) else np.asarray([np.nan])
    return {
        "offered_rate": rate, "offered": f["offered"], "accepted": f["accepted"], "completed": f["completed"],
        "completed_in_window": in_window, "completed_after": f["completed"] - in_window,
        "throughput": in_window / duration_s,
        "p50_ms": float(np.nanpercentile(lat, 50)), "p99_ms": float(np.nanpercentile(lat, 99)),
        "mean_ms": float(np.nanmean(lat)),
        **_agreement(evs),
        "next_pos": [e["next_pos"] for e in evs], "state_hashes": [e["state_hash"] for e in evs],
        "sync": sync,
        "stages": {
            "gw_fsyncs": f["fsyncs"], "gw_fsync_ms_mean": 1e3 * f["fsync_s"] / max(1, f["fsyncs"]),
            "gw_requests_per_fsync": f["accepted"] / max(1, f["fsyncs"]),
            "hr_commits": hr["commits"], "hr_commit_ms_mean": 1e3 * hr["commit_s"] / max(1, hr["commits"]),
            "hr_rows_per_commit": hr["rows"] / max(1, hr["commits"]),
            # each process's CPU over the requests it handled (accepted, stored, executed)
            "cpu_us_per_request": {"front": 1e6 * f["cpu_s"] / max(1, f["accepted"]),
                                   "hr": 1e6 * hr["cpu_s"] / max(1, hr["rows"]),
                                   **{f"ev{i + 1}": 1e6 * e["cpu_s"] / max(1, e["executed"]) for i, e in enumerate(evs)}},
            "etcd": {f"ev{i + 1}": e["etcd"] for i, e in enumerate(evs)},
            # runnable but not running: what the other users of a shared machine cost each process
            "runqueue_wait_s": {"front": f["runqueue_s"], "hr": hr["runqueue_s"],
                                **{f"ev{i + 1}": e["runqueue_s"] for i, e in enumerate(evs)}},
        },
        "trace": stage_breakdown(f, hr, evs),
        "wall_s": (run.stopped_ns - start) / 1e9,
        "load_avg": os.getloadavg()[0],
    }
