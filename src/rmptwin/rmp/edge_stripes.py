"""Edge stripes (RMP seed 4.4): an R_T splits its wide core stripe into narrow edge stripes.

"An R_T organizes the data on the stripe that it receives into narrower stripes of more
closely related stocks and transmits each stripe on a different remulticast address. The
amount of data on one of the final stripes is limited by the minimum reception rate of the R."

The rule (``plan_edges``), the same at every R_T, so every R_T of a region numbers alike:
related stocks are adjacent symbol numbers (a sector is a run of consecutive numbers); the
symbols of core stripe k, in number order, are cut into edge stripes of as many symbols as
the configured line rate carries at their expected message rate (at least one; a symbol
that alone exceeds the line is an error). Edge stripes are numbered after the core stripes
(core 0 .. S-1, edge S, S+1, ...), so an edge stripe is a stripe everywhere past the R_T:
its own MoldUDP64 session (``striping.session_name``), its own regional group
(``groups.region_group``), its own re-requests, heartbeats and retransmit-server history.
Its Mold sequence numbers are its own, 1, 2, 3, ... in release order of its messages.

``EdgeRemulticaster`` has the ``remulticast.Remulticaster`` interface and is used in its place
for a core stripe: it reads each released message's symbol and hands it to the edge stripe's
own Remulticaster under the next edge sequence number, and reports EDGE_RELEASE events.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest
from rmptwin.core.striping import session_stripe, symbols_on
from rmptwin.core.trade_report import TickerDecodeError, TradeReport, symbol_name
from rmptwin.rmp.moldudp64 import MoldDecodeError, decode_request, is_request
from rmptwin.rmp.remulticast import Remulticaster

# UDP/IP/Ethernet (42) + MoldUDP64 header (20) per packet; a narrow stripe's messages are
# too sparse to share packets, so each is counted with a whole header, plus 2 bytes of
# message length, and 25 % headroom for bursts.
PACKET_OVERHEAD = 62
HEADROOM = 1.25


def message_bits(message_bytes: int) -> float:
    """Bits one message costs on a customer's line on an edge stripe (upper bound)."""
    return (message_bytes + 2 + PACKET_OVERHEAD) * 8 * HEADROOM


@dataclass(frozen=True)
class EdgePlan:
    """Core stripe -> its edge stripes (id, symbol numbers), and each edge stripe's rate."""

    core_stripes: int
    edges: Mapping[int, tuple[tuple[int, tuple[int, ...]], ...]]
    msgs_per_symbol: float
    message_bytes: int

    def ids(self, core: int | None = None) -> list[int]:
        cores = [core] if core is not None else sorted(self.edges)
        return [e for k in cores for e, _ in self.edges.get(k, ())]

    def core_of(self, stripe: int) -> int:
        """The core stripe of an edge stripe (a core stripe is its own)."""
        for k, edges in self.edges.items():
            if any(e == stripe for e, _ in edges):
                return k
        return stripe

    def symbols(self, edge: int) -> tuple[int, ...]:
        for edges in self.edges.values():
            for e, syms in edges:
                if e == edge:
                    return syms
        return ()

    def symbol_edges(self, core: int) -> dict[str, int]:
        """Symbol name -> edge stripe id, for one core stripe."""
        return {symbol_name(i): e for e, syms in self.edges.get(core, ()) for i in syms}

    def rate_bps(self, edge: int) -> float:
        """The expected line rate of one edge stripe (bits/s, with the headroom)."""
        return len(self.symbols(edge)) * self.msgs_per_symbol * message_bits(self.message_bytes)


def plan_edges(*, symbols: int, stripes: int, msgs_per_symbol: float, message_bytes: int,
               line_kbps: float) -> EdgePlan:
    """Cut each core stripe's symbols (in number order: related ones adjacent) into edge
    stripes each within ``line_kbps``. ValueError when one symbol alone exceeds the line."""
    per_symbol = msgs_per_symbol * message_bits(message_bytes)
    fit = math.floor(line_kbps * 1000 / per_symbol) if per_symbol > 0 else symbols
    if fit < 1:
        raise ValueError(f"one symbol needs {per_symbol / 1000:.1f} kbps on an edge stripe "
                         f"({msgs_per_symbol:.3g} msg/s of {message_bytes} bytes), more than the line's {line_kbps:g}")
    edges: dict[int, tuple[tuple[int, tuple[int, ...]], ...]] = {}
    next_id = stripes
    for k in range(stripes):
        mine = symbols_on({k}, symbols, stripes)
        cut = []
        for i in range(0, len(mine), fit):
            cut.append((next_id, tuple(mine[i:i + fit])))
            next_id += 1
        edges[k] = tuple(cut)
    return EdgePlan(stripes, edges, msgs_per_symbol, message_bytes)


def stripes_within(plan: EdgePlan, line_kbps: float | None, wanted: list[int] | None, regions: int = 1) -> list[int]:
    """The edge stripes a customer joins: those it subscribes to (``wanted``; None: all, in id
    order) that its line carries, in order, at least the first (a 56 Kbps modem picks one)."""
    ids = plan.ids()
    order = [e for e in wanted if e in ids] if wanted is not None else ids
    if line_kbps is None:
        return order
    out: list[int] = []
    used = 0.0
    for e in order:
        need = plan.rate_bps(e) * regions
        if used + need > line_kbps * 1000 and out:
            break
        out.append(e)
        used += need
    return out


class EdgeRemulticaster:
    """A core stripe's released messages re-cut into its edge stripes (one Remulticaster each)."""

    def __init__(self, regions: list[str], core: int, plan: EdgePlan, *, emit: Callable[[Event], None] | None = None,
                 **remulticaster_kw: Any) -> None:
        self.stripe = core
        self.emit = emit
        self.symbol_edge = plan.symbol_edges(core)
        self.subs: dict[int, Remulticaster] = {
            e: Remulticaster(list(regions), e, **remulticaster_kw) for e in plan.ids(core)}
        self.next_seq = {e: 1 for e in self.subs}
        self.unplaced = 0   # a released message with no readable symbol of this stripe

    def release(self, gseq: int, payload: bytes) -> None:
        try:
            symbol = TradeReport.decode(payload).symbol
        except TickerDecodeError:
            self.unplaced += 1
            return
        edge = self.symbol_edge.get(symbol)
        if edge is None:
            self.unplaced += 1
            return
        seq = self.next_seq[edge]
        self.next_seq[edge] = seq + 1
        self.subs[edge].release(seq, payload)
        if self.emit is not None:
            self.emit(Event(Kind.EDGE_RELEASE, symbol, -1, seq, len(payload),
                            {"stripe": edge, "core_stripe": self.stripe, "gseq": gseq}))

    def datagrams(self, now: int | None = None) -> list[tuple[bytes, Dest]]:
        out: list[tuple[bytes, Dest]] = []
        for rm in self.subs.values():
            out += rm.datagrams(now)
        return out

    def get_timer(self) -> int | None:
        due = [d for d in (rm.get_timer() for rm in self.subs.values()) if d is not None]
        return min(due) if due else None

    def handle_timer(self, now: int) -> None:
        for rm in self.subs.values():
            rm.handle_timer(now)

    def serve_rerequest(self, data: bytes, src: str) -> list[tuple[bytes, Dest]]:
        try:
            edge = session_stripe(decode_request(data).session) if is_request(data) else None
        except MoldDecodeError:
            edge = None
        rm = self.subs.get(edge) if edge is not None else None
        return rm.serve_rerequest(data, src) if rm is not None else []
