"""The primary token ring (seed 2.1, 4, 5): ``RingMember``, one R_P's place in one stripe's ring.

The token site acknowledges waiting source messages and assigns them global sequence
numbers; that ack also acknowledges the token pass from the previous site and passes the
token to the next. Event-driven (original RMP): the holder acks as soon as a message waits
(up to ``batch_limit`` per ack) and passes a null token after ``null_token`` idle, or at
once when the previous site re-sends its pass. Time-driven (seed 5): every tau_t after the
previous ack's timestamp the holder acks the batch waiting, empty or not.

A site accepts the token only once it holds every ack and message up to it (recovering
what it lacks first); the previous site re-sends its pass every tau_r until it sees the
next ack and reports the next site after k_r tries. Sending ack t proves every member
holds up to t - m + 1 (STABLE). A member left out of a ring, or restarted, asks a reformation
server to let it in (JOIN) and takes part in forming the next ring (INVITE, NEW_RING).
"""

from __future__ import annotations

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import rmp_group
from rmptwin.core.sansio import Dest, Group, Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.nack_ranges import MAX_RANGE
from rmptwin.rmp.nack_reduction import request_slot
from rmptwin.rmp.receiver import Channel, StreamReceiver, source_node
from rmptwin.rmp.remulticast import RegionalFeed


class RingMember(StreamReceiver):
    serves_retransmissions = True
    asks_sources = True

    def __init__(self, core: CoreBase, stripe: int, timing: Timing, reporter: Reporter, remulticaster: RegionalFeed | None,
                 ring: list[str], reformers: list[str], recovering: bool = False) -> None:
        super().__init__(core, stripe, timing, reporter, remulticaster)
        self.members = list(ring)
        self.reformers = list(reformers)
        self.idx = self.members.index(self.me) if self.me in self.members else -1
        self.holding = False
        self.token_t = 0            # last token number accepted
        self.sent_t: int | None = None
        self.pass_attempts = 0
        self.ring_start_t = 1
        self.stable_gseq = 0
        self.frozen = False
        self.joining: int | None = None
        self.join_acked = False
        self.join_attempts = 0
        self.join_sent_at: int | None = None
        self.reformer_idx = 0
        self.recovering = recovering
        self.pending_ring: wire.NewRing | None = None
        if recovering or self.idx < 0:
            # a restarted host knows nothing: ask a reformation server to let it in
            self.epoch = 0
            self.frozen = True
            self.joining = 0
            self.mark_recovering()
            core.timers.set((stripe, "join"), 0)
        elif self.idx == 0:
            self.accept(0, None, 0)

    # ----------------------------------------------------------------- ring helpers
    @property
    def next_site(self) -> str:
        return self.members[(self.idx + 1) % len(self.members)]

    def _cancel(self, *what: str) -> None:
        for w in what:
            self.core.timers.cancel((self.stripe, w))

    # ----------------------------------------------------------------- token site
    def accept(self, token: int, ts: int | None, now: int) -> None:
        self.holding = True
        self.token_t = token
        self.core.emit(Event(Kind.TOKEN_ACCEPT, detail={"stripe": self.stripe, "token": token}))
        if self.tm.time_driven:
            due = now if ts is None else max(now, ts + self.tm.tau_t)
            self.core.timers.set((self.stripe, "send"), due)
        elif self.choose_batch():
            self.core.timers.set((self.stripe, "send"), now)
        else:
            self.core.timers.set((self.stripe, "null"), now + self.tm.null_token)

    def choose_batch(self) -> tuple[tuple[str, int], ...]:
        """Waiting messages, each source's from M_s,r on without a gap, in arrival order
        (a message never goes before its source's earlier one), at most batch_limit."""
        arrival = {m: i for i, m in enumerate(self.waiting)}
        sources = {s for s, _ in self.waiting}
        chosen: list[tuple[int, str, int]] = []
        for s in sources:
            seq, key = self.m_sr.get(s, 1), -1
            while (s, seq) in arrival:
                key = max(key, arrival[(s, seq)])
                chosen.append((key, s, seq))
                seq += 1
        chosen.sort()
        return tuple((s, seq) for _, s, seq in chosen[: self.tm.batch_limit])

    def send_token(self, now: int) -> None:
        if not self.holding or self.frozen:
            return
        batch = self.choose_batch()
        t = self.token_t + 1
        # The seed's stability: as ack t goes out, acks t-m+1..t were sent by the m members in
        # turn, each holding everything before it, so every member holds up to t-m+1.
        stable = t - len(self.members) + 1
        a = wire.Ack(self.stripe, self.epoch, t, self.next_gseq, now, self.me, self.next_site, batch,
                     stable if stable >= self.ring_start_t else 0)
        self.core.multicast(self.stripe, a)
        if batch:
            self.core.emit(Event(Kind.ACK_SENT, gseq=a.first_gseq, detail={
                "stripe": self.stripe, "token": t, "k": len(batch), "ts_ns": now, "next": a.next_site}))
        else:
            self.core.emit(Event(Kind.NULL_TOKEN, detail={"stripe": self.stripe, "token": t, "next": a.next_site}))
        self.holding = False
        self.sent_t = t
        self.pass_attempts = 0
        self._cancel("send", "null")
        # the next site may hold the token a whole period (time-driven) or idle interval
        # (event-driven) before its ack shows it accepted
        hold = self.tm.tau_t + self.tm.dn if self.tm.time_driven else self.tm.null_token + self.tm.tau_r
        self.core.timers.set((self.stripe, "pass"), now + hold)
        self.on_ack(a, self.me, now, False)

    def on_pass_timeout(self, now: int) -> None:
        """We passed the token with ack sent_t and have not seen sent_t + 1: pass it again."""
        if self.sent_t is None or self.highest_seen > self.sent_t or self.frozen or len(self.members) < 2:
            return
        self.pass_attempts += 1
        if self.pass_attempts > self.tm.k_r:
            self.reporter.report(self.stripe, self.epoch, self.next_site, wire.REASON_TOKEN_LOST, self.sent_t, now)
        a = self.acks.get(self.sent_t)
        if a is not None:
            self.core.send(a, Unicast(a.next_site))
        self.core.timers.set((self.stripe, "pass"), now + self.tm.tau_r)

    # ----------------------------------------------------------------- receiver hooks
    def on_new_data(self, key: tuple[str, int], now: int) -> None:
        if self.holding and not self.tm.time_driven and not self.core.timers.has((self.stripe, "send")):
            if self.choose_batch():
                self._cancel("null")
                self.core.timers.set((self.stripe, "send"), now)

    def on_new_highest(self, a: wire.Ack, now: int) -> None:
        if self.sent_t is not None and a.token > self.sent_t:
            self._cancel("pass")

    def on_processed(self, a: wire.Ack, now: int) -> None:
        stable_t = a.token - len(self.members) + 1
        if stable_t >= self.ring_start_t and stable_t in self.acks:
            g = self.acks[stable_t].last_gseq
            if g > self.stable_gseq:
                self.stable_gseq = g
                self.core.emit(Event(Kind.STABLE, gseq=g, detail={"stripe": self.stripe, "token": stable_t}))
        if self.pending_ring is not None:
            self.try_take_ring_token(now)
        elif a.next_site == self.me and a.epoch == self.epoch and not self.frozen and a.token > self.token_t:
            self.accept(a.token, a.ts_ns, now)

    def on_duplicate_data(self, d: wire.Data, src: str, now: int) -> None:
        # implicit request: a source re-sending an acknowledged message missed the ack
        serving = self.holding or (self.sent_t is not None and self.highest_seen == self.sent_t)
        if serving and src == source_node(d.src):
            t = self.ack_of.get((d.src, d.src_seq))
            if t is not None and t < self.t_r and t in self.acks:
                self.send_retx(self.acks[t], Unicast(src))

    def on_duplicate_ack(self, a: wire.Ack, src: str, now: int) -> None:
        # implicit request: the previous site re-sending its pass missed the ack that accepted it
        if a.next_site != self.me or src != a.token_site or self.frozen:
            return
        later = self.acks.get(a.token + 1)
        if later is not None and later.token_site == self.me:
            self.core.send(later, Unicast(src))
        elif self.holding and self.token_t == a.token and not self.tm.time_driven:
            self.send_token(now)

    def on_newer_epoch(self, epoch: int, now: int) -> None:
        if epoch <= self.epoch:
            return
        # A ring formed without us hearing NEW_RING: ask for it. Also when we answered its
        # invitation and are waiting: its acks prove it exists, and waiting k_r tau_r for
        # the next JOIN would let the token site report us as lost first.
        if self.joining is None:
            self.joining = epoch
            self.send_join(now)
        elif epoch >= self.joining and (self.join_sent_at is None or now >= self.join_sent_at + self.tm.tau_r):
            self.send_join(now)

    def may_request(self, chan: Channel) -> bool:
        """NACK reduction (seed 5.2): ask for what token t acknowledged only in our slot."""
        k_p = self.tm.k_p
        if k_p and isinstance(chan, tuple) and self.idx >= 0:
            # A hole the ring has not acknowledged yet is the next token site's to ask the source
            # for (it must hold what it acknowledges); the others wait for the ack naming the
            # message and ask in their slot, so that a multicast repair can spare the later sets.
            latest = self.acks.get(self.highest_seen)
            return latest is None or latest.next_site == self.me
        if not k_p or chan != "msgs" or self.idx < 0:
            return True
        a = self.acks.get(self.t_r)
        if a is None or a.token_site not in self.members:
            return True
        r = self.members.index(a.token_site)
        return self.highest_seen >= a.token + request_slot(self.idx, r, len(self.members), k_p)

    def retx_dest(self, requester: str) -> Dest:
        return Group(rmp_group(self.stripe)) if self.tm.k_p else Unicast(requester)

    def request_target(self, chan: Channel, rotation: int) -> str | None:
        first = self.server
        if chan == "acks" and self.expect_t >= self.t_r and self.t_r > self.highest_seen:
            first = self.expected_sender()
        if first == self.me:
            first = None
        # the server first, then the other members in ring order, round and round
        candidates = ([first] if first else []) + [m for m in self.members if m not in (self.me, first)]
        return candidates[rotation % len(candidates)] if candidates else None

    # ----------------------------------------------------------------- reformation
    def on_other(self, frame: wire.Frame, src: str, now: int) -> None:
        # Control frames are idempotent (``rmp.seal``): one already acted on, replayed or
        # repeated, changes nothing, but is counted like a replayed ack, so that no
        # authenticated frame passes unseen.
        if isinstance(frame, wire.Invite):
            self.on_invite(frame, now)
        elif isinstance(frame, wire.JoinAck) and frame.member == self.me and frame.epoch == self.joining:
            if self.join_acked:
                self.core.duplicates += 1
            self.join_acked = True
        else:
            self.core.ignored += 1      # a JOIN_ACK not for our join, a JOIN or REPORT (a server's)

    def freeze(self) -> None:
        self.frozen = True
        self.holding = False
        self._cancel("send", "null", "pass", "expect")

    def on_invite(self, inv: wire.Invite, now: int) -> None:
        if inv.epoch <= self.epoch or (self.joining is not None and inv.epoch <= self.joining and self.join_acked):
            self.core.duplicates += 1   # a ring we are in, or a join already acknowledged
            return
        self.freeze()
        if inv.reformer in self.reformers:
            self.reformer_idx = self.reformers.index(inv.reformer)
        if self.joining != inv.epoch:
            self.joining = inv.epoch
            self.join_acked = False
            self.join_attempts = 0
        self.send_join(now)

    def send_join(self, now: int) -> None:
        if self.joining is None or not self.reformers:
            return
        self.join_attempts += 1
        if self.join_attempts % (2 * self.tm.k_r) == 0:
            self.reformer_idx = (self.reformer_idx + 1) % len(self.reformers)
        if self.joining > self.epoch and (self.join_fence is None or self.join_fence[0] != self.joining):
            self.join_fence = (self.joining, self.t_r - 1)
        j = wire.Join(self.stripe, self.joining, self.me, self.t_r - 1, self.next_gseq, self.recovering,
                      self.have_epoch())
        self.core.send(j, Unicast(self.reformers[self.reformer_idx]))
        self.join_sent_at = now
        wait = self.tm.k_r * self.tm.tau_r if self.join_acked else self.tm.tau_r
        self.core.timers.set((self.stripe, "join"), now + wait)

    def on_new_ring(self, nr: wire.NewRing, src: str, now: int) -> None:
        if nr.epoch <= self.epoch:
            self.core.duplicates += 1   # a ring we know, or an older one
            return
        self.fence(nr.last_t, nr.epoch, now, nr.lineage)
        self.sent_t = None
        self.pending_ring = None
        self.holding = False
        if self.t_r == 1 and nr.last_t > 0:
            self.stable_gseq = 0      # resynchronised (or fresh): it knows nothing yet
        if self.me not in nr.members:
            # left out (thought dead, or joined too late): ask to be let back in
            self.freeze()
            self.recovering = True
            self.joining = nr.epoch
            self.join_acked = False
            self.send_join(now)
            return
        self.members = list(nr.members)
        self.idx = self.members.index(self.me)
        self.frozen = False
        self.holding = False
        self.joining = None
        self.recovering = False
        self._cancel("join", "send", "null", "pass")
        self.ring_start_t = nr.last_t + 1
        self.token_t = nr.last_t
        self.server = nr.recovery_site if nr.recovery_site != self.me else self.server
        if nr.token_site == self.me:
            self.pending_ring = nr
            self.try_take_ring_token(now)
            return
        # The new ring's first ack can overtake its NEW_RING (fence keeps it). If it passed us
        # the token, we placed it while still frozen in the old epoch, when on_processed could
        # not accept it; its re-sent passes are duplicates from then on. Accept it now: left
        # alone the token stopped here until the next site was reported and the ring reformed
        # once more (its messages, acknowledged to their sources, undelivered meanwhile).
        last = self.acks.get(self.t_r - 1)
        if last is not None and last.token > nr.last_t and last.epoch == self.epoch \
                and last.next_site == self.me and last.token > self.token_t:
            self.accept(last.token, last.ts_ns, now)

    def try_take_ring_token(self, now: int) -> None:
        nr = self.pending_ring
        if nr is None or self.t_r - 1 < nr.last_t:
            return
        self.pending_ring = None
        if self.tm.start_policy == "conservative":
            # members may hold less than we do: push the acks from the policy's start
            for t in range(max(nr.start_t, 1, nr.last_t - MAX_RANGE + 1), nr.last_t + 1):
                if t in self.acks:
                    self.send_retx(self.acks[t], Group(rmp_group(self.stripe)))
        self.accept(nr.last_t, None, now)

    # ----------------------------------------------------------------- timers
    def on_timer(self, key: TimerKey, now: int) -> None:
        what = key[1]
        if what == "send":
            if self.tm.time_driven or self.choose_batch():
                self.send_token(now)
            elif self.holding:
                self.core.timers.set_earlier((self.stripe, "null"), now + self.tm.null_token)
        elif what == "null":
            self.send_token(now)
        elif what == "pass":
            self.on_pass_timeout(now)
        elif what == "join":
            self.send_join(now)
        else:
            super().on_timer(key, now)
