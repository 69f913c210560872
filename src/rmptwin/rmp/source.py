"""S_P: a primary source (seed 2.1, 4.2, 4.3).

``publish`` labels a message (s, M_s) per stripe and multicasts it on the stripe's group.
The source re-sends it every tau_r until an ack carries it (the first wait also covers one
token period in time-driven mode, when acks come only every tau_t). With keys (seed 7.1)
the payload travels sealed under the source's key (``seal.Sealer.seal_source``), so only
the R_T can read it, and only they verify it came from us. After k_r unanswered
re-sends it reports the token site it last heard of to a reformation server. When a
reformed ring starts below the ack that carried a message (that ack died with the old
token site), the message is sent again so the new ring acknowledges it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import rmp_group
from rmptwin.core.sansio import Unicast
from rmptwin.core.timing import Timing
from rmptwin.rmp import wire
from rmptwin.rmp.corebase import CoreBase, TimerKey
from rmptwin.rmp.failure_report import Reporter
from rmptwin.rmp.seal import KeySet

# acks remembered per stripe to re-send what a reformation dropped
ACK_MEMORY = 4096


@dataclass
class _Outstanding:
    payload: bytes
    attempts: int = 0


class _Stripe:
    def __init__(self, initial_site: str | None) -> None:
        self.next_seq = 1
        self.outstanding: dict[int, _Outstanding] = {}
        self.acked_t: dict[int, tuple[int, int]] = {}   # M -> (epoch, token) of its ack (recent)
        self.acked: set[int] = set()
        self.acked_below = 1
        self.epoch = 1
        self.site = initial_site                   # token site as last heard of
        self.highest_t = 0
        self.progress_at = 0                       # when the ring last showed a new ack
        self.payloads: dict[int, bytes] = {}       # recent acked payloads, to re-send after reformation


class SourceCore(CoreBase):
    def __init__(self, name: str, stripes: list[int], timing: Timing, reformers: list[str],
                 initial_sites: dict[int, str | None] | None = None, incarnation: str | None = None, *,
                 keys: KeySet | None = None) -> None:
        super().__init__(name, keys)
        # A restarted source cannot know how far it had numbered its messages, and the
        # receivers remember M_s,r for it: it publishes under a fresh label "name~tag".
        self.label = name if incarnation is None else f"{name}~{incarnation}"
        self.tm = timing
        self.reporter = Reporter(self, reformers, timing)
        self.stripes = {k: _Stripe((initial_sites or {}).get(k)) for k in stripes}

    def groups(self) -> frozenset[str]:
        return frozenset(rmp_group(k) for k in self.stripes)

    # ----------------------------------------------------------------- publishing
    def publish(self, stripe: int, payload: bytes, now: int) -> int:
        st = self.stripes.get(stripe)
        if st is None:
            raise ValueError(f"source {self.name} does not publish on stripe {stripe}")
        seq = st.next_seq
        st.next_seq += 1
        # sealed once: every re-send carries the same envelope (seal: one nonce, one plaintext)
        sent = bytes(payload) if self.sealer is None else self.sealer.seal_source(self.label, stripe, seq, payload)
        st.outstanding[seq] = _Outstanding(sent)
        self.multicast(stripe, wire.Data(stripe, self.label, seq, st.acked_below, sent), control=False)
        self.emit(Event(Kind.SEND, self.label, seq, -1, len(payload), {"stripe": stripe}))
        self.timers.set((stripe, seq), now + self._wait(first=True))
        return seq

    def _resend(self, stripe: int, seq: int, now: int) -> None:
        st = self.stripes[stripe]
        out = st.outstanding.get(seq)
        if out is None:
            return
        out.attempts += 1
        quiet = now - st.progress_at > self.tm.k_r * self._wait(first=False)
        if out.attempts > self.tm.k_r and st.site is not None and quiet:
            # no ack after k_r tries and no sign of the ring moving: the token site seems
            # down (seed 4.3). A ring that still passes acks is only behind, not down.
            self.reporter.report(stripe, st.epoch, st.site, wire.REASON_NO_ACK, st.highest_t, now)
        self.multicast(stripe, wire.Data(stripe, self.label, seq, st.acked_below, out.payload))
        self.emit(Event(Kind.SRC_RETX, self.label, seq, -1, len(out.payload),
                        {"stripe": stripe, "attempt": out.attempts}))
        self.timers.set((stripe, seq), now + self._wait(first=False))

    def _wait(self, first: bool) -> int:
        """How long to wait for an ack. Time-driven rings ack whatever waits once every tau_t
        (whichever site holds the token then and has the message), so re-sending sooner only
        floods the ring; event-driven rings ack on arrival, so tau_r."""
        if not self.tm.time_driven:
            return self.tm.tau_r
        return self.tm.tau_t + self.tm.tau_r if first else max(self.tm.tau_r, self.tm.tau_t + self.tm.dn)

    # ----------------------------------------------------------------- frames in
    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        frame = self.decode_frame(data, src)
        if frame is None:
            return
        if isinstance(frame, wire.Retx):
            frame = frame.original
        if isinstance(frame, wire.Ack):
            self._on_ack(frame, now)
        elif isinstance(frame, wire.Nack):
            self._serve(frame, src)
        elif isinstance(frame, wire.NewRing):
            self._on_new_ring(frame, now)
        elif isinstance(frame, wire.ReportAck):
            self.reporter.on_ack(frame, now)
        else:
            self.ignored += 1   # other sources' messages, tokens of secondary rings, ...

    def _on_ack(self, a: wire.Ack, now: int) -> None:
        st = self.stripes.get(a.stripe)
        if st is None or a.epoch < st.epoch and a.token > st.highest_t:
            return
        heard = a.token <= st.highest_t
        if not heard:
            st.highest_t = a.token
            st.site = a.next_site
            st.progress_at = now
        fresh = 0
        for i, (s, seq) in enumerate(a.msgs):
            if s != self.label:
                continue
            out = st.outstanding.pop(seq, None)
            if out is None:
                continue
            fresh += 1
            self.timers.cancel((a.stripe, seq))
            st.acked_t[seq] = (a.epoch, a.token)
            st.payloads[seq] = out.payload
            st.acked.add(seq)
            while st.acked_below in st.acked:
                st.acked.discard(st.acked_below)
                st.acked_below += 1
            self.emit(Event(Kind.SRC_ACKED, self.label, seq, a.first_gseq + i, len(out.payload),
                            {"stripe": a.stripe, "token": a.token}))
        if heard and not fresh:
            self.duplicates += 1   # an ack heard before (a re-sent pass, a replay): nothing in it was new
        while len(st.acked_t) > ACK_MEMORY:
            old = next(iter(st.acked_t))
            del st.acked_t[old]
            st.payloads.pop(old, None)

    def _serve(self, n: wire.Nack, src: str) -> None:
        """A ring member lacks some of our messages that it needs to acknowledge them."""
        st = self.stripes.get(n.stripe)
        if st is None or n.want != wire.WANT_MSGS or n.src != self.label:
            return
        for seq in range(n.lo, min(n.hi, n.lo + 128 - 1) + 1):
            out = st.outstanding.get(seq)
            payload = out.payload if out is not None else st.payloads.get(seq)
            if payload is not None:
                self.send(wire.Retx(n.stripe, wire.Data(n.stripe, self.label, seq, st.acked_below, payload)),
                          Unicast(src))
                self.emit(Event(Kind.RETX_SENT, self.label, seq, -1, len(payload), {"stripe": n.stripe}))

    def _on_new_ring(self, nr: wire.NewRing, now: int) -> None:
        st = self.stripes.get(nr.stripe)
        if st is None or nr.epoch <= st.epoch:
            return
        st.epoch = nr.epoch
        st.site = nr.token_site
        st.highest_t = nr.last_t
        for seq in [m for m, (e, t) in st.acked_t.items()
                    if e < nr.epoch and (t > nr.last_t or wire.superseded(nr.lineage, e, t))]:
            # that ack died with the old token site: the new ring must acknowledge it again
            # (an ack of the new ring itself may well have come before this NEW_RING)
            del st.acked_t[seq]
            st.outstanding[seq] = _Outstanding(st.payloads.pop(seq))
            st.acked_below = min(st.acked_below, seq)
            self._resend(stripe=nr.stripe, seq=seq, now=now)
        for out in st.outstanding.values():
            out.attempts = 0

    def on_timer(self, key: TimerKey, now: int) -> None:
        if key[0] == "report":
            self.reporter.on_timer(key[1], now)
        else:
            self._resend(key[0], key[1], now)
