"""Venue benchmarks: the etcd CAS round trip, and venue throughput/latency with 2 EVs on the
real etcd sequencer (loopback, in-process threads), and the same on the emulated network
(H6's runtime, flat namespaces; full run only, as root). The matching engine is
bench_matching."""

from __future__ import annotations

import os
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

RUNS = 3     # the harness repeats the whole module: 3 clusters, 3 runs at each rate
_LOOPBACK = ("2 EVs as threads in one process, 3 etcd members on loopback with data on /dev/shm "
             "(RAM disk)")


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
                     "better": "lower", "conditions": f"median of {len(rtts)} CAS in a row; 3 etcd members on "
                                                      "loopback, data on /dev/shm (RAM disk)",
                     "note": f"3 members on loopback, data on tmpfs, JSON gateway; p99 "
                             f"{sorted(rtts)[int(len(rtts) * 0.99) - 1]:.2f} ms; load avg {load:.1f}"})
        rates = (1000, 5000) if quick else (1000, 5000, 9000)
        r = run_realtime(cluster.endpoints, rate=1000, duration_s=2.0, durable=False, state_dir="/dev/shm")
        rows.append({"metric": "venue, 2 EVs + etcd, 1,000/s, HR not awaited", "value": r["p50_ms"], "unit": "ms p50",
                     "better": "lower", "conditions": f"{_LOOPBACK}; GW log on tmpfs; 2 s of offered load",
                     "note": f"p99 {r['p99_ms']:.2f} ms; completions sent after execution (no HR fsync wait); "
                             f"GW log on tmpfs; {r['throughput']:,.0f} req/s completed"})
        secs = 2.0 if quick else 5.0
        for rate in rates:
            r = run_realtime(cluster.endpoints, rate=rate, duration_s=secs, durable=True)
            top = rate == rates[-1]
            rows.append({
                "metric": f"venue, 2 EVs + etcd, offered {rate:,}/s", "value": r["throughput"], "unit": "req/s",
                "better": "higher",
                "conditions": f"{_LOOPBACK}; durable GW file + SQLite WAL HR on disk; {secs:g} s of offered load, "
                              f"completions (including those after the load stops) / {secs:g} s",
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
                         "value": s["requests_completed"] / 3.0, "unit": "req/s", "better": "higher",
                         "conditions": "venue1 topology, flat namespaces, no captures, etcd sequencer, 3 s of "
                                       "offered load, completions / 3 s",
                         "note": f"p50 {lat['p50'] or float('nan'):.2f} ms, p99 {lat['p99'] or float('nan'):.2f} ms; "
                                 f"{s['requests_completed']:,}/{s['requests_accepted']:,} completed; "
                                 f"EVs consistent: {s['ev_consistent']}; load avg {os.getloadavg()[0]:.1f}"})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def run(quick: bool) -> list[dict]:
    return _etcd(quick) + _emulated(quick)
