"""Properties of a receiver core under any arrival order: whatever order and duplication the
source messages and acks arrive in, it places exactly the acknowledged messages, each once,
at the gseq the acks assign, in gseq order, and never before it holds every earlier one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rmp_bus import timing

from rmptwin.core.events import Kind
from rmptwin.rmp import wire
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.secondary import SecondaryCore


@st.composite
def streams(draw):
    """A valid acknowledged stream: per-source messages in order, batched into acks."""
    n_src = draw(st.integers(1, 3))
    counts = [draw(st.integers(0, 12)) for _ in range(n_src)]
    labels = [(f"s{i + 1}", m) for i in range(n_src) for m in range(1, counts[i] + 1)]
    # interleave sources while keeping each one's messages in order
    order = draw(st.permutations(labels))
    nxt = {f"s{i + 1}": 1 for i in range(n_src)}
    seq = []
    pending = list(order)
    while pending:
        for k, (s, m) in enumerate(pending):
            if nxt[s] == m:
                seq.append((s, m))
                nxt[s] += 1
                del pending[k]
                break
    acks, t, g, i = [], 1, 1, 0
    sites = ["rp1", "rp3"]
    while i < len(seq) or t <= 2:
        k = draw(st.integers(0, 4))
        batch = tuple(seq[i:i + k])
        acks.append(wire.Ack(0, 1, t, g, t * 1000, sites[t % 2], sites[(t + 1) % 2], batch))
        t, g, i = t + 1, g + len(batch), i + len(batch)
    return seq, acks


@settings(max_examples=300, deadline=None)
@given(streams(), st.data())
def test_any_arrival_order_places_the_acknowledged_sequence(stream, data):
    seq, acks = stream
    frames = [wire.Data(0, s, m, 1, f"{s}:{m}".encode()) for s, m in seq] + acks
    dupes = data.draw(st.lists(st.sampled_from(frames), max_size=10)) if frames else []
    arrival = data.draw(st.permutations(frames + dupes))
    retx = data.draw(st.lists(st.booleans(), min_size=len(arrival), max_size=len(arrival)))
    kind = data.draw(st.sampled_from(["primary", "secondary"]))
    if kind == "primary":
        core = PrimaryCore("rp2", {0: ["rp1", "rp2", "rp3"]}, timing(), ["xr1"])
    else:
        core = SecondaryCore("rs1", [0], timing(), ["xr1"], primary="rp1", primaries={0: ["rp1", "rp3"]},
                             ring="r", ring_members={0: ["rp1", "rs1"]})
    placed: list[tuple[int, str, int]] = []
    for now, (f, as_retx) in enumerate(zip(arrival, retx)):
        frame = wire.Retx(0, f) if as_retx else f
        core.receive_datagram(wire.encode(frame), "rp1", now)
        ev = core.next_event()
        while ev is not None:
            if ev.kind == Kind.DELIVER:
                placed.append((ev.gseq, ev.src, ev.src_seq))
            ev = core.next_event()
        # at every moment what is placed is a prefix of the true sequence
        assert placed == [(g + 1, s, m) for g, (s, m) in enumerate(seq[: len(placed)])]
    assert [(s, m) for _, s, m in placed] == seq
    assert core.datagrams_to_send(len(arrival)) is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=60), max_size=30))
def test_cores_survive_any_bytes(blobs):
    core = PrimaryCore("rp2", {0: ["rp1", "rp2", "rp3"]}, timing(), ["xr1"])
    for i, b in enumerate(blobs):
        core.receive_datagram(b"\xa5\x01" + b, "x", i)
        core.receive_datagram(b, "x", i)
        core.handle_timer(i)
    core.datagrams_to_send(len(blobs))
