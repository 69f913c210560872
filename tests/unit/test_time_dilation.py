"""Virtual time: the mapping every node uses (core.host.TimeDilation) and what the emulated
network and the captures are given (emulation.dilation)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmptwin.core.host import TimeDilation
from rmptwin.emulation.dilation import LinkFigures, dilated_link, dilated_topology, rewrite_pcap_times, virtual_figures
from rmptwin.emulation.selftest import delay_probe_rate, jitter_ms
from rmptwin.model import LinkParams, Trace, load_experiment
from rmptwin.node.etcd_cluster import ELECTION_MS, HEARTBEAT_MS, dilated_raft_timers

FACTORS = st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0, 7.3, 8.0])


@given(FACTORS, st.integers(min_value=0, max_value=10**13))
def test_a_timer_woken_at_its_wall_time_is_never_early_nor_a_tick_late(factor, v):
    d = TimeDilation(factor)
    w = d.wall(v)
    assert d.virtual(w) >= v                      # never early
    assert w == 0 or d.virtual(w - 1) < v        # and not a wall ns later than needed
    assert d.virtual(w) - v <= 1                  # at most one virtual ns late from rounding


@given(FACTORS, st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=10**12))
def test_virtual_time_runs_factor_times_slower_and_never_backwards(factor, a, b):
    d = TimeDilation(factor)
    lo, hi = sorted((a, b))
    assert d.virtual(lo) <= d.virtual(hi)
    assert abs((d.virtual(hi) - d.virtual(lo)) - (hi - lo) / factor) <= 1
    assert d.wall_s(1e9) == pytest.approx(factor)


def test_factor_one_is_the_identity_and_below_one_is_refused():
    d = TimeDilation()
    assert d.virtual(123_456_789) == d.wall(123_456_789) == 123_456_789
    with pytest.raises(ValueError, match="at least 1"):
        TimeDilation(0.5)


def test_a_dilated_link_is_the_configured_one_in_virtual_time():
    p = LinkParams(delay_ms=10, jitter_ms=2, loss=0.02, bandwidth_mbps=100)
    d = dilated_link(p, 4.0)
    assert (d.delay_ms, d.jitter_ms, d.bandwidth_mbps) == (40, 8, 25)
    assert d.loss == p.loss                                  # a chance per frame is not time
    assert d.queue_limit() == p.queue_limit()                # the bandwidth-delay product is unchanged
    # a 1500-byte frame's serialization: 0.12 ms configured, 0.48 ms of wall time
    assert 1500 * 8 / (d.bandwidth_mbps * 1e3) == pytest.approx(4 * 1500 * 8 / (p.bandwidth_mbps * 1e3))
    trace = LinkParams(loss=Trace(intervals_ms=[(100.0, 150.0)]))
    assert dilated_link(trace, 2.0).loss.intervals_ms == [(200.0, 300.0)]
    assert dilated_link(p, 1.0) is p


def test_a_dilated_topology_dilates_every_switch_and_access_link():
    q = load_experiment("experiments/quickstart.yaml").topology
    d = dilated_topology(q, 3.0)
    assert [lk.delay_ms for lk in d.links] == [lk.delay_ms * 3 for lk in q.links]
    assert [(lk.a, lk.b) for lk in d.links] == [(lk.a, lk.b) for lk in q.links]
    assert [h.link.delay_ms for h in d.hosts] == [h.link.delay_ms * 3 for h in q.hosts]


def _pcap(times_ns: list[int], nano: bool = False) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    for t in times_ns:
        frac = t % 10**9 if nano else (t % 10**9) // 1000
        out += struct.pack("<IIII", t // 10**9, frac, 4, 4) + b"abcd"
    return out


@pytest.mark.parametrize("nano", [False, True])
def test_a_capture_is_rewritten_into_virtual_time(tmp_path, nano):
    t0 = 1_700_000_000 * 10**9
    path = tmp_path / "h.pcap"
    path.write_bytes(_pcap([t0, t0 + 2_000_000_000, t0 + 5_000_000_000], nano))
    assert rewrite_pcap_times(path, t0, 2.0) == 3
    data = path.read_bytes()
    got = []
    off = 24
    while off < len(data):
        sec, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        got.append(sec * 10**9 + frac * (1 if nano else 1000))
        assert data[off + 16:off + 16 + incl] == b"abcd"      # the frames themselves untouched
        off += 16 + incl
    assert got == [t0, t0 + 1_000_000_000, t0 + 2_500_000_000]
    assert rewrite_pcap_times(path, t0, 1.0) == 0


@given(FACTORS)
def test_virtual_figures_read_a_dilated_link_as_the_configured_one(factor):
    p = LinkParams(delay_ms=20, jitter_ms=4, loss=0.05, bandwidth_mbps=20)
    d = dilated_link(p, factor)
    # What an exact probe of the dilated link reads on the wall clock, put in virtual time.
    v = virtual_figures(LinkFigures(loss=0.05, delay_ms=d.delay_ms, jitter_ms=d.jitter_ms,
                                    rate_mbps=d.bandwidth_mbps), factor)
    assert v.loss == 0.05
    assert v.delay_ms == pytest.approx(p.delay_ms) and v.jitter_ms == pytest.approx(p.jitter_ms)
    assert v.rate_mbps == pytest.approx(p.bandwidth_mbps)


def test_virtual_figures_convert_each_quantity_its_own_way():
    v = virtual_figures(LinkFigures(loss=0.1, delay_ms=80.0, jitter_ms=16.0, rate_mbps=2.5), 8.0)
    assert v == LinkFigures(loss=0.1, delay_ms=10.0, jitter_ms=2.0, rate_mbps=20.0)
    assert virtual_figures(LinkFigures(loss=0.0, delay_ms=5.0), 2.0) == LinkFigures(loss=0.0, delay_ms=2.5)
    with pytest.raises(ValueError, match="at least 1"):
        virtual_figures(LinkFigures(loss=0.0, delay_ms=1.0), 0.5)


def test_the_selftest_spaces_delay_probes_by_two_jitters_and_reads_the_jitter_from_the_iqr():
    assert delay_probe_rate(LinkParams(delay_ms=20), 2000.0) == 2000.0
    assert delay_probe_rate(LinkParams(delay_ms=20, jitter_ms=4), 2000.0) == 125.0
    assert delay_probe_rate(LinkParams(jitter_ms=0.1), 2000.0) == 2000.0
    uniform = [20.0 + 4.0 * i / 1000 for i in range(1001)]   # delays uniform in [20, 24]
    assert jitter_ms(uniform) == pytest.approx(4.0, rel=0.01)
    assert jitter_ms(uniform + [500.0] * 10) == pytest.approx(4.0, rel=0.05)   # a few stalled probes
    assert jitter_ms([1.0, 2.0]) != jitter_ms([1.0, 2.0])   # too few to tell: NaN


@given(st.floats(min_value=1.0, max_value=1000.0))
def test_etcd_raft_timers_last_as_long_in_run_time_at_every_factor_etcd_allows(factor):
    heartbeat, election = dilated_raft_timers(factor)
    assert election < 50_000 and election >= 5 * heartbeat   # etcd refuses anything else
    if factor < 99:
        assert election == pytest.approx(ELECTION_MS * factor, abs=0.5)   # ms of wall time
        assert heartbeat == pytest.approx(HEARTBEAT_MS * factor, abs=1)
    assert dilated_raft_timers(1.0) == (HEARTBEAT_MS, ELECTION_MS)
