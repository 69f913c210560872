"""Trace-driven loss (issue 21, item 5): the trace file is read by the loader, the one link
model replays it (per packet or by time) in the simulator and the relay alike, netem refuses
it, and `rmptwin trace fit` recovers the parameters of a synthetic trace."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from test_linkmodel import _data, _ethernet

from rmptwin.core.linkmodel import LOSS, LinkConfig, LinkDirection, TraceConfig, loss_config
from rmptwin.emulation.impair import impair_for_traces, traced_links
from rmptwin.emulation.relay import Direction
from rmptwin.errors import UserError
from rmptwin.model import LinkParams, load_experiment, load_topology
from rmptwin.model.traces import parse_trace
from rmptwin.topotools.trace_fit import fit

ROOT = Path(__file__).resolve().parents[2]
BITS = "0010011100000001"


def test_per_packet_trace_drops_exactly_its_ones_and_loops():
    ld = LinkDirection(LinkConfig(loss=TraceConfig(packets=bytes(int(c) for c in BITS))), "s")
    lost = [ld.offer(i * 1000, 100, (b"k%d" % i, None, -1)) == LOSS for i in range(3 * len(BITS))]
    assert lost == [c == "1" for c in BITS * 3]


def test_interval_trace_drops_by_run_time_from_its_origin():
    cfg = loss_config(LinkParams(loss={"model": "trace", "intervals_ms": [[10, 20], [15, 30], [50, 51]]}).loss)
    assert cfg.intervals_ns == ((10_000_000, 30_000_000), (50_000_000, 51_000_000))   # overlaps merged
    ld = LinkDirection(LinkConfig(loss=cfg), "s")
    ld.trace_origin_ns = 1_000_000_000          # the relay's monotonic clock at the run's t = 0
    lost = [t for t in range(0, 60) if ld.offer(1_000_000_000 + t * 1_000_000, 100) == LOSS]
    assert lost == list(range(10, 30)) + [50]


def test_relay_direction_replays_the_trace_on_udp_frames_and_lets_arp_pass():
    params = LinkParams(loss={"model": "trace", "packets": BITS})
    d = Direction("ab", params, 1, "s1-s2", "s1", "s2")
    arp = b"\xff" * 12 + b"\x08\x06" + b"\x00" * 28
    out = []
    for i, c in enumerate(BITS):
        assert d.admit(arp, i * 10) == -1        # not a datagram: passes, takes no trace entry
        out.append(d.admit(_ethernet(_data("src1", i)), i * 10 + 1))
    assert [r == -LOSS - 1 for r in out] == [c == "1" for c in BITS]


def test_simulated_drops_equal_the_trace(monkeypatch):
    """line3-trace: on each direction of s1-s2 the n-th datagram offered is lost exactly when the
    trace's n-th entry is 1, and the drop log holds those losses and no others."""
    import rmptwin.core.linkmodel as lm
    from rmptwin.sim.simulate import simulate

    loaded = load_experiment(ROOT / "experiments" / "line3-trace.yaml")
    trace = loaded.topology.link("s1", "s2").loss.packets
    seen: dict[int, list[bool]] = {}
    real = lm.LinkDirection.offer

    def spy(self, now_ns, size, key=lm.UNKEYED):
        r = real(self, now_ns, size, key)
        if self._trace is not None:
            seen.setdefault(id(self), []).append(r == LOSS)
        return r

    monkeypatch.setattr(lm.LinkDirection, "offer", spy)
    result = simulate(loaded, 1)
    assert len(seen) == 2 and all(len(v) > 100 for v in seen.values()), {k: len(v) for k, v in seen.items()}
    for lost in seen.values():
        assert lost == [trace[i % len(trace)] == "1" for i in range(len(lost))]
    drops = result.drops.to_pandas()
    on_link = drops[(drops.link == "s1-s2") & (drops.reason == "loss")]
    assert len(on_link) == sum(sum(v) for v in seen.values()) >= 5   # the trace does drop here


def test_loader_reads_the_trace_relative_to_the_yaml_and_names_bad_lines(tmp_path):
    topo = load_topology(ROOT / "topologies" / "line3-trace.yaml")
    assert len(topo.link("s1", "s2").loss.packets) == 3000
    (tmp_path / "t.txt").write_text("# comment\n0 1\n012\n")
    yaml = ROOT.joinpath("topologies", "line3-trace.yaml").read_text().replace("../traces/ge-bursts.txt", "t.txt")
    (tmp_path / "topo.yaml").write_text(yaml)
    with pytest.raises(UserError, match=r"t.txt:3: expected 0/1 per packet"):
        load_topology(tmp_path / "topo.yaml")
    (tmp_path / "t.txt").unlink()
    with pytest.raises(UserError, match="no such trace file"):
        load_topology(tmp_path / "topo.yaml")
    assert parse_trace("0 1\n1 0\n") == {"packets": "0110"}
    assert parse_trace("1.5 2\n0 0.5\n") == {"intervals_ms": [[0.0, 0.5], [1.5, 2.0]]}


def test_netem_cannot_replay_a_trace_so_auto_picks_the_relay():
    topo = load_topology(ROOT / "topologies" / "line3-trace.yaml")
    assert traced_links(topo) == ["s1-s2"]
    assert impair_for_traces("auto", topo) == "relay" and impair_for_traces("relay", topo) == "relay"
    with pytest.raises(UserError, match="link s1-s2: a loss trace cannot be replayed by netem"):
        impair_for_traces("netem", topo)
    assert impair_for_traces("netem", load_topology(ROOT / "topologies" / "line3.yaml")) == "netem"


def test_fit_recovers_bernoulli_and_gilbert_parameters():
    rng = random.Random(3)
    bern = "".join("1" if rng.random() < 0.05 else "0" for _ in range(40_000))
    f = fit(bern)
    assert f.bernoulli_p == pytest.approx(0.05, abs=0.004)
    assert f.loglik_gilbert - f.loglik_bernoulli < 5          # no bursts: Gilbert gains ~nothing
    bad, bits = False, []
    for _ in range(40_000):
        bad = (rng.random() >= 0.3) if bad else (rng.random() < 0.01)
        bits.append("1" if bad else "0")
    g = fit("".join(bits))
    assert g.p_gb == pytest.approx(0.01, abs=0.002) and g.p_bg == pytest.approx(0.3, abs=0.03)
    assert g.loglik_gilbert - g.loglik_bernoulli > 500


def test_shipped_trace_is_what_its_generator_writes():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_loss_trace.py"), "--packets", "3000",
                          "--p-gb", "0.01", "--p-bg", "0.3", "--seed", "7"], capture_output=True, text=True, check=True)
    assert out.stdout == (ROOT / "traces" / "ge-bursts.txt").read_text()
