"""A token-site crash mid-run: a reformation server rebuilds the ring without it, and the
survivors still agree and lose nothing that was acknowledged; a recovered host rejoins;
with the first reformation server down, the next one does the work."""

from __future__ import annotations

import json
import random

import pytest
from rmp_checks import assert_agreement_and_no_loss, frame

from rmptwin.analysis.summary import summarize
from rmptwin.sim.random_trees import loaded_experiment, max_path_delay_ms, random_tree
from rmptwin.sim.simulate import simulate

CRASH_S = 1.0


def _scenario(seed: int, mode: str, faults: list[dict], *, reformers: int = 1, max_loss: float = 0.05,
              start_policy: str = "ticker"):
    rng = random.Random(seed)
    topo = random_tree(rng, switches=6, primaries=4, sources=2, reformers=reformers, max_loss=max_loss)
    protocol = {"token_mode": mode, "dn_ms": max_path_delay_ms(topo) + 5, "k_r": 3, "p_ms": 1,
                "null_token_ms": 100, "start_policy": start_policy}
    if mode == "time_driven":
        protocol["tau_t_ms"] = 60
    return topo, loaded_experiment(
        topo, protocol=protocol, seed=seed, duration_s=6.0, faults=faults,
        workload={"rate_per_source": 50, "start_s": 0.2, "duration_s": 2.5},
    )


def _token_site_at(seed: int, mode: str, t_s: float, **kw) -> str:
    """Who holds the token at ``t_s`` (the same deterministic run, without the crash)."""
    _, loaded = _scenario(seed, mode, [], **kw)
    df = frame(simulate(loaded))
    acc = df[(df.kind == "token_accept") & (df.t_ns <= t_s * 1e9)]
    return str(acc.sort_values("t_ns", kind="stable").iloc[-1].node)


def _receivers(topo) -> dict[str, list[int]]:
    return {h.name: [0] for h in topo.hosts if h.role == "primary"}


def _reforms(df):
    done = df[df.kind == "reform_done"].sort_values("t_ns", kind="stable")
    return [(int(t), node, json.loads(d)) for t, node, d in zip(done.t_ns, done.node, done.detail)]


@pytest.mark.parametrize("mode", ["event_driven", "time_driven"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_token_site_crash_reforms_without_loss(mode, seed):
    site = _token_site_at(seed, mode, CRASH_S)
    topo, loaded = _scenario(seed, mode, [{"at_s": CRASH_S, "action": "crash", "node": site}])
    result = simulate(loaded)
    df = frame(result)
    reforms = _reforms(df)
    assert reforms, "no reformation after the token site crashed"
    t_done, _, first = reforms[0]
    assert t_done > CRASH_S * 1e9
    assert site not in first["ring"]
    assert first["token_site"] in first["ring"] and first["epoch"] > 1
    assert set(first["ring"]) == {h.name for h in topo.hosts if h.role == "primary"} - {site}
    # every published message, including those in flight at the crash, ends up placed by
    # every survivor in one agreed order (sources re-send until the new ring acks them)
    n = assert_agreement_and_no_loss(df, _receivers(topo))
    summary = summarize(result.events, loaded)
    assert n == summary["messages_sent"]
    assert summary["agreement"] and summary["messages_lost"] == 0
    # the ring kept acknowledging after the reformation
    acks_after = df[(df.kind == "ack_sent") & (df.t_ns > t_done)]
    assert len(acks_after) > 0 and site not in set(acks_after.node)


@pytest.mark.parametrize("mode", ["event_driven", "time_driven"])
def test_crashed_site_recovers_and_rejoins(mode):
    seed = 4
    site = _token_site_at(seed, mode, CRASH_S)
    topo, loaded = _scenario(seed, mode, [{"at_s": CRASH_S, "action": "crash", "node": site},
                                          {"at_s": 2.0, "action": "recover", "node": site}])
    df = frame(simulate(loaded))
    reforms = _reforms(df)
    assert len(reforms) >= 2
    assert site not in reforms[0][2]["ring"]
    assert site in reforms[-1][2]["ring"], "the recovered host was not let back into the ring"
    # the recovered host catches up on the whole history and agrees with everyone
    assert_agreement_and_no_loss(df, _receivers(topo))
    later_acks = df[(df.kind.isin(["ack_sent", "null_token"])) & (df.node == site) & (df.t_ns > 2.0e9)]
    assert len(later_acks) > 0, "the recovered host never held the token again"


def test_next_reformation_server_takes_over():
    seed, mode = 5, "time_driven"
    site = _token_site_at(seed, mode, CRASH_S, reformers=2)
    topo, loaded = _scenario(seed, mode, [{"at_s": 0.1, "action": "crash", "node": "xr1"},
                                          {"at_s": CRASH_S, "action": "crash", "node": site}], reformers=2)
    df = frame(simulate(loaded))
    reforms = _reforms(df)
    assert reforms and {node for _, node, _ in reforms} == {"xr2"}
    assert site not in reforms[0][2]["ring"]
    assert_agreement_and_no_loss(df, _receivers(topo))


def test_conservative_start_policy():
    seed, mode = 2, "event_driven"
    site = _token_site_at(seed, mode, CRASH_S, start_policy="conservative")
    topo, loaded = _scenario(seed, mode, [{"at_s": CRASH_S, "action": "crash", "node": site}],
                             start_policy="conservative")
    df = frame(simulate(loaded))
    (_, _, first), *_ = _reforms(df)
    assert first["start_t"] <= first["last_t"] + 1
    assert_agreement_and_no_loss(df, _receivers(topo))


def test_restarted_source_publishes_under_a_new_label():
    seed, mode = 3, "time_driven"
    topo, loaded = _scenario(seed, mode, [{"at_s": 1.0, "action": "crash", "node": "src1"},
                                          {"at_s": 1.5, "action": "recover", "node": "src1"}])
    df = frame(simulate(loaded))
    labels = set(df[df.kind == "send"].src)
    fresh = {s for s in labels if s.startswith("src1~")}
    assert "src1" in labels and len(fresh) == 1
    # nothing published after the restart is mistaken for a duplicate of the old numbering
    assert_agreement_and_no_loss(df, _receivers(topo), all_acked=False)
    sent_after = df[(df.kind == "send") & df.src.isin(fresh)]
    placed = df[(df.kind == "deliver") & df.src.isin(fresh)]
    assert len(sent_after) > 0 and set(sent_after.src_seq) <= set(placed.src_seq)
    assert (df.kind == "reform_done").sum() == 0      # a source restart is no ring failure


def test_silent_secondary_is_passed_around():
    rng = random.Random(8)
    topo = random_tree(rng, switches=4, primaries=2, sources=1, secondaries=4, max_loss=0.0)
    # secondaries rs1 and rs3 share ring1 (anchored at rp1); crash rs3
    protocol = {"token_mode": "time_driven", "tau_t_ms": 40, "dn_ms": max_path_delay_ms(topo) + 5, "p_ms": 1}
    loaded = loaded_experiment(topo, protocol=protocol, seed=8, duration_s=4.0,
                               faults=[{"at_s": 1.0, "action": "crash", "node": "rs3"}],
                               workload={"rate_per_source": 50, "start_s": 0.2, "duration_s": 3.0})
    df = frame(simulate(loaded))
    reports = [json.loads(d) for d in df[df.kind == "failure_report"].detail]
    assert any(r["suspect"] == "rs3" and r["ring"] == "ring1" for r in reports)
    tokens = df[(df.kind == "secondary_token")]
    ring1 = [(int(t), n, json.loads(d)) for t, n, d in zip(tokens.t_ns, tokens.node, tokens.detail)
             if json.loads(d)["ring"] == "ring1"]
    late = [(n, d) for t, n, d in ring1 if t > 2.5e9]
    assert late and {n for n, _ in late} == {"rp1", "rs1"} and all(d["next"] != "rs3" for _, d in late)
    # the secondary token numbers follow the primary tokens upward
    assert [d["token"] for _, _, d in ring1] == sorted(d["token"] for _, _, d in ring1)
    receivers = {h.name: [0] for h in topo.hosts if h.role in ("primary", "secondary")}
    assert_agreement_and_no_loss(df, receivers)


def _missed_new_ring(seed: int, delivery: str):
    """The random crash scenarios of a 120-seed sweep (3-5 primaries, a secondary, one or two
    X_R, 0-20 % loss, one primary crashing and sometimes recovering)."""
    rng = random.Random(seed)
    mode = rng.choice(["event_driven", "time_driven"])
    topo = random_tree(rng, switches=rng.randint(2, 8), primaries=rng.randint(3, 5), sources=rng.randint(1, 3),
                       secondaries=1, reformers=rng.randint(1, 2), max_loss=rng.choice([0.0, 0.05, 0.1, 0.2]))
    protocol = {"token_mode": mode, "dn_ms": max_path_delay_ms(topo) + 5, "k_r": 3, "p_ms": 1,
                "null_token_ms": rng.choice([60, 100, 200]), "batch_limit": rng.choice([4, 256]),
                "start_policy": rng.choice(["ticker", "conservative"]), "delivery": delivery}
    if mode == "time_driven":
        protocol["tau_t_ms"] = rng.choice([60, 100])
    victim = rng.choice([h.name for h in topo.hosts if h.role == "primary"])
    faults = [{"at_s": round(rng.uniform(0.3, 1.0), 3), "action": "crash", "node": victim}]
    if rng.random() < 0.5:
        faults.append({"at_s": round(rng.uniform(1.2, 1.8), 3), "action": "recover", "node": victim})
    return topo, loaded_experiment(topo, protocol=protocol, seed=seed, duration_s=6.0, faults=faults,
                                   workload={"rate_per_source": 40, "start_s": 0.2, "duration_s": 1.0})


@pytest.mark.parametrize("seed, delivery", [(10, "agreed"), (0, "safe")])
def test_a_receiver_that_missed_every_new_ring_announcement_asks_and_catches_up(seed, delivery):
    """seed 10 (91 with the link model of before issue 10): the secondary lost every NEW_RING and held back the new ring's acks for good;
    seed 0: a member that had answered the invitation waited k_r tau_r before asking again,
    and the token site reported it lost first, reformation after reformation. Both now ask
    as soon as an ack shows the ring exists, and every survivor delivers everything."""
    topo, loaded = _missed_new_ring(seed, delivery)
    result = simulate(loaded)
    summary = summarize(result.events, loaded)
    assert summary["agreement"] and summary["messages_lost"] == 0
    receivers = {h.name: [0] for h in topo.hosts if h.role in ("primary", "secondary")}
    assert_agreement_and_no_loss(frame(result), receivers, all_acked=False)
