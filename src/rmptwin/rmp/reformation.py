"""X_R: a reformation server (seed 4.3).

On a failure report (or a recovered host asking to join) it multicasts INVITEs for the
next epoch k_r times, tau_r apart; operable receivers answer with the last ack they hold
(positive acknowledgement: JOIN_ACK, else they retry). After the invitations it forms the
new ring from the primaries that answered (with safe delivery, only once a majority of the
stripe's primaries did), in topology order, picks the starting token
number by policy (ticker: t_r,max + 1; conservative: min over members + 1), appoints a
primary holding the most as token site, names a receiver holding t_r,max (secondaries
answer too, so nothing any operable R_T has placed is reassigned) as recovery site, and
multicasts NEW_RING.

Redundant X_R: they are ranked in topology order. A report reaching a lower-ranked one
(because the first did not answer the reporter) is handed up to the higher-ranked X_R
first; it reforms only if none of them answers. Epochs carry the rank in their low bits
(epoch = 8 n + rank), so two rings formed at once never share an epoch and receivers all
settle on the higher one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import rmp_group
from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.seal import KeySet

EPOCH_RANKS = 8


def start_token(haves: list[int], policy: str) -> int:
    """The starting token number of a reformed ring from the members' last held acks."""
    return (max(haves) if policy == "ticker" else min(haves)) + 1


@dataclass
class _Reform:
    epoch: int
    started: int
    invites_sent: int = 0
    replies: dict[str, wire.Join] = field(default_factory=dict)


@dataclass
class _StripeState:
    epoch: int
    members: list[str]
    last_ring: wire.NewRing | None = None
    reform: _Reform | None = None
    announce_left: int = 0
    lineage: list[tuple[int, int]] = field(default_factory=lambda: [(1, 1)])   # (epoch, first token)


LINEAGE_KEPT = 8


def valid_have(lineage: list[tuple[int, int]], have: int, have_epoch: int) -> int:
    """How much of a member's history is the lineage's own: its acks from ``have_epoch`` on
    are only trusted below the first ring that started after that epoch."""
    later = [first for epoch, first in lineage if epoch > have_epoch]
    return min([have] + [f - 1 for f in later])


class ReformationCore(CoreBase):
    def __init__(self, name: str, rings: dict[int, list[str]], primaries: dict[int, list[str]], timing: Timing,
                 servers: list[str] | None = None, *, keys: KeySet | None = None) -> None:
        super().__init__(name, keys)
        self.tm = timing
        self.primaries = primaries                  # stripe -> its primaries, topology order
        self.state = {k: _StripeState(1, list(ring)) for k, ring in rings.items()}
        self.reforms_done = 0
        servers = servers or [name]
        self.rank = servers.index(name) % EPOCH_RANKS
        # reports reaching us go to the higher-ranked X_R first; we act if none answers
        self.handoff = Reporter(self, servers[: servers.index(name)], timing,
                                on_give_up=lambda stripe, ring, now: self._start_if_idle(stripe, now, "higher X_R silent"))

    def next_epoch(self, epoch: int) -> int:
        return (epoch // EPOCH_RANKS + 1) * EPOCH_RANKS + self.rank

    def groups(self) -> frozenset[str]:
        return frozenset(rmp_group(k) for k in self.state)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        frame = self.decode_frame(data, src)
        if frame is None:
            return
        st = self.state.get(getattr(frame, "stripe", -1))
        if st is None:
            self.ignored += 1
            return
        if isinstance(frame, wire.Report):
            self.send(wire.ReportAck(frame.stripe, frame.epoch, frame.reporter), Unicast(src))
            self.emit(Event(Kind.FAILURE_REPORT, detail={
                "stripe": frame.stripe, "reporter": frame.reporter, "suspect": frame.suspect,
                "reason": frame.reason, "epoch": frame.epoch, "ring": frame.ring}))
            if frame.ring:
                return   # secondary rings route around a silent member themselves
            if frame.epoch >= st.epoch and st.reform is None:
                if self.handoff.servers:
                    self.handoff.report(frame.stripe, frame.epoch, frame.suspect, frame.reason, frame.token, now)
                else:
                    what = "asks to join" if frame.reason == wire.REASON_JOIN else "reported"
                    self._start(frame.stripe, now, why=f"{frame.suspect} {what} (via {frame.reporter})")
        elif isinstance(frame, wire.ReportAck):
            self.handoff.on_ack(frame, now)
        elif isinstance(frame, wire.Join):
            self._on_join(frame, src, now)
        elif isinstance(frame, wire.NewRing) and frame.epoch > st.epoch:
            # another X_R reformed this stripe: follow it, dropping our own attempt
            self._cancel(frame.stripe)
            st.epoch, st.members, st.last_ring, st.reform = frame.epoch, list(frame.members), frame, None
            st.announce_left = 0
            if frame.lineage:
                st.lineage = list(frame.lineage)
        else:
            self.ignored += 1   # source messages, acks, an older NEW_RING, ...

    def _on_join(self, j: wire.Join, src: str, now: int) -> None:
        st = self.state[j.stripe]
        if st.reform is not None and j.epoch == st.reform.epoch:
            st.reform.replies[j.member] = j
            self.send(wire.JoinAck(j.stripe, j.epoch, j.member), Unicast(src))
        elif st.reform is not None:
            if j.recovering:   # let a restarted host answer the invitation under way
                st.reform.replies[j.member] = j
        elif (j.member in st.members or j.member not in self.primaries.get(j.stripe, [])) and not j.recovering \
                and st.last_ring is not None and j.epoch <= st.epoch:
            self.send(st.last_ring, Unicast(src))            # a member or a secondary missed NEW_RING
        elif j.member in self.primaries.get(j.stripe, []) and j.member not in st.members or j.recovering:
            if self.handoff.servers:      # the higher-ranked X_R decides, unless it is gone
                self.handoff.report(j.stripe, st.epoch, j.member, wire.REASON_JOIN, j.have, now)
            else:
                self._start(j.stripe, now, why=f"{j.member} asks to join")

    def _start_if_idle(self, stripe: int, now: int, why: str) -> None:
        if self.state[stripe].reform is None:
            self._start(stripe, now, why)

    def _start(self, stripe: int, now: int, why: str) -> None:
        st = self.state[stripe]
        self._cancel(stripe)
        st.reform = _Reform(epoch=self.next_epoch(st.epoch), started=now)
        self.emit(Event(Kind.REFORM_START, detail={"stripe": stripe, "epoch": st.reform.epoch, "why": why}))
        self._invite(stripe, now)

    def _cancel(self, stripe: int) -> None:
        for what in ("invite", "form", "announce"):
            self.timers.cancel((stripe, what))

    def _invite(self, stripe: int, now: int) -> None:
        r = self.state[stripe].reform
        assert r is not None   # only while a reformation runs (_start, on_timer, _form)
        self.multicast(stripe, wire.Invite(stripe, r.epoch, self.name))
        r.invites_sent += 1
        if r.invites_sent < self.tm.k_r:
            self.timers.set((stripe, "invite"), now + self.tm.tau_r)
        else:
            # the last invitee needs a round trip to answer, and a retry if its answer is lost
            self.timers.set((stripe, "form"), now + self.tm.tau_r + 2 * self.tm.dn)

    def _form(self, stripe: int, now: int) -> None:
        st = self.state[stripe]
        r = st.reform
        assert r is not None   # only while a reformation runs (on_timer)
        order = self.primaries.get(stripe, [])
        members = [m for m in order if m in r.replies]
        # Safe delivery: any two rings share a member, so a new ring learns every stable token.
        if not members or (self.tm.safe and 2 * len(members) <= len(order)):
            r.invites_sent = 0      # nobody (or no majority) answered: keep inviting
            self._invite(stripe, now)
            return
        valid = {n: valid_have(st.lineage, j.have, j.have_epoch) for n, j in r.replies.items()}
        haves = {m: valid[m] for m in members}
        # secondaries answer too: what any operable R_T placed must keep its number
        last_t = max(valid.values())
        site = max(members, key=lambda m: (haves[m], -members.index(m)))
        recovery = site if haves[site] == last_t else next(n for n, v in valid.items() if v == last_t)
        lineage = [(e, f) for e, f in st.lineage if f <= last_t] + [(r.epoch, last_t + 1)]
        st.lineage = lineage[-LINEAGE_KEPT:]
        nr = wire.NewRing(
            stripe, r.epoch, start_token(list(haves.values()), self.tm.start_policy), last_t,
            r.replies[recovery].next_gseq if valid[recovery] == r.replies[recovery].have else 0, now, site,
            recovery, tuple(members), tuple(st.lineage),
        )
        st.epoch, st.members, st.last_ring, st.reform = r.epoch, members, nr, None
        st.announce_left = self.tm.k_r
        self._announce(stripe, now)
        self.reforms_done += 1
        self.emit(Event(Kind.REFORM_DONE, detail={
            "stripe": stripe, "ring": members, "start_t": nr.start_t, "last_t": last_t, "token_site": site,
            "recovery_site": recovery, "epoch": nr.epoch, "took_ns": now - r.started}))

    def _announce(self, stripe: int, now: int) -> None:
        st = self.state[stripe]
        if st.last_ring is None or st.announce_left <= 0 or st.reform is not None:
            return
        self.multicast(stripe, st.last_ring)
        st.announce_left -= 1
        if st.announce_left > 0:
            self.timers.set((stripe, "announce"), now + self.tm.tau_r)

    def on_timer(self, key: TimerKey, now: int) -> None:
        if key[0] == "report":
            self.handoff.on_timer(key[1], now)
            return
        stripe, what = key
        st = self.state[stripe]
        if what == "invite" and st.reform is not None:
            self._invite(stripe, now)
        elif what == "form" and st.reform is not None:
            self._form(stripe, now)
        elif what == "announce":
            self._announce(stripe, now)
