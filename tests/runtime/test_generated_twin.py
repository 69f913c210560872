"""The twin on inputs nobody here wrote, emulated (issue 21, item 6): two generated topologies
(12 switches, 11 lossy links, customers in 2 regions; ``topotools.generate`` seeds 1 and 2)
run simulated and emulated with the same seed, and the twin verdict (`rmptwin compare`)
must pass on each, every rule, reformations included. And trace-driven loss (item 5) under the
relay: line3-trace's s1-s2 drops in the same bursts emulated as simulated.

Needs root and Mininet (namespace hosts, relay impairment). The emulated run is in virtual
time (docs/virtual-time.md). At TDF 1 (2026-11-26) seed 2 failed control per
data, 0.633 simulated against 0.725 emulated: a repair from src1 reached the token site 0.34 ms
before its tick simulated and 0.9 ms after it emulated, because the emulated path through the
switches and relays was ~4 ms slower than the modelled links (first-copy data delay p50 10.1
against 13.9 ms), and 4 source re-sends and 6 retransmissions followed. That latency is wall
time: the plan raises the factor until it is under 3 % of the median path's delay (here 10 ms,
at 0.39 ms per link), 8 for both seeds on this 2-CPU machine (2026-11-29), where both passed
every rule in each of two runs (seed 2: 0.679 against 0.633, data delay 10.5 against 10.1 ms).
At factor 3 seed 2 failed once in two runs (0.706).

So this test runs at factor 8, not ``auto``: the plan's latency per link comes from its
calibration's trees (quickstart, line3), whose paths measured 0.07-0.30 ms a link on this
machine (2026-11-30, three calibrations), against 0.35-0.39 ms on these generated trees, and
with those figures ``auto`` chose factor 1 or 2 for seed 2, which failed the same way (0.706,
CI rehearsals). ``auto`` underestimating the path of a tree unlike its calibration's is a known
limit (docs/virtual-time.md); what this test holds is the twin on a topology nobody here wrote,
at a factor where the emulated path is faithful.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_twin_links import first_copy_losses
from twin_checks import assert_twin_verdict

from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment
from rmptwin.topotools.generate import GenParams, loaded_generated

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]
SHIFT = 3   # data messages a trace entry may move by, between backends
BURST_GAP_S = 0.1      # drops closer than this belong to one burst of the trace (its bursts are >= 0.6 s apart)
FACTOR = 8.0          # the generated trees' time dilation (module docstring)
BURST_SHIFT_S = 0.15   # a burst may start this much earlier or later emulated (measured: up to 0.04 s)


def generated(seed: int):
    return loaded_generated(GenParams(switches=12, regions=2, loss_max=0.03, customers_per_region=2,
                                      rate_per_source=50, workload_s=2.0, name=f"gen-twin-{seed}"), seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_topology_twin_verdict_passes(seed, tmp_path):
    loaded = generated(seed)
    assert len(loaded.topology.switches) >= 10 and len(loaded.topology.regions) >= 2
    assert sum(lk.loss.mean > 0 for lk in loaded.topology.links) >= 5
    sim = run_experiment(loaded, "sim", seed=seed, out=tmp_path / "sim")
    dilated = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"time_dilation": FACTOR})})
    emu = run_experiment(dilated, "emulation", seed=seed, out=tmp_path / "emu",
                         options=EmulationOptions(nodes="ns", impair="relay", capture=[]))
    assert not emu.summary["runtime"]["overloaded"], emu.summary["runtime"]["load"]
    for outcome in (sim, emu):
        s = outcome.summary
        assert s["agreement"] and s["messages_lost"] == 0
        assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]
    rules = assert_twin_verdict(sim.run_dir, emu.run_dir)
    assert rules["reformations"].status == "pass" and rules["control_per_data"].status == "pass"


def test_trace_link_drops_line_up_under_the_relay(tmp_path):
    loaded = load_experiment(REPO / "experiments" / "line3-trace.yaml")
    sim = run_experiment(loaded, "sim", out=tmp_path / "sim")
    # impair auto: a traced link must get the relay even where netem exists
    emu = run_experiment(loaded, "emulation", out=tmp_path / "emu", options=EmulationOptions(nodes="ns", capture=[]))
    assert emu.run_dir.read_manifest()["impair"] == "relay"
    w = loaded.experiment.workload
    publishing_s = w.start_s + w.duration_s
    # The trace drops the n-th datagram offered in both backends. Which frame the n-th is (DATA,
    # a MOLD, an ACK) depends on how control frames interleave with the data, and that differs a
    # little emulated (measured, s1->s2: DATA 106 and 141 simulated; 106 and 139, 106 alone,
    # 106/139/140 emulated, the rest of each burst on control frames). What must agree is *when*
    # the trace's bursts fall, counting every frame the data direction s1->s2 lost: each burst
    # that starts while sources publish has one in the other backend starting within
    # BURST_SHIFT_S. After publishing only tokens and MOLDs flow (and s2->s1 carries control
    # frames only), so the n-th datagram's time drifts by seconds there; those are left out. A
    # Bernoulli draw, or no trace, would drop elsewhere.
    sim_b, emu_b = (bursts_in_time(trace_drop_times(r.run_dir, "s1", "s2")) for r in (sim, emu))
    assert sum(b[0] < publishing_s for b in sim_b) >= 2, sim_b
    for mine, theirs in ((sim_b, emu_b), (emu_b, sim_b)):
        for b in mine:
            if b[0] < publishing_s - BURST_SHIFT_S:
                assert any(abs(b[0] - o[0]) <= BURST_SHIFT_S for o in theirs), (sim_b, emu_b)
    # And the DATA first copies the trace took: the simulator's line3-trace loses at least two on
    # s1-s2 with seed 1, and every one the emulation lost is within SHIFT messages of one of them.
    a, b = first_copy_losses(sim.run_dir), first_copy_losses(emu.run_dir)
    traced = [d for d in a if d[0] == "s1-s2"]
    assert sum(len(a[d]) for d in traced) >= 2, a
    assert sum(len(b.get(d, ())) for d in traced) >= 1, b
    for d in traced:
        sim_seq = sorted(seq for _, seq in a[d])
        emu_seq = sorted(seq for _, seq in b.get(d, set()))
        assert all(any(abs(x - y) <= SHIFT for y in sim_seq) for x in emu_seq), (d, sim_seq, emu_seq)


def trace_drop_times(run_dir, u: str, v: str) -> list[float]:
    """Run times (s) of every frame the traced link s1-s2 lost from u to v."""
    rows = run_dir.read_drops().to_pylist()
    return sorted(r["t_ns"] / 1e9 for r in rows if r["link"] == "s1-s2" and (r["from_node"], r["to_node"]) == (u, v))


def bursts_in_time(times: list[float]) -> list[list[float]]:
    """Sorted times grouped into runs whose neighbours are at most BURST_GAP_S apart."""
    out: list[list[float]] = []
    for t in times:
        if out and t - out[-1][-1] <= BURST_GAP_S:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def test_bursts_group_neighbours():
    assert bursts_in_time([2.28, 2.30, 3.0, 3.01]) == [[2.28, 2.30], [3.0, 3.01]]
    assert bursts_in_time([2.28, 2.5]) == [[2.28], [2.5]]
    assert bursts_in_time([]) == []
