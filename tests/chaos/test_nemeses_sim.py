"""The nemeses in the simulator: each fault action does what it says, is validated with one
error line, and leaves the shipped experiments' schedules as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.core.events import Kind
from rmptwin.core.linkmodel import LinkConfig, LinkDirection
from rmptwin.core.nemesis import partition_links, steps
from rmptwin.core.packetkey import packet_key
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.model.experiment import Fault
from rmptwin.sim.simulate import Simulation, simulate

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"


def line3(*faults: dict):
    loaded = load_experiment(LINE3)
    exp = loaded.experiment
    fs = [Fault.model_validate(f) for f in faults]
    w = exp.workload.model_copy(update={"duration_s": 2.0})
    return loaded.model_copy(update={"experiment": exp.model_copy(update={"faults": fs, "workload": w,
                                                                        "duration_s": 4.0})})


def events(result, kind=None, node=None):
    df = result.events.to_pandas()
    if kind:
        df = df[df.kind == kind]
    if node:
        df = df[df.node == node]
    return df


def test_partition_cuts_the_links_between_its_sets_until_it_heals():
    loaded = line3({"at_s": 1.0, "action": "partition", "groups": [["s3"]], "duration_s": 0.5})
    assert partition_links(loaded.topology, [["s3"]]) == ["s2-s3"]
    r = simulate(loaded)
    drops = r.drops.to_pandas()
    down = drops[drops.reason == "down"]
    assert len(down) and set(down.link) == {"s2-s3"}
    assert down.t_ns.min() >= 1.0e9 and down.t_ns.max() < 1.5e9


def test_heal_ends_a_partition_without_duration():
    loaded = line3({"at_s": 1.0, "action": "partition", "groups": [["s1"], ["s2", "s3"]]},
                   {"at_s": 1.2, "action": "heal"})
    down = r_down = simulate(loaded).drops.to_pandas()
    down = r_down[r_down.reason == "down"]
    assert set(down.link) == {"s1-s2"} and down.t_ns.max() < 1.2e9


def test_pause_freezes_a_core_and_it_resumes_with_its_state():
    loaded = line3({"at_s": 1.0, "action": "pause", "node": "rp2", "duration_s": 0.3})
    r = simulate(loaded)
    rp2 = events(r, node="rp2")
    pause, resume = rp2[rp2.kind == Kind.PAUSE], rp2[rp2.kind == Kind.RESUME]
    assert list(pause.t_ns) == [1_000_000_000] and list(resume.t_ns) == [1_300_000_000]
    assert '"paused_ns":300000000' in resume.detail.iloc[0]
    between = rp2[(rp2.t_ns > 1.0e9) & (rp2.t_ns < 1.3e9)]
    assert between.empty, "a frozen core does nothing"
    # resumed with its state: it goes on delivering where it was, no RECOVER, no restart
    after = rp2[(rp2.kind == Kind.DELIVER) & (rp2.t_ns >= 1.3e9)]
    before = rp2[(rp2.kind == Kind.DELIVER) & (rp2.t_ns < 1.0e9)]
    assert len(after) and after.gseq.min() > before.gseq.max() - 1
    assert events(r, Kind.RECOVER).empty


def test_clock_jump_and_drift_change_move_one_node_clock():
    loaded = line3({"at_s": 1.0, "action": "clock", "node": "rp1", "jump_ms": 250},
                   {"at_s": 2.0, "action": "clock", "node": "rp3", "drift_ppm": 500})
    sim = Simulation(loaded)
    sim.start()
    rp1, rp3 = sim.by_name["rp1"], sim.by_name["rp3"]
    sim.sched.run_until(1_500_000_000)
    assert rp1.clock.local(1_500_000_000) == 1_750_000_000
    before = rp3.clock.local(2_000_000_000)
    sim.sched.run_until(2_500_000_000)
    assert rp3.clock.local(2_000_000_000) == before, "a drift change does not step the clock"
    assert rp3.clock.local(3_000_000_000) - rp3.clock.local(2_000_000_000) == 1_000_500_000
    r = simulate(loaded)
    assert len(events(r, Kind.CLOCK)) == 2


def test_flap_takes_a_link_down_and_up_every_period_and_ends_up():
    f = Fault.model_validate({"at_s": 1.0, "action": "flap", "link": "s1-s2", "period_ms": 100, "duration_s": 0.35})
    got = [(s.at_ns, s.action) for s in steps([f])]
    assert got == [(1_000_000_000, "link_down"), (1_100_000_000, "link_up"), (1_200_000_000, "link_down"),
                   (1_300_000_000, "link_up")]
    odd = Fault.model_validate({**f.model_dump(), "duration_s": 0.25})
    assert [(s.at_ns, s.action) for s in steps([odd])][-2:] == [(1_200_000_000, "link_down"),
                                                                (1_250_000_000, "link_up")], "ends up"
    r = simulate(line3(f.model_dump()))
    down = r.drops.to_pandas()
    down = down[down.reason == "down"]
    assert len(down) and set(down.link) == {"s1-s2"}
    assert not ((down.t_ns >= 1.1e9) & (down.t_ns < 1.2e9)).any(), "up between the flaps"


def test_duplicates_and_reordering_on_a_link_the_protocol_survives():
    loaded = line3({"at_s": 0.5, "action": "dup_reorder", "link": "s1-s2", "duplicate": 0.5, "reorder": 0.3,
                    "reorder_ms": 15, "duration_s": 1.5})
    base = simulate(line3())
    r = simulate(loaded)
    assert r.stats["deliveries"] > base.stats["deliveries"]
    from rmptwin.analysis.summary import summarize
    s = summarize(r.events, loaded)
    assert s["agreement"] and s["messages_lost"] == 0


def test_link_model_duplicates_and_reorders_from_its_keyed_stream():
    cfg = LinkConfig(delay_ns=1000, loss=0.2)
    plain = LinkDirection(cfg, "s:l:a>b")
    chaotic = LinkDirection(cfg, "s:l:a>b")
    chaotic.set_chaos(duplicate=0.5, reorder=0.5, reorder_ns=10_000)
    frames = [bytes([0xA5, 1, 1, 0, 0, 0, 0, 1, 3]) + b"src" + i.to_bytes(8, "big") + b"x" * 20 for i in range(400)]
    lost_plain, lost_chaos, dups, held = set(), set(), 0, 0
    for i, f in enumerate(frames):
        k = packet_key(f)
        a, b = plain.offer(i * 100, 64, k), chaotic.offer(i * 100, 64, k)
        if a < 0:
            lost_plain.add(i)
        if b < 0:
            lost_chaos.add(i)
            continue
        held += b > a
        dups += chaotic.duplicate_at >= 0
    assert lost_plain == lost_chaos, "duplicates and reordering never move the loss draws"
    assert 100 < dups < 220 and 100 < held < 220
    again = LinkDirection(cfg, "s:l:a>b")
    again.set_chaos(duplicate=0.5, reorder=0.5, reorder_ns=10_000)
    same = [(again.offer(i * 100, 64, packet_key(f)), again.duplicate_at) for i, f in enumerate(frames)]
    chaotic2 = LinkDirection(cfg, "s:l:a>b")
    chaotic2.set_chaos(duplicate=0.5, reorder=0.5, reorder_ns=10_000)
    assert same == [(chaotic2.offer(i * 100, 64, packet_key(f)), chaotic2.duplicate_at) for i, f in enumerate(frames)]


BAD = {
    "pause needs node": {"at_s": 1, "action": "pause", "duration_s": 1},
    "pause needs duration_s": {"at_s": 1, "action": "pause", "node": "rp1"},
    "clock needs jump_ms or drift_ppm": {"at_s": 1, "action": "clock", "node": "rp1"},
    "flap needs period_ms": {"at_s": 1, "action": "flap", "link": "s1-s2", "duration_s": 1},
    "dup_reorder needs duplicate or reorder": {"at_s": 1, "action": "dup_reorder", "link": "s1-s2"},
    "partition needs groups": {"at_s": 1, "action": "partition"},
    "a switch is in two groups": {"at_s": 1, "action": "partition", "groups": [["s1"], ["s1", "s2"]]},
}


@pytest.mark.parametrize("problem", list(BAD))
def test_each_new_action_is_validated_with_one_line(tmp_path, problem):
    import yaml

    exp = yaml.safe_load(LINE3.read_text())
    exp["topology"] = str(REPO / "topologies" / "line3.yaml")
    exp["faults"] = [BAD[problem]]
    p = tmp_path / "e.yaml"
    p.write_text(yaml.safe_dump(exp))
    with pytest.raises(UserError) as exc:
        load_experiment(p)
    msg = str(exc.value)
    assert "\n" not in msg and problem in msg and "faults.0" in msg


def test_a_partition_of_unknown_switches_is_one_line(tmp_path):
    import yaml

    exp = yaml.safe_load(LINE3.read_text())
    exp["topology"] = str(REPO / "topologies" / "line3.yaml")
    exp["faults"] = [{"at_s": 1, "action": "partition", "groups": [["s9"]]}]
    p = tmp_path / "e.yaml"
    p.write_text(yaml.safe_dump(exp))
    with pytest.raises(UserError, match=r"faults\.0\.groups: unknown switch 's9'"):
        load_experiment(p)
