"""R_S: a secondary receiver (seed 4.1). It hears the same source messages and acks as the
R_P, places and releases them the same way, never acknowledges, asks only its assigned R_P
for what it misses (other primaries only once that one stops answering), and passes the
secondary token of its ring."""

from __future__ import annotations

from . import wire
from .common import CoreBase, Timing
from .receiver import StreamReceiver
from .report import Reporter
from .secondary_ring import SecondaryRing
from ..core import Unicast, rmp_group

try:
    from .remulticast import Remulticaster
except ImportError:  # pragma: no cover
    Remulticaster = None


class SecondaryReceiver(StreamReceiver):
    # it serves only when a reformation names it recovery site (it held the most)
    serves_retransmissions = True

    def __init__(self, core: CoreBase, stripe: int, timing: Timing, reporter: Reporter, remulticaster,
                 primary: str, primaries: list[str]) -> None:
        super().__init__(core, stripe, timing, reporter, remulticaster)
        self.primary = primary
        self.server = primary
        self.alternates = [p for p in primaries if p != primary]

    def on_other(self, frame: wire.Frame, src: str, now: int) -> None:
        # An R_S is no ring member, but it answers invitations with what it holds, so the
        # new ring never reassigns a number it already placed; then it stops taking the
        # old ring's acks above that point.
        if isinstance(frame, wire.Invite) and frame.epoch > self.epoch:
            if self.join_fence is None or self.join_fence[0] < frame.epoch:
                self.join_fence = (frame.epoch, self.t_r - 1)
            have = min(self.t_r - 1, self.join_fence[1])
            self.core.send(wire.Join(self.stripe, frame.epoch, self.me, have, self.next_gseq, False,
                                     self.have_epoch()), Unicast(frame.reformer))

    def request_target(self, chan: str, rotation: int) -> str | None:
        # its own R_P first; the other primaries only while that one does not answer
        candidates = [self.primary] + self.alternates
        return candidates[rotation % len(candidates)]

    def on_new_highest(self, a: wire.Ack, now: int) -> None:
        self.server = self.primary   # never the token site: R_S add no load to the primary ring

    def on_new_ring(self, nr: wire.NewRing, src: str, now: int) -> None:
        super().on_new_ring(nr, src, now)
        self.server = self.primary


class SecondaryCore(CoreBase):
    def __init__(self, name: str, stripes: list[int], timing: Timing, reformers: list[str], *, primary: str,
                 primaries: dict[int, list[str]], ring: str, ring_members: dict[int, list[str]],
                 regions: list[str] = (), heartbeat_ns: int | None = None, recovering: bool = False) -> None:
        super().__init__(name)
        self.reporter = Reporter(self, reformers, timing)
        self.receivers: dict[int, SecondaryReceiver] = {}
        self.remulticasters = {}
        self.sec_rings: dict[tuple[str, int], SecondaryRing] = {}
        for stripe in stripes:
            rm = None
            if regions and Remulticaster is not None:
                kw = {} if heartbeat_ns is None else {"heartbeat_ns": heartbeat_ns}
                rm = self.remulticasters[stripe] = Remulticaster(list(regions), stripe, **kw)
            rec = SecondaryReceiver(self, stripe, timing, self.reporter, rm, primary, primaries.get(stripe, []))
            if recovering:
                rec.mark_recovering()
            self.receivers[stripe] = rec
            members = ring_members.get(stripe, [])
            if name in members:
                self.sec_rings[(ring, stripe)] = SecondaryRing(self, rec, ring, members, timing, self.reporter)

    def groups(self) -> frozenset[str]:
        return frozenset(rmp_group(s) for s in self.receivers)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if not wire.is_rmp(data):
            for rm in self.remulticasters.values():
                self._out += rm.serve_rerequest(data, src)
            return
        try:
            frame = wire.decode(data)
        except wire.WireError:
            self.malformed += 1
            return
        if isinstance(frame, wire.ReportAck):
            self.reporter.on_ack(frame, now)
            return
        if isinstance(frame, wire.SecToken):
            ring = self.sec_rings.get((frame.ring, frame.stripe))
            if ring is not None:
                ring.on_token(frame, src, now)
            return
        rec = self.receivers.get(frame.stripe)
        if rec is not None:
            rec.receive(frame, src, now)
            for (_, stripe), ring in self.sec_rings.items():
                if stripe == frame.stripe:
                    ring.on_progress(now)

    def datagrams_to_send(self, now: int) -> list:
        for rm in self.remulticasters.values():
            self._out += rm.datagrams(now)
        return super().datagrams_to_send(now)

    def get_timer(self) -> int | None:
        deadlines = [d for d in [self.timers.next(), *(rm.get_timer() for rm in self.remulticasters.values())]
                     if d is not None]
        return min(deadlines) if deadlines else None

    def handle_timer(self, now: int) -> None:
        super().handle_timer(now)
        for rm in self.remulticasters.values():
            rm.handle_timer(now)

    def on_timer(self, key, now: int) -> None:
        if key[0] == "report":
            self.reporter.on_timer(key[1], now)
        elif key[0] == "sec":
            ring = self.sec_rings.get(key[1])
            if ring is not None:
                ring.on_timer(key[2], now)
        else:
            self.receivers[key[0]].on_timer(key, now)
