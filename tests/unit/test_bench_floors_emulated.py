"""emulated_floors' pure parts: ovs-ofctl dump-ports as frames received, the floor's static rules,
CPU per frame from ticks and counters, the rows beside their floors; and the fixed-delay model
the relay's floor forwards with (delays by a constant, drops nothing). No network, no root."""

from __future__ import annotations

import pytest

from rmptwin.bench import emulated_floors as ef
from rmptwin.bench.harness import aggregate, floor_ratio
from rmptwin.core.linkmodel import LinkConfig
from rmptwin.emulation.relay import Direction, FixedDelay
from rmptwin.model import LinkParams

# Open vSwitch 3.1, `ovs-ofctl -O OpenFlow13 --no-names dump-ports r1s1` after a probe.
DUMP_NUMBERS = """\
OFPST_PORT reply (OF1.3) (xid=0x2): 3 ports
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
           duration=41.337s
  port  1: rx pkts=12, bytes=1040, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=10512, bytes=1471680, drop=0, errs=0, coll=0
           duration=41.339s
  port  2: rx pkts=10512, bytes=1471680, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=12, bytes=1040, drop=0, errs=0, coll=0
           duration=41.339s
"""
# The same bridge with names (a terminal's default), one name quoted, a counter the port lacks.
DUMP_NAMES = """\
OFPST_PORT reply (OF1.3) (xid=0x2): 3 ports
  port LOCAL: rx pkts=3, bytes=180, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
           duration=41.337s
  port  r1s1-eth1: rx pkts=12, bytes=1040, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=10512, bytes=1471680, drop=0, errs=0, coll=0
           duration=41.339s
  port  "odd name": rx pkts=?, bytes=?, drop=?, errs=?, frame=?, over=?, crc=?
           tx pkts=?, bytes=?, drop=?, errs=?, coll=?
"""
# A relay's "stats" reply (Relay.stats), both directions.
RELAY_STATS = {
    "ab": {"packets": 10_004, "loss": 497, "queue": 0, "down": 0, "queued": 0,
           "params": {"delay_ms": 20.0, "loss": {"model": "bernoulli", "p": 0.05}}, "up": True},
    "ba": {"packets": 6, "loss": 1, "queue": 0, "down": 0, "queued": 0, "params": {}, "up": True},
}


def test_dump_ports_gives_rx_packets_per_port_by_number_or_name():
    assert ef.port_rx(DUMP_NUMBERS) == {"LOCAL": 0, "1": 12, "2": 10_512}
    assert ef.port_rx(DUMP_NAMES) == {"LOCAL": 3, "r1s1-eth1": 12, "odd name": 0}


def test_frames_received_sum_every_port_of_every_bridge():
    assert ef.frames_received([DUMP_NUMBERS, DUMP_NAMES]) == 12 + 10_512 + 3 + 12
    assert ef.frames_received([]) == 0


def test_the_floors_rules_send_each_of_two_ports_to_the_other_and_flood_otherwise():
    assert ef.static_flows(list(ef.port_rx(DUMP_NUMBERS))) == [
        "priority=0,in_port=1,actions=output:2", "priority=0,in_port=2,actions=output:1"]
    assert ef.static_flows(["LOCAL", "10", "9"]) == [
        "priority=0,in_port=9,actions=output:10", "priority=0,in_port=10,actions=output:9"]
    assert ef.static_flows(["1", "2", "3"]) == ["priority=0,actions=FLOOD"]


def test_cpu_per_frame_is_the_ticks_over_the_frames_counted_meanwhile():
    s = ef.cpu_sample((1_000, 1_030), (ef.relay_frames({"ab": {"packets": 0}}), ef.relay_frames(RELAY_STATS)), 100)
    assert s.frames == 10_010 and s.cpu_s == pytest.approx(0.30)
    assert s.us_per_frame == pytest.approx(0.30e6 / 10_010)
    assert ef.CpuSample(0.5, 0).us_per_frame is None


def test_a_pid_file_or_pidof_gives_the_first_pid():
    assert ef.parse_pid("1234\n") == 1234 and ef.parse_pid("1234 99\n") == 1234
    assert ef.parse_pid("") is None and ef.parse_pid("no\n") is None


def test_a_row_sits_beside_its_floor_with_a_goal_of_twice_it():
    cond = ef.conditions(2.0, "bench-link", "relay", (3.14, 2.5))
    for part in ("5,000 pkt/s", "2 s", "bench-link", "relay backend", "load average 3.1", "2.5"):
        assert part in cond
    row = ef.cpu_row(ef.relay_metric(20.0, 0.05), ef.CpuSample(0.3, 10_000), ef.CpuSample(0.2, 10_000),
                     ef.relay_floor_what(20.0), cond, "n")
    assert row["metric"] == "relay CPU per frame (20 ms, 5 % loss link)"
    assert row["floor_what"] == "the same relay forwarding with a fixed 20 ms delay, same run"
    assert row["value"] == pytest.approx(30.0) and row["floor"] == pytest.approx(20.0)
    assert row["unit"] == "µs/frame" and row["better"] == "lower" and row["goal"] == "<= 2 x floor"
    assert row["goal_max"] == pytest.approx(40.0) and floor_ratio(row) == pytest.approx(1.5)
    assert aggregate([row])["ok"] is True
    assert aggregate([{**row, "value": 41.0}])["ok"] is False


def test_a_row_without_its_floor_has_no_goal_and_one_without_frames_is_skipped():
    row = ef.cpu_row(ef.OVS_METRIC, ef.CpuSample(0.1, 20_000), None, ef.OVS_FLOOR_WHAT, "c", "n")
    assert row["value"] == pytest.approx(5.0) and "floor" not in row and "goal_max" not in row
    assert ef.cpu_row(ef.OVS_METRIC, ef.CpuSample(0.1, 0), None, ef.OVS_FLOOR_WHAT, "c", "n")["value"] == "skipped"
    assert ef.cpu_row(ef.OVS_METRIC, None, None, ef.OVS_FLOOR_WHAT, "c", "n")["value"] == "skipped"


def test_skipped_rows_name_the_metrics_they_stand_for():
    rows = ef.skipped_rows("needs root", 20.0, 0.05)
    assert [r["metric"] for r in rows] == [ef.relay_metric(20.0, 0.05), ef.OVS_METRIC]
    assert all(r["value"] == "skipped" and r["note"] == "needs root" for r in rows)
    assert [r["metric"] for r in ef.skipped_rows("x", 20.0, 0.05, ("ovs",))] == [ef.OVS_METRIC]


# ----------------------------------------------------------------------------- the fixed-delay relay


def test_fixed_delay_releases_every_frame_its_delay_later_and_drops_none():
    fd = FixedDelay(20_000_000)
    assert not fd.draws and fd.up
    for i in range(10_000):
        now = 1_000_000_000 + i * 200_000
        assert fd.offer(now, 64 + i % 1400) == now + 20_000_000
        assert fd.last_copy == -1 and fd.duplicate_at == -1


def test_fixed_delay_takes_only_the_delay_of_a_new_configuration_and_refuses_what_it_leaves_out():
    fd = FixedDelay(20_000_000)
    fd.reconfigure(LinkConfig(delay_ns=5_000_000, loss=0.5, jitter_ns=1_000))
    assert fd.offer(0, 100) == 5_000_000
    fd.set_up(True)
    fd.set_chaos(0.0, 0.0)
    with pytest.raises(ValueError):
        fd.set_up(False)
    with pytest.raises(ValueError):
        fd.set_chaos(duplicate=0.1)
    with pytest.raises(ValueError):
        FixedDelay(-1)


def test_a_fixed_delay_direction_queues_every_frame_of_a_lossy_link_in_arrival_order():
    params = LinkParams.model_validate({"delay_ms": 20.0, "loss": 0.5})
    d = Direction("ab", params, 1, "a-b", "a", "b", fixed_delay_ns=20_000_000)
    frames = [bytes([i % 256]) * 100 for i in range(1_000)]
    assert all(d.admit(f, i * 1_000) == -1 for i, f in enumerate(frames))
    assert d.packets == 1_000 and d.dropped == [0, 0, 0]
    assert [t for t, _ in d.line] == [i * 1_000 + 20_000_000 for i in range(1_000)]
    lossy = Direction("ab", params, 1, "a-b", "a", "b")   # the link model, for contrast: it loses about half
    assert sum(lossy.admit(f, i * 1_000) >= 0 for i, f in enumerate(frames)) > 300


# ----------------------------------------------------------------------------- the rows from a (fake) network


class FakeNet:
    """What floor_rows reads of an EmulatedNetwork, and a record of what it asked."""

    def __init__(self, links, impair="relay"):
        self.links, self.impair = links, impair
        self.sw_name = {"a": "r3s1", "b": "r3s2"}
        self.topo = type("T", (), {"switches": ["a", "b"]})()
        self.calls = []

    def restart_relay(self, link, *, fixed_delay=False):
        self.calls.append(("restart", link, fixed_delay))
        return self.links[link]


def _relay_link():
    from rmptwin.emulation.impair import RelayLink

    return RelayLink("a-b", "a", "b", None, "r3l1a", "r3l1b", LinkParams.model_validate({"delay_ms": 20.0,
                     "loss": 0.05}), None, 11, 0)


def test_without_a_relay_or_ovs_vswitchd_each_row_says_skipped_and_why(monkeypatch):
    monkeypatch.setattr(ef, "ovs_pid", lambda: None)
    rows = ef.floor_rows(FakeNet({}, impair="netem"), "a-b", "tx", "rx", True, "bench-link")
    assert [r["value"] for r in rows] == ["skipped", "skipped"]
    assert "netem backend" in rows[0]["note"] and "ovs-vswitchd pid not found" in rows[1]["note"]


def test_figures_come_from_the_first_probe_and_floors_from_the_second_after_the_set_up(monkeypatch):
    net = FakeNet({"a-b": _relay_link()})
    windows = iter([ef.Window(ef.CpuSample(0.30, 10_000), ef.CpuSample(0.20, 20_000), 10_000, 9_500, 1.0),
                    ef.Window(ef.CpuSample(0.15, 10_000), ef.CpuSample(0.10, 20_000), 10_000, 10_000, 1.2)])
    monkeypatch.setattr(ef, "ovs_pid", lambda: 4242)
    monkeypatch.setattr(ef, "probe_window", lambda *a: (net.calls.append(("probe",)), next(windows))[1])
    monkeypatch.setattr(ef, "static_bridges", lambda bridges: net.calls.append(("static", tuple(bridges))))
    monkeypatch.setattr(ef, "_bridges_served", lambda: "2 bridges")
    monkeypatch.setattr(ef.time, "sleep", lambda s: None)
    relay, ovs = ef.floor_rows(net, "a-b", "tx", "rx", False, "bench-link")
    assert net.calls == [("probe",), ("restart", "a-b", True), ("static", ("r3s1", "r3s2")), ("probe",)]
    assert relay["metric"] == "relay CPU per frame (20 ms, 5 % loss link)"
    assert relay["value"] == pytest.approx(30.0) and relay["floor"] == pytest.approx(15.0)
    assert ovs["value"] == pytest.approx(10.0) and ovs["floor"] == pytest.approx(5.0)
    assert ovs["floor_what"] == ef.OVS_FLOOR_WHAT and ovs["goal_max"] == pytest.approx(10.0)
    for r in (relay, ovs):
        assert "2 s" in r["conditions"] and "relay backend" in r["conditions"]
        assert "load average 1.0 (figure probe) / 1.2 (floor probe)" in r["conditions"]


def test_a_floor_that_cannot_be_set_up_leaves_the_figures_without_a_goal(monkeypatch):
    net = FakeNet({"a-b": _relay_link()})
    monkeypatch.setattr(ef, "ovs_pid", lambda: 4242)
    monkeypatch.setattr(ef, "probe_window", lambda *a: ef.Window(ef.CpuSample(0.3, 10_000),
                                                                   ef.CpuSample(0.2, 20_000), 10_000, 9_500, 1.0))

    def refuse(bridges):
        raise ef.UserError("ovs-vsctl del-controller r3s1: no bridge named r3s1")

    monkeypatch.setattr(ef, "static_bridges", refuse)
    monkeypatch.setattr(ef, "_bridges_served", lambda: "2 bridges")
    rows = ef.floor_rows(net, "a-b", "tx", "rx", True, "bench-link")
    assert [r["value"] for r in rows] == [pytest.approx(30.0), pytest.approx(10.0)]
    assert all("goal_max" not in r and "floor not measured: UserError" in r["note"] for r in rows)
