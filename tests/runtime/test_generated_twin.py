"""The twin on inputs nobody here wrote, emulated (issue 21, item 6): two generated topologies
(12 switches, 11 lossy links, customers in 2 regions; ``topotools.generate`` seeds 1 and 2)
run simulated and emulated with the same seed, and the twin verdict (`rmptwin compare`)
must pass on each, every rule, reformations included. And trace-driven loss (item 5) under the
relay: line3-trace's s1-s2 drops the same DATA first copies emulated as simulated.

Needs root and Mininet (namespace hosts, relay impairment). The emulated run is at
``time_dilation: auto`` (docs/virtual-time.md). At TDF 1 (2026-11-26) seed 2 failed control per
data, 0.633 simulated against 0.725 emulated: a repair from src1 reached the token site 0.34 ms
before its tick simulated and 0.9 ms after it emulated, because the emulated path through the
switches and relays was ~4 ms slower than the modelled links (first-copy data delay p50 10.1
against 13.9 ms), and 4 source re-sends and 6 retransmissions followed. That latency is wall
time: the plan raises the factor until it is under 3 % of the median path's delay (here 10 ms,
at 0.39 ms per link), 8 for both seeds on this 2-CPU machine (2026-11-29), where both passed
every rule in each of two runs (seed 2: 0.679 against 0.633, data delay 10.5 against 10.1 ms).
At factor 3 seed 2 failed once in two runs (0.706).
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


def generated(seed: int):
    return loaded_generated(GenParams(switches=12, regions=2, loss_max=0.03, customers_per_region=2,
                                      rate_per_source=50, workload_s=2.0, name=f"gen-twin-{seed}"), seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_topology_twin_verdict_passes(seed, tmp_path):
    loaded = generated(seed)
    assert len(loaded.topology.switches) >= 10 and len(loaded.topology.regions) >= 2
    assert sum(lk.loss.mean > 0 for lk in loaded.topology.links) >= 5
    sim = run_experiment(loaded, "sim", seed=seed, out=tmp_path / "sim")
    at_auto = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"time_dilation": "auto"})})
    emu = run_experiment(at_auto, "emulation", seed=seed, out=tmp_path / "emu",
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
    a, b = first_copy_losses(sim.run_dir), first_copy_losses(emu.run_dir)
    traced = [d for d in a if d[0] == "s1-s2"]
    # something to compare: the trace drops first copies (line3-trace's drops 2 data messages'
    # first copies with seed 1; its other drops hit control frames)
    assert sum(len(a[d]) for d in traced) >= 2, a
    for d in traced:
        # the trace's n-th datagram is dropped in both backends, but control frames interleave
        # with the data a little differently emulated, so a burst of the trace may take one data
        # message more or fewer, a few messages away (measured: {106, 141} simulated; {106, 141,
        # 142}, {106, 139} and {106, 107, 137, 138} emulated). What must agree is where the trace's
        # bursts fall: as many bursts in each backend, and each drop of one backend within SHIFT
        # messages of a drop in the other. A Bernoulli draw, or no trace, would land elsewhere.
        sim_seq = sorted(seq for _, seq in a[d])
        emu_seq = sorted(seq for _, seq in b.get(d, set()))
        assert len(bursts(sim_seq)) == len(bursts(emu_seq)), (d, sim_seq, emu_seq)
        for mine, theirs in ((sim_seq, emu_seq), (emu_seq, sim_seq)):
            assert all(any(abs(x - y) <= SHIFT for y in theirs) for x in mine), (d, sim_seq, emu_seq)


def bursts(seqs: list[int]) -> list[list[int]]:
    """Sorted sequence numbers grouped into runs whose neighbours are at most SHIFT apart."""
    out: list[list[int]] = []
    for x in seqs:
        if out and x - out[-1][-1] <= SHIFT:
            out[-1].append(x)
        else:
            out.append([x])
    return out


def test_bursts_group_neighbours():
    assert bursts([106, 107, 137, 138]) == [[106, 107], [137, 138]]
    assert bursts([106, 141, 142]) == [[106], [141, 142]]
    assert bursts([]) == []
