"""Gateway (GW): validate, store durably, number [gw id, gw seq], multicast to the venues.

An order is acknowledged to its client and sent to the EVs only after the batch that
holds it is on the injected durable log (group fsync, latency ``fsync_ns`` modelled by a
timer). Malformed orders are rejected with a reason, counted and never numbered. The
first COMPLETE from any EV finishes a request (latency as the seed measures it: GW send
to GW completion). After a restart the GW replays every request not yet complete; the
EVs drop the duplicates by [gw id, gw seq] and complete them again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, Group, JoinsNoGroup, Unicast
from rmptwin.venue import wire
from rmptwin.venue.orderbook import BUY, FOK, SELL
from rmptwin.venue.stores import GatewayLog
from rmptwin.venue.wire import Order, Request


def validate(order: Order, symbols: frozenset[str], tick: int) -> str | None:
    """The reason an order is rejected, or None."""
    if order.action not in (wire.NEW, wire.CANCEL, wire.REPLACE):
        return f"unknown action {order.action}"
    if order.symbol not in symbols:
        return f"unknown symbol {order.symbol!r}"
    if order.side not in (BUY, SELL):
        return f"unknown side {order.side}"
    if order.kind not in range(FOK + 1):
        return f"unknown order type {order.kind}"
    if order.action == wire.CANCEL:
        return None
    if order.qty <= 0:
        return f"size {order.qty} is not positive"
    priced = order.action == wire.REPLACE or order.kind != 1   # every type but MARKET has a limit
    if priced and (order.price <= 0 or order.price % tick):
        return f"price {order.price} is not a positive multiple of the tick {tick}"
    return None


REPLAY_NS = 1_000_000_000   # a gateway resends a request not completed within this long


@dataclass(frozen=True)
class GatewayConfig:
    gw_id: int                    # this gateway's number: the first half of [gw id, gw seq]
    venues: tuple[str, ...]       # the EVs, which complete its requests
    symbols: tuple[str, ...]      # the symbols it accepts orders for
    tick: int = 100               # price tick in ticker units
    fsync_ns: int = 100_000       # modelled group-fsync latency (0: the store's own fsync is the cost)
    replay_ns: int = REPLAY_NS       # resend a request not completed within this long


class GatewayCore(JoinsNoGroup):
    def __init__(self, config: GatewayConfig, log: GatewayLog, *, recovering: bool = False) -> None:
        self.config = config
        self.gw_id = config.gw_id
        self.venues = list(config.venues)
        self.symbols = frozenset(config.symbols)
        self.tick = config.tick
        self.log = log
        self.fsync_ns = config.fsync_ns
        self.replay_ns = config.replay_ns
        self.next_seq = log.last_seq() + 1
        self._pending: list[tuple[str, int, Request]] = []      # received, awaiting fsync
        self._fsync: tuple[int, list[tuple[str, int, Request]]] | None = None   # (done at, batch in flight)
        self._inflight: dict[int, tuple[str, int, int]] = {}     # gw_seq -> (client, client seq, sent ns)
        self._resent: dict[int, int] = {}                        # gw_seq -> last (re)send, while in flight
        self._check_at: int | None = None
        self._out: list[tuple[bytes, Dest]] = []
        self._events: deque[Event] = deque()
        self._replay_at: int | None = None
        self.accepted = self.rejected = self.completed = self.malformed = 0
        if recovering:
            self._replay_at = 0   # replay unfinished requests at the first opportunity

    # ------------------------------------------------------------------ input
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        try:
            ftype, f = wire.decode(data)
        except wire.VenueWireError as e:
            self.malformed += 1
            self._events.append(Event(Kind.ORDER_REJECT, src=src, detail={"reason": f"malformed: {e}"}))
            return
        if ftype == wire.T_ORDER:
            client_seq, t_ns, order = f
            self._order(src, client_seq, t_ns, order, now)
        elif ftype == wire.T_COMPLETE:
            gw_seq, n, trades = f
            self._complete(src, gw_seq, n, trades, now)
        elif ftype == wire.T_RESEND_REQ:
            first, last = f
            for seq in range(max(first, 0), min(last, self.next_seq - 1) + 1):
                body = self.log.get(seq)
                if body is not None:
                    self._out.append((wire.frame(wire.T_REQUEST, body), Unicast(src)))

    def _order(self, client: str, client_seq: int, t_ns: int, order: Order, now: int) -> None:
        reason = validate(order, self.symbols, self.tick)
        if reason is not None:
            self.rejected += 1
            self._events.append(Event(Kind.ORDER_REJECT, src=client, src_seq=client_seq,
                                      detail={"reason": reason, "symbol": order.symbol}))
            self._out.append((wire.order_ack_frame(client_seq, wire.REJECTED, -1, reason), Unicast(client)))
            return
        req = Request(self.gw_id, self.next_seq, now, order)
        self.next_seq += 1
        self._pending.append((client, client_seq, req))
        self._events.append(Event(Kind.ORDER_IN, src=client, src_seq=client_seq, bytes=wire.REQUEST_SIZE,
                                  detail={"gw_seq": req.gw_seq, "symbol": order.symbol}))
        self._start_fsync(now)

    def _start_fsync(self, now: int) -> None:
        if self._fsync is None and self._pending:
            batch, self._pending = self._pending, []
            self.log.append([(r.gw_seq, r.encode_body()) for _, _, r in batch])
            self._fsync = (now + self.fsync_ns, batch)

    def _complete(self, ev: str, gw_seq: int, n: int, trades: int, now: int) -> None:
        info = self._inflight.pop(gw_seq, None)
        self._resent.pop(gw_seq, None)
        if info is None:
            return   # a second venue's completion, or one for a request finished before a restart
        client, client_seq, sent = info
        self.completed += 1
        self.log.mark_done(gw_seq)
        self._events.append(Event(Kind.ORDER_DONE, src=ev, src_seq=gw_seq, gseq=n,
                                  detail={"latency_ns": now - sent, "trades": trades, "client": client}))
        if client:
            self._out.append((wire.complete_frame(wire.T_DONE, client_seq, n, trades), Unicast(client)))

    # ------------------------------------------------------------------ timers
    def get_timer(self) -> int | None:
        fsync_due = self._fsync[0] if self._fsync and self.log.synced() else None   # a background fsync wakes us
        ts = [t for t in (fsync_due, self._replay_at, self._check_at) if t is not None]
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        due = self.get_timer()
        if due is not None and now < due:
            now = due   # fired a little early by a real event loop
        if self._fsync is not None and now >= self._fsync[0] and self.log.synced():
            _, batch = self._fsync
            self._fsync = None
            for client, client_seq, req in batch:
                self._out.append((wire.order_ack_frame(client_seq, wire.ACCEPTED, req.gw_seq), Unicast(client)))
                self._out.append((wire.request_frame(req), Group(wire.REQUEST_GROUP)))
                self._inflight[req.gw_seq] = (client, client_seq, now)
                self._resent[req.gw_seq] = now
                self.accepted += 1
            self._start_fsync(now)
            if self._check_at is None and self._inflight:
                self._check_at = now + self.replay_ns
        if self._replay_at is not None and now >= self._replay_at:
            self._replay(now)
        if self._check_at is not None and now >= self._check_at:
            self._resend_stale(now)

    def _resend_stale(self, now: int) -> None:
        """A request no venue completed within ``replay_ns`` was lost on the way: send it again."""
        self._check_at = now + self.replay_ns if self._inflight else None
        stale = [s for s, t in self._resent.items() if now - t >= self.replay_ns][:256]
        for seq in stale:
            body = self.log.get(seq)
            if body is not None:
                self._resent[seq] = now
                self._out.append((wire.frame(wire.T_REQUEST, body), Group(wire.REQUEST_GROUP)))

    def _replay(self, now: int) -> None:
        """Resend every durable request that no venue has completed (after a restart)."""
        self._replay_at = None
        self._check_at = now + self.replay_ns
        for seq, body in self.log.unfinished():
            if seq not in self._inflight:
                self._inflight[seq] = ("", -1, now)
                self._resent[seq] = now
            self._out.append((wire.frame(wire.T_REQUEST, body), Group(wire.REQUEST_GROUP)))

    # ------------------------------------------------------------------ output
    def datagrams_to_send(self, now: int) -> list[tuple[bytes, Dest]]:
        out, self._out = self._out, []
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None
