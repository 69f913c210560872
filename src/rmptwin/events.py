"""The one event schema shared by the simulator, the emulation runtime and the analysis.

Every core emits ``Event`` records; drivers stamp them with wall or simulated time
(``t_ns``) and the node name, and write them as Parquet rows with ``EVENT_SCHEMA``.
``detail`` is a small JSON object for whatever a kind needs beyond the fixed columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa

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


class Kind:
    """Event kinds. The analysis relies on these names; add, never rename."""

    # sources
    SEND = "send"                  # source originates (s, M_s)
    SRC_RETX = "src_retx"          # source retransmits an unacknowledged message
    SRC_ACKED = "src_acked"        # source saw its message acknowledged
    # receivers (R_P, R_S)
    RECV = "recv"                  # first copy of (s, M_s) at a receiver; detail.repair: bool
    ACK_SENT = "ack_sent"          # token site acknowledged; gseq = first t, detail: {token, k, ts_ns}
    TOKEN_ACCEPT = "token_accept"  # receiver accepted the token; detail.token
    NULL_TOKEN = "null_token"      # idle token pass (event-driven)
    CTRL_SENT = "ctrl_sent"        # any control datagram sent; detail.type (ACK, NACK, RETX, ...)
    NACK_SENT = "nack_sent"        # explicit retransmission request; detail: what
    RETX_SENT = "retx_sent"        # a retransmission served
    DELIVER = "deliver"            # message delivered at gseq: on placement (agreed) or once stable (safe)
    RELEASE = "release"            # R_T remulticast of gseq (ack ts + Delta_A)
    STABLE = "stable"              # all receivers hold up to gseq (t - m + 1)
    SECONDARY_TOKEN = "secondary_token"
    # reformation
    FAILURE_REPORT = "failure_report"  # detail: reporter's suspicion
    REFORM_START = "reform_start"
    REFORM_DONE = "reform_done"        # detail: {ring: [...], start_t, token_site}
    # customers and retransmit servers
    CUST_RECV = "cust_recv"        # customer got gseq; detail: {repair, mold_seq, session, stripe}
    CUST_GAP = "cust_gap"          # gap detected; detail: {first, count}
    CUST_SKIP = "cust_skip"        # best-effort customer skipped a gap
    # faults
    CRASH = "crash"
    RECOVER = "recover"
    # venues (exchange)
    ORDER_IN = "order_in"
    ORDER_REJECT = "order_reject"
    SEQ_POSITION = "seq_position"  # EV decided request at position n
    TRADE = "trade"
    HR_STORE = "hr_store"
    SYNC_DONE = "sync_done"
    ORDER_DONE = "order_done"      # GW got the first completion; detail: {latency_ns, position, trades}
    VENUE_STATE = "venue_state"    # EV state after position gseq; detail: {state_hash, trade_hash, trades}
    SEQ_TOO_FAR = "seq_too_far"    # a proposer fell out of the sequencer window (soft failure)


@dataclass(frozen=True, slots=True)
class Event:
    """What a core reports. Drivers add t_ns, node and role when they log it."""

    kind: str
    src: str = ""
    src_seq: int = -1
    gseq: int = -1
    bytes: int = 0
    detail: dict = field(default_factory=dict)


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
