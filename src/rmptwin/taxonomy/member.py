"""A taxonomy group member: a receiver that delivers in gseq order, repairs gaps, watches the
sequencer, and sequences itself when it is the head of the succession.

What every protocol shares lives here; ``ub``, ``bb``, ``uub`` and ``gup`` add their frames.

- **Delivery.** Messages are held by gseq in ``log`` (src "" is a no-op) and delivered in
  gseq order (``Kind.DELIVER``, as RMP's receivers, so one agreement and latency definition
  covers both).
- **Receiver loss.** A gap (a gseq above the next one to deliver is known: a later message, an
  ORDER, the sequencer's heartbeat top) stands ``nak_ns``, then the member NAKs the sequencer
  for the missing range (at most ``nak_span``), again every ``retry_ns`` until filled. The
  sequencer (any member, for the takeover) answers with RETX frames from its log.
- **Sequencer failure** (crash faults; the seed is silent, so this is ours, kept simple, after
  virtual synchrony's flush). The sequencer heartbeats when idle; a member that hears nothing
  from it for ``suspect_ns`` suspects it, and the next member of the succession that is not
  suspected takes over (``takeover.SuccessorTakeover``): it broadcasts TAKEOVER(epoch + 1); every
  member stops accepting first copies, moves to the new epoch and answers STATE (the gseqs
  above the successor's top it holds); the successor fetches each of them (NAK/RETX), fills
  the gseqs nobody holds with no-ops, and broadcasts NEWEPOCH(floor, no-ops). Members then
  accept frames of the new epoch only; senders resubmit what was not sequenced below the
  floor. Nothing a live member delivered is lost: every gseq a member holds is in the cut.
  The replaced sequencer is asked too (it may only have been slow); a member passed over as
  failed that delivered past the cut leaves the group (logged as a CRASH with a reason), as
  virtual synchrony excludes it, rather than disagree. Limits: crash faults; a member silent
  through ``max_retries`` TAKEOVERs is presumed failed; no member rejoins.
"""

from __future__ import annotations

from collections.abc import Hashable

from rmptwin.core.events import Event, Kind
from rmptwin.taxonomy.codec import Frame, Heartbeat, Nak, NewEpoch, Retx, Seq, State, Takeover
from rmptwin.taxonomy.config import TaxonomyConfig
from rmptwin.taxonomy.node_base import TaxonomyNode, runs_of
from rmptwin.taxonomy.takeover import SuccessorTakeover

NOOP = ("", -1, b"")


class MemberCore(TaxonomyNode):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.log: dict[int, tuple[str, int, bytes]] = {}
        self.next = 0                 # next gseq to deliver
        self.top_seen = -1            # highest gseq known to exist
        self.floor = 0                # first gseq of this epoch
        self.flushing = False         # answered a TAKEOVER, waiting for its NEWEPOCH
        self.suspected: set[str] = set()
        self.last_heard = 0
        self.delivered = 0
        # as the sequencer
        self.next_gseq = 0
        self.index: dict[tuple[str, int], int] = {}   # (src, src_seq) -> gseq, to refuse duplicates
        self.takeover: SuccessorTakeover | None = None
        self.last_group_send = -1
        self.started = False

    # -- roles ------------------------------------------------------------------
    @property
    def is_sequencer(self) -> bool:
        return self.sequencer == self.name and self.takeover is None and not self.flushing

    def start(self, now: int) -> None:
        self.started = True
        self.last_heard = now
        if self.sequencer == self.name:
            self.timers.set("heartbeat", now + self.cfg.heartbeat_ns)
        else:
            self.timers.set("watch", now + self.cfg.suspect_ns)

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        if self.excluded:
            return
        if not self.started:
            self.start(now)
        if src == self.sequencer:
            self.last_heard = now
            self.heard = True
        super().receive_datagram(data, src, now)

    def get_timer(self) -> int | None:
        t = super().get_timer()
        return 0 if t is None and not self.started else t   # first call: start at once

    def handle_timer(self, now: int) -> None:
        if self.excluded:
            return
        if not self.started:
            self.start(now)
        super().handle_timer(now)

    # -- frames -------------------------------------------------------------------
    def on_frame(self, frame: Frame, src: str, now: int) -> None:
        epoch = getattr(frame, "epoch", -1)
        if epoch > self.epoch and isinstance(frame, (Heartbeat, Seq, Retx, NewEpoch)) and src in self.cfg.members:
            self.catch_up(frame, src, now)   # an epoch went by without us (we were cut off, or slow)
            return
        if isinstance(frame, Seq):
            if frame.epoch == self.epoch and not self.flushing:
                self.accept_first_copy(frame, src, now)
        elif isinstance(frame, Retx):
            if frame.epoch == self.epoch:
                self.store(frame.gseq, frame.src, frame.src_seq, frame.payload, now)
                if self.takeover is not None:
                    self.takeover.maybe_done_after_store(now)
        elif isinstance(frame, Nak):
            self.serve_nak(frame, src, now)
        elif isinstance(frame, Heartbeat):
            if frame.epoch == self.epoch and not self.flushing:
                self.see_top(frame.top, now)
        elif isinstance(frame, Takeover):
            self.on_takeover(frame, src, now)
        elif isinstance(frame, State):
            if self.takeover is not None:
                self.takeover.on_state(frame, src, now)
            elif self.is_sequencer and frame.epoch == self.epoch:
                self.unicast(NewEpoch(self.epoch, self.floor, self.noops), src)   # it missed NEWEPOCH
        elif isinstance(frame, NewEpoch):
            self.on_new_epoch(frame, src, now)
        else:
            self.on_protocol_frame(frame, src, now)

    def accept_first_copy(self, frame: Seq, src: str, now: int) -> None:
        self.store(frame.gseq, frame.src, frame.src_seq, frame.payload, now)

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        """Frames only one protocol has (subclasses)."""

    # -- holding and delivering -----------------------------------------------------
    def store(self, gseq: int, src: str, src_seq: int, payload: bytes, now: int) -> None:
        if gseq < self.next or gseq in self.log:
            return
        self.log[gseq] = (src, src_seq, payload)
        if src:
            self.index[(src, src_seq)] = gseq
        self.see_top(gseq, now)
        self.deliver_ready(now)

    def deliver_ready(self, now: int) -> None:
        log = self.log
        while self.next in log:
            src, src_seq, payload = log[self.next]
            if src:
                self.delivered += 1
                self.emit(Event(Kind.DELIVER, src, src_seq, self.next, len(payload), {"stripe": 0}))
            self.next += 1
        if self.next > self.top_seen:
            self.timers.cancel("nak")

    def see_top(self, gseq: int, now: int) -> None:
        if gseq > self.top_seen:
            self.top_seen = gseq
        if self.top_seen >= self.next and self.next not in self.log and not self.timers.has("nak"):
            self.timers.set("nak", now + self.cfg.nak_ns)

    def missing(self) -> tuple[int, int] | None:
        """The first gap: (first, last) gseq to ask for, or None."""
        if self.next > self.top_seen or self.next in self.log:
            return None
        last = self.next
        stop = min(self.top_seen, self.next + self.cfg.nak_span - 1)
        while last + 1 <= stop and last + 1 not in self.log:
            last += 1
        return self.next, last

    def serve_nak(self, frame: Nak, src: str, now: int) -> None:
        for g in range(frame.first, min(frame.last, frame.first + self.cfg.nak_span - 1) + 1):
            entry = self.log.get(g)
            if entry is not None:
                self.unicast(Retx(self.epoch, g, *entry), src)
                self.emit(Event(Kind.RETX_SENT, entry[0], entry[1], g, detail={"to": src}))
            elif self.is_sequencer:
                self.serve_missing(g, src, now)

    def serve_missing(self, gseq: int, requester: str, now: int) -> None:
        """The sequencer was asked for a gseq it does not hold (UUB forwards to its sender)."""

    # -- timers ---------------------------------------------------------------------
    def on_timer(self, key: Hashable, now: int) -> None:
        if key == "nak":
            gap = self.missing()
            if gap is not None and not self.flushing and self.takeover is None:
                self.unicast(Nak(self.epoch, *gap), self.sequencer)
                self.emit(Event(Kind.NACK_SENT, gseq=gap[0], detail={"last": gap[1]}))
            if self.next <= self.top_seen:
                self.timers.set("nak", now + self.cfg.retry_ns)
        elif key == "heartbeat":
            if self.is_sequencer:
                if now - self.last_group_send >= self.cfg.heartbeat_ns:
                    self.broadcast_seq_frame(Heartbeat(self.epoch, self.heartbeat_top()), now)
                self.timers.set("heartbeat", now + self.cfg.heartbeat_ns)
        elif key == "watch":
            self.watch(now)
        elif key == "flush":
            if self.flushing:   # our STATE or its NEWEPOCH was lost: say it again
                self.unicast(State(self.epoch, runs_of(g for g in self.log if g >= self.next)), self.sequencer)
                self.timers.set("flush", now + self.cfg.retry_ns)
        elif key == "newepoch":
            if self.is_sequencer and self.repeats:
                self.repeats -= 1
                self.broadcast_seq_frame(NewEpoch(self.epoch, self.floor, self.noops), now)
                self.timers.set("newepoch", now + self.cfg.retry_ns)
        elif key == "takeover" and self.takeover is not None:
            self.takeover.on_retry(now)
        else:
            self.on_protocol_timer(key, now)

    def on_protocol_timer(self, key: Hashable, now: int) -> None:
        """Timers only one protocol has (subclasses)."""

    def broadcast_seq_frame(self, frame: Frame, now: int) -> None:
        self.last_group_send = now
        self.broadcast(frame)

    # -- failure and takeover -------------------------------------------------------------
    def watch(self, now: int) -> None:
        if self.sequencer == self.name:
            return
        # Before the first word from the first sequencer, allow it ten times as long: hosts of a
        # real run start one after another.
        patience = self.cfg.suspect_ns * (1 if self.heard else 10)
        if now - self.last_heard >= patience:
            self.suspected.add(self.sequencer)
            self.emit(Event(Kind.FAILURE_REPORT, detail={"suspect": self.sequencer}))
            head = self.successor()
            if head == self.name:
                self.start_takeover(now)
                return
            self.sequencer, self.last_heard, self.heard = head, now, True
        self.timers.set("watch", self.last_heard + self.cfg.suspect_ns * (1 if self.heard else 10))

    def successor(self) -> str:
        return next(m for m in self.cfg.members if m not in self.suspected)

    def start_takeover(self, now: int) -> None:
        previous = self.cfg.members[self.cfg.members.index(self.name) - 1]
        self.sequencer = self.name
        self.epoch += 1
        self.timers.cancel("nak")
        self.emit(Event(Kind.REFORM_START, detail={"epoch": self.epoch}))
        # The sequencer it replaces is asked too: if it was only slow (a false suspicion) its
        # STATE brings what it sequenced; if it crashed, max_retries unanswered TAKEOVERs pass it over.
        live = [m for m in self.cfg.members if (m not in self.suspected or m == previous) and m != self.name]
        self.takeover = SuccessorTakeover(self, live, now)

    def on_takeover(self, frame: Takeover, src: str, now: int) -> None:
        if frame.epoch < self.epoch or (frame.epoch == self.epoch and src != self.sequencer):
            return
        if frame.epoch > self.epoch:
            for m in self.cfg.members:   # everyone before src in the succession has failed
                if m == src:
                    break
                self.suspected.add(m)
            self.epoch, self.sequencer, self.flushing = frame.epoch, src, True
            self.last_heard = now
            self.takeover = None
            self.timers.cancel("nak")
            self.timers.set("flush", now + self.cfg.retry_ns)
            self.timers.set("watch", now + self.cfg.suspect_ns)
        if self.flushing:
            self.unicast(State(self.epoch, runs_of(g for g in self.log if g > frame.top)), src)

    def catch_up(self, frame: Heartbeat | Seq | Retx | NewEpoch, src: str, now: int) -> None:
        """Join the epoch ``src`` runs: its NEWEPOCH gives the cut; anything else, ask for it."""
        if type(frame) is NewEpoch:
            self.epoch, self.sequencer, self.flushing = frame.epoch, src, True
            self.takeover, self.last_heard = None, now
            self.timers.cancel("heartbeat")
            self.on_new_epoch(frame, src, now)
            self.timers.set("watch", now + self.cfg.suspect_ns)
        elif self.asked_epoch < frame.epoch:
            self.asked_epoch = frame.epoch
            self.unicast(State(frame.epoch, ()), src)   # its sequencer answers a late STATE with NEWEPOCH

    def on_new_epoch(self, frame: NewEpoch, src: str, now: int) -> None:
        if frame.epoch != self.epoch or src != self.sequencer or not self.flushing:
            return
        if self.next > frame.floor or any(g < self.next and self.log.get(g, NOOP)[0] for g in frame.noops):
            # It delivered what the new epoch does not keep (it was passed over as failed): as
            # virtual synchrony has it, it leaves the group rather than disagree.
            self.excluded = True
            self.emit(Event(Kind.CRASH, detail={"reason": "excluded: delivered past the new epoch's cut"}))
            return
        for g in frame.noops:
            if g >= self.next:
                self.log[g] = NOOP
        for g in [g for g in self.log if g >= frame.floor]:
            del self.log[g]   # never happens with a complete STATE; kept so the cut always holds
        self.flushing, self.floor = False, frame.floor
        self.timers.cancel("flush")
        self.see_top(frame.floor - 1, now)
        self.deliver_ready(now)

    def finish_takeover(self, floor: int, noops: list[int], now: int) -> None:
        """Called by the takeover when the successor holds every gseq any member holds."""
        for g in noops:
            self.log[g] = NOOP
        self.takeover, self.floor, self.noops = None, floor, tuple(noops)
        self.next_gseq = floor
        self.deliver_ready(now)
        self.emit(Event(Kind.REFORM_DONE, gseq=floor, detail={"epoch": self.epoch, "token_site": self.name,
                                                              "noops": len(noops)}))
        self.repeats = 2     # NEWEPOCH goes out three times: senders have no other way to hear it
        self.broadcast_seq_frame(NewEpoch(self.epoch, floor, self.noops), now)
        self.timers.set("newepoch", now + self.cfg.retry_ns)
        self.timers.set("heartbeat", now + self.cfg.heartbeat_ns)
        self.timers.cancel("watch")
        self.became_sequencer(now)

    def heartbeat_top(self) -> int:
        """The top gseq a heartbeat announces: members NAK up to it."""
        return self.next_gseq - 1

    def became_sequencer(self, now: int) -> None:
        """Protocol state a new sequencer rebuilds from its log (subclasses)."""

    noops: tuple[int, ...] = ()
    repeats = 0
    heard = False       # heard from the current sequencer since it took the role
    asked_epoch = -1    # the newest epoch it asked a NEWEPOCH for
    excluded = False    # left the group: it delivered past a new epoch's cut
