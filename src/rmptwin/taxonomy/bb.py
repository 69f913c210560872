"""Broadcast-broadcast with ISIS-style FIFO NAK repair (seed: sequencer-taxonomy, "Virtual
Synchrony/ISIS").

Two levels, as the seed describes ISIS:

- **FIFO level.** A sender broadcasts DATA (src, src_seq, payload) to every member and the
  sequencer. A member that sees a sender's src_seq jump NAKs that sender (FIFO_NAK) for the
  missing ones, and the sender unicasts them again.
- **Total order.** The sequencer numbers each sender's messages in FIFO order and broadcasts
  a small ORDER (gseq, src, src_seq) -- the message is not broadcast twice, only its number
  (the seed's "broadcasts it ... again" is this ordering message). Members deliver a gseq once
  they hold both its ORDER and its DATA; a missing ORDER, or DATA still missing when the gap
  is NAKed, is repaired from the sequencer (NAK, RETX with the payload).

A sender's message is acknowledged by its ORDER; an unordered message is resent to the
sequencer by unicast.
"""

from __future__ import annotations

from rmptwin.core.events import Event, Kind
from rmptwin.taxonomy.codec import Data, FifoNak, Frame, Order, Retx
from rmptwin.taxonomy.config import TaxonomyConfig
from rmptwin.taxonomy.member import MemberCore
from rmptwin.taxonomy.sender import SenderCore


class BbMember(MemberCore):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.unordered: dict[tuple[str, int], bytes] = {}     # DATA without its ORDER yet
        self.awaiting: dict[tuple[str, int], int] = {}        # ORDER without its DATA yet: key -> gseq
        self.fifo_top: dict[str, int] = {}                    # highest src_seq seen per sender
        self.expected: dict[str, int] = {}                    # as sequencer: next src_seq to order
        self.held_back: dict[str, dict[int, bytes]] = {}      # as sequencer: out of FIFO order

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if isinstance(frame, Data):
            self.on_data(frame, src, now)
        elif isinstance(frame, Order):
            if frame.epoch == self.epoch and not self.flushing:
                self.on_order(frame, now)

    def on_data(self, frame: Data, src: str, now: int) -> None:
        key = (frame.src, frame.src_seq)
        top = self.fifo_top.get(frame.src, -1)
        if frame.src_seq > top + 1:
            self.unicast(FifoNak(frame.src, top + 1, frame.src_seq - 1), src)
            self.emit(Event(Kind.NACK_SENT, frame.src, top + 1, detail={"level": "fifo", "last": frame.src_seq - 1}))
        self.fifo_top[frame.src] = max(top, frame.src_seq)
        if self.is_sequencer:
            self.sequence(frame, src, now)
            return
        if key in self.index:
            return
        g = self.awaiting.pop(key, None)
        if g is not None:
            self.store(g, frame.src, frame.src_seq, frame.payload, now)
        else:
            self.unordered[key] = frame.payload

    def on_order(self, frame: Order, now: int) -> None:
        if frame.gseq < self.next or frame.gseq in self.log:
            return
        key = (frame.src, frame.src_seq)
        payload = self.unordered.pop(key, None)
        if payload is None:
            self.awaiting[key] = frame.gseq
            self.see_top(frame.gseq, now)    # NAKed if its DATA does not come within nak_ns
        else:
            self.store(frame.gseq, frame.src, frame.src_seq, payload, now)

    # -- as the sequencer ------------------------------------------------------------
    def sequence(self, frame: Data, src: str, now: int) -> None:
        key = (frame.src, frame.src_seq)
        g = self.index.get(key)
        if g is not None:
            self.unicast(Order(self.epoch, g, frame.src, frame.src_seq), src)   # the sender missed it
            return
        expected = self.expected.get(frame.src, 0)
        if frame.src_seq > expected:
            self.held_back.setdefault(frame.src, {})[frame.src_seq] = frame.payload
            return
        self.order(frame.src, frame.src_seq, frame.payload, now)   # in FIFO order (or resubmitted)
        if frame.src_seq == expected:
            nxt, waiting = expected + 1, self.held_back.get(frame.src, {})
            while nxt in waiting:
                self.order(frame.src, nxt, waiting.pop(nxt), now)
                nxt += 1
            self.expected[frame.src] = nxt

    def order(self, src: str, src_seq: int, payload: bytes, now: int) -> None:
        g, self.next_gseq = self.next_gseq, self.next_gseq + 1
        self.unordered.pop((src, src_seq), None)
        self.broadcast_seq_frame(Order(self.epoch, g, src, src_seq), now)
        self.store(g, src, src_seq, payload, now)

    def became_sequencer(self, now: int) -> None:
        for (src, seq) in self.index:
            self.expected[src] = max(self.expected.get(src, 0), seq + 1)
        for (src, seq), payload in sorted(self.unordered.items(), key=lambda kv: kv[0][1]):
            if (src, seq) not in self.index:
                self.sequence(Data(src, seq, payload), src, now)


class BbSender(SenderCore):
    def submit(self, seq: int, now: int, *, first: bool) -> None:
        frame = Data(self.name, seq, self.payloads[seq])
        if first:
            self.broadcast(frame)
        else:
            self.unicast(frame, self.sequencer)    # only the sequencer needs it again: members NAK

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        if isinstance(frame, (Order, Retx)) and frame.src == self.name and frame.epoch == self.epoch:
            self.acked(frame.src_seq, frame.gseq)
        elif isinstance(frame, FifoNak) and frame.src == self.name:
            for seq in range(frame.first, min(frame.last, frame.first + self.cfg.nak_span - 1) + 1):
                if seq in self.payloads:
                    self.unicast(Data(self.name, seq, self.payloads[seq]), src)
