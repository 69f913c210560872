"""The real durable stores: gateway log file (fsync) and history recorder on SQLite (WAL)."""

from __future__ import annotations

import sqlite3

from rmptwin.venue.stores import FileGatewayLog, SqliteHistoryStore


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


def test_sqlite_history_store_is_wal_and_keeps_everything_across_reopen(tmp_path):
    path = tmp_path / "hr.sqlite"
    st = SqliteHistoryStore(path)
    st.store([(0, b"r0", []), (1, b"r1", [(5, 6, 1_000_000, 100, 0), (5, 7, 1_000_100, 50, 0)])])
    st.store([(1, b"dup", []), (2, b"r2", [])])          # a duplicate position is ignored
    st.put_checkpoint(1, b"book@1")
    st.put_checkpoint(0, b"older")
    st.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = SqliteHistoryStore(path)
    assert again.top() == 2 and again.trade_count() == 2
    assert again.hardened(1, 5) == [(1, b"r1"), (2, b"r2")]
    assert again.latest_checkpoint() == (1, b"book@1")
    again.close()
