"""One link model (issue 10, item 1): with the same seed, the simulator and the emulation's
user-space relays lose the same first copies on the same links.

``line3`` and ``binary-tree-loss`` run both ways (the emulation on namespace hosts with the
relay impairment). Per link direction, the set of ``(src, src_seq)`` of the DATA frames
whose first copy was lost (reason ``loss``, the link model's copy 0 of the frame) must overlap >= 95 % (Jaccard) between the two
backends. Both experiments are scaled down (a few hundred to 1,500 messages, at rates the
emulation keeps up with) to keep ``make test`` short: which packets a link loses depends
on the seed and the packets' identities, not on the rate. Every compared direction must have
lost enough first copies for the overlap to mean something, and the simulator with another
seed must lose clearly other packets, so the test cannot pass for a reason other than the
shared seed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from twin_checks import assert_binary_tree_loss_twin

from rmptwin.analysis.twin_verdict import PASS, first_copies_lost, message_times, stripe_trees
from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]
MIN_OVERLAP = 0.95
MIN_DROPS = 5            # first copies lost per compared direction, in the simulator
OTHER_SEED_AT_MOST = 0.25   # independent draws overlap about p / (2 - p): a few %

# Scaled-down copies: (rate per source, seconds of publishing, seconds to drain after).
SCALED = {
    "line3": (200, 3.0, 1.5),              # 600 messages over 2 % links
    "binary-tree-loss": (200, 4.0, 1.5),   # 800 of the 20,000 messages over 1-10 % links: at 500 msg/s a
                                           # loaded 2-core machine overflows relay sockets upstream
}

Direction = tuple[str, str, str]   # (link, from, to)


def _scaled(name: str) -> LoadedExperiment:
    base = load_experiment(REPO / "experiments" / f"{name}.yaml")
    rate, seconds, drain = SCALED[name]
    w = base.experiment.workload.model_copy(update={"rate_per_source": rate, "duration_s": seconds})
    exp = base.experiment.model_copy(update={"name": f"{name}-twin-links", "workload": w,
                                             "duration_s": w.start_s + seconds + drain})
    return base.model_copy(update={"experiment": exp})


def first_copy_losses(run_dir: RunDir) -> dict[Direction, set[tuple[str, int]]]:
    """Per direction of a lossy link, the (src, src_seq) whose first copy was lost there: the
    twin verdict's own definition (``twin_verdict.first_copies_lost``: drops the link model
    counted as the frame's copy 0, messages lost further up the tree left out)."""
    _, topo, _ = run_dir.check()
    events = run_dir.read_events()
    fates = first_copies_lost(run_dir.read_drops(), message_times(events), message_times(events, Kind.SRC_RETX),
                              stripe_trees(topo, events))
    lossy = {(lk.name, u, v) for lk in topo.links if lk.loss.mean > 0 for u, v in ((lk.a, lk.b), (lk.b, lk.a))}
    return {(link, u, v): {(src, seq) for _, src, seq in fates.get((u, v), (set(), 0))[0]}
            for link, u, v in lossy if (u, v) in fates}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _overlaps(a: dict, b: dict) -> dict[Direction, float]:
    return {d: jaccard(a.get(d, set()), b.get(d, set())) for d in sorted(set(a) | set(b))}


@pytest.fixture(scope="module", params=sorted(SCALED))
def both_ways(request, tmp_path_factory):
    """(loaded, simulated drops, emulated drops, drops of the simulator with another seed,
    (simulated run, emulated run))."""
    loaded = _scaled(request.param)
    seed = loaded.experiment.seed
    out = tmp_path_factory.mktemp("twin") / request.param
    sim = run_experiment(loaded, "sim", seed=seed, out=out / "sim")
    other = run_experiment(loaded, "sim", seed=seed + 1, out=out / "sim-other-seed")
    at_auto = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"time_dilation": "auto"})})
    emu = run_experiment(at_auto, "emulation", seed=seed, out=out / "emu",
                         options=EmulationOptions(nodes="ns", impair="relay", capture=[]))
    assert emu.run_dir.read_manifest()["impair"] == "relay"
    return (loaded, first_copy_losses(sim.run_dir), first_copy_losses(emu.run_dir),
            first_copy_losses(other.run_dir), (sim.run_dir, emu.run_dir))


def test_same_seed_loses_the_same_first_copies_on_every_link(both_ways):
    loaded, sim, emu, _, _ = both_ways
    lossy = {lk.name for lk in loaded.topology.links if lk.loss.mean > 0}
    assert {link for (link, _, _), lost in sim.items() if lost} >= lossy, "every lossy link must have lost DATA first copies"
    few = {d: len(s) for d, s in sim.items() if len(s) < MIN_DROPS}
    assert not few, f"too few first copies lost for the overlap to mean anything: {few}"
    overlaps = _overlaps(sim, emu)
    low = {d: round(j, 3) for d, j in overlaps.items() if j < MIN_OVERLAP}
    assert not low, f"first-copy drop sets differ between simulator and emulation: {low}"


def test_another_seed_loses_other_first_copies(both_ways):
    _, sim, emu, other, _ = both_ways
    overlaps = _overlaps(other, emu)
    high = {d: round(j, 3) for d, j in overlaps.items() if j > OTHER_SEED_AT_MOST}
    assert not high, f"another seed lost the same first copies: the overlap is not the seed's doing: {high}"
    assert set(other) == set(sim), "the other seed must lose on the same links (else the sets are trivially apart)"


def test_binary_tree_loss_twin_verdict(both_ways):
    """`rmptwin compare` on the scaled binary-tree-loss: one source, so the order rule is judged."""
    loaded, *_, (sim_run, emu_run) = both_ways
    if not loaded.experiment.name.startswith("binary-tree-loss"):
        pytest.skip("the order rule needs one source per stripe; line3 is covered by the drop sets above")
    # A reformation is a timing rule: a token pass is re-sent when its timer fires. At TDF 1 the
    # emulated run flagged itself overloaded in a CI run (the source's timers 607 ms late at p99,
    # one reformation after 28 failure reports) and this test excused the rule then; at `auto`
    # (virtual time, docs/virtual-time.md) the run is on time and the rule must hold.
    runtime = emu_run.read_summary()["runtime"]
    assert not runtime["overloaded"], (runtime["time_dilation"], runtime["load"])
    rules = assert_binary_tree_loss_twin(sim_run, emu_run)   # every rule, at the factor the plan chose
    assert rules["reformations"].status == PASS, rules["reformations"]
