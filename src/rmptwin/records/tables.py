"""Arrow schemas of the run directory's tables (events, link drops, link counts), and
the buffer that turns core events into event rows. Driver side: cores never import this."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from json.encoder import (  # type: ignore[attr-defined]  # the C encoder (or None): not in typeshed
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Any

import pyarrow as pa

from rmptwin.core.events import Event

# The detail keys the analysis reads, written beside ``detail`` as typed columns so that it
# reads no JSON (10 M events: parsing ``detail`` was most of the analysis' extraction):
# column -> (detail key, Python type of the value). Null when the detail has no such key of
# that type, as Spark's from_json of ``detail`` gives (analysis.extract parses older files).
DETAIL_COLUMNS = {"d_stripe": ("stripe", int), "d_repair": ("repair", bool), "d_type": ("type", str),
                  "d_count": ("count", int)}
_DETAIL_TYPES = {"d_stripe": pa.int64(), "d_repair": pa.bool_(), "d_type": pa.string(), "d_count": pa.int64()}

# Columns: t_ns node role kind src src_seq gseq bytes detail d_stripe d_repair d_type d_count
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
        *_DETAIL_TYPES.items(),     # detail.stripe, .repair, .type, .count (DETAIL_COLUMNS)
    ]
)
# The columns of event files written before the typed detail columns.
LEGACY_EVENT_COLUMNS = EVENT_SCHEMA.names[:9]


def _typed(value: Any, kind: type) -> Any:
    """``value`` if it is of ``kind`` as JSON types go (a bool is no int), else None; a type
    that is not a string keeps its JSON text, as Spark's from_json reads a string field."""
    if value is None:
        return None
    if kind is str:
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, kind) else None


# the typed detail columns of one event: stripe, repair, type, count
DetailValues = tuple[int | None, bool | None, str | None, int | None]
_NO_VALUES: DetailValues = (None, None, None, None)
if tuple(key for key, _ in DETAIL_COLUMNS.values()) != ("stripe", "repair", "type", "count"):
    raise AssertionError("detail_values unrolls DETAIL_COLUMNS: change both together")


def detail_values(detail: dict[str, Any] | None) -> DetailValues:
    """The typed detail columns of one event, in DETAIL_COLUMNS order."""
    if not detail:
        return _NO_VALUES
    # DETAIL_COLUMNS unrolled, once per event: a value of exactly the column's type is kept
    # as it is; anything else (None, a bool where an int belongs, a subclass) goes to _typed.
    get = detail.get
    stripe, repair, kind, count = get("stripe"), get("repair"), get("type"), get("count")
    return (stripe if stripe.__class__ is int else _typed(stripe, int),
            repair if repair.__class__ is bool else _typed(repair, bool),
            kind if kind.__class__ is str else _typed(kind, str),
            count if count.__class__ is int else _typed(count, int))


def _compact_json() -> Callable[[dict[str, Any]], str]:
    """``json.dumps(d, separators=(",", ":"))`` for a detail dict, through the C encoder
    directly when there is one (a third of ``JSONEncoder.encode``'s time: no per-call set-up).
    Details hold no cycles, so no circular check."""
    encoder = json.JSONEncoder(separators=(",", ":"))
    if c_make_encoder is None:
        return encoder.encode
    chunks = c_make_encoder(None, encoder.default, encode_basestring_ascii, None, ":", ",", False, False, True)
    join = "".join
    return lambda d: join(chunks(d, 0))


def detail_arrays(details: Iterable[dict[str, Any] | None]) -> list[pa.Array]:
    """The typed detail columns (DETAIL_COLUMNS order) of events with these details (dicts or None)."""
    return typed_arrays([detail_values(d) for d in details])


def typed_arrays(values: list[DetailValues]) -> list[pa.Array]:
    """The typed detail columns from each event's ``detail_values``."""
    return [pa.array([v[i] for v in values], _DETAIL_TYPES[name]) for i, name in enumerate(DETAIL_COLUMNS)]


def encoded_details(details: Iterable[dict[str, Any] | None]) -> tuple[list[str], list[pa.Array]]:
    """The ``detail`` column (compact JSON, "{}" if none) and the typed detail columns of events
    with these details. A detail object shared by many events (customers that hear the same
    message share one event, ``rmp.customer``) is encoded once: the caller keeps every detail
    alive meanwhile, so its id is its identity."""
    encode = _compact_json()
    none = ("{}", _NO_VALUES)
    done: dict[int, tuple[str, DetailValues]] = {}
    texts: list[str] = []
    values: list[DetailValues] = []
    for d in details:
        if not d:
            text, typed = none
        else:
            got = done.get(id(d))
            if got is None:
                got = done[id(d)] = (encode(d), detail_values(d))
            text, typed = got
        texts.append(text)
        values.append(typed)
    return texts, typed_arrays(values)

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
        ("copy", pa.int32()),       # times the frame's identity had crossed this direction before
                                    # (0: its first copy; linkmodel.last_copy), -1 when not counted
    ]
)

# Link traffic totals per link and direction (for drop *rates*).
LINK_COUNT_SCHEMA = pa.schema(
    [("link", pa.string()), ("from_node", pa.string()), ("to_node", pa.string()),
     ("frame", pa.string()), ("packets", pa.int64()), ("dropped", pa.int64())]
)


def row(t_ns: int, node: str, role: str, ev: Event) -> dict[str, Any]:
    return {
        "t_ns": int(t_ns), "node": node, "role": role, "kind": ev.kind, "src": ev.src,
        "src_seq": int(ev.src_seq), "gseq": int(ev.gseq), "bytes": int(ev.bytes),
        "detail": json.dumps(ev.detail, separators=(",", ":")) if ev.detail else "{}",
        **dict(zip(DETAIL_COLUMNS, detail_values(ev.detail))),
    }


class EventLog:
    """Buffered rows for one run or node; ``table()`` gives a Parquet-ready Arrow table."""

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {f.name: [] for f in EVENT_SCHEMA}

    def add(self, t_ns: int, node: str, role: str, ev: Event) -> None:
        for k, v in row(t_ns, node, role, ev).items():
            self._cols[k].append(v)

    def __len__(self) -> int:
        return len(self._cols["t_ns"])

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self._cols, schema=EVENT_SCHEMA)
