"""Regional remulticast of released messages as MoldUDP64 (seed 4.1, 7.1).

Every R_T (R_P or R_S) of a stripe releases message t at (ack timestamp + Delta_A), in
gseq order, and remulticasts it on each of its regions' groups ``region/<r>/<stripe>``.
The MoldUDP64 session is a fixed name per stripe and the Mold sequence number IS the
gseq, so every R_T of a stripe numbers identically: a customer hearing two overlapping
regions dedupes by sequence number, and any R_T or R_x can serve any re-request.

Use from an R_T core (one ``Remulticaster`` per stripe it serves)::

    rm = Remulticaster(host.regions, stripe, heartbeat_ns=...)
    rm.release(gseq, payload)               # when the message is released, in gseq order
    out += rm.datagrams(now)                # in datagrams_to_send(now)
    deadline = rm.get_timer()               # fold into the core's get_timer()
    out += rm.serve_rerequest(data, src)    # any non-RMP datagram (first byte != 0xA5)

Heartbeats (count 0, sequence = the next sequence number) go out when ``datagrams`` is
given ``now`` and nothing was sent for ``heartbeat_ns``: they let customers and R_x
notice that the last messages of a burst were lost. Without ``now`` no heartbeats are sent.

With a ``sealer`` (seed 6, 7.1) each message is re-encrypted per region under that
region's key (``seal_region``; the MoldUDP64 header stays in the clear, so tshark still
decodes the framing), and a re-request is answered under the retransmit key of the
requester's region (``requester_region``: host -> region), so only guaranteed-grade
customers and R_x read it; a requester of no known region gets nothing (``refused``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rmptwin.core.groups import region_group
from rmptwin.core.sansio import Dest, Group, Unicast
from rmptwin.core.striping import session_name
from rmptwin.rmp.moldudp64 import (
    DEFAULT_MAX_PACKET,
    MAX_MESSAGE_COUNT,
    MoldDecodeError,
    MoldPacket,
    decode_request,
    is_request,
    pack_messages,
)
from rmptwin.rmp.seal import Sealer

DEFAULT_HEARTBEAT_NS = 250_000_000
DEFAULT_HISTORY = 1 << 17
# Most messages one re-request is answered with; a larger gap is asked for again.
MAX_SERVE = 1024


def runs(seqs: list[int]) -> list[tuple[int, int]]:
    """Sorted sequence numbers -> [(first, count)] of consecutive runs."""
    out: list[tuple[int, int]] = []
    for s in seqs:
        if out and out[-1][0] + out[-1][1] == s:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((s, 1))
    return out


class MessageHistory:
    """Recent messages of one session by sequence number, oldest evicted first."""

    def __init__(self, limit: int = DEFAULT_HISTORY) -> None:
        self.limit = limit
        self._msgs: dict[int, bytes] = {}

    def put(self, seq: int, payload: bytes) -> None:
        if seq in self._msgs:
            return
        self._msgs[seq] = payload
        while len(self._msgs) > self.limit:
            del self._msgs[next(iter(self._msgs))]  # oldest inserted: seqs arrive mostly in order

    def get(self, seq: int) -> bytes | None:
        return self._msgs.get(seq)

    def __contains__(self, seq: int) -> bool:
        return seq in self._msgs

    def __len__(self) -> int:
        return len(self._msgs)

    def answer(self, session: str, seq: int, count: int, max_packet: int) -> list[MoldPacket]:
        """Packets carrying what we hold of [seq, seq + count), at most MAX_SERVE messages."""
        have = [s for s in range(seq, seq + min(count, MAX_SERVE)) if s in self._msgs]
        packets: list[MoldPacket] = []
        for first, n in runs(have):
            packets += pack_messages(session, first, [self._msgs[s] for s in range(first, first + n)], max_packet)
        return packets


class RegionalFeed(Protocol):
    """What an R_T host drives per stripe: a ``Remulticaster``, or an ``EdgeRemulticaster``
    (``rmp.edge_stripes``) re-cutting the stripe into edge stripes."""

    def release(self, gseq: int, payload: bytes) -> None: ...

    def datagrams(self, now: int | None = None) -> list[tuple[bytes, Dest]]: ...

    def get_timer(self) -> int | None: ...

    def handle_timer(self, now: int) -> None: ...

    def serve_rerequest(self, data: bytes, src: str) -> list[tuple[bytes, Dest]]: ...


class Remulticaster:
    """MoldUDP64 remulticast of one stripe's released messages to an R_T's regions."""

    def __init__(
        self, regions: list[str], stripe: int, *, heartbeat_ns: int | None = DEFAULT_HEARTBEAT_NS,
        history: int = DEFAULT_HISTORY, max_packet: int = DEFAULT_MAX_PACKET,
        sealer: Sealer | None = None, requester_region: Mapping[str, str] | None = None,
    ) -> None:
        self.regions = list(regions)
        self.stripe = stripe
        self.session = session_name(stripe)
        self.groups = [Group(region_group(r, stripe)) for r in self.regions]
        self.heartbeat_ns = heartbeat_ns
        self.max_packet = max_packet
        self.history = MessageHistory(history)
        self.sealer = sealer
        self.requester_region = dict(requester_region or {})
        self.refused = 0
        self._pending: list[tuple[int, bytes]] = []
        self._next_seq: int | None = None   # after the last released message
        self._last_sent: int | None = None
        self._heartbeat_due = False
        # Counters for tests and the driver's log.
        self.released = 0
        self.packets_sent = 0
        self.heartbeats_sent = 0
        self.requests_served = 0
        self.messages_served = 0
        self.malformed = 0

    @property
    def next_seq(self) -> int | None:
        return self._next_seq

    def release(self, gseq: int, payload: bytes) -> None:
        """Queue message ``gseq`` for remulticast. Calls come in gseq order; a repeated or
        older gseq is ignored; a jump leaves a gap that customers will see as lost."""
        if self._next_seq is not None and gseq < self._next_seq:
            return
        self._pending.append((gseq, bytes(payload)))
        self.history.put(gseq, bytes(payload))
        self._next_seq = gseq + 1
        self.released += 1

    def _packets(self, pending: list[tuple[int, bytes]]) -> list[MoldPacket]:
        seqs = [s for s, _ in pending]
        by_seq = dict(pending)
        packets: list[MoldPacket] = []
        for first, n in runs(seqs):
            packets += pack_messages(self.session, first, [by_seq[s] for s in range(first, first + n)],
                                     self.max_packet)
        return packets

    def _sealed_datagrams(self, sealer: Sealer) -> list[tuple[bytes, Dest]]:
        """The pending messages re-encrypted for each region under its own key."""
        out: list[tuple[bytes, Dest]] = []
        for region, group in zip(self.regions, self.groups):
            sealed = [(s, sealer.seal_region(region, self.stripe, s, p)) for s, p in self._pending]
            packets = self._packets(sealed)
            self.packets_sent += len(packets)
            out += [(p.encode(), group) for p in packets]
        return out

    def datagrams(self, now: int | None = None) -> list[tuple[bytes, Dest]]:
        """Packets to multicast now: the released messages, else a heartbeat when one is due."""
        packets: list[MoldPacket] = []
        if self._pending and self.sealer is not None:
            sealed = self._sealed_datagrams(self.sealer)
            self._pending.clear()
            self._heartbeat_due = False
            if now is not None:
                self._last_sent = now
            return sealed
        if self._pending:
            packets = self._packets(self._pending)
            self._pending.clear()
        elif self._next_seq is not None and self.heartbeat_ns is not None and now is not None and (
            self._heartbeat_due or (self._last_sent is not None and now >= self._last_sent + self.heartbeat_ns)
        ):
            packets.append(MoldPacket(self.session, self._next_seq))
            self.heartbeats_sent += 1
        self._heartbeat_due = False
        if not packets:
            return []
        if now is not None:
            self._last_sent = now
        self.packets_sent += len(packets)
        out: list[tuple[bytes, Dest]] = []
        for p in packets:
            data = p.encode()
            out += [(data, g) for g in self.groups]
        return out

    def get_timer(self) -> int | None:
        """When the next heartbeat is due (None: nothing released yet, or heartbeats off)."""
        if self.heartbeat_ns is None or self._last_sent is None or not self.groups:
            return None
        return self._last_sent + self.heartbeat_ns

    def handle_timer(self, now: int) -> None:
        deadline = self.get_timer()
        if deadline is not None and now >= deadline:
            self._heartbeat_due = True

    def serve_rerequest(self, data: bytes, src: str) -> list[tuple[bytes, Dest]]:
        """Answer a MoldUDP64 re-request from our own history, by unicast to ``src``.
        Malformed requests and requests for another stripe's session get no answer."""
        if not is_request(data):
            self.malformed += 1
            return []
        try:
            req = decode_request(data)
        except MoldDecodeError:
            self.malformed += 1
            return []
        if req.session != self.session:
            return []
        history = self.history
        if self.sealer is not None:
            region = self.requester_region.get(src)
            if region is None:
                self.refused += 1
                return []
            history = self._sealed_answer(self.sealer, region, req.seq, min(req.count, MAX_MESSAGE_COUNT))
        packets = history.answer(self.session, req.seq, min(req.count, MAX_MESSAGE_COUNT), self.max_packet)
        self.requests_served += 1
        self.messages_served += sum(len(p.messages) for p in packets)
        dest = Unicast(src)
        return [(p.encode(), dest) for p in packets]

    def _sealed_answer(self, sealer: Sealer, region: str, seq: int, count: int) -> MessageHistory:
        """What we hold of [seq, seq + count), sealed under ``region``'s retransmit key."""
        sealed = MessageHistory(MAX_SERVE)
        for s in range(seq, seq + min(count, MAX_SERVE)):
            p = self.history.get(s)
            if p is not None:
                sealed.put(s, sealer.seal_repair(region, self.stripe, s, p))
        return sealed
