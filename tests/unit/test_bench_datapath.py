"""bench_datapath's pure parts: CPU from /proc/<pid>/stat, sockets from /proc/net/udp, the
per-datagram arithmetic (received + sent, as planning.demand counts a node's datagrams), the
rows with socat's figure as the Python rows' floor, and the sender's pacing. No Docker."""

from __future__ import annotations

import math

import pytest

from rmptwin.bench import bench_datapath as dp
from rmptwin.bench import harness
from rmptwin.bench.udp_loops import EchoCore, driver_hosts, paced_count

# A real line's shape (Linux 5.x), with a command name holding a space and a parenthesis.
STAT = ("4242 (python (x) y) S 1 4242 4242 0 -1 4194304 1500 0 0 0 "
        "173 27 0 0 20 0 1 0 100 12345678 2000 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0")

UDP = """\
   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 7442: 0100007F:2328 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 63812940 2 000000003bc16c10 12
 7443: 0300007F:1CE8 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 63812941 2 000000003bc16c11 0
 7444: 00000000:1CE8 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 63812942 2 000000003bc16c12 3
"""


def m(**kw):
    base = dict(sent=40_000, sender_s=2.0, sender_cpu_s=0.3, in_drops=0, out_drops=0, forwarded=40_000,
                loop_cpu_s=0.8, sink_cpu_s=0.1)
    return dp.Measurement(**{**base, **kw})


def test_cpu_ticks_are_utime_plus_stime_counted_after_the_command_name():
    assert dp.cpu_ticks(STAT) == 173 + 27


def test_udp_table_gives_queue_and_drops_per_local_address():
    socks = dp.udp_sockets(UDP)
    assert socks[("127.0.0.1", 9000)] == (0, 12)
    assert socks[("127.0.0.3", 7400)] == (0xA00, 0)
    assert socks[("0.0.0.0", 7400)] == (0, 3)      # the driver's wildcard socket beside the sink's


def test_handled_is_received_plus_sent_and_drops_are_counted_where_they_happen():
    x = m(in_drops=1_000, forwarded=38_500, out_drops=500)
    assert x.received == 39_000                    # what reached the loop's socket and was read
    assert x.loop_sent == 39_000                   # what the sink counted + what its socket dropped
    assert x.handled == 78_000
    assert x.us_per_datagram == pytest.approx(0.8e6 / 78_000)
    assert x.forwarded_pct == pytest.approx(96.25)
    assert x.sender_rate == pytest.approx(20_000)
    assert x.busy() == pytest.approx((0.3 + 0.8 + 0.1) / 2.0)


def test_nothing_handled_is_not_a_division_by_zero():
    x = m(sent=0, forwarded=0, sender_s=0.0)
    assert math.isnan(x.us_per_datagram)
    assert x.forwarded_pct == 0.0 and x.sender_rate == 0.0 and x.busy() == 0.0


def test_rows_carry_socats_median_as_the_python_floor():
    results = {"asyncio": [m(loop_cpu_s=0.8), m(loop_cpu_s=1.2), m(loop_cpu_s=1.0)],
               "uvloop": "uvloop not installed",
               "socat": [m(loop_cpu_s=0.16), m(loop_cpu_s=0.24), m(loop_cpu_s=0.2)],
               "rmptwin node driver": [m(loop_cpu_s=2.0)] * 3}
    rows = {r["metric"]: r for r in dp.build_rows(results, 4.0, 1.0, 512)}
    a = rows["CPU per datagram handled: asyncio"]
    assert a["value"] == pytest.approx(1.0e6 / 80_000) and len(a["samples"]) == 3
    assert a["floor"] == pytest.approx(0.2e6 / 80_000) and a["floor_what"] == dp.FLOOR_WHAT
    assert a["unit"] == "µs/datagram" and a["better"] == "lower"
    assert "floor" not in rows["CPU per datagram handled: socat"]   # the floor has no floor
    assert rows["CPU per datagram handled: uvloop"]["value"] == "skipped"
    assert rows["CPU per datagram handled: uvloop"]["note"] == "uvloop not installed"
    d = rows["CPU per datagram handled: rmptwin node driver"]
    assert d["floor"] == a["floor"] and "2.00 x asyncio" in d["note"]
    # the harness reduces the samples and reads the ratio to the floor as cost / floor's cost
    agg = harness.aggregate([a])
    assert agg["value"] == pytest.approx(12.5) and agg["n"] == 3
    assert harness.floor_ratio(agg) == pytest.approx(5.0)


def test_forwarded_and_sender_rows_judge_their_goals():
    results = {"asyncio": [m(forwarded=36_000, in_drops=4_000)], "socat": [m(sent=30_000, forwarded=30_000)]}
    rows = {r["metric"]: harness.aggregate([r]) for r in dp.build_rows(results, 2.0, 1.0, 512)}
    assert rows["forwarded / sent: asyncio"]["ok"] is False          # 90 %: the loop did not keep up
    assert rows["forwarded / sent: socat"]["ok"] is True
    assert rows["sender rate achieved: socat run"]["ok"] is False    # 15,000/s of the 20,000 asked
    assert rows["sender rate achieved: asyncio run"]["ok"] is True


def test_without_socat_the_python_rows_have_no_floor():
    rows = dp.build_rows({"asyncio": [m()], "socat": "socat not installed (Debian package socat)"}, 2.0, 1.0, 512)
    by = {r["metric"]: r for r in rows}
    assert "floor" not in by["CPU per datagram handled: asyncio"]
    assert "Debian package socat" in by["CPU per datagram handled: socat"]["note"]


def test_run_without_root_says_so(monkeypatch):
    monkeypatch.setattr(dp.os, "geteuid", lambda: 1000)
    [row] = dp.run(quick=True)
    assert row["value"] == "skipped" and "root" in row["note"]
    with pytest.raises(Exception, match="root"):
        dp.python_floor_us(quick=True)


def test_unavailable_variants_name_what_is_missing(monkeypatch):
    monkeypatch.setattr(dp.shutil, "which", lambda name: None)
    monkeypatch.setattr(dp.importlib.util, "find_spec", lambda name: None)
    assert dp.availability("socat") == "socat not installed (Debian package socat)"
    assert dp.availability("uvloop") == "uvloop not installed"
    assert dp.availability("asyncio") is None


def test_sender_paces_by_elapsed_time_and_stops_at_the_total():
    assert paced_count(0.0, 20_000, 40_000) == 1
    assert paced_count(0.5, 20_000, 40_000) == 10_001     # a late wake-up catches up at once
    assert paced_count(9.0, 20_000, 40_000) == 40_000


def test_echo_core_sends_each_datagram_on_to_the_sink_once():
    core = EchoCore()
    core.receive_datagram(b"a", "tx", 1)
    core.receive_datagram(b"b", "tx", 2)
    out = core.datagrams_to_send(3)
    assert [d for d, _ in out] == [b"a", b"b"] and all(dest.node == "sink" for _, dest in out)
    assert core.datagrams_to_send(4) == [] and core.get_timer() is None and core.next_event() is None
    assert driver_hosts("127.0.0.1", "127.0.0.3", "127.0.0.2") == {"loop": "127.0.0.1", "tx": "127.0.0.2",
                                                                   "sink": "127.0.0.3"}


def test_each_calibrated_role_is_held_to_a_wake_up_of_the_cheapest_loop_plus_its_own_work():
    from rmptwin.bench.bench_datapath import role_rows
    from rmptwin.bench.harness import aggregate, floor_ratio

    rows = [aggregate([r]) for r in role_rows({"primary": 36.0, "customer": 9.0, "venue": 12.0}, 5.0,
                                              {"primary": 10.0, "customer": 1.0}, "2026-11-29 05:21")]
    by = {r["metric"].split(": ")[1].split(" ")[0]: r for r in rows}
    assert by["primary"]["floor"] == 15.0 and floor_ratio(by["primary"]) == 2.4 and by["primary"]["ok"] is False
    assert floor_ratio(by["customer"]) == 1.5 and by["customer"]["ok"] is True
    assert by["venue"]["floor"] == 5.0 and "not replayed" in by["venue"]["floor_what"]   # no replay: the loop alone


def test_rows_at_the_low_rate_name_it_and_judge_the_sender_by_it():
    results = {"uvloop": [m(sent=4_000, forwarded=4_000, loop_cpu_s=0.2)], "socat": [m(sent=4_000, forwarded=4_000)]}
    rows = {r["metric"]: harness.aggregate([r]) for r in dp.build_rows(results, 4.0, 1.0, 512, dp.LOW_RATE)}
    assert rows["CPU per datagram handled at 1,000/s: uvloop"]["value"] == pytest.approx(0.2e6 / 8_000)
    assert rows["sender rate achieved at 1,000/s: uvloop run"]["ok"] is True   # 2,000/s of the 1,000 asked


def test_each_driver_lever_is_set_beside_the_plain_driver():
    results = {"asyncio": [m(loop_cpu_s=1.0)], "socat": [m(loop_cpu_s=0.2)], dp.DRIVER: [m(loop_cpu_s=0.4)],
               dp.DRIVER_UVLOOP: [m(loop_cpu_s=0.3)], dp.DRIVER_ACCESS: [m(loop_cpu_s=0.6)]}
    rows = {r["metric"]: r for r in dp.build_rows(results, 2.0, 1.0, 512)}
    assert "0.75 x the rmptwin node driver" in rows[f"CPU per datagram handled: {dp.DRIVER_UVLOOP}"]["note"]
    assert "1.50 x the rmptwin node driver" in rows[f"CPU per datagram handled: {dp.DRIVER_ACCESS}"]["note"]
    assert "x the rmptwin node driver" not in rows[f"CPU per datagram handled: {dp.DRIVER}"]["note"]
