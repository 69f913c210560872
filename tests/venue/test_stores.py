"""The real durable stores (runtime side): gateway log and history recorder log files
(fdatasync), and the per-host stores a real node hands its venue factory; the simulator's
in-memory ones."""

from __future__ import annotations

import random
from pathlib import Path

from rmptwin.factories import build_core
from rmptwin.model import load_experiment
from rmptwin.node.durable_stores import DurableStores, FileGatewayLog, FileHistoryStore
from rmptwin.node.venue_adapters import node_adapters
from rmptwin.venue.stores import MemoryStores

REPO = Path(__file__).resolve().parents[2]


def test_gateway_log_survives_reopen_and_drops_a_torn_tail(tmp_path):
    path = tmp_path / "gw.log"
    log = FileGatewayLog(path)
    log.append([(0, b"zero"), (1, b"one")])
    log.append([(2, b"two")])
    log.mark_done(1)
    log.close()
    with open(path, "ab") as f:          # a crash in the middle of the next write
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x10ab")
    again = FileGatewayLog(path)
    assert again.unfinished() == [(0, b"zero"), (2, b"two")]
    assert again.last_seq() == 2 and again.get(1) == b"one"
    again.close()


def test_history_log_keeps_everything_across_reopen_and_drops_a_torn_tail(tmp_path):
    path = tmp_path / "hr.log"
    st = FileHistoryStore(path)
    st.store([(0, b"r0", []), (1, b"r1", [(5, 6, 1_000_000, 100, 0), (5, 7, 1_000_100, 50, 0)])])
    st.store([(1, b"dup", []), (2, b"r2", [])])          # a duplicate position is ignored
    st.put_checkpoint(1, b"book@1")
    st.put_checkpoint(0, b"older")
    st.store([(3, b"r3", [])])
    end = st._f.end
    st.close()
    with open(path, "r+b") as f:                          # a crash in the middle of the next group commit
        f.seek(end)
        f.write(bytes([0x52]) + (4).to_bytes(8, "big") + b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00r4")
    again = FileHistoryStore(path)
    assert again.top() == 3 and again.trade_count() == 2
    assert again.hardened(1, 5) == [(1, b"r1"), (2, b"r2"), (3, b"r3")]
    assert again.latest_checkpoint() == (1, b"book@1")
    again.store([(4, b"r4", [])])                         # goes where the torn record was
    again.close()
    assert FileHistoryStore(path).hardened(3, 9) == [(3, b"r3"), (4, b"r4")]


def test_logs_write_into_preallocated_space_so_a_sync_changes_no_file_size(tmp_path):
    log, hr = FileGatewayLog(tmp_path / "gw.log"), FileHistoryStore(tmp_path / "hr.log")
    sizes = [(tmp_path / n).stat().st_size for n in ("gw.log", "hr.log")]
    for i in range(100):
        log.append([(i, b"x" * 60)])
        hr.store([(i, b"y" * 60, [])])
    assert [(tmp_path / n).stat().st_size for n in ("gw.log", "hr.log")] == sizes and min(sizes) > 0
    log.close()
    hr.close()
    assert FileGatewayLog(tmp_path / "gw.log").last_seq() == 99 and FileHistoryStore(tmp_path / "hr.log").top() == 99


def test_a_recovering_host_finds_its_store_and_a_fresh_start_begins_empty(tmp_path):
    stores = DurableStores(tmp_path / "venue-state")
    stores.gateway_log("gw1", fresh=True).append([(0, b"zero")])
    stores.history_store("hr1", fresh=True).store([(0, b"r0", [(1, 2, 3, 4, 0)])])
    stores.close()
    again = DurableStores(tmp_path / "venue-state")          # a restarted process, the same directory
    log, hr = again.gateway_log("gw1", fresh=False), again.history_store("hr1", fresh=False)
    assert log.unfinished() == [(0, b"zero")] and hr.top() == 0 and hr.trade_count() == 1
    assert again.gateway_log("gw1", fresh=True).last_seq() == -1    # a first start forgets an old run
    assert again.history_store("hr1", fresh=True).top() == -1
    again.close()
    assert sorted(p.name for p in (tmp_path / "venue-state").iterdir()) == ["gw1.gwlog", "hr1.hrlog"]


def test_memory_stores_keep_each_host_across_recovery_and_start_fresh_on_a_first_start():
    stores = MemoryStores()
    log = stores.gateway_log("gw1", fresh=True)
    log.append([(0, b"zero")])
    assert stores.gateway_log("gw1", fresh=False) is log
    assert stores.gateway_log("gw2", fresh=False) is not log
    assert stores.gateway_log("gw1", fresh=True).last_seq() == -1
    hr = stores.history_store("hr1", fresh=True)
    assert stores.history_store("hr1", fresh=False) is hr and stores.history_store("hr1", fresh=True) is not hr


def test_a_real_gateway_node_gets_its_log_in_the_state_dir_and_no_etcd(tmp_path):
    loaded = load_experiment(REPO / "experiments" / "venue-failover.yaml")
    adapters = node_adapters(loaded.topology.host("gw1"), loaded, tmp_path / "venue-state")
    assert adapters.cluster is None and adapters.cas_client is None
    gw = build_core(loaded.topology.host("gw1"), loaded, random.Random(1), adapters=adapters)
    gw.log.append([(0, b"x")])
    adapters.close()
    assert (tmp_path / "venue-state" / "gw1.gwlog").stat().st_size > 0
