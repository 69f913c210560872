"""The user-space impairment's per-direction logic, without sockets (no root needed).

Expected values come from the configuration (loss probability, delay, bit rate, queue
limit), computed here independently of the relay.
"""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.emulation.droplog import drops_table, read_drop_file
from rmptwin.emulation.relay import DROP_RECORD, LOSS, QUEUE, Direction
from rmptwin.model import GilbertElliott, LinkParams

MS = 1_000_000


def _drops(params: LinkParams, seed: int, n: int, gap_ns: int = 100_000) -> list[bool]:
    d = Direction("ab", params, seed, "x-y", "x", "y")
    out = []
    for i in range(n):
        r = d.admit(b"\0" * 100, i * gap_ns)
        out.append(r >= 0)
        if d.line:
            d.line.clear()   # nothing queues up: only the loss decision is under test
    return out


def test_same_seed_same_drops_packet_for_packet():
    p = LinkParams(loss=0.05)
    assert _drops(p, 7, 5000) == _drops(p, 7, 5000)
    assert _drops(p, 7, 5000) != _drops(p, 8, 5000)


def test_bernoulli_loss_rate():
    lost = sum(_drops(LinkParams(loss=0.05), 3, 40_000))
    assert abs(lost / 40_000 - 0.05) < 0.005


def test_gilbert_elliott_mean_and_bursts():
    ge = GilbertElliott(p_gb=0.01, p_bg=0.2)
    drops = _drops(LinkParams(loss=ge), 5, 100_000)
    assert abs(sum(drops) / len(drops) - ge.mean) < 0.01
    runs, cur = [], 0
    for x in drops:
        if x:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    assert sum(runs) / len(runs) > 3   # mean burst 1/p_bg = 5: losses come in bursts


def test_delay_and_no_reordering_with_jitter():
    d = Direction("ab", LinkParams(delay_ms=20, jitter_ms=10), 1, "x-y", "x", "y")
    for i in range(2000):
        d.admit(b"\0" * 100, i * 50_000)
    releases = [r for r, _ in d.line]
    assert releases == sorted(releases)
    lateness = [(r - i * 50_000) / MS for i, (r, _) in enumerate(d.line)]
    assert min(lateness) >= 20 and max(lateness) <= 30


def test_bandwidth_spaces_frames_by_their_serialisation_time():
    d = Direction("ab", LinkParams(bandwidth_mbps=8), 1, "x-y", "x", "y")
    for _ in range(10):
        d.admit(b"\0" * 1000, 0)   # a burst at t=0
    releases = [r for r, _ in d.line]
    # 1000 bytes at 8 Mbit/s = 1 ms each.
    assert [b - a for a, b in zip(releases, releases[1:])] == [MS] * 9


def test_queue_limit_drops_what_does_not_fit():
    d = Direction("ab", LinkParams(bandwidth_mbps=1, queue_packets=5), 1, "x-y", "x", "y")
    reasons = [d.admit(b"\0" * 1000, 0) for _ in range(8)]
    assert reasons == [-1] * 5 + [QUEUE] * 3


def test_down_link_drops_everything():
    d = Direction("ab", LinkParams(), 1, "x-y", "x", "y")
    d.up = False
    assert all(d.admit(b"x", i) == 2 for i in range(10))


def _frame(src: str, dst: str, payload: bytes) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 1, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", 5000, 9000, 8 + len(payload), 0)
    return b"\x01\x00\x5e\x01\x02\x03" + b"\x02" * 6 + b"\x08\x00" + ip + udp + payload


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 1), st.integers(0, 2), st.binary(max_size=300)),
                max_size=20))
def test_drop_log_round_trip(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("drops") / "l.drops"
    with open(path, "wb") as f:
        for t, d, reason, frame in records:
            cap = frame[:200]
            f.write(DROP_RECORD.pack(t, d, reason, len(cap), 0) + cap)
    got = read_drop_file(path, "a-b", "a", "b")
    assert [(g.t_ns, g.from_node, g.reason) for g in got] == \
        [(t, "a" if d == 0 else "b", ("loss", "queue", "down")[r]) for t, d, r, _ in records]


def test_drop_log_names_a_probe_frame(tmp_path):
    payload = struct.pack("!10sQHq", b"PROBE     ", 42, 1, 0)
    path = tmp_path / "l.drops"
    frame = _frame("10.0.0.1", "239.1.2.3", payload)
    path.write_bytes(DROP_RECORD.pack(5, 0, LOSS, len(frame), 0) + frame)
    rows = drops_table(read_drop_file(path, "s1-s2", "s1", "s2"), {"10.0.0.1": "h1"},
                       {"239.1.2.3": "rmp/0"}).to_pylist()
    assert rows == [{"t_ns": 5, "link": "s1-s2", "from_node": "s1", "to_node": "s2", "frame": "MOLD", "src": "h1",
                     "src_seq": -1, "gseq": 42, "group": "rmp/0", "reason": "loss", "copy": 0}]


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_loss_extremes(p):
    assert sum(_drops(LinkParams(loss=p), 1, 1000)) == int(1000 * p)
