"""The standby EV core (``venue.standby``) driven by hand: whatever the order, losses and
duplicates of the HR's HARDENED frames, it reaches the live EVs' state and says nothing but
HARDENED_REQ until promoted; promoted, one read of the sequencer brings it in sync."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.core.events import Kind
from rmptwin.core.sansio import Unicast
from rmptwin.venue import wire
from rmptwin.venue.execution_venue import VenueConfig, VenueCore
from rmptwin.venue.orderbook import BUY, LIMIT, SELL
from rmptwin.venue.sequencer import CasLog
from rmptwin.venue.standby import StandbyVenueCore
from rmptwin.venue.wire import Order, Request

RETRY = 1_000_000


def _requests(n: int, rng: random.Random) -> list[Request]:
    """n limit orders from two gateways, prices close enough to trade often."""
    seqs = [0, 0]
    out = []
    for _ in range(n):
        gw = rng.randrange(2)
        seqs[gw] += 1
        side = rng.choice((BUY, SELL))
        out.append(Request(gw, seqs[gw], 0, Order(wire.NEW, LIMIT, side, "IBM", (gw + 1) << 40 | seqs[gw],
                                                  rng.randrange(1, 5) * 100, rng.randrange(99, 102) * 10_000)))
    return out


def _reference(order: list[Request]) -> VenueCore:
    """An EV that executed ``order`` in that order (arrival order, no sequencer)."""
    ev = VenueCore(VenueConfig(ev_id=9, symbols=("IBM",), gateways=("gw1", "gw2"), sequencer=None, history=None,
                               lookahead=10_000), lambda: 0)
    for r in order:
        ev.receive_datagram(wire.request_frame(r), "gw", 0)
    return ev


def _standby(recovering: bool = False) -> StandbyVenueCore:
    return StandbyVenueCore(VenueConfig(ev_id=2, symbols=("IBM",), gateways=("gw1", "gw2"), sequencer="seq",
                                        history="hr", checkpoint_every=8, retry_ns=RETRY), lambda: 0,
                            recovering=recovering)


def _hardened(order: list[Request], first: int, last: int, upto: int) -> list[bytes]:
    """The HR's HARDENED frames for positions first..last, 18 a frame, each saying ``upto``."""
    entries = [(n, order[n]) for n in range(first, last + 1)]
    return [wire.hardened_frame(upto, entries[i:i + 18]) for i in range(0, len(entries), 18)]


def _drain(core) -> list[tuple[int, object, object]]:
    return [(wire.decode(d)[0], wire.decode(d)[1], dest) for d, dest in core.datagrams_to_send(0)]


def _run_hr_repairs(sb: StandbyVenueCore, order: list[Request], hardened_to: int, now: int) -> int:
    """Fire the standby's timers, answering each HARDENED_REQ as the HR would; the time reached."""
    for _ in range(50):
        t = sb.get_timer()
        if t is None:
            break
        now = max(now, t)
        sb.handle_timer(now)
        for ftype, f, dest in _drain(sb):
            assert ftype == wire.T_HARDENED_REQ and dest == Unicast("hr"), wire.TYPE_NAMES[ftype]
            for fr in _hardened(order, f[0], hardened_to, hardened_to):
                sb.receive_datagram(fr, "hr", now)
    return now


def _sequencer(order: list[Request]) -> CasLog:
    """The sequencer after the live EVs ordered ``order``."""
    cas = CasLog(window=10_000)
    for i in range(0, len(order), 64):
        cas.propose(i, [r.key for r in order[i:i + 64]])
    return cas


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), loss=st.floats(0, 0.5), dup=st.floats(0, 0.3),
       tail=st.integers(0, 100), last_heard=st.booleans())
def test_standby_follows_any_hardened_delivery_silently_and_syncs_on_promotion(seed, n, loss, dup, tail, last_heard):
    rng = random.Random(seed)
    order = _requests(n + tail, rng)
    ref = _reference(order)
    sb = _standby()
    # the bodies as the gateways multicast them: some lost, in another order
    for r in rng.sample(order, len(order)):
        if rng.random() >= loss:
            sb.receive_datagram(wire.request_frame(r), "gw1" if r.gw == 0 else "gw2", 0)
    # the first n positions hardened, in commits of random size, frames shuffled, lost, duplicated
    frames, pos = [], 0
    while pos < n:
        last = min(n - 1, pos + rng.randrange(1, 40))
        frames += _hardened(order, pos, last, last)
        pos = last + 1
    rng.shuffle(frames)
    if last_heard:   # a later frame arrives (under load the HR multicasts on): a loss before it shows
        frames.append(_hardened(order, n - 1, n - 1, n - 1)[0])
    now = 1
    for i, fr in enumerate(frames):
        for _ in range(2 if rng.random() < dup else 1):
            if rng.random() >= loss or (last_heard and i == len(frames) - 1):
                sb.receive_datagram(fr, "hr", now)
        assert all(ftype == wire.T_HARDENED_REQ for ftype, _, _ in _drain(sb))   # silent while standing by
    now = _run_hr_repairs(sb, order, n - 1, now)
    assert sb.standby and sb.get_timer() is None
    assert sb.next_pos == sb.known_top and (sb.next_pos == n or not last_heard)
    assert sb.state_hash() == _reference(order[:sb.next_pos]).state_hash()
    states = {e.gseq: e.detail["state_hash"] for e in iter(sb.next_event, None) if e.kind == Kind.VENUE_STATE}
    assert sorted(states) == [p for p in range(sb.next_pos) if (p + 1) % 8 == 0]

    # promoted: a read-only proposal from its first unknown position; the sequencer's answers
    # bring the positions ordered but not heard hardened (the tail at least), executed at once
    start, hr_top = sb.next_pos, sb.hr_top
    promoted_at = now + 5
    sb.promote(promoted_at)
    (ftype, f, dest), = _drain(sb)
    assert ftype == wire.T_PROPOSE and dest == Unicast("seq") and f == (2, start, [])
    for r in order[start:]:   # the bodies it may lack: the tail's, multicast now, and any lost (resent)
        sb.receive_datagram(wire.request_frame(r), "gw1", promoted_at)
    cas, pending, out, t = _sequencer(order), [f], [], promoted_at
    while pending:   # the sequencer answers each proposal 7 ns later
        t += 7
        sb.receive_datagram(wire.decide_frame(*_decide(cas, pending.pop(0))), "seq", t)
        for o in _drain(sb):
            (pending if o[0] == wire.T_PROPOSE else out).append(o[1] if o[0] == wire.T_PROPOSE else o)
    assert sb.next_pos == n + tail
    assert sb.state_hash() == ref.state_hash() and sb.trade_hash == ref.trade_hash
    sync = [e for e in iter(sb.next_event, None) if e.kind == Kind.SYNC_DONE]
    assert len(sync) == 1 and 0 < sync[0].detail["sync_ns"] <= t - promoted_at and sync[0].detail["sync_ns"] % 7 == 0
    # and now a live EV: it stores with the HR what the HR had not acknowledged to it, and
    # completes only what the HR then hardens
    stored = sorted(p for ftype, f, _ in out if ftype == wire.T_STORE for p, *_ in f[1])
    assert stored == list(range(hr_top + 1, n + tail))
    assert not any(ftype == wire.T_COMPLETE for ftype, _, _ in out)
    if stored:
        for fr in _hardened(order, hr_top + 1, n + tail - 1, n + tail - 1):
            sb.receive_datagram(fr, "hr", t + 9)
        done = [f for ftype, f, _ in _drain(sb) if ftype == wire.T_COMPLETE]
        assert len(done) == len(stored)


def _decide(cas: CasLog, propose: tuple) -> tuple:
    _, n, keys = propose
    status, nxt, standing = cas.propose(n, keys)
    return status, n, nxt, standing


def test_a_standby_started_from_nothing_recovers_then_stands_by():
    """The supervisor's replacement standby: checkpoint + hardened requests, then silent."""
    order = _requests(40, random.Random(3))
    sb = _standby(recovering=True)
    out = _drain(sb)
    assert [ftype for ftype, _, _ in out] == [wire.T_PROPOSE, wire.T_CKPT_REQ]   # where the sequencer is; the HR
    sb.receive_datagram(wire.decide_frame(wire.LOST, out[0][1][1], 40, []), "seq", 1)
    for fr in wire.ckpt_frames(wire.T_CKPT_PART, -1, b""):   # no checkpoint yet
        sb.receive_datagram(fr, "hr", 2)
    for fr in _hardened(order, 0, 39, 39):
        sb.receive_datagram(fr, "hr", 3)
    assert sb.next_pos == 40 and sb.phase == "live" and sb.standby
    assert sb.state_hash() == _reference(order).state_hash()
    assert [e.kind for e in iter(sb.next_event, None) if e.kind == Kind.SYNC_DONE] == [Kind.SYNC_DONE]
    assert not [ftype for ftype, _, _ in _drain(sb) if ftype != wire.T_HARDENED_REQ]
    more = _requests(50, random.Random(3))   # the same stream, 10 more positions
    for fr in _hardened(more, 40, 49, 49):
        sb.receive_datagram(fr, "hr", 4)
    assert sb.next_pos == 50 and sb.state_hash() == _reference(more).state_hash()
    assert not _drain(sb)
