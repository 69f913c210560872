"""The emulated side of the nemeses, in the parts that run without a network: the relay's
direction (the shared link model's duplicates and reordering), the node's CLOCK command (the clock
itself: tests/unit/test_host_model.py). The emulated runs themselves: tests/emulation/test_nemeses_emulated.py."""

from __future__ import annotations

from rmptwin.emulation.relay import Direction
from rmptwin.model import LinkParams
from rmptwin.node.main import clock_command


def _frame(i: int) -> bytes:
    payload = bytes([0xA5, 1, 1, 0, 0, 0, 0, 1, 3]) + b"src" + i.to_bytes(8, "big") + b"x" * 20
    ip = bytes([0x45, 0, 0, 28 + len(payload), 0, 0, 0, 0, 64, 17, 0, 0]) + bytes(8)
    return b"\x01" * 6 + b"\x02" * 6 + b"\x08\x00" + ip + bytes(8) + payload


def test_relay_direction_duplicates_and_keeps_its_line_in_time_order():
    d = Direction("ab", LinkParams(delay_ms=1.0), 1, "s1-s2", "s1", "s2")
    d.command = None
    d.model.set_chaos(duplicate=0.5, reorder=0.3, reorder_ns=5_000_000)
    for i in range(300):
        assert d.admit(_frame(i), i * 100_000) == -1
    times = [t for t, _ in d.line]
    assert times == sorted(times)
    assert 300 + 100 < len(d.line) < 300 + 200, "about half the frames go out twice"
    order = [int.from_bytes(f[-28:-20], "big") for _, f in d.line]
    assert order != sorted(order), "held-back frames are overtaken"
    d.model.set_chaos()   # calm again: no more duplicates
    before = len(d.line)
    d.admit(_frame(1000), 40_000_000)
    assert len(d.line) == before + 1


def test_clock_command_carries_the_jump_in_ns():
    assert clock_command(["CLOCK", "250000000", "-"]) == (250_000_000, None)
    assert clock_command(["CLOCK", "-", "-40"]) == (None, -40.0)
    assert clock_command(["CLOCK", "250.0", "-"]) is None, "a jump in ms (the old protocol) is refused"
    assert clock_command(["CLOCK", "x", "-"]) is None and clock_command(["GO", "1"]) is None


def test_etcd_member_command():
    from rmptwin.node.main import etcd_command

    assert etcd_command(["ETCD", "pause", "1"]) == ("pause", 1)
    assert etcd_command(["ETCD", "resume", "0"]) == ("resume", 0)
    assert etcd_command(["ETCD", "kill", "0"]) is None and etcd_command(["ETCD", "pause", "x"]) is None


def test_a_member_pause_needs_an_etcd_sequencer_host(tmp_path):
    from pathlib import Path

    import pytest
    import yaml

    from rmptwin.errors import UserError
    from rmptwin.model import load_experiment

    repo = Path(__file__).resolve().parents[2]
    exp = yaml.safe_load((repo / "experiments" / "venue-failover.yaml").read_text())
    exp["topology"] = str(repo / "topologies" / "venue.yaml")
    exp["faults"] = [{"at_s": 1, "action": "pause", "node": "seq1", "member": 0, "duration_s": 1}]
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(exp))
    assert load_experiment(ok).experiment.faults[0].member == 0
    exp["faults"][0]["node"] = "ev1"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(exp))
    with pytest.raises(UserError, match=r"faults\.0\.member: only a sequencer host"):
        load_experiment(bad)
