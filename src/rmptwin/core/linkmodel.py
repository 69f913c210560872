"""One link model: what happens to a packet offered to one direction of a link.

``LinkDirection.offer(now_ns, size, key)`` answers, for a packet of ``size`` bytes on the
wire (Ethernet + IP + UDP headers included, as both backends count them) arriving at
``now_ns``, either the time it reaches the far end or why it is dropped (``LOSS``,
``QUEUE``, ``DOWN``). The simulator and the user-space relay both call it, so the same
seed drops the same packets in both backends. Pure: no I/O, no
clocks, no randomness but the direction's own seeded stream.

Order of decisions (netem's, which the relay already follows): a link that is down drops
(``DOWN``); then the loss draw (``LOSS``); then the queue limit (``QUEUE``); then FIFO
serialization at the bandwidth, propagation delay and jitter. Loss comes before the queue
so that which packets are lost never depends on how congested a backend happens to be.

**Why keyed draws, not a sequential stream.** A loss draw taken in arrival order from one
``random.Random`` shifts for every packet after one extra control frame, and the two
backends interleave tokens, NACKs, retransmissions and control traffic differently. So
each direction's one seeded stream is a keyed pseudo-random function: BLAKE2b over the
direction's 16-byte stream key (derived from ``stream_seed(seed, link, frm, to)``) and a
packet identity. The identity is what the caller passes (``packetkey.packet_key``): for an RMP DATA
frame (type, stripe, src, src_seq), for ACK/NULL_TOKEN (stripe, epoch, token), for a RETX
the frame it carries, for MoldUDP64 (session, sequence); plus the copy index, the number
of times that identity was already offered to this direction (so a source's re-send is an
independent draw; identities are remembered for at least ``MEMORY`` packets of the
direction). Packets with no stable identity are keyed by a per-kind counter. Links that
neither lose nor jitter take no draws and count nothing. The same DATA frame thus meets
the same draw in both backends whatever else crosses the link and whenever it arrives.
BLAKE2b with the stream key as a prefix measured 0.3-0.65 us here, by load (keyed mode
~1.0 us, ``random.Random`` seeded per packet ~9.5 us); one 16-byte digest gives both the
loss draw (its first 8 bytes) and the jitter draw (its last 8), so changing the jitter
never moves which packets are lost.

**Gilbert-Elliott.** Burstiness needs a channel state that persists across packets, and
that state must not depend on the interleaving either. A time-slotted chain would need
both backends to share one time origin to well under a slot, and slots much longer than
their timing differences (milliseconds), which stretches the spec's per-packet bursts
(``1/p_bg`` packets) into bursts of hundreds of milliseconds. Measured with the quickstart's
London-Singapore parameters, 3 sources at 1,000 msg/s each: 1 ms slots keep only 82 % of
the lost set (Jaccard) when arrivals move by up to 0.1 ms, 74 % at 1 ms; 3 ms slots 96 %
and 88 %. Instead the chain is indexed by the packet's own position in its stream: for
keyed first copies, the per-packet Markov chain of ``(p_gb, p_bg)`` over that stream's
sequence numbers (one chain per source and stripe, per direction), so consecutive messages
of a source are lost in bursts of mean ``1 / p_bg`` exactly as the spec's per-packet model
says, and a message's state is the same in both backends. Every other packet (control
frames, copies after the first) walks one chain in arrival order, the classic per-packet
model. Chains are computed in blocks of ``GE_BLOCK`` indices from the same keyed stream;
each block starts from the stationary distribution, so any index can be recomputed alone
and the loss rate is the stationary one. What this gives up: a burst does not hit several
sources' packets at the same instant.

**Traces.** ``TraceConfig`` replays a measured loss trace instead of drawing: a per-packet
0/1 sequence by the order UDP datagrams are offered to the direction (looping when the run
offers more), or loss intervals by run time (``trace_origin_ns`` is the clock value of t = 0).
The file is read by the spec loader (``model.traces``); this module is only given the
sequence. Where the two backends offer a direction the same datagrams in the same order,
they drop the same ones, and the drop log is the trace.

**Queue.** A drop-tail FIFO of ``queue_packets`` packets (and optionally ``queue_bytes``).
With ``count_in_flight`` (the default) it counts every packet accepted and not yet at the
far end, as netem and the relay do and as the spec's default limit (2 x bandwidth-delay
product) assumes; otherwise only those still waiting for or in the transmitter. Jitter is
uniform in ``[0, jitter_ns)`` and never reorders: a packet leaves no earlier than the one
before it (the spec promises this; both backends do it today). Packets already accepted
when the link goes down or its parameters change leave as decided.

**Duplicates and reordering** (the ``dup_reorder`` nemesis, ``rmptwin.core.nemesis``): with
``reorder`` a packet is, with that chance, held back ``reorder_ns`` beyond its arrival and
exempt from the no-reordering rule, so later packets overtake it; with ``duplicate`` a
packet that got through arrives twice: ``offer`` returns the first copy's time and leaves
the second's in ``duplicate_at`` (-1: none) for the caller to deliver. Both draws come from
a second keyed digest of the same identity, so they never move the loss or jitter draws
and are the same in both backends.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from rmptwin.core.packetkey import UNKEYED, PacketKey
from rmptwin.errors import UserError

LOSS, QUEUE, DOWN = -1, -2, -3
# Ethernet (14) + IPv4 (20) + UDP (8): what a datagram costs on the wire beyond its payload;
# the simulator and an emulated host offer len(payload) + this to a LinkDirection.
WIRE_HEADER_BYTES = 42
REASONS = ("loss", "queue", "down")     # REASONS[-code - 1]: the relay's drop-log order
GE_BLOCK = 1024                         # chain indices computed together (from a stationary start)
MEMORY = 1 << 17                        # identities remembered per generation, for copy indices

_U64 = 1 << 64
_BLAKE2B = hashlib.blake2b
_FROM_BYTES = int.from_bytes
_BLOCK_WORDS = struct.Struct(f">{GE_BLOCK}Q")


def reason(code: int) -> str:
    """'loss', 'queue' or 'down' for a negative result of ``offer``."""
    return REASONS[-code - 1]


def stream_seed(seed: int | str, link: str, frm: str, to: str) -> str:
    """The one agreed seed string of a link direction, for both backends."""
    return f"{seed}:{link}:{frm}>{to}"


# ----------------------------------------------------------------------------- configuration


def _probability(name: str, v: float, allow_zero: bool = True) -> float:
    v = float(v)
    if not (0.0 <= v <= 1.0) or (not allow_zero and v == 0.0):
        bound = "in (0, 1]" if not allow_zero else "in [0, 1]"
        raise UserError(f"link loss: {name} must be {bound}, got {v}")
    return v


@dataclass(frozen=True, slots=True)
class BernoulliConfig:
    """Independent loss with probability ``p`` per packet."""

    p: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", _probability("p", self.p))

    @property
    def mean(self) -> float:
        return self.p


@dataclass(frozen=True, slots=True)
class GilbertElliottConfig:
    """Two states; Good->Bad with ``p_gb``, Bad->Good with ``p_bg`` per packet of a stream."""

    p_gb: float
    p_bg: float
    loss_good: float = 0.0
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        for name in ("p_gb", "loss_good", "loss_bad"):
            object.__setattr__(self, name, _probability(name, getattr(self, name)))
        object.__setattr__(self, "p_bg", _probability("p_bg", self.p_bg, allow_zero=False))

    @property
    def pi_bad(self) -> float:
        return self.p_gb / (self.p_gb + self.p_bg)

    @property
    def mean(self) -> float:
        """Stationary loss rate."""
        return (1 - self.pi_bad) * self.loss_good + self.pi_bad * self.loss_bad

    @property
    def mean_bad_run(self) -> float:
        """Mean number of consecutive packets of a stream in the Bad state."""
        return 1.0 / self.p_bg


@dataclass(frozen=True, slots=True)
class TraceConfig:
    """A loss trace replayed as given: ``packets`` (1: lost) by the order packets are offered
    to the direction, or ``intervals_ns`` ([start, end) of run time) by when. A per-packet
    trace loops when the run offers more packets than it holds. Only UDP datagrams count
    (frames the relay sees that the simulator never makes, ARP or IGMP, pass and take no
    place in the trace), so the n-th datagram meets the n-th entry in both backends."""

    packets: bytes = b""
    intervals_ns: tuple[tuple[int, int], ...] = ()

    @property
    def mean(self) -> float:
        if self.packets:
            return self.packets.count(1) / len(self.packets)
        end = self.intervals_ns[-1][1] if self.intervals_ns else 0
        return sum(b - a for a, b in self.intervals_ns) / end if end else 0.0


LossConfig = BernoulliConfig | GilbertElliottConfig | TraceConfig


def loss_config(model: Any) -> LossConfig:
    """A loss config from a spec loss model (duck-typed), a bare probability or a config."""
    if isinstance(model, (BernoulliConfig, GilbertElliottConfig, TraceConfig)):
        return model
    if model is None:
        return BernoulliConfig(0.0)
    if isinstance(model, (int, float)) and not isinstance(model, bool):
        return BernoulliConfig(model)
    kind = getattr(model, "model", "bernoulli")
    if kind == "gilbert_elliott":
        return GilbertElliottConfig(model.p_gb, model.p_bg, model.loss_good, model.loss_bad)
    if kind == "bernoulli":
        return BernoulliConfig(model.p)
    if kind == "trace":
        if model.packets:
            return TraceConfig(packets=bytes(c == "1" for c in model.packets))
        if model.intervals_ms:
            merged: list[list[int]] = []
            for a, b in sorted((round(a * 1e6), round(b * 1e6)) for a, b in model.intervals_ms):
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            return TraceConfig(intervals_ns=tuple((a, b) for a, b in merged))
        raise UserError(f"link loss: trace {getattr(model, 'file', None)!r} was never read (load the YAML with "
                        "rmptwin.model.load_topology, which reads trace files)")
    raise UserError(f"link loss: unknown model {kind!r}; use bernoulli, gilbert_elliott or trace")


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """One link direction's parameters, in the units the model computes with."""

    delay_ns: int = 0
    jitter_ns: int = 0
    bandwidth_mbps: float | None = None     # None: unlimited (no serialization)
    queue_packets: int = 1000
    queue_bytes: int | None = None
    # Given as a loss config, a probability or a spec loss model; __post_init__ stores its
    # LossConfig. Typed Any for what is given (mypyc checks a field's type as it is set).
    loss: Any = BernoulliConfig(0.0)
    count_in_flight: bool = True
    duplicate: float = 0.0      # chance a packet arrives twice
    reorder: float = 0.0        # chance a packet is held back reorder_ns and overtaken
    reorder_ns: int = 0

    def __post_init__(self) -> None:
        if self.delay_ns < 0 or self.jitter_ns < 0:
            raise UserError(f"link: delay and jitter must be >= 0, got {self.delay_ns} ns and {self.jitter_ns} ns")
        if self.bandwidth_mbps is not None and self.bandwidth_mbps <= 0:
            raise UserError(f"link: bandwidth_mbps must be > 0 or unset, got {self.bandwidth_mbps}")
        if self.queue_packets < 1 or (self.queue_bytes is not None and self.queue_bytes < 1):
            raise UserError("link: the queue must hold at least 1 packet and 1 byte")
        object.__setattr__(self, "loss", loss_config(self.loss))
        object.__setattr__(self, "duplicate", _probability("duplicate", self.duplicate))
        object.__setattr__(self, "reorder", _probability("reorder", self.reorder))
        if self.reorder_ns < 0:
            raise UserError(f"link: reorder delay must be >= 0, got {self.reorder_ns} ns")

    @classmethod
    def from_spec(cls, params: Any, *, count_in_flight: bool = True) -> LinkConfig:
        """From a ``spec.LinkParams`` or anything with its attributes and ``queue_limit()``."""
        return cls(
            delay_ns=round(params.delay_ms * 1e6),
            jitter_ns=round(params.jitter_ms * 1e6),
            bandwidth_mbps=params.bandwidth_mbps,
            queue_packets=params.queue_limit(),
            loss=loss_config(params.loss),
            count_in_flight=count_in_flight,
        )

    @property
    def ns_per_byte(self) -> float:
        # bytes * 8 bits / (Mbit/s) = bytes * 8000 / Mbps ns
        return 8000.0 / self.bandwidth_mbps if self.bandwidth_mbps else 0.0


# ----------------------------------------------------------------------------- the model


def _threshold(p: float) -> int:
    """A 64-bit draw below this happens with probability ``p``."""
    return int(p * _U64)


def _digest_threshold(p: float) -> bytes:
    """A digest that sorts below this (bytes compare as big-endian numbers) has chance ``p``.

    Comparing the digest itself spares an int conversion per packet (~65 ns)."""
    return b"\xff" * 17 if p >= 1.0 else _threshold(p).to_bytes(8, "big")


class LinkDirection:
    """One direction of a link: its queue, serialization clock, delay line and loss stream.

    ``offer`` returns the time the packet reaches the far end (>= ``now_ns``), or ``LOSS``,
    ``QUEUE`` or ``DOWN`` (negative). ``now_ns`` must be >= 0 and, for the queue to mean
    anything, non-decreasing from one call to the next.
    """

    __slots__ = (
        "config", "up", "_prefix", "_hasher", "_draws", "_ge", "_loss_thr", "_thr_good", "_thr_bad",
        "_jitter_ns", "_delay_ns", "_ns_per_byte", "_limit", "_byte_limit", "_in_flight",
        "_line", "_line_bytes", "_bytes_held", "_tx_free", "_last_arrival",
        "_seen", "_seen_old", "_other_index", "_blocks", "_trace", "_trace_n", "_trace_starts",
        "trace_origin_ns", "_chaos", "_dup_thr", "_reorder_thr", "duplicate_at", "last_copy",
    )

    def __init__(self, config: LinkConfig, seed: str) -> None:
        # The direction's one stream: every draw is BLAKE2b(prefix + what is drawn for).
        self._prefix = _BLAKE2B(seed.encode(), digest_size=16, person=b"rmptwin-link").digest()
        # BLAKE2b(prefix + identity) = a copy of this hasher, fed the identity: the same
        # digest, without hashing the prefix's bytes into a new state per packet.
        self._hasher = _BLAKE2B(self._prefix, digest_size=16)
        self.up = True
        self._line: deque[int] = deque()        # per held packet: arrival (or transmit end) time
        self._line_bytes: deque[int] = deque()  # their sizes, kept only under a byte limit
        self._bytes_held = 0
        self._tx_free = 0
        self._last_arrival = 0
        self._seen: dict[bytes, int] = {}       # identity -> copies offered (this generation)
        self._seen_old: dict[bytes, int] = {}   # the previous generation
        self._other_index = 0                   # place in the arrival-order Gilbert-Elliott chain
        self._blocks: dict[tuple[bytes, int], bytearray] = {}
        self._byte_limit: int | None = None
        self._trace: TraceConfig | None = None
        self._trace_n = 0                       # datagrams offered since the trace was set
        self._trace_starts: list[int] = []
        # The clock value of the run's t = 0, for interval traces (run time); the simulator's
        # clock is run time already, the relay's is the monotonic clock.
        self.trace_origin_ns = 0
        # The copy index of the packet last offered: how many times its identity had been
        # offered to this direction before (0: its first copy), -1 where no draw was taken.
        # Drop logs record it, so "the first copy was lost here" needs no clock comparison.
        self.last_copy = -1
        self.reconfigure(config)

    # ------------------------------------------------------------------ run-time changes

    def reconfigure(self, config: LinkConfig) -> None:
        """New parameters from now on; the queue, clocks and copy counts carry over."""
        self.config = config
        self._delay_ns, self._jitter_ns = config.delay_ns, config.jitter_ns
        self._ns_per_byte = config.ns_per_byte
        self._limit, self._in_flight = config.queue_packets, config.count_in_flight
        if config.queue_bytes is not None and self._byte_limit is None:
            # Sizes of packets held before the byte limit existed are unknown: count them as 0.
            self._line_bytes = deque([0] * len(self._line))
            self._bytes_held = 0
        self._byte_limit = config.queue_bytes
        loss = config.loss
        trace = loss if isinstance(loss, TraceConfig) else None
        if trace != self._trace:   # a new trace replays from its start (other changes keep its place)
            self._trace, self._trace_n = trace, 0
            self._trace_starts = [a for a, _ in trace.intervals_ns] if trace is not None else []
        ge = self._ge = loss if isinstance(loss, GilbertElliottConfig) else None
        self._loss_thr = _digest_threshold(loss.p if isinstance(loss, BernoulliConfig) else 0.0)
        if ge is not None:
            self._thr_good, self._thr_bad = _digest_threshold(ge.loss_good), _digest_threshold(ge.loss_bad)
        self._blocks.clear()   # chains computed with the old probabilities
        self._chaos = bool(config.duplicate or config.reorder)
        self.duplicate_at = -1
        self._dup_thr, self._reorder_thr = _threshold(config.duplicate), _threshold(config.reorder)
        self._draws = bool(self._ge is not None or (trace is None and loss.mean > 0.0) or self._jitter_ns
                           or self._chaos)

    def set_loss(self, model: Any) -> None:
        """Change the loss model (a spec model, a probability or a loss config)."""
        self.reconfigure(replace(self.config, loss=loss_config(model)))

    def set_up(self, up: bool) -> None:
        self.up = bool(up)

    def set_chaos(self, duplicate: float = 0.0, reorder: float = 0.0, reorder_ns: int = 0) -> None:
        """Duplicate and reorder packets from now on (all zero: stop)."""
        self.reconfigure(replace(self.config, duplicate=duplicate, reorder=reorder, reorder_ns=reorder_ns))

    @property
    def draws(self) -> bool:
        """Whether packets take draws (loss or jitter) or a trace's entries: a link that only
        delays takes none."""
        return self._draws or self._trace is not None

    # ------------------------------------------------------------------ the decision

    def offer(self, now_ns: int, size: int, key: PacketKey = UNKEYED) -> int:  # noqa: C901 - one packet's whole path through the model, inlined: the relay's hot loop
        """Arrival time at the far end of ``size`` bytes offered at ``now_ns``, or LOSS/QUEUE/DOWN.

        ``key`` is the packet's ``packet_key`` (computed once per packet, not per link)."""
        self.last_copy = -1
        if not self.up:
            return DOWN
        if self._trace is not None and key[0] != b"L2" and self._trace_lost(now_ns):
            return LOSS
        jitter = 0
        held = 0
        if self._draws:
            identity = key[0]
            seen = self._seen
            copies = seen.get(identity)
            if copies is None:
                copies = self._seen_old.get(identity, 0)
                if len(seen) >= MEMORY:   # two generations: bounded memory, O(1) per packet
                    self._seen_old, seen = seen, {}
                    self._seen = seen
            seen[identity] = copies + 1
            self.last_copy = copies
            if copies:
                identity += b"#%d" % copies
            # One digest: its first 8 bytes decide the loss, its last 8 the jitter.
            hasher = self._hasher.copy()
            hasher.update(identity)
            digest = hasher.digest()
            if digest < (self._loss_thr if self._ge is None else self._ge_threshold(key, copies)):
                return LOSS
            if self._jitter_ns:
                jitter = (_FROM_BYTES(digest[8:], "big") * self._jitter_ns) >> 64
            if self._chaos:
                hasher = self._hasher.copy()
                hasher.update(identity + b"|chaos")
                chaos = hasher.digest()
                if _FROM_BYTES(chaos[:8], "big") < self._reorder_thr:
                    held = self.config.reorder_ns
                dup = _FROM_BYTES(chaos[8:], "big") < self._dup_thr
        line, byte_limit = self._line, self._byte_limit
        while line and line[0] <= now_ns:
            line.popleft()
            if byte_limit is not None:
                self._bytes_held -= self._line_bytes.popleft()
        if len(line) >= self._limit or (byte_limit is not None and self._bytes_held + size > byte_limit):
            return QUEUE
        sent = now_ns
        if self._ns_per_byte:
            if sent < self._tx_free:
                sent = self._tx_free
            sent += int(size * self._ns_per_byte + 0.5)
            self._tx_free = sent
        arrival = sent + self._delay_ns + jitter
        if arrival < self._last_arrival:   # jitter never reorders
            arrival = self._last_arrival
        if held:
            arrival += held                # a reordered packet: later ones overtake it
        else:
            self._last_arrival = arrival
        line.append(arrival if self._in_flight else sent)
        if byte_limit is not None:
            self._line_bytes.append(size)
            self._bytes_held += size
        if self._chaos:
            self.duplicate_at = arrival if dup else -1
        return arrival

    def held(self, now_ns: int) -> int:
        """Packets the queue limit counts at ``now_ns`` (after those gone by then)."""
        return sum(1 for t in self._line if t > now_ns)

    def _trace_lost(self, now_ns: int) -> bool:
        trace = self._trace
        assert trace is not None   # offer calls it only with a trace set
        if trace.packets:
            n = self._trace_n
            self._trace_n = n + 1
            return trace.packets[n % len(trace.packets)] == 1
        t = now_ns - self.trace_origin_ns
        i = bisect_right(self._trace_starts, t) - 1
        return i >= 0 and t < trace.intervals_ns[i][1]

    # ------------------------------------------------------------------ Gilbert-Elliott

    def _ge_threshold(self, key: PacketKey, copies: int) -> bytes:
        _, stream, index = key
        if stream is None or copies:
            stream, index = b"", self._other_index
            self._other_index += 1
        block, offset = divmod(index, GE_BLOCK)
        states = self._blocks.get((stream, block))
        if states is None:
            states = self._ge_block(stream, block)
        return self._thr_bad if states[offset] else self._thr_good

    def _ge_block(self, stream: bytes, block: int) -> bytearray:
        """States of ``GE_BLOCK`` consecutive indices of one chain, from the keyed stream."""
        ge = self._ge
        assert ge is not None   # offer calls it only under Gilbert-Elliott loss
        head = self._prefix + b"G" + block.to_bytes(8, "big", signed=True)
        raw = b"".join(_BLAKE2B(head + j.to_bytes(2, "big") + stream, digest_size=64).digest()
                       for j in range(GE_BLOCK // 8))
        draws = _BLOCK_WORDS.unpack(raw)
        gb, bg = _threshold(ge.p_gb), _threshold(ge.p_bg)
        bad = draws[0] < _threshold(ge.pi_bad)   # stationary start: any block stands alone
        states = bytearray(GE_BLOCK)
        states[0] = bad
        for i in range(1, GE_BLOCK):
            # Transition first, then the packet is lost with the new state's probability.
            bad = draws[i] >= bg if bad else draws[i] < gb
            states[i] = bad
        if len(self._blocks) >= 256:
            self._blocks.clear()
        self._blocks[(stream, block)] = states
        return states
