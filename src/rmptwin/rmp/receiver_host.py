"""What an R_P host and an R_S host do alike: one stream receiver per stripe, the
secondary rings they belong to, failure reports, and regional remulticast."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rmptwin.core.groups import rmp_group
from rmptwin.core.sansio import Dest
from rmptwin.core.striping import session_stripe
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.moldudp64 import MoldDecodeError, decode_request, is_request
from rmptwin.rmp.receiver import StreamReceiver
from rmptwin.rmp.remulticast import RegionalFeed, Remulticaster
from rmptwin.rmp.seal import KeySet
from rmptwin.rmp.secondary_ring import SecondaryRing

if TYPE_CHECKING:
    from rmptwin.rmp.edge_stripes import EdgePlan


class ReceiverHost(CoreBase):
    """Dispatches frames and timers to the per-stripe receivers, secondary rings and reporter;
    subclasses build ``receivers`` and ``sec_rings`` in their constructors."""

    def __init__(self, name: str, timing: Timing, reformers: list[str], regions: Sequence[str],
                 heartbeat_ns: int | None, keys: KeySet | None = None,
                 requester_region: Mapping[str, str] | None = None) -> None:
        super().__init__(name, keys)
        # with keys: who may re-request from us and under which region's retransmit key to answer
        self._requester_region = dict(requester_region or {})
        self.reporter = Reporter(self, reformers, timing)
        self.receivers: dict[int, StreamReceiver] = {}
        self.remulticasters: dict[int, RegionalFeed] = {}
        self.sec_rings: dict[tuple[str, int], SecondaryRing] = {}
        self._regions = list(regions)
        self._heartbeat_ns = heartbeat_ns
        self._groups_cache: tuple[int, frozenset[str]] | None = None  # (receivers, their groups)
        self._edge_core: dict[int, int] = {}   # edge stripe -> its core stripe (use_edge_stripes)

    def add_remulticaster(self, stripe: int) -> Remulticaster | None:
        """The stripe's remulticaster into this host's regions, or None when it serves none."""
        if not self._regions:
            return None
        kw = {} if self._heartbeat_ns is None else {"heartbeat_ns": self._heartbeat_ns}
        rm = self.remulticasters[stripe] = Remulticaster(list(self._regions), stripe, sealer=self.sealer,
                                                         requester_region=self._requester_region, **kw)
        return rm

    def use_edge_stripes(self, plan: EdgePlan) -> None:
        """Remulticast each core stripe as its edge stripes (``edge_stripes.EdgePlan``, seed 4.4)
        instead of as one session: re-requests for an edge stripe go to its core stripe's."""
        from rmptwin.rmp.edge_stripes import EdgeRemulticaster

        kw = {} if self._heartbeat_ns is None else {"heartbeat_ns": self._heartbeat_ns}
        for stripe in list(self.remulticasters):
            rm = EdgeRemulticaster(list(self._regions), stripe, plan, emit=self.emit, sealer=self.sealer,
                                   requester_region=self._requester_region, **kw)
            self.remulticasters[stripe] = rm
            if stripe in self.receivers:
                self.receivers[stripe].remulticaster = rm
            for edge in plan.ids(stripe):
                self._edge_core[edge] = stripe

    def groups(self) -> frozenset[str]:
        # Asked after every datagram: built again only when a stripe's receiver was added
        # (receivers are only ever added), so a driver sees the same object otherwise.
        cached = self._groups_cache
        if cached is None or cached[0] != len(self.receivers):
            cached = self._groups_cache = (len(self.receivers), frozenset(rmp_group(s) for s in self.receivers))
        return cached[1]

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if not wire.is_rmp(data):
            self._serve_rerequest(data, src)
            return
        frame = self.decode_frame(data, src)
        if frame is None:
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
        if rec is None:
            self.ignored += 1
            return
        rec.receive(frame, src, now)
        for (_, stripe), ring in self.sec_rings.items():
            if stripe == frame.stripe:
                ring.on_progress(now)

    def _serve_rerequest(self, data: bytes, src: str) -> None:
        """A MoldUDP64 re-request goes to the remulticaster of its session's stripe; anything
        else that is not RMP is counted in ``malformed``."""
        try:
            stripe = session_stripe(decode_request(data).session) if is_request(data) else None
        except MoldDecodeError:
            stripe = None
        rm = self.remulticasters.get(self._edge_core.get(stripe, stripe)) if stripe is not None else None
        if rm is None:
            self.malformed += 1
            return
        self._out += rm.serve_rerequest(data, src)

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Dest]]:
        for rm in self.remulticasters.values():
            out = rm.datagrams(now)
            if out:
                self._out += out
        return super().datagrams_to_send(now)

    def get_timer(self) -> int | None:
        # asked after every datagram: a plain loop, no lists
        earliest = self.timers.next()
        for rm in self.remulticasters.values():
            d = rm.get_timer()
            if d is not None and (earliest is None or d < earliest):
                earliest = d
        return earliest

    def handle_timer(self, now: int) -> None:
        super().handle_timer(now)
        for rm in self.remulticasters.values():
            rm.handle_timer(now)

    def on_timer(self, key: TimerKey, now: int) -> None:
        if key[0] == "report":
            self.reporter.on_timer(key[1], now)
        elif key[0] == "sec":
            ring = self.sec_rings.get(key[1])
            if ring is not None:
                ring.on_timer(key[2], now)
        else:
            self.receivers[key[0]].on_timer(key, now)
