"""The typed detail columns every event writer adds (tables.DETAIL_COLUMNS): the detail's value
where its JSON type fits the column, null otherwise, as Spark's from_json of ``detail`` reads it."""

from __future__ import annotations

import json

from rmptwin.core.events import Event, Kind
from rmptwin.node.eventlog import EventWriter, merge_logs
from rmptwin.records.tables import EventLog, detail_arrays, detail_values, encoded_details


def test_detail_values_keep_only_values_of_the_column_type():
    assert detail_values({"stripe": 2, "repair": True, "type": "NACK", "count": 3}) == (2, True, "NACK", 3)
    assert detail_values({}) == detail_values(None) == (None, None, None, None)
    # a bool is no stripe, a number no repair flag; a non-string type keeps its JSON text
    assert detail_values({"stripe": True, "repair": 1, "type": 7, "count": "3"}) == (None, None, "7", None)


def test_every_writer_adds_the_typed_columns_beside_detail(tmp_path):
    events = [Event(kind=Kind.RECV, src="h0", src_seq=1, detail={"repair": True, "stripe": 1}),
              Event(kind=Kind.CTRL_SENT, detail={"type": "NACK"}), Event(kind=Kind.CUST_GAP, detail={"count": 4}),
              Event(kind=Kind.SEND, src="h0", src_seq=2)]
    log, writer = EventLog(), EventWriter(tmp_path / "n.jsonl")
    for i, ev in enumerate(events):
        log.add(i, "n", "primary", ev)
        writer.add(i, "n", "primary", ev)
    writer.close()
    merged, bad = merge_logs([tmp_path / "n.jsonl"])
    want = [(1, True, None, None), (None, None, "NACK", None), (None, None, None, 4), (None, None, None, None)]
    for table in (log.table(), merged):
        rows = table.to_pylist()
        assert [(r["d_stripe"], r["d_repair"], r["d_type"], r["d_count"]) for r in rows] == want
        assert [json.loads(r["detail"]) for r in rows] == [ev.detail or {} for ev in events]
    assert bad == 0


def test_encoded_details_equal_per_event_encoding_also_for_shared_details():
    shared = {"stripe": 1, "repair": False, "type": "CUST_RECV"}
    details = [shared, None, {"count": 2}, shared, {}, shared]
    texts, typed = encoded_details(details)
    assert texts == [json.dumps(d, separators=(",", ":")) if d else "{}" for d in details]
    assert [a.to_pylist() for a in typed] == [a.to_pylist() for a in detail_arrays(details)]
