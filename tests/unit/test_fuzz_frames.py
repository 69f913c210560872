"""Hostile bytes (issue 12 item 8): every RMP core, sealed (security on), takes well over
100,000 malformed, truncated, forged and replayed frames without raising; each one lands
in exactly one of the core's counters (malformed, rejected for security, duplicate,
ignored, unreadable, foreign, refused), none is delivered, and every security rejection is
also an ALARM event.

Frames come from a seeded random mutation of a legitimate corpus (fast: no hypothesis):
random bytes; legitimate frames cut short; legitimate frames with 1-3 bytes changed;
well-formed frames sealed or MACed under a key the attacker made up, or not MACed at all;
and replays of legitimate frames the core already holds. Sources and reformation servers
get no replays: they hold no messages, so a replay is only another control frame to them
(and a replayed control frame is idempotent by design, ``rmp.seal``).
"""

from __future__ import annotations

import random
import zlib

import pytest
from rmp_bus import MS, timing

from rmptwin.core.events import Kind
from rmptwin.core.striping import session_name
from rmptwin.rmp import wire
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.moldudp64 import MoldPacket
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.reformation import ReformationCore
from rmptwin.rmp.repair import RepairConfig
from rmptwin.rmp.retransmit import RetransmitConfig, RetransmitCore
from rmptwin.rmp.seal import KeySet, Sealer
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore

PER_CORE = 15_000          # x 7 cores = 105,000 frames
LEGIT = 24

KEYS = KeySet(sources={"s1": b"\x11" * 32}, regions={"eu": b"\x22" * 32}, retransmit={"eu": b"\x33" * 32},
              control=b"\x44" * 32)
ALL = Sealer(KEYS)
ATTACKER = Sealer(KeySet(sources={"s1": b"\xee" * 32}, regions={"eu": b"\xee" * 32},
                         retransmit={"eu": b"\xee" * 32}, control=b"\xee" * 32))
DELIVERIES = (Kind.RECV, Kind.DELIVER, Kind.RELEASE, Kind.CUST_RECV)


def _data(seq: int, sealer: Sealer = ALL) -> bytes:
    return wire.encode(wire.Data(0, "s1", seq, 1, sealer.seal_source("s1", 0, seq, b"trade %04d" % seq * 4)))


def _controls(sealer: Sealer) -> list[bytes]:
    frames = [wire.Ack(0, 1, t, t, t * MS, "rp1", "rp2", (("s1", t),)) for t in range(1, LEGIT + 1)]
    frames += [wire.Nack(0, 1, "rp2", wire.WANT_MSGS, 1, 3, "s1"), wire.Report(0, 1, "rp2", "rp1", 1, 3),
               wire.ReportAck(0, 1, "s1"), wire.Invite(0, 9, "xr1"), wire.Join(0, 9, "rp2", 3, 4),
               wire.JoinAck(0, 9, "rp2"), wire.NewRing(0, 9, 4, 3, 4, 0, "rp1", "rp1", ("rp1", "rp2")),
               wire.SecToken(0, 1, "r", 3, "rp1", "rs1", 1), wire.Retx(0, wire.Data(0, "s1", 1, 1, b"x"))]
    return [sealer.mac_control(wire.encode(f)) for f in frames]


def _rmp_corpus() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(legitimate frames, of them the ones a receiver holds after setup, forged well-formed ones)."""
    held = [_data(i) for i in range(1, LEGIT + 1)] + _controls(ALL)[:LEGIT]
    legit = held + _controls(ALL)[LEGIT:]
    forged = [_data(i, ATTACKER) for i in range(1, LEGIT + 1)] + _controls(ATTACKER)
    forged += [wire.encode(wire.decode(f[:-16])) for f in _controls(ALL)]        # no MAC at all
    forged += [wire.encode(wire.Data(0, "mallory", i, 1, b"x" * 40)) for i in range(1, 5)]
    return legit, held, forged


def _mold(seq: int, env: bytes) -> bytes:
    return MoldPacket(session_name(0), seq, (env,)).encode()


def _mold_corpus() -> tuple[list[bytes], list[bytes], list[bytes]]:
    held = [_mold(s, ALL.seal_region("eu", 0, s, b"trade %04d" % s * 4)) for s in range(1, LEGIT + 1)]
    forged = [_mold(s, ATTACKER.seal_region("eu", 0, s, b"forged %03d" % s * 4)) for s in range(1, LEGIT + 1)]
    forged += [_mold(s, b"trade %04d" % s * 4) for s in range(1, LEGIT + 1)]      # in the clear
    return held, held, forged


def _mutants(rng: random.Random, legit, held, forged, n: int, *, rmp: bool, replays: bool) -> list[bytes]:
    out = []
    for i in range(n):
        kind = i % (5 if replays else 4)
        if kind == 0:      # random bytes (RMP-looking for RMP cores, else anything)
            body = rng.randbytes(rng.randrange(0, 120))
            out.append(bytes([wire.MAGIC, wire.VERSION, rng.randrange(256)]) + body if rmp and i % 3 else body)
        elif kind == 1:    # truncated
            f = rng.choice(legit)
            out.append(f[:rng.randrange(len(f))])
        elif kind == 2:    # bytes changed
            original = rng.choice(legit)
            f = bytearray(original)
            for _ in range(rng.randint(1, 3)):
                f[rng.randrange(len(f))] ^= rng.randrange(1, 256)
            # Two changes of one byte can cancel (x ^ a ^ a): the "mutant" is then the legitimate
            # frame itself, which a core that never held it rightly acts on (corpus seeds 27 and 50
            # gave the INVITE and the JOIN_ACK unchanged: the primary answered the INVITE with a
            # JOIN and counted nothing). Change another byte; other mutants keep the same stream.
            while f == original:
                f[rng.randrange(len(f))] ^= rng.randrange(1, 256)
            out.append(bytes(f))
        elif kind == 3:    # well formed, but sealed or MACed by someone without the keys
            out.append(rng.choice(forged))
        else:              # replayed as captured
            out.append(rng.choice(held))
    return out


def _rmp_cores() -> dict[str, object]:
    tm = timing()
    rt_keys = KEYS.only(sources=["s1"], regions=["eu"], retransmit=["eu"], control=True)
    return {
        "source": SourceCore("s1", [0], tm, ["xr1"], {0: "rp1"}, keys=KEYS.only(sources=["s1"], control=True)),
        "primary": PrimaryCore("rp2", {0: ["rp1", "rp2"]}, tm, ["xr1"], regions=["eu"], keys=rt_keys),
        "secondary": SecondaryCore("rs1", [0], tm, ["xr1"], primary="rp1", primaries={0: ["rp1", "rp2"]}, ring="r",
                                   ring_members={0: ["rp1", "rs1"]}, regions=["eu"], keys=rt_keys),
        "reformation": ReformationCore("xr1", {0: ["rp1", "rp2"]}, {0: ["rp1", "rp2"]}, tm,
                                       keys=KEYS.only(control=True)),
    }


def _mold_cores() -> dict[str, object]:
    def repair(name):
        return RepairConfig(name=name, regions=("eu",), stripes=(0,), wait_ns=20 * MS, retry_ns=50 * MS, k_r=3)

    def cust(grade):
        keys = KEYS.only(regions=["eu"], retransmit=["eu"] if grade == "guaranteed" else [])
        return CustomerCore(CustomerConfig(repair=repair("c1"), grade=grade, retransmit="rx1", remulticasters={
            0: ("rp1",)}, region_of={"rp1": "eu"}, keys=keys), random.Random(1))

    rx = RetransmitCore(RetransmitConfig(repair=repair("rx1"), upstream={0: ("rp1",)}, keys=KEYS.only(
        regions=["eu"], retransmit=["eu"]), requester_region={"c1": "eu"}), random.Random(1))
    return {"guaranteed customer": cust("guaranteed"), "best-effort customer": cust("best_effort"),
            "retransmit server": rx}


def _counted(core) -> int:
    names = ("malformed", "rejected", "duplicates", "ignored", "unreadable", "foreign", "refused")
    total = sum(getattr(core, n, 0) for n in names)
    return total + sum(rm.refused for rm in getattr(core, "remulticasters", {}).values())


def _events(core) -> list:
    out = []
    ev = core.next_event()
    while ev is not None:
        out.append(ev)
        ev = core.next_event()
    return out


def _throw(core, frames: list[bytes], now: int) -> list:
    before_counted, before_rejected = _counted(core), core.rejected
    events = []
    for i, f in enumerate(frames):
        core.receive_datagram(f, "fuzzer", now + i)
        core.datagrams_to_send(now + i)
        events += _events(core)
    assert _counted(core) - before_counted == len(frames)
    alarms = [e for e in events if e.kind == Kind.ALARM]
    assert len(alarms) == core.rejected - before_rejected > 0
    assert not [e for e in events if e.kind in DELIVERIES]
    return events


@pytest.mark.parametrize("name", sorted(_rmp_cores()))
def test_rmp_cores_count_every_hostile_frame_and_deliver_none(name):
    core = _rmp_cores()[name]
    legit, held, forged = _rmp_corpus()
    for f in held:                       # what the core holds before the attack (replays are duplicates)
        core.receive_datagram(f, "rp1", 0)
    core.datagrams_to_send(0)
    _events(core)
    replays = name in ("primary", "secondary", "source")   # a core that holds acks counts their replays
    # a seed fixed per core (hash() of a str changes with PYTHONHASHSEED: the test threw another
    # corpus each run)
    frames = _mutants(random.Random(zlib.crc32(name.encode())), legit, held, forged, PER_CORE, rmp=True, replays=replays)
    _throw(core, frames, 10 * MS)


def _held_primary():
    core = _rmp_cores()["primary"]
    legit, held, forged = _rmp_corpus()
    for f in held:
        core.receive_datagram(f, "rp1", 0)
    core.datagrams_to_send(0)
    _events(core)
    return core, legit, held, forged


def test_corpus_seed_27_in_which_two_changes_of_one_byte_cancelled():
    """Seed 27 (and 50) failed the primary: the 1,713th frame, a "bytes changed" mutant, was
    the legitimate INVITE byte for byte (one byte changed twice by the same value), which the
    primary had never held, so it rightly answered with a JOIN and counted nothing (seed 50:
    the JOIN_ACK unchanged, rightly dropped as not for a join of ours)."""
    core, legit, held, forged = _held_primary()
    _throw(core, _mutants(random.Random(27), legit, held, forged, PER_CORE, rmp=True, replays=True), 10 * MS)


@pytest.mark.parametrize("seed", [27, 50])
def test_a_changed_frame_is_never_a_legitimate_one(seed):
    legit, held, forged = _rmp_corpus()
    frames = _mutants(random.Random(seed), legit, held, forged, PER_CORE, rmp=True, replays=True)
    assert not [i for i, f in enumerate(frames) if i % 5 == 2 and f in legit]


def _control(kind: type) -> bytes:
    return next(f for f in _controls(ALL) if isinstance(wire.decode(f[:-16]), kind))


def _ring_state(core) -> tuple:
    m = core.members[0]
    return (m.epoch, m.joining, m.join_acked, m.frozen, m.holding, m.token_t, m.t_r, m.fence_t, tuple(m.members))


def test_replayed_reformation_frames_the_primary_acted_on_are_counted_and_change_nothing():
    """INVITE, JOIN_ACK and NEW_RING of epoch 9 sent once (the primary joins, is acknowledged,
    enters the ring), then each of them replayed twice: none moves its ring state
    or sends anything, and each lands in a counter, as a replayed ack does."""
    core, legit, held, forged = _held_primary()
    invite, join_ack, new_ring = _control(wire.Invite), _control(wire.JoinAck), _control(wire.NewRing)
    core.receive_datagram(invite, "xr1", 10 * MS)
    assert [wire.decode(d[:-16]).__class__ for d, _ in core.datagrams_to_send(10 * MS)] == [wire.Join]
    core.receive_datagram(join_ack, "xr1", 10 * MS)
    core.receive_datagram(new_ring, "xr1", 10 * MS)
    core.datagrams_to_send(10 * MS)
    _events(core)
    assert core.members[0].epoch == 9
    state, counted = _ring_state(core), _counted(core)
    replays = [invite, join_ack, new_ring, invite, new_ring, join_ack]
    for i, f in enumerate(replays):
        core.receive_datagram(f, "fuzzer", 20 * MS + i)
        assert not core.datagrams_to_send(20 * MS + i)
    assert _ring_state(core) == state
    assert _counted(core) - counted == len(replays)
    assert not [e for e in _events(core) if e.kind in DELIVERIES]


@pytest.mark.parametrize("name", sorted(_mold_cores()))
def test_customers_and_retransmit_servers_count_every_hostile_packet_and_deliver_none(name):
    core = _mold_cores()[name]
    legit, held, forged = _mold_corpus()
    for f in held:
        core.receive_datagram(f, "rp1", 0)
    _events(core)
    frames = _mutants(random.Random(len(name)), legit, held, forged, PER_CORE, rmp=False, replays=True)
    _throw(core, frames, 10 * MS)


def test_the_fuzz_throws_at_least_100000_frames():
    assert PER_CORE * (len(_rmp_cores()) + len(_mold_cores())) >= 100_000


def test_unsealed_cores_take_hostile_bytes_without_raising():
    """Security off (the default): nothing authenticates, so a well-formed forgery is acted
    on, but no byte sequence makes a core raise, and what does not parse is counted."""
    cores = {**_rmp_cores(), **_mold_cores()}
    for name, core in cores.items():
        core.sealer = None
    legit = [wire.decode(f[:-16]) if f[2] != wire.DATA else None for f in _rmp_corpus()[0]]
    clear = [wire.encode(f) for f in legit if f is not None] + [_data(i) for i in range(1, 5)]
    mold = [_mold(s, b"trade %04d" % s * 4) for s in range(1, LEGIT + 1)]
    for name, core in cores.items():
        rmp = name in ("source", "primary", "secondary", "reformation")
        corpus = clear if rmp else mold
        frames = _mutants(random.Random(7), corpus, corpus, corpus, 4_000, rmp=rmp, replays=True)
        before = core.malformed
        for i, f in enumerate(frames):
            core.receive_datagram(f, "fuzzer", 10 * MS + i)
            core.datagrams_to_send(10 * MS + i)
            _events(core)
        assert core.malformed - before > 400, name
