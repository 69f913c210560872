"""Hostile bytes for every core that is not an RMP core (issue 12 item 8; the seven RMP
cores are ``test_fuzz_frames.py``): the venue cores, the sequencer-taxonomy cores, the
unified-orders cores and the trading-floor cores each take thousands of malformed,
truncated, forged and replayed frames without raising, and count every frame they cannot
decode (a ``malformed`` counter, or ``ignored`` for a trader, which reads nothing).

Each core is built the way a run builds it (``factories.build_core`` from a small
experiment under experiments/) and the legitimate corpus is what the hosts of that role
received in a short simulation of the same experiment. Mutants are seeded, so a failure
reproduces: random bytes; legitimate frames cut short; legitimate frames with 1-3 bytes
changed; a legitimate header (first 2-6 bytes) over a random body; replays as captured.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from pathlib import Path

import pytest

from rmptwin.apps.unified_orders import offers
from rmptwin.factories import build_core
from rmptwin.factories.adapters import Adapters
from rmptwin.model import load_experiment
from rmptwin.rmp import wire as rmp_wire
from rmptwin.rmp.moldudp64 import MoldDecodeError, decode_packet
from rmptwin.sim.simulate import simulate
from rmptwin.taxonomy.codec import CodecError
from rmptwin.venue import wire as venue_wire

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
PER_CORE = 5_000            # x 22 cores = 110,000 frames
MS = 1_000_000


class _Recorder:
    """A core as the simulator sees it, keeping a copy of every datagram it is handed."""

    def __init__(self, core, received: list[bytes]) -> None:
        self._core, self._received = core, received

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        self._received.append(bytes(data))
        self._core.receive_datagram(data, src, now)

    def __getattr__(self, name):
        return getattr(self._core, name)


def _loaded(experiment: str, duration_s: float, **venue):
    loaded = load_experiment(EXPERIMENTS / experiment)
    exp = loaded.experiment.model_copy(update={"duration_s": duration_s})
    if venue:
        exp = exp.model_copy(update={"venue": exp.venue.model_copy(update=venue)})
    return loaded.model_copy(update={"experiment": exp})


@functools.cache
def _captured(experiment: str, duration_s: float) -> dict[str, list[bytes]]:
    """role -> the datagrams hosts of that role received in a short simulation."""
    received: dict[str, list[bytes]] = defaultdict(list)

    def build(host, loaded, rng, **kw):
        return _Recorder(build_core(host, loaded, rng, **kw), received[host.role])

    simulate(_loaded(experiment, duration_s), 1, build=build)
    return dict(received)


class _CasMemory:
    """A CAS memory outside the core (etcd in a real run) that only notes what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def submit(self, request_id: int, n: int, keys, owner: int) -> None:
        self.asked += 1


def _fails(decode, *errors):
    def undecodable(data: bytes) -> bool:
        try:
            decode(data)
        except errors:
            return True
        return False
    return undecodable


def _venue_bad(data):
    return _fails(venue_wire.decode, venue_wire.VenueWireError)(data)


def _rmp_bad(data):
    return _fails(rmp_wire.decode, rmp_wire.WireError)(data)


def _offer_or_rmp_bad(data):
    """A portal: offers go to admission, anything else to its RMP source."""
    if offers.is_offer(data):
        return _fails(offers.decode, offers.OfferDecodeError)(data)
    return _rmp_bad(data)


def _offer_bad(data):
    """A broker or a directly reached exchange reads offers only."""
    return not offers.is_offer(data) or _fails(offers.decode, offers.OfferDecodeError)(data)


def _mold_bad(data):
    return len(data) != 20 and _fails(decode_packet, MoldDecodeError)(data)


def _taxonomy_bad(core):
    return _fails(core.codec.decode, CodecError)


# name -> (experiment, simulated seconds, role, corpus role, which frames it must count, venue overrides)
CORES = {
    "gateway": ("venue-latency.yaml", 0.5, "gateway", "gateway", _venue_bad, {}),
    "venue": ("venue-latency.yaml", 0.5, "venue", "venue", _venue_bad, {}),
    "sequencer": ("venue-latency.yaml", 0.5, "sequencer", "sequencer", _venue_bad, {}),
    "sequencer (CAS proxy)": ("venue-latency.yaml", 0.5, "sequencer", "sequencer", _venue_bad,
                              {"sequencer": "etcd"}),
    "history": ("venue-latency.yaml", 0.5, "history", "history", _venue_bad, {}),
    "client": ("venue-latency.yaml", 0.5, "client", "client", _venue_bad, {}),
    **{f"taxonomy {p} {role}": (f"taxonomy/{p}.yaml", 1.0, role, role, _taxonomy_bad, {})
       for p in ("ub", "uub", "bb", "gup") for role in ("taxonomy_member", "source")},
    "trader": ("unified-orders.yaml", 8.0, "trader", "portal", None, {}),
    "portal": ("unified-orders.yaml", 8.0, "portal", "portal", _offer_or_rmp_bad, {}),
    "broker": ("unified-orders.yaml", 8.0, "broker", "portal", _offer_bad, {}),
    "exchange (through the ring)": ("unified-orders.yaml", 8.0, "exchange", "exchange", _mold_bad, {}),
    "exchange (direct)": ("unified-orders-direct.yaml", 8.0, "exchange", "exchange", _offer_bad, {}),
    "floor participant": ("trading-floor.yaml", 2.0, "participant", "participant", _rmp_bad, {}),
    "floor arbiter": ("trading-floor.yaml", 2.0, "primary", "primary", _rmp_bad, {}),
}

# where the experiment alone does not say which core a role gets
BUILT_AS = {"sequencer": "SequencerCore", "sequencer (CAS proxy)": "CasProxyCore", "floor arbiter": "ArbiterCore",
            "exchange (through the ring)": "ExchangeCore", "taxonomy ub source": "UbSender"}


def _build(name: str):
    experiment, duration_s, role, _, _, venue = CORES[name]
    loaded = _loaded(experiment, duration_s, **venue)
    host = next(h for h in loaded.topology.hosts if h.role == role)
    adapters = Adapters(cas_client=_CasMemory()) if venue else None
    return build_core(host, loaded, random.Random(1), adapters=adapters)


def _mutants(rng: random.Random, legit: list[bytes], n: int) -> list[bytes]:
    out = []
    for i in range(n):
        f = rng.choice(legit)
        kind = i % 5
        if kind == 0:      # random bytes
            out.append(rng.randbytes(rng.randrange(0, 120)))
        elif kind == 1:    # truncated
            out.append(f[:rng.randrange(len(f))])
        elif kind == 2:    # bytes changed
            g = bytearray(f)
            for _ in range(rng.randint(1, 3)):
                g[rng.randrange(len(g))] ^= rng.randrange(1, 256)
            out.append(bytes(g))
        elif kind == 3:    # a legitimate header over a forged body (type, length, fields)
            out.append(f[:rng.randint(2, 6)] + rng.randbytes(rng.randrange(0, 80)))
        else:              # replayed as captured
            out.append(f)
    return out


def _counted(core) -> int:
    return getattr(core, "malformed", 0) + getattr(core, "ignored", 0)


def _drain(core) -> None:
    core.datagrams_to_send(0)
    while core.next_event() is not None:
        pass


@pytest.mark.parametrize("name", list(CORES))
def test_core_counts_every_frame_it_cannot_decode_and_never_raises(name):
    experiment, duration_s, _, corpus_role, must_count, _ = CORES[name]
    core = _build(name)
    assert type(core).__name__ == BUILT_AS.get(name, type(core).__name__)
    legit = _captured(experiment, duration_s)[corpus_role]
    if name == "trader":
        legit = [f for f in legit if offers.is_offer(f)]
    assert len(legit) >= 5, f"the simulation gave {name} too few frames to mutate"
    if must_count is _taxonomy_bad:
        must_count = _taxonomy_bad(core)
    frames = _mutants(random.Random(name), legit, PER_CORE)
    _drain(core)
    before = _counted(core)
    for i, f in enumerate(frames):
        now = 10 * MS + i * 1000
        core.receive_datagram(f, "fuzzer", now)
        core.datagrams_to_send(now)
        while core.next_event() is not None:
            pass
    counted = _counted(core) - before
    if must_count is None:                      # a trader reads nothing: it ignores every frame
        assert counted == len(frames)
        return
    undecodable = sum(1 for f in frames if must_count(f))
    assert undecodable > PER_CORE // 4, "the mutants should mostly not decode"
    assert counted >= undecodable, f"{name} dropped {undecodable - counted} undecodable frames uncounted"


def test_the_fuzz_throws_at_least_100000_frames():
    assert PER_CORE * len(CORES) >= 100_000
