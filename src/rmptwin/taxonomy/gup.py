"""The Tandem global update protocol with its locker (seed: sequencer-taxonomy, circa 1985).

One update at a time: a sender REQUESTs the lock from the locker (a member; requests queue
in arrival order); the locker GRANTs it to one sender with the update's number (the seed needs
no sequence numbers because updates never overlap; the number here only names the update for
the event log and repair); the sender broadcasts the UPDATE (a SEQ frame); every member ACKs
it to the sender; a member that does not ack within ``retry_ns`` gets the update again by
unicast; once every member acknowledged (or stayed silent through ``max_retries`` resends:
presumed failed), the sender RELEASEs the lock and the locker answers (a GRANT with done=1, the
sender's acknowledgement) and grants the next request.

Locker failure: the next member of the succession takes over the locker as any sequencer
(``member``); an update some member holds stays (the new locker repairs the others); an
update nobody holds is a no-op and its sender asks for the lock again. The lock starts free
in the new epoch. Limit: a lock holder that crashes holds the lock forever (not modelled).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

from rmptwin.taxonomy.codec import Frame, Grant, NewEpoch, Release, Request, Seq, UpdateAck
from rmptwin.taxonomy.config import TaxonomyConfig
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore


class GupMember(MemberCore):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.queue: deque[tuple[str, int]] = deque()   # (sender host, src_seq) waiting for the lock
        self.holder: tuple[str, int, int] | None = None  # (sender host, src_seq, gseq)

    def accept_first_copy(self, frame: Seq, src: str, now: int) -> None:
        self.store(frame.gseq, frame.src, frame.src_seq, frame.payload, now)
        self.unicast(UpdateAck(self.epoch, frame.gseq), src)

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if not self.is_sequencer:
            return
        if isinstance(frame, Request):
            key = (src, frame.src_seq)
            if self.holder is not None and self.holder[:2] == key:
                self.unicast(Grant(self.epoch, self.holder[2], frame.src_seq, 0), src)
            elif (frame.src, frame.src_seq) in self.index:
                g = self.index[(frame.src, frame.src_seq)]
                self.unicast(Grant(self.epoch, g, frame.src_seq, 1), src)
            elif key not in self.queue:
                self.queue.append(key)
        elif isinstance(frame, Release) and frame.epoch == self.epoch:
            if self.holder is not None and self.holder[2] == frame.gseq and self.holder[0] == src:
                self.unicast(Grant(self.epoch, frame.gseq, self.holder[1], 1), src)
                self.holder = None
            elif frame.gseq in self.log and self.log[frame.gseq][0] == src:
                self.unicast(Grant(self.epoch, frame.gseq, self.log[frame.gseq][1], 1), src)   # answer lost
        self.grant_next()

    def grant_next(self) -> None:
        if self.holder is None and self.queue:
            src, seq = self.queue.popleft()
            g, self.next_gseq = self.next_gseq, self.next_gseq + 1
            self.holder = (src, seq, g)
            self.unicast(Grant(self.epoch, g, seq, 0), src)

    def heartbeat_top(self) -> int:
        return self.next - 1   # a granted update not yet broadcast is not missing

    def became_sequencer(self, now: int) -> None:
        self.queue.clear()
        self.holder = None


class GupSender(SenderCore):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.update: tuple[int, int] | None = None      # (src_seq, gseq) being distributed
        self.unacked: dict[str, int] = {}               # member -> resends so far
        self.releasing = False

    def submit(self, seq: int, now: int, *, first: bool) -> None:
        """One global update at a time per sender: only the oldest unsequenced message asks."""
        if self.update is not None:
            if self.update[0] == seq and self.releasing:
                self.unicast(Release(self.epoch, self.update[1]), self.sequencer)
            return   # distributing: the update's own timer resends
        if seq == min(self.outstanding):
            self.unicast(Request(self.name, seq), self.sequencer)

    def acked(self, seq: int, gseq: int) -> None:
        was_outstanding = seq in self.outstanding
        super().acked(seq, gseq)
        if was_outstanding and self.outstanding and self.update is None:
            head = min(self.outstanding)
            self.unicast(Request(self.name, head), self.sequencer)

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if isinstance(frame, Grant) and frame.epoch == self.epoch and frame.src_seq in self.payloads:
            if frame.done:
                if self.update is not None and self.update[1] == frame.gseq:
                    self.update, self.releasing = None, False
                self.acked(frame.src_seq, frame.gseq)
            elif self.update is None and frame.src_seq in self.outstanding:
                self.begin(frame.src_seq, frame.gseq, now)
        elif isinstance(frame, UpdateAck) and self.update is not None and frame.gseq == self.update[1]:
            self.unacked.pop(src, None)
            self.maybe_release()

    def begin(self, seq: int, gseq: int, now: int) -> None:
        self.update = (seq, gseq)
        self.unacked = {m: 0 for m in self.cfg.members if m not in self.failed}
        self.broadcast(Seq(self.epoch, gseq, self.name, seq, self.payloads[seq]))
        self.timers.set("update", now + self.cfg.retry_ns)

    def maybe_release(self) -> None:
        if self.update is not None and not self.unacked and not self.releasing:
            self.releasing = True
            self.unicast(Release(self.epoch, self.update[1]), self.sequencer)

    def on_protocol_timer(self, key: Hashable, now: int) -> None:
        if key != "update" or self.update is None or self.releasing:
            return
        seq, g = self.update
        for m in list(self.unacked):
            self.unacked[m] += 1
            if self.unacked[m] > self.cfg.max_retries:
                del self.unacked[m]          # silent: presumed failed, for this update
            else:
                self.unicast(Seq(self.epoch, g, self.name, seq, self.payloads[seq]), m)
        self.maybe_release()
        self.timers.set("update", now + self.cfg.retry_ns)

    def reset_epoch(self, frame: NewEpoch, now: int) -> None:
        if self.update is not None:
            seq, g = self.update
            self.update, self.releasing, self.unacked = None, False, {}
            self.timers.cancel("update")
            if g < frame.floor and g not in frame.noops:
                self.acked(seq, g)   # some member holds it: the new locker repairs the rest
