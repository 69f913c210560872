"""Arrow schemas of the run directory's tables (events, link drops, link counts), and
the buffer that turns core events into event rows. Driver side: cores never import this."""

from __future__ import annotations

import json

import pyarrow as pa

from .events import Event

# Columns: t_ns node role kind src src_seq gseq bytes detail
EVENT_SCHEMA = pa.schema(
    [
        ("t_ns", pa.int64()),       # simulated or wall-clock time, ns since run start
        ("node", pa.string()),      # host name that logged the event
        ("role", pa.string()),      # its role (spec.ROLES)
        ("kind", pa.string()),      # one of the kinds below
        ("src", pa.string()),       # source host of the message, "" if none
        ("src_seq", pa.int64()),    # M_s, -1 if none
        ("gseq", pa.int64()),       # global sequence number t, -1 if none
        ("bytes", pa.int64()),      # datagram or payload size, 0 if none
        ("detail", pa.string()),    # JSON object, "{}" if none
    ]
)

# Link ground truth: one row per packet dropped on a link (simulator; user-space impairment).
DROP_SCHEMA = pa.schema(
    [
        ("t_ns", pa.int64()),
        ("link", pa.string()),      # "a-b" as in the topology
        ("from_node", pa.string()), # the end the packet left from
        ("to_node", pa.string()),
        ("frame", pa.string()),     # frame type name, e.g. DATA, ACK
        ("src", pa.string()),
        ("src_seq", pa.int64()),
        ("gseq", pa.int64()),
        ("group", pa.string()),     # multicast group, "" for unicast
        ("reason", pa.string()),    # loss | queue | down
    ]
)

# Link traffic totals per link and direction (for drop *rates*).
LINK_COUNT_SCHEMA = pa.schema(
    [("link", pa.string()), ("from_node", pa.string()), ("to_node", pa.string()),
     ("frame", pa.string()), ("packets", pa.int64()), ("dropped", pa.int64())]
)


def row(t_ns: int, node: str, role: str, ev: Event) -> dict:
    return {
        "t_ns": int(t_ns), "node": node, "role": role, "kind": ev.kind, "src": ev.src,
        "src_seq": int(ev.src_seq), "gseq": int(ev.gseq), "bytes": int(ev.bytes),
        "detail": json.dumps(ev.detail, separators=(",", ":")) if ev.detail else "{}",
    }


class EventLog:
    """Buffered rows for one run or node; ``table()`` gives a Parquet-ready Arrow table."""

    def __init__(self) -> None:
        self._cols: dict[str, list] = {f.name: [] for f in EVENT_SCHEMA}

    def add(self, t_ns: int, node: str, role: str, ev: Event) -> None:
        for k, v in row(t_ns, node, role, ev).items():
            self._cols[k].append(v)

    def __len__(self) -> int:
        return len(self._cols["t_ns"])

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self._cols, schema=EVENT_SCHEMA)
