"""What cores report: ``Event`` records and their ``Kind`` names (pure; no Arrow here).

Drivers stamp each event with wall or simulated time (``t_ns``) and the node name and
write it as a row of ``tables.EVENT_SCHEMA``, shared by the simulator, the emulation
runtime and the analysis. ``detail`` is a small dict for whatever a kind needs beyond
the fixed columns.
"""

from __future__ import annotations

from typing import Any, Final


class Kind:
    """Event kinds. The analysis relies on these names; add, never rename.

    Each is ``Final``: a constant, and mypyc compiles this class (a plain class attribute of
    a compiled class would be taken for an instance attribute)."""

    # sources
    SEND: Final = "send"                  # source originates (s, M_s)
    SRC_RETX: Final = "src_retx"          # source retransmits an unacknowledged message
    SRC_ACKED: Final = "src_acked"        # source saw its message acknowledged
    # receivers (R_P, R_S)
    RECV: Final = "recv"                  # first copy of (s, M_s) at a receiver; detail.repair: bool
    ACK_SENT: Final = "ack_sent"          # token site acknowledged; gseq = first t, detail: {token, k, ts_ns}
    TOKEN_ACCEPT: Final = "token_accept"  # receiver accepted the token; detail.token
    NULL_TOKEN: Final = "null_token"      # idle token pass (event-driven)
    CTRL_SENT: Final = "ctrl_sent"        # any control datagram sent; detail.type (ACK, NACK, RETX, ...)
    NACK_SENT: Final = "nack_sent"        # explicit retransmission request; detail: what
    RETX_SENT: Final = "retx_sent"        # a retransmission served
    DELIVER: Final = "deliver"            # message delivered at gseq: on placement (agreed) or once stable (safe)
    RELEASE: Final = "release"            # R_T remulticast of gseq (ack ts + Delta_A)
    EDGE_RELEASE: Final = "edge_release"  # R_T put a released message on an edge stripe (seed 4.4); src: symbol,
                                   # gseq: its edge Mold sequence; detail: {stripe (edge), core_stripe, gseq}
    STABLE: Final = "stable"              # all receivers hold up to gseq (t - m + 1)
    SECONDARY_TOKEN: Final = "secondary_token"
    # every member of a secondary ring holds up to gseq (seed 4.1); detail: {stripe, ring, token}
    SECONDARY_STABLE: Final = "secondary_stable"
    # reformation
    FAILURE_REPORT: Final = "failure_report"  # detail: reporter's suspicion
    REFORM_START: Final = "reform_start"
    REFORM_DONE: Final = "reform_done"        # detail: {ring: [...], start_t, token_site}
    # customers and retransmit servers
    CUST_RECV: Final = "cust_recv"        # customer got gseq; detail: {repair, mold_seq, session, stripe}
    CUST_GAP: Final = "cust_gap"          # gap detected; detail: {first, count}
    CUST_SKIP: Final = "cust_skip"        # best-effort customer skipped a gap
    # security (seed 6): a frame dropped unread; src = the claimed sender, detail: {reason
    # (rmp.seal.Reason: mac_failed, conflicting_payload, replay, unauthorized), claimed, via}
    ALARM: Final = "alarm"
    ATTACK: Final = "attack"             # an attacker sent a frame; detail: {mode, group, stripe, target}
    EDGE_DROPS: Final = "edge_drops"     # emulated runs: unauthorized multicast an edge switch dropped; detail: {packets}
    # faults
    CRASH: Final = "crash"
    RECOVER: Final = "recover"
    PAUSE: Final = "pause"                # the node stops (SIGSTOP; a frozen core): no timers, no input
    RESUME: Final = "resume"              # ... and goes on with its state; detail: {paused_ns}
    CLOCK: Final = "clock"                # the node's clock jumped or its drift changed; detail: {jump_ms, drift_ppm}
    # emulated runtime (never in a simulated run)
    TIMER_LATENESS: Final = "timer_lateness"  # once per node at its end; detail: lateness histogram, priority
    # venues (exchange)
    ORDER_IN: Final = "order_in"
    ORDER_REJECT: Final = "order_reject"
    SEQ_POSITION: Final = "seq_position"  # EV decided request at position n
    TRADE: Final = "trade"
    HR_STORE: Final = "hr_store"
    SYNC_DONE: Final = "sync_done"
    ORDER_DONE: Final = "order_done"      # GW got the first completion; detail: {latency_ns, position, trades}
    VENUE_STATE: Final = "venue_state"    # EV state after position gseq; detail: {state_hash, trade_hash, trades}
    SEQ_TOO_FAR: Final = "seq_too_far"    # a proposer fell out of the sequencer window (soft failure)
    # the CAS history an EV sees (rmptwin.checkers.linearizable): every proposal sent (a retry
    # too) and the answer it took; gseq = n, detail: {keys: [[gw, seq], ...]} / {status, next, keys}
    CAS_INVOKE: Final = "cas_invoke"
    CAS_OK: Final = "cas_ok"
    # distributed trading floor (seed 7.3; rmptwin.apps.trading_floor)
    FLOOR_REPORT: Final = "floor_report"  # token site sourced a trade report; detail: {status, n, digest, token}
    FLOOR_TRADE: Final = "floor_trade"    # a node's floor changed at gseq; detail: {status: derived|tentative|confirmed|withdrawn, n, digest}
    FLOOR_STATE: Final = "floor_state"    # a node's floor after that change; detail: {hash, trades, tentative, confirmed, ...}
    # unified orders (seed 7.2; rmptwin.apps.unified_orders): src/src_seq = trader and its offer number
    OFFER_SENT: Final = "offer_sent"      # trader sent an offer; detail: {decision, pair, side, symbol, price, qty, to, exchange}
    OFFER_ADMIT: Final = "offer_admit"    # S_P (or a direct-entry exchange) admitted it; detail: {account, stripe}
    OFFER_REJECT: Final = "offer_reject"  # ... refused it; detail: {reason: credentials|funds|holdings|rate|duplicate|...}
    OFFER_EXEC: Final = "offer_exec"      # exchange executed it at position gseq; detail: {decision, pair, ring_gseq, trades}


class Event:
    """What a core reports. Drivers add t_ns, node and role when they log it.

    Read-only once made (``Final``: mypy holds every typed caller to it, and the compiled
    build refuses the assignment at run time). A plain class with its ``__init__`` written
    out rather than a frozen dataclass: cores create about one event per simulated packet,
    and a frozen dataclass sets each field through ``object.__setattr__`` (0.6 us an event
    interpreted; mypyc leaves a dataclass's generated ``__init__`` interpreted too).
    """

    __slots__ = ("kind", "src", "src_seq", "gseq", "bytes", "detail")

    def __init__(self, kind: str, src: str = "", src_seq: int = -1, gseq: int = -1, bytes: int = 0,
                 detail: dict[str, Any] | None = None) -> None:
        self.kind: Final = kind
        self.src: Final = src
        self.src_seq: Final = src_seq
        self.gseq: Final = gseq
        self.bytes: Final = bytes
        self.detail: Final[dict[str, Any]] = {} if detail is None else detail

    def _fields(self) -> tuple[str, str, int, int, int, dict[str, Any]]:
        return self.kind, self.src, self.src_seq, self.gseq, self.bytes, self.detail

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return (f"Event(kind={self.kind!r}, src={self.src!r}, src_seq={self.src_seq!r}, gseq={self.gseq!r}, "
                f"bytes={self.bytes!r}, detail={self.detail!r})")
