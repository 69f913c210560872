"""The successor's side of a sequencer (locker) takeover: collect every live member's STATE,
fetch every gseq some member holds, fill the rest with no-ops, open the new epoch.

See ``member`` for the whole procedure and its limits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmptwin.taxonomy.codec import Heartbeat, Nak, State
from rmptwin.taxonomy.codec import Takeover as TakeoverFrame
from rmptwin.taxonomy.node_base import expand_runs

if TYPE_CHECKING:
    from rmptwin.taxonomy.member import MemberCore


class SuccessorTakeover:
    def __init__(self, core: MemberCore, live: list[str], now: int) -> None:
        self.core = core
        self.waiting = {m: 0 for m in live}    # member -> TAKEOVERs sent without an answer
        self.holders: dict[int, list[str]] = {}  # gseq -> members that hold it
        self.base = core.next - 1               # we hold everything up to here
        core.broadcast_seq_frame(TakeoverFrame(core.epoch, self.base), now)
        core.timers.set("takeover", now + core.cfg.retry_ns)
        self._maybe_done(now)

    def on_state(self, frame: State, src: str, now: int) -> None:
        core = self.core
        if frame.epoch != core.epoch or src not in self.waiting:
            return
        del self.waiting[src]
        for g in expand_runs(frame.runs):
            self.holders.setdefault(g, []).append(src)
        self._fetch()
        self._maybe_done(now)

    def on_retry(self, now: int) -> None:
        core = self.core
        core.broadcast_seq_frame(Heartbeat(core.epoch, self.base), now)   # members waiting must not suspect us
        for m in list(self.waiting):
            self.waiting[m] += 1
            if self.waiting[m] > core.cfg.max_retries:
                del self.waiting[m]          # silent: presumed failed
                core.suspected.add(m)
            else:
                core.unicast(TakeoverFrame(core.epoch, self.base), m)
        self._fetch()
        self._maybe_done(now)
        if core.takeover is self:
            core.timers.set("takeover", now + core.cfg.retry_ns)

    def _lacking(self) -> list[int]:
        log = self.core.log
        return sorted(g for g in self.holders if g not in log and g >= self.core.next)

    def _fetch(self) -> None:
        """NAK a holder of every gseq we lack, one range per holder."""
        core = self.core
        by_holder: dict[str, list[int]] = {}
        for g in self._lacking():
            holders = [h for h in self.holders[g] if h not in core.suspected]
            if holders:
                by_holder.setdefault(holders[0], []).append(g)
        for holder, gs in by_holder.items():
            start = prev = gs[0]
            for g in gs[1:]:
                if g != prev + 1 or g - start >= core.cfg.nak_span:
                    core.unicast(Nak(core.epoch, start, prev), holder)
                    start = g
                prev = g
            core.unicast(Nak(core.epoch, start, prev), holder)

    def maybe_done_after_store(self, now: int) -> None:
        self._maybe_done(now)

    def _maybe_done(self, now: int) -> None:
        core = self.core
        if self.waiting or core.takeover is not self:
            return
        if any(g not in core.log for g in self._lacking()
               if any(h not in core.suspected for h in self.holders[g])):
            return
        top = max([core.next - 1, *self.holders, *core.log])
        noops = [g for g in range(core.next, top + 1) if g not in core.log]
        core.finish_takeover(top + 1, noops, now)
