"""Two EVs as separate processes on the real etcd sequencer, with the durable gateway (fsync'd
file log) and history recorder (SQLite WAL), talking over unix datagram sockets
(``runtime.venue_procs``, what ``make bench`` measures).

At a modest rate, with one EV process killed (SIGKILL) in the middle of the load and a new
one started in its place: every offered request is accepted and completed, the two EVs end
at the same position with the same order books, and the restarted EV reports that it
caught up (SYNC_DONE) while the other went on.
"""

from __future__ import annotations

import shutil

import pytest

from rmptwin.bench.venue_procs import run_processes
from rmptwin.node.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(120),
              pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed")]


def test_two_ev_processes_agree_lose_nothing_and_a_killed_ev_resynchronises(tmp_path):
    with EtcdCluster(3) as cluster:
        r = run_processes(cluster.endpoints, rate=200, duration_s=2.0, state_dir=str(tmp_path),
                          kill_at=(0.8,), down_s=0.1, checkpoint_every=128)
    assert r["offered"] > 250                       # the client really offered the load
    assert r["accepted"] == r["offered"]            # every order passed the gateway's fsync
    assert r["completed"] == r["accepted"]          # and none was lost, through the failover too
    assert r["completed_in_window"] + r["completed_after"] == r["completed"]
    assert r["agree"], (r["next_pos"], r["state_hashes"])
    assert r["checkpoints_compared"] > 0            # and the same order books at every common checkpoint
    assert r["next_pos"][0] == r["accepted"]        # every request executed once, no gap
    assert len(r["sync"]) == 1
    assert 0 < r["sync"][0]["sync_core_ms"] <= r["sync"][0]["sync_from_start_ms"]
    assert r["sync"][0]["position"] > 0             # it caught up to a position the survivor had reached
    stages = r["stages"]
    assert stages["gw_fsyncs"] > 0 and stages["hr_commits"] > 0
    trace = r["trace"]                               # where the time went, stage by stage
    assert trace["requests"] > 0.9 * r["completed"]
    parts = ("gw_send_to_ev_arrival", "ev_arrival_to_executed", "executed_to_hr_committed", "hr_committed_to_gw_done")
    assert all(trace[k]["mean_ms"] >= 0 for k in parts[1:])
    assert abs(sum(trace[k]["mean_ms"] for k in parts) - trace["end_to_end"]["mean_ms"]) < 0.01
    assert trace["ev1_txn"]["p50_ms"] > 0
