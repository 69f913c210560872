"""Unicast-broadcast (seed: sequencer-taxonomy): the sender unicasts its message to the
sequencer, which numbers it and broadcasts it. A sender sees its own message in the
broadcast (its acknowledgement); a resubmission of a message already numbered is answered
with a unicast RETX of it."""

from __future__ import annotations

from rmptwin.taxonomy.codec import Frame, Retx, Seq, Submit
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore


class UbMember(MemberCore):
    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if type(frame) is Submit and self.is_sequencer:
            self.sequence(frame, src, now)

    def sequence(self, frame: Submit, src: str, now: int) -> None:
        g = self.index.get((frame.src, frame.src_seq))
        if g is not None:
            self.unicast(Retx(self.epoch, g, frame.src, frame.src_seq, self.log[g][2]), src)
            return
        g, self.next_gseq = self.next_gseq, self.next_gseq + 1
        self.broadcast_seq_frame(Seq(self.epoch, g, frame.src, frame.src_seq, frame.payload), now)
        self.store(g, frame.src, frame.src_seq, frame.payload, now)


class UbSender(SenderCore):
    def submit(self, seq: int, now: int, *, first: bool) -> None:
        self.unicast(Submit(self.name, seq, self.payloads[seq]), self.sequencer)

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if isinstance(frame, (Seq, Retx)) and frame.src == self.name and frame.epoch == self.epoch:
            self.acked(frame.src_seq, frame.gseq)
