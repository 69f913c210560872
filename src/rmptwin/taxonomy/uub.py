"""Unicast-unicast-broadcast (seed: sequencer-taxonomy): the sender asks the sequencer for a
number (REQUEST, no payload), the sequencer answers with it (GRANT), and the sender broadcasts
the numbered message itself. The sequencer never carries a payload.

Repair: a member NAKs the sequencer; the sequencer answers from its own log (it is a member
and hears the broadcasts) or, for a gseq it lacks, FORWARDs the NAK to the sender it granted
that gseq to, which unicasts a RETX to the member. A re-REQUEST of a message already numbered
gets its GRANT again (done=1 once the sequencer holds it).
"""

from __future__ import annotations

from rmptwin.taxonomy.codec import Forward, Frame, Grant, Request, Retx, Seq
from rmptwin.taxonomy.config import TaxonomyConfig
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore


class UubMember(MemberCore):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.granted: dict[int, str] = {}                  # gseq -> the sender holding it
        self.grants: dict[tuple[str, int], int] = {}       # (src, src_seq) -> gseq granted

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if type(frame) is Request and self.is_sequencer:
            key = (frame.src, frame.src_seq)
            g = self.index.get(key)
            if g is not None:
                self.unicast(Grant(self.epoch, g, frame.src_seq, 1), src)
                return
            g = self.grants.get(key)
            if g is None:
                g, self.next_gseq = self.next_gseq, self.next_gseq + 1
                self.grants[key], self.granted[g] = g, src
            self.unicast(Grant(self.epoch, g, frame.src_seq, 0), src)

    def serve_missing(self, gseq: int, requester: str, now: int) -> None:
        sender = self.granted.get(gseq)
        if sender is not None:
            self.unicast(Forward(self.epoch, gseq, requester), sender)

    def heartbeat_top(self) -> int:
        return self.next - 1   # what it holds: a grant whose broadcast is still on its way is not a gap

    def became_sequencer(self, now: int) -> None:
        self.granted.clear()
        self.grants.clear()


class UubSender(SenderCore):
    def submit(self, seq: int, now: int, *, first: bool) -> None:
        self.unicast(Request(self.name, seq), self.sequencer)

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if isinstance(frame, Grant) and frame.epoch == self.epoch and frame.src_seq in self.payloads:
            seq = frame.src_seq
            if not frame.done and seq in self.outstanding:
                self.broadcast(Seq(self.epoch, frame.gseq, self.name, seq, self.payloads[seq]))
            self.acked(seq, frame.gseq)
        elif isinstance(frame, Forward) and frame.epoch == self.epoch:
            held = self.by_gseq.get(frame.gseq)
            if held is not None:
                self.unicast(Retx(frame.epoch, frame.gseq, self.name, held, self.payloads[held]), frame.requester)
