"""A taxonomy sender: numbers its messages, keeps each until it is sequenced, resends on a timer,
and resubmits after a takeover what the new epoch did not keep.

A sender listens to the group (that is how UB and BB senders see their messages sequenced)
and learns a new sequencer from its NEWEPOCH; it is not a member and delivers nothing.
Protocols (``ub``, ``bb``, ``uub``, ``gup``) say how a message is submitted and what
acknowledges it.
"""

from __future__ import annotations

from collections.abc import Hashable

from rmptwin.core.events import Event, Kind
from rmptwin.taxonomy.codec import Frame, NewEpoch
from rmptwin.taxonomy.config import TaxonomyConfig
from rmptwin.taxonomy.node_base import TaxonomyNode


class SenderCore(TaxonomyNode):
    def __init__(self, name: str, config: TaxonomyConfig) -> None:
        super().__init__(name, config)
        self.next_seq = 0
        self.payloads: dict[int, bytes] = {}       # every message, for repair
        self.outstanding: set[int] = set()         # not yet sequenced
        self.placed: dict[int, int] = {}           # src_seq -> gseq, once sequenced
        self.by_gseq: dict[int, int] = {}          # gseq -> src_seq
        self.failed: set[str] = set()              # members a takeover passed over

    def publish(self, stripe: int, payload: bytes, now: int) -> int:
        seq = self.next_seq
        self.next_seq += 1
        self.payloads[seq] = bytes(payload)
        self.outstanding.add(seq)
        self.emit(Event(Kind.SEND, self.name, seq, -1, len(payload), {"stripe": 0}))
        self.submit(seq, now, first=True)
        self.timers.set(("retry", seq), now + self.cfg.retry_ns)
        return seq

    def acked(self, seq: int, gseq: int) -> None:
        if seq not in self.outstanding:
            return
        self.outstanding.discard(seq)
        self.placed[seq] = gseq
        self.by_gseq[gseq] = seq
        self.timers.cancel(("retry", seq))
        self.emit(Event(Kind.SRC_ACKED, self.name, seq, gseq))

    def on_timer(self, key: Hashable, now: int) -> None:
        if isinstance(key, tuple) and key[0] == "retry":
            seq = key[1]
            if seq in self.outstanding:
                self.emit(Event(Kind.SRC_RETX, self.name, seq))
                self.submit(seq, now, first=False)
                self.timers.set(key, now + self.cfg.retry_ns)
        else:
            self.on_protocol_timer(key, now)

    def on_frame(self, frame: Frame, src: str, now: int) -> None:
        if type(frame) is NewEpoch:
            self.on_new_epoch(frame, src, now)
        else:
            self.on_protocol_frame(frame, src, now)

    def on_new_epoch(self, frame: NewEpoch, src: str, now: int) -> None:
        if frame.epoch <= self.epoch:
            return
        self.epoch, self.sequencer = frame.epoch, src
        self.failed.update(self.cfg.members[:self.cfg.members.index(src)] if src in self.cfg.members else ())
        noops = set(frame.noops)
        for seq, g in list(self.placed.items()):
            if g >= frame.floor or g in noops:   # the new epoch did not keep it: sequence it again
                del self.placed[seq]
                self.by_gseq.pop(g, None)
                self.outstanding.add(seq)
        self.reset_epoch(frame, now)
        for seq in sorted(self.outstanding):
            self.submit(seq, now, first=False)
            self.timers.set(("retry", seq), now + self.cfg.retry_ns)

    # -- for protocols ------------------------------------------------------------------
    def submit(self, seq: int, now: int, *, first: bool) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset_epoch(self, frame: NewEpoch, now: int) -> None:
        """Protocol state a new epoch voids (GUP: an update in progress)."""

    def on_protocol_frame(self, frame: Frame, src: str, now: int) -> None:
        """Frames only one protocol's senders handle."""

    def on_protocol_timer(self, key: Hashable, now: int) -> None:
        """Timers only one protocol's senders have."""
