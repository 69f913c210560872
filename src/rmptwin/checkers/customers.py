"""Guaranteed customers gap-free at the end: every position released on a stripe they take,
received, from their own CUST_RECV events and, where the run captured their traffic
(emulated runs' pcaps/<host>.pcap), from the MoldUDP64 packets on the wire.

The same definition as summary.json's ``customers.guaranteed_complete``
(``analysis.stripe_delivery``): released = RELEASE of any R_P/R_S and, on an edge stripe,
its EDGE_RELEASE; a customer crashed at the end owes nothing; Mold sequence = position.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmptwin.checkers import Violation
from rmptwin.core.packetkey import udp_payload_start
from rmptwin.core.striping import session_stripe

NAME = "customers"


@dataclass
class CustomerHistory:
    released: dict[int, dict[int, dict[str, Any]]]                # stripe -> position -> first RELEASE event
    received: dict[tuple[str, int], set[int]]             # (customer, stripe) -> positions received
    owed: dict[str, list[int]]                            # guaranteed customer up at the end -> its stripes
    last_recv: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)   # for the evidence
    wire: dict[str, dict[int, set[int]]] = field(default_factory=dict)     # customer -> stripe -> Mold seqs
    gaps: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)  # its CUST_GAP/CUST_SKIP events


def gap_free(h: CustomerHistory) -> Violation | None:
    for name in sorted(h.owed):
        for stripe in h.owed[name]:
            got = h.received.get((name, stripe), set())
            missing = sorted(set(h.released.get(stripe, {})) - got)
            if missing:
                rel = h.released[stripe][missing[0]]
                gap = [e for e in h.gaps.get((name, stripe), ()) if _covers(e, missing[0])]
                evidence = (rel, *gap) if gap else \
                    (rel,) + ((h.last_recv[(name, stripe)],) if (name, stripe) in h.last_recv else ())
                return Violation(NAME, f"guaranteed customer {name} never received position {missing[0]} of stripe "
                                       f"{stripe} ({len(missing)} missing), released by {rel['node']}", evidence)
    for name in sorted(h.wire):
        if name not in h.owed:
            continue
        for stripe in h.owed[name]:
            missing = sorted(set(h.released.get(stripe, {})) - h.wire[name].get(stripe, set()))
            if missing:
                rel = h.released[stripe][missing[0]]
                return Violation(NAME, f"guaranteed customer {name}: position {missing[0]} of stripe {stripe} never "
                                       f"reached it on the wire (pcap; {len(missing)} missing)", (rel,))
    return None


def _covers(ev: dict[str, Any], gseq: int) -> bool:
    import json

    try:
        d = json.loads(ev.get("detail") or "{}")
        return int(d["first"]) <= gseq < int(d["first"]) + int(d.get("count", 1))
    except (ValueError, KeyError, TypeError):
        return False


# ----------------------------------------------------------------------------- the wire

_PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",       # microseconds
               b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}       # nanoseconds


def pcap_frames(path: Path) -> Iterator[bytes]:
    """Ethernet frames of a classic pcap file (what tcpdump -w writes), in file order."""
    data = Path(path).read_bytes()
    if len(data) < 24 or data[:4] not in _PCAP_MAGIC:
        return
    endian, off = _PCAP_MAGIC[data[:4]], 24
    rec = struct.Struct(endian + "IIII")
    while off + 16 <= len(data):
        _, _, incl, _ = rec.unpack_from(data, off)
        off += 16
        yield data[off:off + incl]
        off += incl


def mold_sequences(frames: Iterable[bytes]) -> dict[int, set[int]]:
    """stripe -> every message sequence number the ticker's MoldUDP64 packets (session RMPT +
    stripe) among ``frames`` carry: sequence .. sequence + count - 1. A 20-byte packet is a
    request or a heartbeat and carries none."""
    out: dict[int, set[int]] = {}
    for frame in frames:
        start = udp_payload_start(frame)
        if start < 0 or len(frame) - start <= 20:
            continue
        p = frame[start:]
        stripe = session_stripe(p[:10].decode("ascii", "replace"))
        if stripe is None:
            continue   # not the ticker's Mold session: RMP or venue traffic
        seq, count = struct.unpack_from(">QH", p, 10)
        if count in (0, 0xFFFF):
            continue
        out.setdefault(stripe, set()).update(range(seq, seq + count))
    return out
