"""The one link model (issue 10, item 1): loss rates as configured, the same packets lost
whatever else crosses the link and whenever, FIFO queueing, serialization, delay and jitter
as the spec says, and packet identities both backends compute alike.

``python tests/unit/test_linkmodel.py`` prints the micro-benchmark (ns per decision).
"""

from __future__ import annotations

import ast
import json
import random
import struct
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmptwin.core import linkmodel
from rmptwin.core.linkmodel import (
    DOWN,
    LOSS,
    QUEUE,
    BernoulliConfig,
    GilbertElliottConfig,
    LinkConfig,
    LinkDirection,
    reason,
    stream_seed,
)
from rmptwin.core.packetkey import UNKEYED, frame_key, packet_key
from rmptwin.corebuild import source_path
from rmptwin.errors import UserError
from rmptwin.model import GilbertElliott, LinkParams
from rmptwin.rmp import wire

SEED = stream_seed(7, "s1-s2", "s1", "s2")
SOURCES = ("srcny", "srclon", "srctyo")
PER_SOURCE = 500
MS = 1_000_000


def _data(src: str, seq: int, acked_below: int = 0, payload: bytes = b"x" * 64) -> bytes:
    return wire.encode(wire.Data(stripe=1, src=src, src_seq=seq, acked_below=acked_below, payload=payload))


DATA_KEYS = {(s, q): packet_key(_data(s, q)) for s in SOURCES for q in range(PER_SOURCE)}
STREAM_KEYS = [packet_key(_data("srcny", q)) for q in range(100_000)]
CONTROL_KEYS = [
    UNKEYED,
    packet_key(wire.encode(wire.Nack(1, 1, "rp2", wire.WANT_MSGS, 3, 9, "srcny"))),
    packet_key(wire.encode(wire.Report(1, 1, "rp2", "rp3", wire.REASON_TOKEN_LOST, 4))),
    packet_key(wire.encode(wire.Retx(1, wire.Data(1, "srclon", 17, 0, b"y")))),
]


def _lossy(loss, **kw) -> LinkDirection:
    return LinkDirection(LinkConfig(loss=loss, **kw), SEED)


def _loss_runs(lost: list[bool]) -> list[int]:
    runs, n = [], 0
    for x in lost:
        if x:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs + ([n] if n else [])


# ----------------------------------------------------------------------------- loss rates


@pytest.mark.parametrize("p", [0.01, 0.05, 0.2])
def test_bernoulli_loses_fraction_p_of_keyed_and_unkeyed_packets(p):
    n = len(STREAM_KEYS)
    tol = 4.5 * (p * (1 - p) / n) ** 0.5
    keyed = _lossy(BernoulliConfig(p))
    rate = sum(keyed.offer(i * 1000, 100, k) == LOSS for i, k in enumerate(STREAM_KEYS)) / n
    assert abs(rate - p) < tol
    counted = _lossy(BernoulliConfig(p))
    rate = sum(counted.offer(i * 1000, 100) == LOSS for i in range(n)) / n
    assert abs(rate - p) < tol


@pytest.mark.parametrize("keyed", [True, False], ids=["stream-chain", "arrival-chain"])
def test_gilbert_elliott_matches_stationary_loss_and_mean_burst(keyed):
    ge = GilbertElliottConfig(p_gb=0.01, p_bg=0.3, loss_good=0.0, loss_bad=1.0)
    ld = _lossy(ge)
    lost = [ld.offer(i * 1000, 100, k if keyed else UNKEYED) == LOSS for i, k in enumerate(STREAM_KEYS)]
    assert abs(sum(lost) / len(lost) - ge.mean) < 0.15 * ge.mean
    runs = _loss_runs(lost)
    assert abs(sum(runs) / len(runs) - ge.mean_bad_run) < 0.1 * ge.mean_bad_run


def test_gilbert_elliott_with_lossy_states_keeps_its_mean():
    ge = GilbertElliottConfig(p_gb=0.05, p_bg=0.2, loss_good=0.01, loss_bad=0.6)
    ld = _lossy(ge)
    rate = sum(ld.offer(i * 1000, 100, k) == LOSS for i, k in enumerate(STREAM_KEYS)) / len(STREAM_KEYS)
    assert abs(rate - ge.mean) < 0.1 * ge.mean


# ----------------------------------------------------------------------------- stability


def _first_copy_losses(ld: LinkDirection, rng: random.Random | None, perturb_ns: int, extra: float) -> set:
    """Offer every source's DATA (1 ms apart per source) in time order; with ``rng``, also
    control packets, retransmissions and re-sent DATA in between, and times moved by up to
    ``perturb_ns``. Returns the (src, seq) whose first copy was lost."""
    arrivals = []
    for i, src in enumerate(SOURCES):
        for seq in range(PER_SOURCE):
            t = seq * MS + i * 300_000 + (rng.randint(-perturb_ns, perturb_ns) if rng else 0)
            arrivals.append((max(t, 0), 0, (src, seq)))
    if rng:
        end = PER_SOURCE * MS
        for _ in range(int(extra * len(arrivals))):
            arrivals.append((rng.randrange(end), 1, rng.choice(CONTROL_KEYS)))
        for _ in range(int(extra * len(arrivals) / 4)):   # re-sends, later than the first copy
            t, _, ident = rng.choice(arrivals[:len(SOURCES) * PER_SOURCE])
            arrivals.append((t + rng.randint(1, 50 * MS), 2, ident))
    arrivals.sort(key=lambda a: (a[0], a[1]))
    first, lost = set(), set()
    for t, kind, what in arrivals:
        key = DATA_KEYS[what] if kind != 1 else what
        r = ld.offer(t, 120, key)
        if kind != 1 and what not in first:
            first.add(what)
            if r == LOSS:
                lost.add(what)
    return lost


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


loss_models = st.one_of(
    st.builds(BernoulliConfig, st.floats(0.01, 0.3)),
    st.builds(GilbertElliottConfig, st.floats(0.005, 0.1), st.floats(0.1, 0.9), st.floats(0.0, 0.05),
              st.floats(0.5, 1.0)),
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(loss=loss_models, seed=st.integers(0, 2**32), extra=st.floats(0.0, 2.0), perturb_ms=st.integers(0, 5),
       bandwidth=st.sampled_from([None, 2.0, 100.0]), limit=st.integers(1, 1000))
def test_same_first_copies_lost_whatever_else_crosses_and_when(loss, seed, extra, perturb_ms, bandwidth, limit):
    quiet = _first_copy_losses(_lossy(loss), None, 0, 0.0)
    # The other backend: other traffic, other timing, even another queue; same seed string.
    busy_link = _lossy(loss, bandwidth_mbps=bandwidth, queue_packets=limit, jitter_ns=2 * MS)
    busy = _first_copy_losses(busy_link, random.Random(seed), perturb_ms * MS, extra)
    assert quiet, "the run must lose something for the comparison to mean anything"
    assert _jaccard(quiet, busy) == 1.0


def test_a_sequential_stream_would_not_be_stable():
    # Why the model keys its draws: a per-packet draw in arrival order (the backends' old way).
    def sequential(rng_extra: random.Random | None) -> set:
        rng, lost = random.Random(SEED), set()
        for seq in range(2000):
            if rng_extra and rng_extra.random() < 0.5:
                rng.random()   # a control packet in between takes a draw
            if rng.random() < 0.05:
                lost.add(seq)
        return lost

    assert _jaccard(sequential(None), sequential(random.Random(1))) < 0.2


def test_another_direction_loses_other_packets_and_the_same_direction_repeats():
    def lost_by(seed: str) -> set:
        ld = LinkDirection(LinkConfig(loss=BernoulliConfig(0.1)), seed)
        return {i for i, k in enumerate(STREAM_KEYS[:20_000]) if ld.offer(i, 100, k) == LOSS}

    here = lost_by(SEED)
    assert lost_by(SEED) == here
    assert _jaccard(here, lost_by(stream_seed(7, "s1-s2", "s2", "s1"))) < 0.1


def test_a_resent_copy_gets_a_fresh_draw():
    ld = _lossy(BernoulliConfig(0.5))
    keys = STREAM_KEYS[:20_000]
    first = [ld.offer(i, 100, k) == LOSS for i, k in enumerate(keys)]
    second = [ld.offer(10**9 + i, 100, k) == LOSS for i, k in enumerate(keys)]
    both = sum(a and b for a, b in zip(first, second)) / len(keys)
    assert abs(both - 0.25) < 0.02


def test_raising_the_loss_at_run_time_keeps_what_was_lost_and_adds_more():
    low, high = _lossy(BernoulliConfig(0.05)), _lossy(BernoulliConfig(0.05))
    high.set_loss(0.2)
    keys = STREAM_KEYS[:20_000]
    lost_low = {i for i, k in enumerate(keys) if low.offer(i, 100, k) == LOSS}
    lost_high = {i for i, k in enumerate(keys) if high.offer(i, 100, k) == LOSS}
    assert lost_low < lost_high
    assert abs(len(lost_high) / len(keys) - 0.2) < 0.015
    high.set_loss(GilbertElliott(p_gb=0.0, p_bg=1.0))   # a spec model: Good forever, no loss
    assert all(high.offer(10**9, 100, k) >= 0 for k in STREAM_KEYS[20_000:21_000])


def test_a_link_that_is_down_drops_everything_until_it_is_up():
    ld = LinkDirection(LinkConfig(delay_ns=5 * MS), SEED)
    assert ld.offer(0, 100) == 5 * MS
    ld.set_up(False)
    results = [ld.offer(MS + i, 100, k) for i, k in enumerate(STREAM_KEYS[:100])] + [ld.offer(2 * MS, 100)]
    assert set(results) == {DOWN} and reason(DOWN) == "down"
    ld.set_up(True)
    assert ld.offer(3 * MS, 100) == 8 * MS


# ----------------------------------------------------------------------------- queue and timing


def test_queue_drops_exactly_when_the_limit_is_reached():
    # 8 Mbit/s: 1 us per byte, a 1000-byte packet takes 1 ms; 10 ms propagation.
    backlog = LinkDirection(LinkConfig(delay_ns=10 * MS, bandwidth_mbps=8, queue_packets=3,
                                       count_in_flight=False), SEED)
    assert [backlog.offer(0, 1000) for _ in range(5)] == [11 * MS, 12 * MS, 13 * MS, QUEUE, QUEUE]
    assert backlog.offer(MS, 1000) == 14 * MS        # the first one left the transmitter
    assert backlog.offer(MS, 1000) == QUEUE and reason(QUEUE) == "queue"
    in_flight = LinkDirection(LinkConfig(delay_ns=10 * MS, bandwidth_mbps=8, queue_packets=3), SEED)
    assert [in_flight.offer(0, 1000) for _ in range(4)] == [11 * MS, 12 * MS, 13 * MS, QUEUE]
    assert in_flight.offer(5 * MS, 1000) == QUEUE    # still on the wire: netem's count
    assert in_flight.offer(11 * MS, 1000) == 22 * MS
    assert in_flight.held(11 * MS) == 3


def test_byte_limit_counts_bytes_held():
    ld = LinkDirection(LinkConfig(delay_ns=MS, queue_bytes=2500), SEED)
    assert [ld.offer(0, 1000) for _ in range(3)] == [MS, MS, QUEUE]
    assert ld.offer(0, 500) == MS
    assert ld.offer(MS, 1000) == 2 * MS


arrivals = st.lists(st.tuples(st.integers(0, 3 * MS), st.integers(60, 1500)), min_size=1, max_size=200)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(gaps=arrivals, delay=st.integers(0, 50 * MS), mbps=st.sampled_from([None, 1, 8, 10, 64, 100, 1000]),
       limit=st.integers(1, 20), in_flight=st.booleans())
def test_departure_is_arrival_plus_queueing_serialization_and_delay(gaps, delay, mbps, limit, in_flight):
    ld = LinkDirection(LinkConfig(delay_ns=delay, bandwidth_mbps=mbps, queue_packets=limit,
                                  count_in_flight=in_flight), SEED)
    now, tx_free, holding = 0, 0, []
    for gap, size in gaps:
        now += gap
        held = sum(1 for h in holding if h > now)
        got = ld.offer(now, size)
        if held >= limit:
            assert got == QUEUE
            continue
        end = max(now, tx_free) + (size * 8000 // mbps if mbps else 0)   # exact for these rates
        tx_free = end if mbps else tx_free
        assert got == end + delay
        holding.append(got if in_flight else end)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(gaps=arrivals, delay=st.integers(0, 50 * MS), jitter=st.integers(1, 20 * MS),
       mbps=st.sampled_from([None, 10, 1000]))
def test_jitter_stays_within_bounds_and_never_reorders(gaps, delay, jitter, mbps):
    ld = LinkDirection(LinkConfig(delay_ns=delay, jitter_ns=jitter, bandwidth_mbps=mbps, queue_packets=10**6), SEED)
    now, tx_free, last = 0, 0, 0
    for i, (gap, size) in enumerate(gaps):
        now += gap
        got = ld.offer(now, size, STREAM_KEYS[i])
        end = max(now, tx_free) + (size * 8000 // mbps if mbps else 0)
        tx_free = end if mbps else tx_free
        assert got >= last and got >= end + delay
        assert got == last or got - (end + delay) < jitter
        last = got


def test_jitter_spreads_over_its_range():
    ld = LinkDirection(LinkConfig(jitter_ns=10 * MS), SEED)
    extra = [ld.offer(i * 20 * MS, 100, k) - i * 20 * MS for i, k in enumerate(STREAM_KEYS[:5000])]
    assert min(extra) < 0.01 * 10 * MS and max(extra) > 0.99 * 10 * MS
    assert abs(sum(extra) / len(extra) - 5 * MS) < 0.2 * MS


# ----------------------------------------------------------------------------- configuration


def test_config_from_spec_link_params():
    params = LinkParams(delay_ms=28.0, jitter_ms=0.5, bandwidth_mbps=1000, loss=0.02)
    cfg = LinkConfig.from_spec(params)
    assert (cfg.delay_ns, cfg.jitter_ns, cfg.ns_per_byte) == (28 * MS, MS // 2, 8.0)
    assert cfg.queue_packets == params.queue_limit() and cfg.loss == BernoulliConfig(0.02)
    ge = LinkConfig.from_spec(LinkParams(loss={"model": "gilbert_elliott", "p_gb": 0.01, "p_bg": 0.3,
                                               "loss_bad": 0.95})).loss
    assert ge == GilbertElliottConfig(0.01, 0.3, 0.0, 0.95) and abs(ge.mean - 0.030645) < 1e-5


def test_config_from_anything_shaped_like_the_spec():
    duck = SimpleNamespace(delay_ms=1.0, jitter_ms=0.0, bandwidth_mbps=None, queue_limit=lambda: 7,
                           loss=SimpleNamespace(model="bernoulli", p=0.5))
    assert LinkConfig.from_spec(duck) == LinkConfig(delay_ns=MS, queue_packets=7, loss=BernoulliConfig(0.5))


@pytest.mark.parametrize("build", [
    lambda: BernoulliConfig(1.5),
    lambda: GilbertElliottConfig(0.1, 0.0),
    lambda: LinkConfig(delay_ns=-1),
    lambda: LinkConfig(queue_packets=0),
    lambda: linkmodel.loss_config(SimpleNamespace(model="pareto")),
])
def test_bad_parameters_are_one_user_error(build):
    with pytest.raises(UserError) as e:
        build()
    assert "\n" not in str(e.value) and str(e.value).startswith("link")


# ----------------------------------------------------------------------------- packet identities


def test_data_identity_is_its_source_message_and_nothing_else():
    key = packet_key(_data("srcny", 42))
    assert key == packet_key(_data("srcny", 42, acked_below=40, payload=b"other"))
    assert key[2] == 42 and key[1] == packet_key(_data("srcny", 43))[1]
    assert len({key[0], packet_key(_data("srcny", 43))[0], packet_key(_data("srclon", 42))[0],
                packet_key(wire.encode(wire.Data(2, "srcny", 42, 0, b"")))[0]}) == 4


def test_retransmissions_and_acks_have_identities_of_their_own():
    data = packet_key(_data("srcny", 42))
    retx = packet_key(wire.encode(wire.Retx(1, wire.Data(1, "srcny", 42, 0, b"p"))))
    assert retx[2] == 42 and retx[0] != data[0] and retx[1] != data[1]

    def ack(token: int, msgs=()) -> tuple:
        return packet_key(wire.encode(wire.Ack(stripe=0, epoch=3, token=token, first_gseq=1, ts_ns=token * 7,
                                               token_site="rp1", next_site="rp2", msgs=msgs)))
    assert ack(9)[2] == 9 and ack(9)[0] == ack(9, (("srcny", 1),))[0] != ack(10)[0]
    nacks = {packet_key(wire.encode(wire.Nack(1, 1, r, wire.WANT_ACKS, 1, 2)))[0] for r in ("rp1", "rp2")}
    assert len(nacks) == 1   # no stable identity: counted per kind


def test_mold_and_venue_packets():
    mold = struct.pack("!10sQH", b"RMPT000000", 77, 1) + struct.pack("!H", 2) + b"ab"
    assert packet_key(mold)[2] == 77 and packet_key(mold)[1] == b"MRMPT000000"
    assert packet_key(struct.pack("!10sQH", b"RMPT000000", 5, 3))[1] is None   # a request
    venue = struct.pack("!BBI", 1, 4, 3) + b"abc"
    assert packet_key(venue)[1] is None and packet_key(venue)[0] != packet_key(struct.pack("!BBI", 1, 5, 0))[0]


def _ethernet(payload: bytes, vlan: bool = False) -> bytes:
    eth = b"\x01\x00\x5e\x00\x00\x01" + b"\x02" * 6 + (b"\x81\x00\x00\x05" if vlan else b"") + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0, bytes([10, 0, 0, 1]),
                     bytes([239, 1, 1, 1]))
    return eth + ip + struct.pack("!HHHH", 5000, 5001, 8 + len(payload), 0) + payload


def test_the_relay_frame_and_the_simulator_datagram_have_the_same_key():
    for payload in (_data("srcny", 42), wire.encode(wire.Retx(1, wire.Data(1, "s", 1, 0, b"")))):
        assert frame_key(_ethernet(payload)) == packet_key(payload) == frame_key(_ethernet(payload, vlan=True))
    arp = b"\xff" * 12 + b"\x08\x06" + b"\x00" * 28
    assert frame_key(arp)[1] is None
    fragment = bytearray(_ethernet(_data("srcny", 42)))
    fragment[14 + 7] = 185                       # fragment offset 185 x 8 bytes: no UDP header here
    assert frame_key(bytes(fragment))[1] is None


@settings(max_examples=300, derandomize=True)
@given(st.binary(max_size=80), st.sampled_from([b"", b"\xa5\x02\x01", b"\xa5\x02\x05\x00\x10\x00\x01\xa5\x02"]))
def test_any_bytes_get_a_key_and_never_raise(junk, prefix):
    for key in (packet_key(prefix + junk), frame_key(_ethernet(prefix + junk)), frame_key(prefix + junk)):
        assert isinstance(key[0], bytes) and (key[1] is None or isinstance(key[1], bytes))
        assert LinkDirection(LinkConfig(loss=GilbertElliottConfig(0.1, 0.5)), SEED).offer(0, 64, key) != QUEUE


# ----------------------------------------------------------------------------- purity


@pytest.mark.parametrize("module", ["rmptwin.core.linkmodel", "rmptwin.core.packetkey"])
def test_the_model_is_pure(module):
    source = source_path(module).read_text()   # (its __file__ may be the compiled build's)
    imported = {a.name.split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(ast.parse(source))
                 if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    assert not imported & {"time", "random", "os", "socket", "asyncio", "threading", "subprocess", "pyarrow",
                           "pydantic"}
    probe = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                           check=True).stdout))
    assert not loaded & {"pyarrow", "pydantic", "yaml", "rmptwin.model", "rmptwin.lossmodels"}


# ----------------------------------------------------------------------------- micro-benchmark (not a test)


def benchmark(n: int = 100_000, repeat: int = 5) -> dict[str, float]:
    """Best-of-``repeat`` ns per ``offer`` (keyed DATA, 20 kpkt/s), and per ``frame_key``."""
    keys = STREAM_KEYS[:n]
    cases = {
        "delay only": LinkConfig(delay_ns=MS),
        "bernoulli 2 %": LinkConfig(delay_ns=MS, loss=BernoulliConfig(0.02)),
        "bernoulli + jitter + 100 Mbit/s": LinkConfig(delay_ns=MS, jitter_ns=MS, bandwidth_mbps=100,
                                                      loss=BernoulliConfig(0.02)),
        "gilbert-elliott": LinkConfig(delay_ns=MS, loss=GilbertElliottConfig(0.01, 0.3, 0.0, 0.95)),
    }
    out = {}
    for name, cfg in cases.items():
        best = float("inf")
        for _ in range(repeat):
            offer = LinkDirection(cfg, SEED).offer
            t = time.perf_counter_ns()
            for i, k in enumerate(keys):
                offer(i * 50_000, 142, k)
            best = min(best, (time.perf_counter_ns() - t) / n)
        out[name] = best
    frame = _ethernet(_data("srcny", 42))
    t = time.perf_counter_ns()
    for _ in range(n):
        frame_key(frame)
    out["frame_key (relay)"] = (time.perf_counter_ns() - t) / n
    return out


if __name__ == "__main__":
    for case, ns in benchmark().items():
        print(f"{case:36s} {ns:8.0f} ns")
