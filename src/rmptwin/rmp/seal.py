"""Sealing and opening what RMP puts on the wire (seed 6 and 7.1): pure computation, no I/O.

Who holds which key (``KeySet``; ``rmptwin keys gen`` writes one per experiment, the
factories hand each core only the keys its role is entitled to; a core never reads a file):

- ``sources[s]``: shared by source S_P ``s`` and the R_T (R_P, R_S). The source seals each
  message with it: the AEAD tag signs the message as ``s``'s and the ciphertext hides it
  from other sources and from every eavesdropper on G_M until the R_T release it.
- ``regions[r]``: the remulticast key of region ``r``, shared by the R_T remulticasting into
  ``r``, its retransmit servers and every customer subscribed in ``r`` (either grade).
- ``retransmit[r]``: the repair key of region ``r``, held by the R_T and R_x of ``r`` and
  by guaranteed-grade customers only: repairs are sealed with it.
- ``control``: the ring control key, held by R_P, R_S, reformation servers and sources (the
  trading floors sit inside the VPN firewall, seed 7.1); it MACs every RMP frame but DATA.

Sealed message (an "envelope"; the AEAD is ChaCha20-Poly1305 from ``cryptography``)::

    purpose (u8: 1 source, 2 region, 3 repair) | key id (4 bytes) | ciphertext | tag (16)

The key id is the first 4 bytes of SHA-256 of the key's public name ("source:S1",
"region:europe", "retransmit:europe"): it tells a receiver which of its keys to try, and
a customer that does not hold it (a best-effort customer hearing a repair) skips the
message without an alarm. The header is the AEAD's associated data.

Nonces, so the cores need no randomness: the AEAD key of a message is a subkey
HKDF-SHA256(key, info = purpose | key name | sender) and the 12-byte nonce is
(stripe u32, sequence u64). (key id, sender, purpose) pick the subkey and (stripe, seq)
the nonce, so no two messages under one subkey share a nonce, as long as
- a source label never reuses a (stripe, src_seq): a restarted source publishes under a
  fresh label "name~tag" (``SourceCore``), so its numbering restarts under a fresh subkey;
- region and repair envelopes are sealed with sender "" by every R_T and R_x alike: they
  seal the same agreed message under the same (stripe, gseq), so their envelopes are
  byte-identical (customers dedupe them) and a nonce is only ever reused for the SAME
  plaintext, which AEADs allow. Two different plaintexts under one gseq mean agreement
  already broke; customers alarm on them (``conflicting_payload``).
The associated data of one nonce never varies either (only the header), since Poly1305
leaks its one-time key when one nonce signs two different inputs. That is why a DATA
frame's ``acked_below`` (which grows between re-sends) is outside the AEAD: it is only a
hint that an ack was missed; forging it costs a NACK.

Control frames: ``mac_control(frame)`` appends HMAC-SHA256(control key, frame)[:16];
``open_control`` checks and strips it (constant-time compare). Control frames are
idempotent by token numbers and epochs, so a replayed control frame is harmless but for
the answer it may provoke (a replayed NACK is served again).

What this does not cover (said so that nobody relies on it): MoldUDP64 heartbeats carry no
message to seal (customers and R_x accept them only from their own R_T instead) and
re-requests are not authenticated (R_T and R_x answer only hosts of their regions, under
the retransmit key); a DATA frame's ``acked_below`` is outside the AEAD (see above); replayed
control frames are accepted (idempotent); a subscriber holding a region key can forge that
region's remulticast, which customers catch only as ``conflicting_payload`` against the real
copy (seed 6: "we can decide that some messages are forgeries and not act on any of them");
a restarted source's 16-bit incarnation tag could recur (then one subkey sees two messages
under one nonce).

Use from a core::

    sealer = Sealer(config.keys)                      # None keys: security off
    env = sealer.seal_source(label, stripe, seq, payload)
    try:
        plain = sealer.open_source(label, stripe, seq, env)
    except SealError as e:                            # e.reason: mac_failed, unauthorized
        core.emit(alarm(e.reason, claimed=label, via=src, stripe=stripe))
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from rmptwin.core.events import Event, Kind

KEY_BYTES = 32           # ChaCha20-Poly1305 and HMAC-SHA256 keys
TAG_BYTES = 16           # AEAD tag
MAC_BYTES = 16           # truncated HMAC-SHA256 on control frames
KEY_ID_BYTES = 4
HEADER_BYTES = 1 + KEY_ID_BYTES
OVERHEAD = HEADER_BYTES + TAG_BYTES   # bytes an envelope adds to its plaintext

# what an envelope is sealed for
PURPOSE_SOURCE = 1       # S_P -> R_T on G_M, under sources[s]
PURPOSE_REGION = 2       # R_T remulticast in a region, under regions[r]
PURPOSE_REPAIR = 3       # R_T / R_x repairs in a region, under retransmit[r]
PURPOSES = {PURPOSE_SOURCE: "source", PURPOSE_REGION: "region", PURPOSE_REPAIR: "retransmit"}

_NONCE = struct.Struct("!IQ")
_INFO = b"rmptwin-seal-v1"
_SUBKEY_CACHE = 4096     # (purpose, key name, sender) subkeys kept per Sealer


class Reason:
    """``detail.reason`` of an ALARM event (``Kind.ALARM``). ``Final`` constants, as
    ``events.Kind``'s (for mypyc)."""

    MAC_FAILED: Final = "mac_failed"                     # a sealed message or a control frame failed its MAC
    CONFLICTING_PAYLOAD: Final = "conflicting_payload"   # two different payloads under one sequence number
    REPLAY: Final = "replay"                             # a frame seen before, sent again to be acted on
    UNAUTHORIZED: Final = "unauthorized"                 # a sender holding no key for what it sent


class SealError(ValueError):
    """An envelope or control frame did not open. ``reason``: a ``Reason`` value, or
    ``not_entitled`` (sealed under a key id this holder lacks: no alarm, just unreadable)."""

    NOT_ENTITLED: Final = "not_entitled"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def key_name(purpose: int, owner: str) -> str:
    """The public name of a key: "source:S1", "region:europe", "retransmit:europe"."""
    return f"{PURPOSES[purpose]}:{owner}"


def key_id(name: str) -> bytes:
    """The 4-byte id of key ``name`` in envelopes (not secret: a hash of the name)."""
    return hashlib.sha256(name.encode("utf-8")).digest()[:KEY_ID_BYTES]


def source_name(label: str) -> str:
    """The source host behind a label (a restarted source publishes as "name~tag")."""
    return label.split("~", 1)[0]


def alarm(reason: str, claimed: str, via: str, **detail: Any) -> Event:
    """An ALARM event: ``src`` and ``detail.claimed`` name the claimed sender, ``detail.via``
    the host the datagram came from (they differ when someone spoofs)."""
    return Event(Kind.ALARM, src=claimed, detail={"reason": reason, "claimed": claimed, "via": via, **detail})


def _frozen(m: Mapping[str, bytes] | None) -> Mapping[str, bytes]:
    return MappingProxyType({str(k): bytes(v) for k, v in (m or {}).items()})


@dataclass(frozen=True, eq=False, repr=False)
class KeySet:
    """The keys one holder has (see the module docstring for who holds what). Its repr
    shows key names only, never key bytes, so it can appear in a log or a traceback."""

    sources: Mapping[str, bytes] = field(default_factory=dict)
    regions: Mapping[str, bytes] = field(default_factory=dict)
    retransmit: Mapping[str, bytes] = field(default_factory=dict)
    control: bytes | None = None

    def __post_init__(self) -> None:
        for name in ("sources", "regions", "retransmit"):
            frozen = _frozen(getattr(self, name))
            bad = [k for k, v in frozen.items() if len(v) != KEY_BYTES]
            if bad:
                raise ValueError(f"{name} key {bad[0]!r} is not {KEY_BYTES} bytes")
            object.__setattr__(self, name, frozen)
        if self.control is not None and len(self.control) != KEY_BYTES:
            raise ValueError(f"the control key is not {KEY_BYTES} bytes")

    def __repr__(self) -> str:
        return (f"KeySet(sources={sorted(self.sources)}, regions={sorted(self.regions)}, "
                f"retransmit={sorted(self.retransmit)}, control={self.control is not None})")

    def only(self, *, sources: Iterable[str] = (), regions: Iterable[str] = (), retransmit: Iterable[str] = (),
             control: bool = False) -> KeySet:
        """The subset a role is entitled to (names this set lacks are left out)."""
        return KeySet(
            sources={s: self.sources[s] for s in sources if s in self.sources},
            regions={r: self.regions[r] for r in regions if r in self.regions},
            retransmit={r: self.retransmit[r] for r in retransmit if r in self.retransmit},
            control=self.control if control else None)

    def all_keys(self) -> list[bytes]:
        """Every key's bytes (for tests that grep a run directory for leaks)."""
        keys = [*self.sources.values(), *self.regions.values(), *self.retransmit.values()]
        return keys + ([self.control] if self.control is not None else [])

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (keys base64) for the key file ``rmptwin keys`` writes."""
        def enc(m: Mapping[str, bytes]) -> dict[str, str]:
            return {k: base64.b64encode(v).decode("ascii") for k, v in sorted(m.items())}
        return {"version": 1, "sources": enc(self.sources), "regions": enc(self.regions),
                "retransmit": enc(self.retransmit),
                "control": base64.b64encode(self.control).decode("ascii") if self.control else None}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> KeySet:
        """Inverse of ``to_json_dict``; ValueError (saying what is wrong) for anything else."""
        if not isinstance(d, Mapping) or d.get("version") != 1:
            raise ValueError("not a version 1 rmptwin key set")

        def dec(what: str, v: Any) -> bytes:
            try:
                return base64.b64decode(v, validate=True)
            except (TypeError, ValueError):
                raise ValueError(f"{what} is not base64") from None

        maps: dict[str, dict[str, bytes]] = {}
        for name in ("sources", "regions", "retransmit"):
            m = d.get(name) or {}
            if not isinstance(m, Mapping):
                raise ValueError(f"{name} must map names to keys")
            maps[name] = {k: dec(f"{name} key {k!r}", v) for k, v in m.items()}
        control = dec("the control key", d["control"]) if d.get("control") else None
        return cls(control=control, **maps)


class Sealer:
    """Seals and opens with one holder's ``KeySet``. Caches one AEAD per (purpose, key,
    sender) subkey; holds no other state, so sealing is deterministic."""

    def __init__(self, keys: KeySet) -> None:
        self.keys = keys
        self._aead: dict[tuple[int, str, str], ChaCha20Poly1305] = {}
        self._headers: dict[tuple[int, str], bytes] = {}   # bounded by the keys held
        # key id -> (purpose, owner) for the regional keys this holder has
        self._regional: dict[bytes, tuple[int, str]] = {}
        for purpose, table in ((PURPOSE_REGION, keys.regions), (PURPOSE_REPAIR, keys.retransmit)):
            for owner in table:
                self._regional[key_id(key_name(purpose, owner))] = (purpose, owner)
        self._control = keys.control

    # ------------------------------------------------------------------ envelopes
    def _table(self, purpose: int) -> Mapping[str, bytes]:
        return {PURPOSE_SOURCE: self.keys.sources, PURPOSE_REGION: self.keys.regions,
                PURPOSE_REPAIR: self.keys.retransmit}[purpose]

    def _aead_for(self, purpose: int, owner: str, sender: str) -> ChaCha20Poly1305:
        cache_key = (purpose, owner, sender)
        aead = self._aead.get(cache_key)
        if aead is None:
            master = self._table(purpose).get(owner)
            if master is None:
                raise SealError(Reason.UNAUTHORIZED, f"no {PURPOSES[purpose]} key for {owner!r}")
            info = b"\0".join([_INFO, bytes([purpose]), key_name(purpose, owner).encode(), sender.encode()])
            sub = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(master)
            if len(self._aead) >= _SUBKEY_CACHE:
                self._aead.clear()
            aead = self._aead[cache_key] = ChaCha20Poly1305(sub)
        return aead

    def _header(self, purpose: int, owner: str) -> bytes:
        header = self._headers.get((purpose, owner))
        if header is None:
            header = self._headers[(purpose, owner)] = bytes([purpose]) + key_id(key_name(purpose, owner))
        return header

    def _seal(self, purpose: int, owner: str, sender: str, stripe: int, seq: int, plaintext: bytes) -> bytes:
        header = self._header(purpose, owner)
        nonce = _NONCE.pack(stripe & 0xFFFFFFFF, seq & 0xFFFFFFFFFFFFFFFF)
        return header + self._aead_for(purpose, owner, sender).encrypt(nonce, bytes(plaintext), header)

    def _open(self, purpose: int, owner: str, sender: str, stripe: int, seq: int, envelope: bytes) -> bytes:
        if owner not in self._table(purpose):
            raise SealError(Reason.UNAUTHORIZED, f"no {PURPOSES[purpose]} key for {owner!r}")
        if len(envelope) < OVERHEAD or envelope[0] != purpose:
            raise SealError(Reason.MAC_FAILED, f"not a {PURPOSES[purpose]} envelope")
        header = bytes(envelope[:HEADER_BYTES])
        if header != self._header(purpose, owner):
            raise SealError(Reason.MAC_FAILED, f"envelope is not under the {key_name(purpose, owner)} key")
        nonce = _NONCE.pack(stripe & 0xFFFFFFFF, seq & 0xFFFFFFFFFFFFFFFF)
        try:
            return self._aead_for(purpose, owner, sender).decrypt(nonce, bytes(envelope[HEADER_BYTES:]), header)
        except InvalidTag:
            raise SealError(Reason.MAC_FAILED, f"{key_name(purpose, owner)} envelope failed its tag") from None

    def seal_source(self, label: str, stripe: int, src_seq: int, plaintext: bytes) -> bytes:
        """A source message, sealed by source ``label`` (key: sources[source_name(label)])."""
        return self._seal(PURPOSE_SOURCE, source_name(label), label, stripe, src_seq, plaintext)

    def open_source(self, label: str, stripe: int, src_seq: int, envelope: bytes) -> bytes:
        """The plaintext of source message (label, stripe, src_seq); SealError ``unauthorized``
        when no key is held for that source, ``mac_failed`` when it does not authenticate."""
        return self._open(PURPOSE_SOURCE, source_name(label), label, stripe, src_seq, envelope)

    def seal_region(self, region: str, stripe: int, gseq: int, plaintext: bytes) -> bytes:
        """Message ``gseq`` for remulticast in ``region`` (MoldUDP64 message data)."""
        return self._seal(PURPOSE_REGION, region, "", stripe, gseq, plaintext)

    def seal_repair(self, region: str, stripe: int, gseq: int, plaintext: bytes) -> bytes:
        """Message ``gseq`` as a repair in ``region``: only retransmit-key holders read it."""
        return self._seal(PURPOSE_REPAIR, region, "", stripe, gseq, plaintext)

    def open_regional(self, stripe: int, gseq: int, envelope: bytes) -> tuple[bytes, int, str]:
        """(plaintext, purpose, region) of a remulticast or repair envelope. SealError
        ``not_entitled`` when its key id is none of ours (no alarm: e.g. a best-effort
        customer hearing a repair), ``mac_failed`` when it does not authenticate."""
        if len(envelope) < OVERHEAD or envelope[0] not in (PURPOSE_REGION, PURPOSE_REPAIR):
            raise SealError(Reason.MAC_FAILED, "not a regional envelope")
        found = self._regional.get(bytes(envelope[1:HEADER_BYTES]))
        if found is None or found[0] != envelope[0]:
            raise SealError(SealError.NOT_ENTITLED, "sealed under a key this holder lacks")
        purpose, region = found
        return self._open(purpose, region, "", stripe, gseq, envelope), purpose, region

    # ------------------------------------------------------------------ control frames
    @property
    def has_control(self) -> bool:
        return self._control is not None

    def mac_control(self, frame: bytes) -> bytes:
        """``frame`` followed by its MAC under the ring control key."""
        if self._control is None:
            raise SealError(Reason.UNAUTHORIZED, "no control key")
        return bytes(frame) + hmac.digest(self._control, frame, "sha256")[:MAC_BYTES]

    def open_control(self, data: bytes) -> bytes:
        """The frame inside ``data`` once its MAC checks; SealError ``mac_failed`` otherwise."""
        if self._control is None:
            raise SealError(Reason.UNAUTHORIZED, "no control key")
        if len(data) <= MAC_BYTES:
            raise SealError(Reason.MAC_FAILED, "control frame shorter than its MAC")
        frame, tag = bytes(data[:-MAC_BYTES]), data[-MAC_BYTES:]
        if not hmac.compare_digest(hmac.digest(self._control, frame, "sha256")[:MAC_BYTES], tag):
            raise SealError(Reason.MAC_FAILED, "control frame failed its MAC")
        return frame
