"""The receive side every R_T shares (seed 2.1 and 5.1), for one stripe.

A receiver tracks t_r (next ack number expected: it has every ack below t_r with its
messages) and M_{s,r} per source (next message expected to be acknowledged). Source
messages wait in a store until acknowledged; acks place them in the receive list in gseq
order (DELIVER). Missing acks and messages are requested (negative acknowledgement; the
ranges: ``nack_ranges``) after a grace period, again every tau_r; after k_r unanswered
requests the server is reported to a reformation server and another one is asked. Placed
messages are released (RELEASE, and handed to the regional remulticaster) at ack timestamp
+ Delta_A, in gseq order.

Delivery "safe" (``Timing.safe``): a placed message is delivered and released only once an
ack of the receiver's own ring epoch says its token is stable (held by every ring member).
A falsely suspected member that went on with the old ring can then place acks a new ring
reassigns, but never delivers them: a stable token cannot be reassigned, because every
member of its ring holds it and a new ring needs answers from a majority of the primaries.

Security (core built with keys, seed 6 and 7.1): a DATA frame is stored only if it opens
under its source's key (else dropped, counted and reported as an ALARM: ``mac_failed``, or
``unauthorized`` for a source without a key); the store keeps the ciphertext, which is
opened again only at release. With or without keys, a second, different payload under an
(s, M_s) already held is an ALARM ``conflicting_payload`` and is never stored; with keys,
a copy of a message already held that comes neither from its source nor as a RETX is an
ALARM ``replay`` (drivers name the sender by its address, so a third host relaying it shows).

Subclasses (ring members, secondaries) add the token logic through the ``on_*`` hooks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.sansio import Dest, Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.nack_ranges import held_frames, missing_ack_of, missing_acks, missing_msgs, source_holes
from rmptwin.rmp.remulticast import RegionalFeed
from rmptwin.rmp.seal import Reason, Sealer, SealError

# What a receiver asks for: "acks", "msgs", "ackof", or ("srcgap", source) for a hole in a
# source's waiting messages (asked of the source itself).
Channel = str | tuple[str, str]


@dataclass
class _Request:
    attempts: int = 0
    rotation: int = 0    # how many servers gave up on so far


class StreamReceiver:
    serves_retransmissions = False
    asks_sources = False       # token candidates fetch holes in the waiting messages from sources

    def __init__(self, core: CoreBase, stripe: int, timing: Timing, reporter: Reporter,
                 remulticaster: RegionalFeed | None = None) -> None:
        self.core = core
        self.me = core.name
        self.stripe = stripe
        self.tm = timing
        self.reporter = reporter
        self.remulticaster = remulticaster
        self.epoch = 1
        self.fence_t = 0               # acks of older epochs above this were superseded
        self.acks: dict[int, wire.Ack] = {}
        self.t_r = 1
        self.highest_seen = 0
        self.expect_t = 0              # time-driven: a token we know is overdue
        self.join_fence: tuple[int, int] | None = None   # (epoch joining, last ack reported)
        self.lineage: tuple[tuple[int, int], ...] = ()   # from the last NEW_RING
        self.server: str | None = None  # whom to ask: the sender of the highest ack seen
        self.msgs: dict[tuple[str, int], bytes] = {}       # only grows
        self._held_upto: tuple[wire.Ack | None, int] = (None, 0)   # see _holds_all
        self.ack_of: dict[tuple[str, int], int] = {}
        self.m_sr: dict[str, int] = {}
        self.waiting: dict[tuple[str, int], None] = {}   # received, unacknowledged, arrival order
        self.hint: dict[str, int] = {}                  # source's acked_below
        self.next_gseq = 1
        self.last_ts: int | None = None
        self.requests: dict[Channel, _Request] = {}
        self.release_q: deque[tuple[int, int, tuple[str, int], bytes]] = deque()
        self.unstable: deque[tuple[int, tuple[str, int], wire.Ack]] = deque()   # safe: placed, not delivered
        self.stable_t = 0              # safe: highest stable token an ack of our epoch announced
        self.delivered = 0
        self.released = 0
        # A restarted receiver recovers the whole history (agreement) but does not
        # remulticast what fell due before it came back: customers had it from others.
        self.release_from: int | None = None
        # What this receiver released (a resync delivers the history again: releases once)
        self.released_msgs: set[tuple[str, int]] = set()
        self._recovering_start = False

    def mark_recovering(self) -> None:
        self._recovering_start = True

    # ----------------------------------------------------------------- frames in
    def receive(self, frame: wire.Frame, src: str, now: int, repair: bool = False) -> None:
        if self._recovering_start:
            self._recovering_start = False
            self.release_from = now
        if isinstance(frame, wire.Data):
            self.on_data(frame, src, now, repair)
        elif isinstance(frame, wire.Ack):
            self.on_ack(frame, src, now, repair)
        elif isinstance(frame, wire.Retx):
            self.receive(frame.original, src, now, repair=True)
        elif isinstance(frame, wire.Nack):
            if self.serves_retransmissions:
                self.serve(frame, src, now)
        elif isinstance(frame, wire.NewRing):
            self.on_new_ring(frame, src, now)
        else:
            self.on_other(frame, src, now)

    def on_data(self, d: wire.Data, src: str, now: int, repair: bool) -> None:
        key = (d.src, d.src_seq)
        sealer = self.core.sealer
        if sealer is not None and not self.authentic(d, src, sealer):
            return
        held = self.msgs.get(key)
        if held is not None and held != d.payload:
            # a second payload under one (s, M_s): never stored, never acknowledged (seed 6)
            self.core.reject(Reason.CONFLICTING_PAYLOAD, d.src, src, stripe=self.stripe, src_seq=d.src_seq)
            return
        if d.src_seq < self.m_sr.get(d.src, 1) or held is not None:
            if sealer is not None and not repair and src != source_node(d.src):
                # an old message sent again by neither its source nor as a retransmission
                self.core.reject(Reason.REPLAY, d.src, src, stripe=self.stripe, src_seq=d.src_seq)
                return
            self.core.duplicates += 1
            self.on_duplicate_data(d, src, now)
            return
        self.msgs[key] = d.payload
        self.core.emit(Event(Kind.RECV, d.src, d.src_seq, -1, len(d.payload),
                             {"stripe": self.stripe, "repair": repair}))
        if key not in self.ack_of:
            self.waiting[key] = None
        if d.acked_below > self.hint.get(d.src, 1):
            self.hint[d.src] = d.acked_below
        self.advance(now)
        if self.hint.get(d.src, 1) > self.m_sr.get(d.src, 1) and self.t_r > self.highest_seen:
            # the source saw acks we lack (seed: M_s > M_s,r -> the ack is missing)
            self.want("ackof", now)
        if self.asks_sources and d.src_seq > max(self.m_sr.get(d.src, 1), self.hint.get(d.src, 1)) \
                and (d.src, d.src_seq - 1) not in self.msgs:
            # a hole in what waits for acknowledgement: the source still holds it
            self.want(("srcgap", d.src), now)
        self.on_new_data(key, now)

    def authentic(self, d: wire.Data, src: str, sealer: Sealer) -> bool:
        """Whether a DATA frame opens under its source's key (seed 6: only authorized
        sources are sequenced). The plaintext is dropped: it is read again only at release."""
        try:
            sealer.open_source(d.src, d.stripe, d.src_seq, d.payload)
        except SealError as e:
            self.core.reject(e.reason, d.src, src, stripe=self.stripe, src_seq=d.src_seq)
            return False
        return True

    def on_ack(self, a: wire.Ack, src: str, now: int, repair: bool) -> None:
        if a.epoch < self.epoch and a.token > self.fence_t:
            return                              # the old ring's token site is gone; not ours
        if a.epoch < self.epoch and wire.superseded(self.lineage, a.epoch, a.token):
            return                              # issued by a ring that was superseded below it
        jf = self.join_fence
        if jf is not None and a.epoch < jf[0] and a.token > jf[1]:
            return     # we told a reformation server what we hold: nothing newer of the old ring
        if a.epoch > self.epoch:
            self.on_newer_epoch(a.epoch, now)
        if a.token < self.t_r or a.token in self.acks:
            self.core.duplicates += 1
            self.on_duplicate_ack(a, src, now)
            return
        if self.tm.safe and a.epoch == self.epoch and a.stable > self.stable_t:
            self.stable_t = a.stable
            self.deliver_stable(now)
        self.acks[a.token] = a
        for m in a.msgs:
            self.ack_of[m] = a.token
            self.waiting.pop(m, None)
        if a.token > self.highest_seen:
            self.highest_seen = a.token
            if a.token_site != self.me:
                self.server = a.token_site
            self.on_new_highest(a, now)
        self.advance(now)

    # ----------------------------------------------------------------- placement
    def advance(self, now: int) -> None:
        progressed = False
        jf = self.join_fence
        while self.t_r in self.acks:
            a = self.acks[self.t_r]
            if jf is not None and a.epoch < jf[0] and a.token > jf[1]:
                break      # held from before the invitation: the new ring decides about it
            if not self._holds_all(a):
                self.want("msgs", now)
                break
            for i, m in enumerate(a.msgs):
                self.place(m, a.first_gseq + i, a, now)
            self.next_gseq = a.first_gseq + len(a.msgs)
            self.last_ts = a.ts_ns
            self.t_r += 1
            progressed = True
            self.on_processed(a, now)
        if self.t_r <= self.highest_seen and self.t_r not in self.acks:
            # Checked after every advance, not only when an ack arrives: an ack above a gap
            # (17 while 14-16 were lost) can come while t_r (13) still waits for a message;
            # once that message places t_r, nothing else asks for 14-16 (the "msgs" request
            # finds nothing from the missing t_r on and ends), and the receiver would never
            # place them, nor accept a token passed to it.
            self.want("acks", now)
        if progressed:
            for req in self.requests.values():
                req.attempts = 0
            if self.tm.time_driven and self.t_r > self.highest_seen and self.last_ts is not None:
                self.core.timers.set((self.stripe, "expect"), self.last_ts + self.tm.tau_t + self.tm.dn)

    def _holds_all(self, a: wire.Ack) -> bool:
        """Whether every message ``a`` acknowledges is held. An ack that waits for its
        messages is checked again on each arrival: the check resumes at the first message
        the last one lacked (``msgs`` only grows), so k messages cost O(k) in all, not each."""
        held, msgs = self.msgs, a.msgs
        i = self._held_upto[1] if self._held_upto[0] is a else 0
        while i < len(msgs) and msgs[i] in held:
            i += 1
        self._held_upto = (a, i)
        return i == len(msgs)

    def place(self, m: tuple[str, int], gseq: int, a: wire.Ack, now: int) -> None:
        self.waiting.pop(m, None)
        self.ack_of[m] = a.token
        s, seq = m
        if seq + 1 > self.m_sr.get(s, 1):
            self.m_sr[s] = seq + 1
        if self.tm.safe:
            self.unstable.append((gseq, m, a))
            self.deliver_stable(now)
        else:
            self.deliver(gseq, m, a, now)

    def deliver(self, gseq: int, m: tuple[str, int], a: wire.Ack, now: int) -> None:
        s, seq = m
        payload = self.msgs[m]
        self.delivered += 1
        self.core.emit(Event(Kind.DELIVER, s, seq, gseq, len(payload), {"stripe": self.stripe, "token": a.token}))
        self.release_q.append((a.ts_ns + self.tm.delta_a, gseq, m, payload))  # late if stable later
        if len(self.release_q) == 1:
            self.core.timers.set((self.stripe, "release"), max(now, self.release_q[0][0]))

    def deliver_stable(self, now: int) -> None:
        q = self.unstable
        while q and q[0][2].token <= self.stable_t:
            self.deliver(*q.popleft(), now)

    def release_due(self, now: int) -> None:
        q = self.release_q
        while q and q[0][0] <= now:
            due, gseq, m, payload = q.popleft()
            if (self.release_from is not None and due < self.release_from) or m in self.released_msgs:
                continue
            s, seq = m
            self.released_msgs.add(m)
            self.released += 1
            self.core.emit(Event(Kind.RELEASE, s, seq, gseq, len(payload),
                                 {"stripe": self.stripe, "late_ns": now - due}))
            if self.remulticaster is not None:
                self.remulticaster.release(gseq, self.readable(s, seq, payload))
        if q:
            self.core.timers.set((self.stripe, "release"), max(now, q[0][0]))

    def readable(self, s: str, seq: int, payload: bytes) -> bytes:
        """The message as released: with keys, the held ciphertext is opened only now (at
        ack ts + Delta_A), so nothing downstream of an R_T reads a trade before the ticker."""
        sealer = self.core.sealer
        return payload if sealer is None else sealer.open_source(s, self.stripe, seq, payload)

    # ----------------------------------------------------------------- requests
    def want(self, chan: Channel, now: int, delay: int | None = None) -> None:
        if chan in self.requests:
            return
        self.requests[chan] = _Request()
        self.core.timers.set((self.stripe, "req", chan), now + (self.tm.dn // 2 if delay is None else delay))

    def missing(self, chan: Channel) -> list[tuple[int, int, int, str]]:
        """What ``chan`` still lacks, as NACK (want, lo, hi, src) ranges; [] when complete."""
        if chan == "acks":
            return missing_acks(self.t_r, max(self.highest_seen, self.expect_t), self.acks)
        if chan == "msgs":
            return missing_msgs(self.t_r, self.acks, self.msgs)
        if isinstance(chan, tuple) and chan[0] == "srcgap":
            return source_holes(chan[1], self.waiting, self.m_sr, self.hint, self.msgs, self.ack_of)
        if chan == "ackof" and self.t_r > self.highest_seen:
            return missing_ack_of(self.m_sr, self.hint)
        return []

    def fire_request(self, chan: Channel, now: int) -> None:
        req = self.requests.get(chan)
        if req is None:
            return
        wanted = self.missing(chan)
        if not wanted:
            del self.requests[chan]
            return
        self.core.timers.set((self.stripe, "req", chan), now + self.tm.tau_r)
        if not self.may_request(chan):
            return
        to_source = isinstance(chan, tuple)
        # a hole in a source's messages is asked of the source itself; if it is gone,
        # nothing acknowledged depends on it, so its silence is never reported
        target = source_node(chan[1]) if to_source else self.request_target(chan, req.rotation)
        if target is None:
            return
        if req.attempts >= self.tm.k_r and not to_source:
            # a lossy path can starve one server's answers: ask another before crying failure
            if req.rotation >= 1:
                suspect = self.request_target(chan, 0) or target
                self.reporter.report(self.stripe, self.epoch, suspect, wire.REASON_NO_ANSWER, self.t_r, now)
            req.attempts = 0
            req.rotation += 1
            target = self.request_target(chan, req.rotation) or target
        req.attempts += 1
        for want, lo, hi, s in wanted:
            self.core.send(wire.Nack(self.stripe, self.epoch, self.me, want, lo, hi, s), Unicast(target))
            self.core.emit(Event(Kind.NACK_SENT, s, lo if want != wire.WANT_ACKS else -1,
                                 lo if want == wire.WANT_ACKS else -1, 0,
                                 {"stripe": self.stripe, "want": want, "lo": lo, "hi": hi, "to": target}))

    def serve(self, n: wire.Nack, src: str, now: int) -> None:
        """Answer an explicit request from what we hold (RETX, unicast to the requester)."""
        frames = held_frames(n, self.stripe, self.acks, self.msgs, self.ack_of)
        for f in frames:
            self.send_retx(f, self.retx_dest(n.requester))

    def send_retx(self, f: wire.Data | wire.Ack, dest: Dest) -> None:
        self.core.send(wire.Retx(self.stripe, f), dest)
        if isinstance(f, wire.Data):
            self.core.emit(Event(Kind.RETX_SENT, f.src, f.src_seq, -1, len(f.payload), {"stripe": self.stripe}))
        else:
            self.core.emit(Event(Kind.RETX_SENT, gseq=f.first_gseq, detail={"stripe": self.stripe, "token": f.token}))

    def retx_dest(self, requester: str) -> Dest:
        return Unicast(requester)

    # ----------------------------------------------------------------- timers
    def on_timer(self, key: TimerKey, now: int) -> None:
        what = key[1]
        if what == "req":
            self.fire_request(key[2], now)
        elif what == "release":
            self.release_due(now)
        elif what == "expect":
            self.on_expect(now)

    def on_expect(self, now: int) -> None:
        """Time-driven: the token pass after t_r - 1 is dN overdue: ask for it."""
        if self.t_r > self.highest_seen and self.expected_sender() != self.me:
            self.expect_t = self.t_r
            self.want("acks", now, delay=0)

    def resync(self, now: int, why: str) -> None:
        """Start the receive list over. A receiver that placed acks a new ring reassigns (it
        missed every invitation and went on with the old ring) cannot take them back: it
        says so with a RECOVER event, forgets what it placed and recovers the history
        again, as a restarted host would; it keeps the source messages it holds and what it
        released."""
        self.core.emit(Event(Kind.RECOVER, detail={"stripe": self.stripe, "cause": why, "placed_to": self.t_r - 1}))
        self.acks.clear()
        self.ack_of.clear()
        self.m_sr.clear()
        self.hint.clear()
        self.requests.clear()
        self.release_q.clear()
        self.unstable.clear()
        self.stable_t = 0
        self.waiting = {m: None for m in self.msgs}
        self.t_r, self.highest_seen, self.expect_t, self.next_gseq, self.last_ts = 1, 0, 0, 1, None
        # unlike a restart, it knows what it released: what it never released goes out now,
        # late (its customers wait for it), and nothing goes out twice

    def have_epoch(self) -> int:
        a = self.acks.get(self.t_r - 1)
        return a.epoch if a is not None else 0

    def _drop_ack(self, t: int) -> None:
        """Forget held ack t: the messages it placed wait to be acknowledged again."""
        a = self.acks.pop(t)
        for m in a.msgs:
            if self.ack_of.get(m) == t:
                del self.ack_of[m]
                if m in self.msgs:
                    self.waiting[m] = None

    def fence(self, last_t: int, epoch: int, now: int, lineage: tuple[tuple[int, int], ...] = ()) -> None:
        """A new ring starts after ``last_t``: drop held acks of older rings above it, and
        of rings the lineage shows were superseded below them."""
        self.epoch = max(self.epoch, epoch)
        self.join_fence = None
        if lineage:
            self.lineage = tuple(lineage)
        bad = next((t for t in sorted(self.acks) if wire.superseded(lineage, self.acks[t].epoch, t)), None)
        # acks above last_t are fine if the new ring itself sent them (they can overtake NEW_RING)
        stale = next((t for t in range(last_t + 1, self.t_r) if self.acks.get(t) is None
                      or self.acks[t].epoch < epoch), None)
        if stale is not None or (bad is not None and bad < self.t_r):
            self.resync(now, f"placed up to {self.t_r - 1} in a ring superseded at "
                             f"{bad if bad is not None else stale} (epoch {epoch})")
        elif bad is not None:
            for t in [t for t in self.acks if t >= bad]:
                self._drop_ack(t)
        self.fence_t = last_t
        for t in [t for t, a in self.acks.items() if t > last_t and a.epoch < epoch]:
            self._drop_ack(t)
        self.highest_seen = max([self.t_r - 1, last_t, *self.acks.keys()])
        self.expect_t = 0
        # The new ring names the server to ask (its recovery site, which holds every ack up to
        # last_t: seed 4.3, a token site with t_r >= t). Requests still open had gone round the
        # old ring's members while the old server was cut off; left there they would ask
        # members that lack what is missing (who stay silent) k_r tau_r each before reaching
        # it: after a healed partition the members behind never caught up and the new token
        # stalled at them. Ask the new server first, now.
        for chan, req in self.requests.items():
            req.attempts = req.rotation = 0
            self.core.timers.set_earlier((self.stripe, "req", chan), now)
        if self.t_r <= last_t:
            self.want("acks", now, delay=0)

    # ----------------------------------------------------------------- hooks
    def may_request(self, chan: Channel) -> bool:
        return True

    def request_target(self, chan: Channel, rotation: int) -> str | None:
        return self.server

    def expected_sender(self) -> str | None:
        prev = self.acks.get(self.t_r - 1)
        return prev.next_site if prev else None

    def on_duplicate_data(self, d: wire.Data, src: str, now: int) -> None:
        pass

    def on_duplicate_ack(self, a: wire.Ack, src: str, now: int) -> None:
        pass

    def on_new_data(self, key: tuple[str, int], now: int) -> None:
        pass

    def on_new_highest(self, a: wire.Ack, now: int) -> None:
        pass

    def on_processed(self, a: wire.Ack, now: int) -> None:
        pass

    def on_newer_epoch(self, epoch: int, now: int) -> None:
        pass

    def on_new_ring(self, nr: wire.NewRing, src: str, now: int) -> None:
        if nr.epoch > self.epoch:
            self.fence(nr.last_t, nr.epoch, now, nr.lineage)
            self.server = nr.recovery_site

    def on_other(self, frame: wire.Frame, src: str, now: int) -> None:
        pass


def source_node(label: str) -> str:
    """The host behind a source label (a restarted source publishes as "name~tag")."""
    return label.split("~", 1)[0]

