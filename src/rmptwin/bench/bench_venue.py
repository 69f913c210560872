"""Venue benchmarks: the latency floors (etcd transaction, fsync), and venue throughput and
latency with 2 EVs as separate processes on the real etcd sequencer, with the durable gateway
and history recorder (``bench.venue_procs``), etcd data on disk and on /dev/shm; failover
sync; and the same on the emulated network (H6's runtime, flat namespaces; full run only, as
root). The matching engine is bench_matching."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rmptwin.bench.venue_procs import run_processes
from rmptwin.model import load_experiment
from rmptwin.node.etcd_client import ETCD_APIS, etcd_cas
from rmptwin.node.etcd_cluster import EtcdCluster
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

STANDBY_PROMOTIONS = 21   # the standby's sync is judged at p99 over at least 20 promotions
STATE_DIR = "/var/tmp"   # the gateway log and the HR database: on disk, their fsyncs are real
STORAGE = {"disk": "/var/tmp", "tmpfs": "/dev/shm"}   # where the etcd members keep their data
_API_NAME = {"grpc": "gRPC API (grpcio)", "json": "JSON gateway over kept-alive HTTP/1.1"}
_PROCS = ("4 processes (client+gateway, HR, 2 EVs) on unix datagram sockets, each EV its own etcd client in a "
          "worker thread (one batch transaction in flight while the next batch forms; a lone request goes at once; "
          "gRPC client to the raft leader), the gateway's fdatasync in its loop, the HR an "
          "append-only log with one fdatasync per group commit (both logs preallocated: no journal commit per "
          "fdatasync); 3 etcd members on loopback")
# the stages of ``bench.venue_trace``, in the order a request passes them
_STAGES = (("gw_send_to_ev_arrival", "GW send->EV"), ("ev_arrival_to_executed", "EV ordering+execution"),
           ("executed_to_hr_committed", "->HR commit"), ("hr_committed_to_gw_done", "HR commit->GW done"))


def _stage_note(trace: dict[str, Any]) -> str:
    """'stages p50/p99 ms: GW send->EV 0.3/6.2, ...; p50 ms: EV1 waits 2.3 for its txn, txn 4.4; ...'."""
    parts = [f"{label} {trace[k]['p50_ms']}/{trace[k]['p99_ms']}" for k, label in _STAGES if k in trace]
    txn = [f"EV{i} waits {trace[f'ev{i}_arrival_to_txn_start']['p50_ms']} for its txn, "
           f"txn {trace[f'ev{i}_txn']['p50_ms']}" for i in (1, 2) if f"ev{i}_txn" in trace]
    return f"stages p50/p99 ms: {', '.join(parts)}; p50 ms: {'; '.join(txn)}"


def _device(path: str) -> str:
    """'/var/tmp on /dev/vda (ext4)': where a directory's fsyncs go."""
    best = ("", "?", "?")
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, mnt, fs = line.split()[:3]
        if path.startswith(mnt) and len(mnt) >= len(best[0]):
            best = (mnt, dev, fs)
    return f"{path} on {best[1]} ({best[2]})"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


def _fsync_ms(directory: str, n: int, preallocated: bool = False) -> list[float]:
    """fsync of 64-byte appends to a growing file, or fdatasync of 64-byte writes into space
    written (zeros) beforehand, as the gateway and HR logs do."""
    fd, path = tempfile.mkstemp(dir=directory)
    out = []
    try:
        if preallocated:
            os.write(fd, bytes(64 * n))
            os.fsync(fd)
        for i in range(n):
            os.pwrite(fd, b"x" * 64, 64 * i)
            t = time.perf_counter()
            (os.fdatasync if preallocated else os.fsync)(fd)
            out.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def _cpu_s(pids: list[int]) -> float:
    """CPU time (user + system) of the processes ``pids`` so far (as ``EtcdCluster.cpu_seconds``)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _txn_ab(endpoints: list[str], etcd_pids: list[int], n: int, block: int) -> dict[str, dict[str, list[float]]]:
    """One-position CAS transactions in a row, the two APIs alternating in blocks of ``block``
    (A/B, so both see the same load), ``n`` each: per API the round trips (ms) and per block
    this process's CPU per transaction (ms; all its threads: grpcio's too) and the etcd members'
    (``etcd_pids``) CPU in each block, per transaction (s; a clock tick is 10 ms). Runs in a process
    of its own (spawned), so no gRPC channel lives in the benchmark's process, which forks the EVs."""
    cases = {api: etcd_cas(endpoints, api=api, prefix=f"bench/rtt/{api}/{time.monotonic_ns()}") for api in ETCD_APIS}
    pos = dict.fromkeys(ETCD_APIS, 0)
    out: dict[str, dict[str, list[float]]] = {api: {"rtt": [], "cpu": [], "etcd_cpu": []} for api in ETCD_APIS}
    for cas in cases.values():
        cas.init()
        cas.propose(0, [(0, 0)])   # connected and warm before the first timed block
        pos[cas.api] = 1
    for b in range(2 * n // block):
        api = ETCD_APIS[b % 2]
        cas = cases[api]
        cpu, etcd_cpu = time.process_time(), _cpu_s(etcd_pids)
        for i in range(block):
            t = time.perf_counter()
            _, pos[api], _ = cas.propose(pos[api], [(0, i)])
            out[api]["rtt"].append((time.perf_counter() - t) * 1e3)
        out[api]["cpu"].append((time.process_time() - cpu) * 1e3 / block)
        out[api]["etcd_cpu"].append(_cpu_s(etcd_pids) - etcd_cpu)
    for cas in cases.values():
        cas.close()
    return out


def _floor_rows(cluster: EtcdCluster, where: str, quick: bool) -> list[dict[str, Any]]:
    n, block = (200, 20) if quick else (600, 20)
    load = os.getloadavg()[0]
    pids = [p.pid for p in cluster.procs if p is not None]
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        got = pool.submit(_txn_ab, cluster.endpoints, pids, n, block).result()
    rows = []
    for api in ETCD_APIS:
        rtts, cpus = got[api]["rtt"], got[api]["cpu"]
        etcd_cpu_ms = 1e3 * sum(got[api]["etcd_cpu"]) / len(rtts)
        blocks = [statistics.median(rtts[i:i + block]) for i in range(0, len(rtts), block)]
        rows.append({
            "metric": f"etcd CAS transaction, 1 position, etcd on {where}, {_API_NAME[api]}", "value": statistics.median(rtts),
            "unit": "ms", "better": "lower",
            "conditions": f"median of {len(rtts)} in a row, in blocks of {block} alternating with the other API's "
                          f"(A/B, one client process of each, same cluster); 3 members on loopback, data "
                          f"{_device(STORAGE[where])}; load avg {load:.1f} before, {os.getloadavg()[0]:.1f} after",
            "note": f"block medians {min(blocks):.2f}-{max(blocks):.2f} ms, p99 {_pct(rtts, 0.99):.2f} ms; client CPU "
                    f"{statistics.median(cpus):.3f} ms per transaction (block median; "
                    f"{min(cpus):.3f}-{max(cpus):.3f}); etcd CPU {etcd_cpu_ms:.2f} ms per transaction (3 members, "
                    f"in this API's blocks)"})
    return rows


def _venue_rows(cluster: EtcdCluster, where: str, quick: bool, floor_ms: float | None = None) -> list[dict[str, Any]]:
    """The venue at 1,000 and 9,000 req/s; ``floor_ms``: one etcd transaction (the default API)
    + one fdatasync, measured in this run, the floor the p50 is held to (the goal: <= 2 x)."""
    secs = 2.0 if quick else 3.0
    rows = []
    for rate in (1000, 9000):
        cpu = cluster.cpu_seconds()
        r = run_processes(cluster.endpoints, rate=rate, duration_s=secs, state_dir=STATE_DIR)
        etcd_cpu = cluster.cpu_seconds() - cpu
        st = r["stages"]
        txns = sum(e["txns"] for e in st["etcd"].values())
        cond = (f"{_PROCS}, etcd data {_device(STORAGE[where])}; GW and HR logs fdatasync'd on "
                f"{_device(STATE_DIR)}; offered {rate:,}/s for {secs:g} s, throughput = completions within that "
                f"window / {secs:g} s; latency = gateway send to completion (after the HR commit); "
                f"load avg {r['load_avg']:.1f}")
        note = (f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms; {r['completed_in_window']:,} completed in the "
                f"window + {r['completed_after']:,} after, of {r['accepted']:,} accepted; EVs at one position with one "
                f"state: {r['agree']}, same state at all {r['checkpoints_compared']} common checkpoints: "
                f"{r['checkpoints_agree']}; "
                f"{st['gw_requests_per_fsync']:.1f} requests per GW fdatasync ({st['gw_fsync_ms_mean']:.2f} ms), "
                f"{st['hr_rows_per_commit']:.1f} per HR commit ({st['hr_commit_ms_mean']:.2f} ms); {txns:,} etcd txns "
                f"(mean {statistics.mean(e['txn_ms_mean'] for e in st['etcd'].values()):.2f} ms, "
                f"{statistics.mean(e['batch_mean'] for e in st['etcd'].values()):.1f} positions each); "
                f"CPU per request: Python {sum(st['cpu_us_per_request'].values()):.0f} us, "
                f"etcd {1e6 * etcd_cpu / max(1, r['accepted']):.0f} us; runnable but waiting for a CPU: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in st["runqueue_wait_s"].items()) + f" of {r['wall_s']:.2f} s; "
                + _stage_note(r["trace"]))
        tag = f"venue, 2 EV processes, etcd on {where}, offered {rate:,}/s"
        if rate == 1000:
            floor = ({} if floor_ms is None else
                     {"floor": floor_ms, "floor_what": "1 etcd txn + 1 fdatasync", "goal": "<= 2 x floor",
                      "goal_max": 2 * floor_ms})
            rows.append({"metric": f"{tag}: p50", "value": r["p50_ms"], "unit": "ms", "better": "lower",
                         **floor, "conditions": cond, "note": note})
        else:
            rows.append({"metric": f"{tag}: completed/s", "value": r["throughput"], "unit": "req/s",
                         "better": "higher", "goal": ">= 9,000 req/s", "goal_min": 9000, "conditions": cond,
                         "note": note})
            rows.append({"metric": f"{tag}: p99", "value": r["p99_ms"], "unit": "ms", "better": "lower",
                         "goal": "< 10 ms", "goal_max": 10.0, "conditions": cond, "note": note})
            rows.append({"metric": f"{tag}: CPU per request (4 Python processes)",
                         "value": sum(st["cpu_us_per_request"].values()), "unit": "us", "better": "lower",
                         "conditions": cond, "note": "; ".join(f"{k} {v:.0f} us" for k, v in
                                                                st["cpu_us_per_request"].items())
                         + f"; etcd {1e6 * etcd_cpu / max(1, r['accepted']):.0f} us per accepted request"})
    return rows


def _median_phases(sync: list[dict[str, Any]], key: str) -> str:
    names = [k for k in sync[0][key] if all(k in x[key] for x in sync)]
    return ", ".join(f"{k} {statistics.median(x[key][k] for x in sync):.1f}" for k in names)


def _failover_rows(cluster: EtcdCluster, where: str, quick: bool) -> list[dict[str, Any]]:
    kills = (1.0, 2.0, 3.0)
    r = run_processes(cluster.endpoints, rate=1000, duration_s=4.0, state_dir=STATE_DIR, kill_at=kills, down_s=0.2)
    sync = r["sync"]
    cond = (f"{_PROCS}, etcd data {_device(STORAGE[where])}; offered 1,000/s for 4 s; EV 2 killed (SIGKILL) at 1, "
            f"2 and 3 s, a new EV process forked 0.2 s later asks at once the HR (its latest checkpoint, one every "
            f"128 positions, and the hardened requests after it, in one answer) and the sequencer (where it stands: "
            f"the target) while listening to the live stream; in sync = it has executed every position the "
            f"sequencer had ordered when it first asked (SYNC_DONE); load avg {r['load_avg']:.1f}")
    note = (f"phases, median ms: {_median_phases(sync, 'phases_ms')}; the new EV's CPU in them, median ms: "
            f"{_median_phases(sync, 'phases_cpu_ms')} (the rest is waiting: for a CPU, the HR, etcd); positions "
            f"replayed: {', '.join(str(x['executed']) for x in sync)}; from its first datagram (the core's own "
            f"figure): median {statistics.median(x['sync_core_ms'] for x in sync):.1f} ms; EVs agree at the end: "
            f"{r['agree']}; {r['completed']:,}/{r['accepted']:,} completed")
    return [{"metric": f"failover sync, new EV started (its code runs) to in sync, etcd on {where}",
             "samples": [x["sync_from_main_ms"] for x in sync], "unit": "ms", "better": "lower",
             "goal": "< 5 ms (seed)", "goal_max": 5.0, "conditions": cond, "note": note},
            {"metric": f"failover: new EV process spawn (fork to its code running), etcd on {where}",
             "samples": [x["spawn_ms"] for x in sync], "unit": "ms", "better": "lower", "conditions": cond,
             "note": "fork of the benchmark's process (multiprocessing, no interpreter start or imports); "
                     "not part of the seed's sync, reported apart"},
            {"metric": f"failover sync, new EV process start to in sync, etcd on {where}",
             "samples": [x["sync_from_start_ms"] for x in sync], "unit": "ms", "better": "lower",
             "conditions": cond, "note": "the two rows above together (fork to in sync); " + note}]


def _standby_rows(cluster: EtcdCluster, where: str, quick: bool) -> list[dict[str, Any]]:
    # The seed's bound is on every promotion, so the row is the p99 over at least 20 of them (full
    # mode): a kill every 0.4 s, each once the previous victim has recovered as the new standby.
    promotions, every_s = (5, 0.5) if quick else (STANDBY_PROMOTIONS, 0.4)
    kills = tuple(round(0.5 + every_s * i, 2) for i in range(promotions))
    duration_s = kills[-1] + 1.0
    r = run_processes(cluster.endpoints, rate=1000, duration_s=duration_s, state_dir=STATE_DIR, kill_at=kills,
                      standby=True)
    sync = r["sync"]
    cond = (f"{_PROCS.replace('4 processes', '5 processes').replace('2 EVs', '2 EVs + a standby EV')}, etcd data {_device(STORAGE[where])}; offered 1,000/s "
            f"for {duration_s:g} s; the EV that took over last killed (SIGKILL) every {every_s:g} s from 0.5 s, "
            f"{promotions} times (first EV 2); the supervisor, "
            f"once it has reaped it, raises PROMOTE for the standby (shared memory, a datagram wakes its loop); "
            f"the standby had followed the HR's HARDENED multicasts and executed them; promoted, it reads the "
            f"sequencer from its first unknown position (one etcd transaction with no write, a serializable read "
            f"at the leader) and executes what it "
            f"learns; in sync = it has executed every position ordered when that answer came (SYNC_DONE, timed "
            f"from its promote call); the killed EV is forked again as the next standby (checkpoint + hardened "
            f"requests, then silent); load avg {r['load_avg']:.1f}")
    note = (
            "from the supervisor seeing the exit to in sync, ms: "
            + ", ".join(f"{x['seen_to_sync_ms']:.2f}" for x in sync)
            + "; of which until the standby's promote call: " + ", ".join(f"{x['seen_to_promote_ms']:.2f}" for x in sync)
            + "; the promotion's etcd read (serializable, at the leader), from the promote call to its start at "
            "the worker thread / to its answer, ms: "
            + ", ".join(f"{x['txns_ms'][0][0]:.2f}/{x['txns_ms'][0][1]:.2f}" if x["txns_ms"] else "n/a" for x in sync)
            + "; the replacement standby's own recovery (fork excluded), ms: "
            + ", ".join(f"{x['new_standby_sync_ms']:.1f}" for x in sync)
            + f"; EVs agree at the end (all 3): {r['agree']}; {r['completed']:,}/{r['accepted']:,} completed")
    ms = [x["sync_ms"] for x in sync]
    return [{"metric": f"failover sync with a standby EV, promoted to in sync, p99 over {len(ms)} promotions, "
                       f"etcd on {where}",
             "value": _pct(ms, 0.99), "unit": "ms", "better": "lower", "goal": "< 5 ms at p99 (seed)",
             "goal_max": 5.0, "conditions": cond,
             "note": f"median {statistics.median(ms):.2f} ms, max {max(ms):.2f} ms; " + note}]


def _etcd(quick: bool) -> list[dict[str, Any]]:
    if shutil.which("etcd") is None:
        return [{"metric": "etcd sequencer", "value": "skipped", "ok": None, "note": "etcd not installed"}]
    fs = _fsync_ms(STATE_DIR, 100 if quick else 300)
    pre = _fsync_ms(STATE_DIR, 100 if quick else 300, preallocated=True)
    rows = [{"metric": "fsync of a 64-byte append (GW log / HR WAL device)", "value": statistics.median(fs),
             "unit": "ms", "better": "lower",
             "conditions": f"median of {len(fs)} in a row, {_device(STATE_DIR)}, the file growing; "
                           f"load avg {os.getloadavg()[0]:.1f}",
             "note": f"p99 {_pct(fs, 0.99):.2f} ms"},
            {"metric": "fdatasync of a 64-byte write into preallocated space (GW and HR logs)",
             "value": statistics.median(pre), "unit": "ms", "better": "lower",
             "conditions": f"median of {len(pre)} in a row, {_device(STATE_DIR)}, space written (zeros) and "
                           f"fsync'd beforehand; load avg {os.getloadavg()[0]:.1f}",
             "note": f"p99 {_pct(pre, 0.99):.2f} ms"}]
    for where, root in STORAGE.items():
        with EtcdCluster(3, data_root=root) as cluster:
            floors = _floor_rows(cluster, where, quick)
            txn_ms = next(r["value"] for r in floors if _API_NAME[ETCD_APIS[0]] in r["metric"])
            rows += floors
            rows += _venue_rows(cluster, where, quick, floor_ms=txn_ms + statistics.median(pre))
            if where == "disk":
                rows += _failover_rows(cluster, where, quick)
                rows += _standby_rows(cluster, where, quick)
    return rows


def _emulated(quick: bool) -> list[dict[str, Any]]:
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


def run(quick: bool) -> list[dict[str, Any]]:
    return _etcd(quick) + _emulated(quick)
