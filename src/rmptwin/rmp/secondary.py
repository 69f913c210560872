"""R_S: a secondary receiver (seed 4.1). It hears the same source messages and acks as the
R_P, places and releases them the same way, never acknowledges, asks only its assigned R_P
for what it misses (other primaries only once that one stops answering), and passes the
secondary token of its ring."""

from __future__ import annotations

from collections.abc import Sequence

from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.receiver import Channel, StreamReceiver
from rmptwin.rmp.receiver_host import ReceiverHost
from rmptwin.rmp.remulticast import RegionalFeed
from rmptwin.rmp.seal import KeySet
from rmptwin.rmp.secondary_ring import SecondaryRing


class SecondaryReceiver(StreamReceiver):
    # it serves only when a reformation names it recovery site (it held the most)
    serves_retransmissions = True

    def __init__(self, core: CoreBase, stripe: int, timing: Timing, reporter: Reporter, remulticaster: RegionalFeed | None,
                 primary: str, primaries: list[str]) -> None:
        super().__init__(core, stripe, timing, reporter, remulticaster)
        self.primary = primary
        self.server = primary
        self.preference = [primary] + [p for p in primaries if p != primary]   # ours, then the others
        self.ranked = list(self.preference)   # whom to ask, in turn (a reformation may reorder it)
        self.ring_asks = 0
        self.ring_asked_at: int | None = None

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

    def on_newer_epoch(self, epoch: int, now: int) -> None:
        # Acks of a ring whose NEW_RING we never heard (every announcement lost): until we
        # have it, the join fence holds back everything that ring acknowledges. Ask for it,
        # once per tau_r, going round the reformation servers.
        servers = self.reporter.servers
        if not servers or (self.ring_asked_at is not None and now < self.ring_asked_at + self.tm.tau_r):
            return
        self.ring_asked_at = now
        self.ring_asks += 1
        self.core.send(wire.Join(self.stripe, epoch, self.me, self.t_r - 1, self.next_gseq, False,
                                 self.have_epoch()), Unicast(servers[self.ring_asks % len(servers)]))

    def request_target(self, chan: Channel, rotation: int) -> str | None:
        # its own R_P first; the other primaries only while that one does not answer
        return self.ranked[rotation % len(self.ranked)]

    def on_new_highest(self, a: wire.Ack, now: int) -> None:
        self.server = self.ranked[0]   # never the token site: R_S add no load to the primary ring

    def on_new_ring(self, nr: wire.NewRing, src: str, now: int) -> None:
        # Seed 4.3: a reformation reassigns the secondaries of a primary it left out. Ours out of
        # the ring, the ring's members come first (ours again once a ring takes it back): before,
        # every request fence() re-opened went to the dead primary k_r times before moving on.
        # Ranked before super(): its fence() sends the re-opened requests at once.
        if nr.epoch > self.epoch and nr.members:
            self.ranked = [p for p in self.preference if p in nr.members] + \
                [p for p in self.preference if p not in nr.members]
        super().on_new_ring(nr, src, now)
        self.server = self.ranked[0]


class SecondaryCore(ReceiverHost):
    def __init__(self, name: str, stripes: list[int], timing: Timing, reformers: list[str], *, primary: str,
                 primaries: dict[int, list[str]], ring: str, ring_members: dict[int, list[str]],
                 regions: Sequence[str] = (), heartbeat_ns: int | None = None, recovering: bool = False,
                 keys: KeySet | None = None, requester_region: dict[str, str] | None = None) -> None:
        super().__init__(name, timing, reformers, regions, heartbeat_ns, keys, requester_region)
        for stripe in stripes:
            rm = self.add_remulticaster(stripe)
            rec = SecondaryReceiver(self, stripe, timing, self.reporter, rm, primary, primaries.get(stripe, []))
            if recovering:
                rec.mark_recovering()
            self.receivers[stripe] = rec
            members = ring_members.get(stripe, [])
            if name in members:
                self.sec_rings[(ring, stripe)] = SecondaryRing(self, rec, ring, members, timing, self.reporter)
