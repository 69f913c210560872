"""Venue benchmarks: the matching engine in pure Python beside a plain sorted-list book,
the etcd CAS round trip, and venue throughput/latency with 2 EVs on the real etcd sequencer
(loopback, in-process threads), and the same on the emulated network (H6's runtime, flat
namespaces; full run only, as root)."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rmptwin.experiment_run import EmulationOptions, run_experiment
from rmptwin.runtime.etcd_client import EtcdCas
from rmptwin.runtime.etcd_cluster import EtcdCluster
from rmptwin.runtime.venue_realtime import run_realtime
from rmptwin.spec import load_experiment
from rmptwin.venue.orderbook import BookError, OrderBook, SortedListBook


def _ops(n: int, seed: int = 1) -> list[tuple]:
    """A realistic-ish flow: limit orders around a mid price, 15 % cancels of resting ones."""
    r = random.Random(seed)
    out, live = [], []
    for i in range(n):
        if r.random() < 0.15 and live:
            out.append(("c", live.pop(r.randrange(len(live)))))
        else:
            out.append(("n", i, r.randrange(2), r.randint(1, 100), 10_000 + r.randint(-20, 20)))
            live.append(i)
    return out


def _time_book(cls, ops) -> float:
    book = cls("IBM")
    submit, cancel = book.submit, book.cancel
    t = time.perf_counter()
    for op in ops:
        if op[0] == "n":
            submit(op[1], op[2], op[3], op[4])
        else:
            try:
                cancel(op[1])
            except BookError:
                pass
    return len(ops) / (time.perf_counter() - t)


def _matching(quick: bool) -> list[dict]:
    n, m = (30_000, 5_000) if quick else (200_000, 20_000)
    ops = _ops(n)
    fast = statistics.median(_time_book(OrderBook, ops) for _ in range(3))
    fast_m = statistics.median(_time_book(OrderBook, ops[:m]) for _ in range(3))
    plain_m = statistics.median(_time_book(SortedListBook, ops[:m]) for _ in range(3))
    return [
        {"metric": "matching engine (dict+heap book)", "value": fast, "unit": "orders/s", "goal": ">= 300k/s",
         "ok": fast >= 300_000, "note": f"{n:,} orders (85 % limit around mid, 15 % cancels), median of 3"},
        {"metric": "plain sorted-list book", "value": plain_m, "unit": "orders/s",
         "note": f"first {m:,} orders of the same flow, median of 3"},
        {"metric": "fast / plain (same orders)", "value": fast_m / plain_m, "unit": "x",
         "note": f"{fast_m:,.0f} vs {plain_m:,.0f} orders/s on {m:,} orders"},
    ]


def _etcd(quick: bool) -> list[dict]:
    if shutil.which("etcd") is None:
        return [{"metric": "etcd sequencer", "value": "skipped", "ok": None, "note": "etcd not installed"}]

    rows = []
    load = os.getloadavg()[0]
    with EtcdCluster(3) as cluster:
        cas = EtcdCas(cluster.endpoints, prefix="bench/rtt")
        cas.init()
        n, rtts = 0, []
        for i in range(100 if quick else 300):
            t = time.perf_counter()
            _, n, _ = cas.propose(n, [(0, i)])
            rtts.append((time.perf_counter() - t) * 1e3)
        cas.close()
        rows.append({"metric": "etcd CAS round trip (1 position)", "value": statistics.median(rtts), "unit": "ms",
                     "note": f"3 members on loopback, data on tmpfs, JSON gateway; p99 "
                             f"{sorted(rtts)[int(len(rtts) * 0.99) - 1]:.2f} ms; load avg {load:.1f}"})
        rates = (1000, 5000) if quick else (1000, 5000, 9000)
        r = run_realtime(cluster.endpoints, rate=1000, duration_s=2.0, durable=False, state_dir="/dev/shm")
        rows.append({"metric": "venue, 2 EVs + etcd, 1,000/s, HR not awaited", "value": r["p50_ms"], "unit": "ms p50",
                     "note": f"p99 {r['p99_ms']:.2f} ms; completions sent after execution (no HR fsync wait); "
                             f"GW log on tmpfs; {r['throughput']:,.0f} req/s completed"})
        for rate in rates:
            r = run_realtime(cluster.endpoints, rate=rate, duration_s=2.0 if quick else 5.0, durable=True)
            top = rate == rates[-1]
            rows.append({
                "metric": f"venue, 2 EVs + etcd, offered {rate:,}/s", "value": r["throughput"], "unit": "req/s",
                "goal": ">= 9,000 req/s, p50 < 1.25 ms" if top else None,
                "ok": (r["throughput"] >= 9000 and r["p50_ms"] < 1.25) if top else None,
                "note": f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms; {r['completed']:,}/{r['accepted']:,} "
                        f"completed; {r['etcd_round_trips']:,} etcd txns; EVs equal at stop: {r['agree']}; durable "
                        f"GW file + SQLite WAL HR (real fsync); load avg {os.getloadavg()[0]:.1f}"})
    return rows


def _emulated(quick: bool) -> list[dict]:
    """The same cores as processes in network namespaces (H6's runtime, flat bridge), etcd sequencer."""

    if quick or os.geteuid() != 0 or shutil.which("etcd") is None:
        return []

    repo = Path(__file__).resolve().parents[3]
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-bench-venue-"))
    rows = []
    try:
        for rate in (500, 2000):
            exp = tmp / f"venue-{rate}.yaml"
            exp.write_text(f"name: bench-venue-{rate}\ntopology: {repo / 'topologies' / 'venue1.yaml'}\n"
                           f"duration_s: 6.0\nvenue: {{rate: {rate}, sequencer: etcd, ev_service_us: 0, "
                           f"start_s: 0.5, duration_s: 3.0}}\n")
            s = run_experiment(load_experiment(exp), "emulation", out=tmp / f"run-{rate}",
                               options=EmulationOptions(nodes="flat", capture=[])).summary
            lat = s["latency_ms"]
            rows.append({"metric": f"emulated venue (flat namespaces, etcd), offered {rate:,}/s",
                         "value": s["requests_completed"] / 3.0, "unit": "req/s",
                         "note": f"p50 {lat['p50'] or float('nan'):.2f} ms, p99 {lat['p99'] or float('nan'):.2f} ms; "
                                 f"{s['requests_completed']:,}/{s['requests_accepted']:,} completed; "
                                 f"EVs consistent: {s['ev_consistent']}; load avg {os.getloadavg()[0]:.1f}"})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def run(quick: bool) -> list[dict]:
    return _matching(quick) + _etcd(quick) + _emulated(quick)
