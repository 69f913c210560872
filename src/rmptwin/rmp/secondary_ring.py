"""The secondary token ring of one region on one stripe (seed 4.1).

Members: the R_S sharing a ring name, and the R_P they are assigned to (first). The
secondary token carries a primary token number: a holder passes it only once it holds
every ack and message up to that number, so a site receiving it can infer what every
member before it holds, as on the primary ring. Tokens are multicast on the stripe's
group, so every member sees every pass; a holder that sees no later pass re-sends every
tau_r and, after k_r tries, reports the silent member and passes around it (the others
see the skip in the next pass and leave the suspect out too, until it is heard again).

Stability on the ring (the seed's layering, L_2 = sqrt(L_1)): a pass numbered T says its
holder holds every ack up to T, and numbers never fall from one round to the next. So once
a member has seen consecutive rounds passed by every live member, each of them holds up
to the lowest number among those passes: that position is stable on this ring, reported
as SECONDARY_STABLE (gseq: the last message of that ack), as the primary ring reports STABLE.
"""

from __future__ import annotations

from collections import deque

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.receiver import StreamReceiver


class SecondaryRing:
    def __init__(self, core: CoreBase, receiver: StreamReceiver, ring: str, members: list[str],
                 timing: Timing, reporter: Reporter) -> None:
        self.core = core
        self.receiver = receiver
        self.ring = ring
        self.members = list(members)
        self.me = core.name
        self.idx = self.members.index(self.me)
        self.tm = timing
        self.reporter = reporter
        self.key = (ring, receiver.stripe)
        self.round_accepted = 0
        self.holding = False
        self.waiting_tok: wire.SecToken | None = None
        self.last_sent: wire.SecToken | None = None
        self.pass_attempts = 0
        self.suspects: set[str] = set()
        self.passes = 0
        self.seen: deque[tuple[int, str, int]] = deque(maxlen=2 * len(self.members))   # (round, holder, token)
        self.stable_token = 0
        if self.idx == 0 and len(self.members) > 1:
            self.holding = True
            core.timers.set(("sec", self.key, "pass"), self.tm.tau_t)

    def _timer(self, what: str, when: int) -> None:
        self.core.timers.set(("sec", self.key, what), when)

    def next_live(self) -> str | None:
        n = len(self.members)
        for step in range(1, n):
            m = self.members[(self.idx + step) % n]
            if m not in self.suspects:
                return m
        return None

    def _note_pass(self, tok: wire.SecToken) -> None:
        """Record a pass (ours or one we saw) and report what it makes stable on this ring."""
        if self.seen and tok.round <= self.seen[-1][0]:
            return   # a resend of a round already counted, or an old one
        self.seen.append((tok.round, tok.holder, tok.token))
        need = {m for m in self.members if m not in self.suspects}
        covered: set[str] = set()
        low, expect = None, tok.round
        for rnd, holder, token in reversed(self.seen):
            if rnd != expect:
                return   # a round we did not see: nothing can be inferred past it
            covered.add(holder)
            low = token if low is None else min(low, token)
            if covered >= need:
                break
            expect -= 1
        else:
            return
        if low is not None and low > self.stable_token:
            self.stable_token = low
            a = self.receiver.acks.get(low)
            if a is not None:
                self.core.emit(Event(Kind.SECONDARY_STABLE, gseq=a.last_gseq, detail={
                    "stripe": tok.stripe, "ring": self.ring, "token": low}))

    def on_token(self, tok: wire.SecToken, src: str, now: int) -> None:
        self._note_pass(tok)
        self.suspects.discard(tok.holder)
        if tok.holder in self.members and tok.next_holder in self.members:
            # members the holder skipped were found silent: skip them too
            n = len(self.members)
            j = (self.members.index(tok.holder) + 1) % n
            for _ in range(n):
                if self.members[j] == tok.next_holder:
                    break
                if self.members[j] != self.me:
                    self.suspects.add(self.members[j])
                j = (j + 1) % n
        if self.last_sent is not None and tok.round > self.last_sent.round:
            self.last_sent = None
            self.core.timers.cancel(("sec", self.key, "wait"))
        if tok.next_holder != self.me:
            return
        if tok.round > self.round_accepted:
            if self.waiting_tok is None or tok.round > self.waiting_tok.round:
                self.waiting_tok = tok
            self.on_progress(now)
        elif self.last_sent is not None and tok.round == self.round_accepted:
            self.core.send(self.last_sent, Unicast(src))   # the previous holder missed our pass

    def on_progress(self, now: int) -> None:
        tok = self.waiting_tok
        if tok is not None and self.receiver.t_r - 1 >= tok.token:
            self.waiting_tok = None
            self.round_accepted = tok.round
            self.holding = True
            self._timer("pass", now + self.tm.tau_t)

    def pass_token(self, now: int) -> None:
        if not self.holding:
            return
        nxt = self.next_live()
        if nxt is None:
            self._timer("pass", now + self.tm.tau_t)
            return
        r = self.receiver
        tok = wire.SecToken(r.stripe, r.epoch, self.ring, r.t_r - 1, self.me, nxt, self.round_accepted + 1)
        self._send(tok, now)

    def _send(self, tok: wire.SecToken, now: int) -> None:
        self.core.multicast(self.receiver.stripe, tok)
        self._note_pass(tok)
        self.passes += 1
        self.core.emit(Event(Kind.SECONDARY_TOKEN, gseq=self.receiver.next_gseq - 1, detail={
            "stripe": tok.stripe, "ring": self.ring, "token": tok.token, "round": tok.round, "next": tok.next_holder}))
        self.holding = False
        self.last_sent = tok
        self.pass_attempts = 0
        self._timer("wait", now + self.tm.tau_t + self.tm.tau_r + self.tm.dn)

    def on_wait(self, now: int) -> None:
        tok = self.last_sent
        if tok is None:
            return
        self.pass_attempts += 1
        if self.pass_attempts > self.tm.k_r:
            self.reporter.report(tok.stripe, self.receiver.epoch, tok.next_holder, wire.REASON_SECONDARY,
                                 tok.token, now, ring=self.ring)
            self.suspects.add(tok.next_holder)
            nxt = self.next_live()
            if nxt is None:
                self.last_sent = None
                self.holding = True
                self.round_accepted = tok.round - 1
                self._timer("pass", now + self.tm.tau_t)
                return
            # the last token, now to nxt at our position (frames are plain classes: no dataclasses.replace)
            self._send(wire.SecToken(tok.stripe, tok.epoch, tok.ring, self.receiver.t_r - 1, tok.holder, nxt,
                                     tok.round), now)
            return
        self.core.send(tok, Unicast(tok.next_holder))
        self._timer("wait", now + self.tm.tau_r)

    def on_timer(self, what: str, now: int) -> None:
        if what == "pass":
            self.pass_token(now)
        elif what == "wait":
            self.on_wait(now)
