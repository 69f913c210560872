"""The distributed trading floor (seed 7.3) on simulated runs of the shipped experiments:
every participant derives the same trades, no confirmed trade is lost, confirmation comes
about one token rotation after the tentative report, and when the arbiter's token site
crashes every tentative trade ends confirmed (or withdrawn) identically at every node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from rmptwin.analysis.floor_summary import (
    floor_figures,
    plot_confirm_latency,
    report_html,
)
from rmptwin.analysis.summary import summarize
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.sim.simulate import simulate

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
FLOOR_EXPERIMENTS = ["trading-floor", "trading-floor-dutch", "trading-floor-second-price", "trading-floor-crash"]
CRASH_AT_S = 2.86


def _loaded(name: str, faults: list[dict] | None = None, **floor):
    loaded = load_experiment(EXPERIMENTS / f"{name}.yaml")
    exp = loaded.experiment
    if faults is not None:
        exp = exp.model_copy(update={"faults": [type(exp.faults[0]).model_validate(f) for f in faults]
                                     if exp.faults else faults})
    if floor:
        exp = exp.model_copy(update={"floor": exp.floor.model_copy(update=floor)})
    return loaded.model_copy(update={"experiment": exp})


@cache
def _run(name: str, seed: int, crash: str | None = None):
    if crash is not None:
        # "hold": 40 ms into its hold, before its ack carries its tentative reports;
        # "pass": 30 ms after its ack went out with them, before it holds the token again
        site, t = _token_site_at(seed, CRASH_AT_S, after_pass=crash == "pass")
        loaded = _loaded(name, [{"at_s": t / 1e9 + (0.04 if crash == "hold" else 0.03), "action": "crash",
                                 "node": site}])
    else:
        loaded = _loaded(name)
    df = simulate(loaded, seed).events.to_pandas()
    return loaded, df, summarize(df, loaded)


def _token_site_at(seed: int, t_s: float, after_pass: bool = False) -> tuple[str, int]:
    """The first token site after ``t_s`` that reports a trade tentative, and when it accepted
    the token (``after_pass``: when it passed it on) in the run without faults: crashing it
    then leaves that trade unconfirmed."""
    _, df, _ = _run("trading-floor", seed)
    rep = df[(df.kind == "floor_report") & (df.t_ns >= t_s * 1e9)].sort_values("t_ns", kind="stable")
    first = next(r for r in rep.itertuples(index=False) if json.loads(r.detail)["status"] == "tentative")
    if not after_pass:
        return str(first.node), int(first.t_ns)
    sent = df[(df.kind.isin(["ack_sent", "null_token"])) & (df.node == first.node) & (df.t_ns >= first.t_ns)]
    return str(first.node), int(sent.t_ns.min())


def _ledgers(df: pd.DataFrame) -> dict[str, dict[str, set]]:
    """Each operable floor node's (status -> {(n, digest)}) since it last started over, read
    from its own FLOOR_TRADE events (independently of floor_summary)."""
    out: dict[str, dict[str, set]] = {}
    down: set[str] = set()
    for r in df.sort_values("t_ns", kind="stable").itertuples(index=False):
        det = json.loads(r.detail) if r.detail and r.detail != "{}" else {}
        if r.kind == "crash":
            down.add(r.node)
        elif r.kind == "recover" and "cause" not in det:
            down.discard(r.node)
            out[r.node] = {}
        elif r.kind == "floor_state" and det.get("reset"):
            out[r.node] = {}
        elif r.kind == "floor_trade":
            out.setdefault(r.node, {}).setdefault(det["status"], set()).add((det["n"], det["digest"]))
    return {n: v for n, v in out.items() if n not in down}


@pytest.mark.parametrize("name", FLOOR_EXPERIMENTS)
def test_each_floor_experiment_agrees_and_loses_nothing(name):
    loaded, df, s = _run(name, loaded_seed := load_experiment(EXPERIMENTS / f"{name}.yaml").experiment.seed)
    assert s["participants_agree"] is True
    assert s["floor_trades_lost"] == 0
    assert s["trades_confirmed"] >= 10, f"{name} (seed {loaded_seed}) made too few trades to test anything"
    assert s["trades_unconfirmed"] == 0
    assert s["agreement"] is True and s["messages_lost"] == 0
    ledgers = _ledgers(df)
    participants = {h.name for h in loaded.topology.hosts_with_role("participant")}
    assert participants <= set(ledgers)
    assert len({json.dumps({k: sorted(v) for k, v in sorted(led.items())}) for led in ledgers.values()}) == 1


@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("crash", [None, "hold"])
def test_three_seeds_agree_and_lose_nothing(seed, crash):
    _, _, s = _run("trading-floor-crash" if crash else "trading-floor", seed, crash)
    assert s["participants_agree"] is True and s["floor_trades_lost"] == 0 and s["trades_confirmed"] > 0


@pytest.mark.parametrize("name", ["trading-floor", "trading-floor-dutch", "trading-floor-second-price"])
def test_confirmation_takes_about_one_token_rotation(name):
    _, _, s = _run(name, 1)
    rotation = s["token_rotation_ms"]["p50"]
    assert rotation == pytest.approx(4 * 100, rel=0.05)       # four R_P, tau_t 100 ms
    lat = s["confirm_latency_ms"]
    assert 0.5 * rotation <= lat["p50"] and lat["p99"] <= 2 * rotation


def _statuses(df: pd.DataFrame, kind: str, status: str, node: str | None = None, before: int | None = None) -> set:
    rows = df[df.kind == kind]
    out = set()
    for n, t, d in zip(rows.node, rows.t_ns, rows.detail):
        det = json.loads(d)
        if det["status"] == status and (node is None or n == node) and (before is None or t < before):
            out.add((det["n"], det["digest"]))
    return out


@pytest.mark.parametrize("seed, crash", [(1, None), (2, "hold"), (3, "hold"), (1, "pass"), (2, "pass")])
def test_crash_of_the_arbiter_confirms_or_withdraws_every_tentative_trade_identically(seed, crash):
    """None: the shipped experiment's own crash (during the hold, as "hold")."""
    loaded, df, s = _run("trading-floor-crash", seed, crash)
    site = next(f.node for f in loaded.experiment.faults if f.action == "crash")
    crash_ns = int(df[(df.kind == "crash") & (df.node == site)].t_ns.min())
    pending = (_statuses(df, "floor_report", "tentative", site, crash_ns)
               - _statuses(df, "floor_report", "confirmed", site, crash_ns))
    assert pending, "the crashed token site had no tentative trade left to confirm: the crash tests nothing"
    ledgers = _ledgers(df)
    reference = ledgers[next(iter(sorted(ledgers)))]
    for node, led in ledgers.items():
        assert led == reference, f"{node} ends with another ledger than the others"
    confirmed, withdrawn = reference.get("confirmed", set()), reference.get("withdrawn", set())
    assert _statuses(df, "floor_trade", "confirmed") <= confirmed, "a trade some node held confirmed was lost"
    for key in _statuses(df, "floor_report", "tentative"):
        assert key in confirmed or key in withdrawn, f"tentative trade {key} was neither confirmed nor withdrawn"
    assert pending <= confirmed | withdrawn
    assert s["floor_trades_lost"] == 0 and s["trades_unconfirmed"] == 0


def test_summary_figures_match_between_summary_and_floor_figures():
    _, df, s = _run("trading-floor-crash", 1)
    f = floor_figures(df, "continuous", 0)
    for key in ("trades_tentative", "trades_confirmed", "trades_withdrawn", "floor_trades_lost", "participants_agree"):
        assert f[key] == s[key]


def test_floor_and_venue_summary_keys_do_not_overwrite_each_other():
    # summary.json merges the venues' keys and the floor's: a run with both must keep both
    from rmptwin.analysis.venue_metrics import venue_summary
    from rmptwin.records.tables import EVENT_SCHEMA

    _, df, s = _run("trading-floor", 1)
    venue_keys = set(venue_summary(EVENT_SCHEMA.empty_table().to_pandas(),
                                   load_experiment(EXPERIMENTS / "venue-latency.yaml")))
    floor_keys = set(floor_figures(df, "continuous", 0))
    assert "trades_lost" in venue_keys and "floor_trades_lost" in floor_keys
    assert not venue_keys & floor_keys
    assert s["floor_trades_lost"] == 0 and "trades_lost" not in s   # a floor run without venues


def test_report_section_shows_the_keys_and_the_latency_plot(tmp_path):
    _, df, _ = _run("trading-floor-crash", 1)
    m = floor_figures(df, "continuous", 0, ("pnyc1",))
    m["plot"] = plot_confirm_latency(m, tmp_path / "lat.png").name
    html = report_html({"trading_floor": m})
    assert (tmp_path / "lat.png").stat().st_size > 1000
    assert "<img src='lat.png'" in html and "trades_withdrawn" in html and "token_rotation_ms" in html
    assert "<th>floor_trades_lost</th>" in html
    assert report_html({}) == ""


def test_event_driven_ring_also_agrees():
    loaded = _loaded("trading-floor")
    proto = loaded.experiment.protocol.model_copy(update={"token_mode": "event_driven", "null_token_ms": 100})
    loaded = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"protocol": proto})})
    df = simulate(loaded, 1).events.to_pandas()
    s = summarize(df, loaded)
    assert s["participants_agree"] is True and s["floor_trades_lost"] == 0 and s["trades_confirmed"] > 10


# ----------------------------------------------------------------------------- bad input


def _with_topology(tmp_path, experiment_extra: str, participant_extra: str = "") -> str:
    topo = (EXPERIMENTS.parent / "topologies" / "floor.yaml").read_text()
    topo = topo.replace("{name: pnyc1, role: participant, switch: nyc, primary: rpnyc,",
                        "{name: pnyc1, role: participant, switch: nyc, primary: rpnyc," + participant_extra)
    (tmp_path / "floor.yaml").write_text(topo)
    exp = ("name: bad\ntopology: floor.yaml\nduration_s: 1.0\nprotocol: {tau_t_ms: 100}\n" + experiment_extra)
    path = tmp_path / "bad.yaml"
    path.write_text(exp)
    return str(path)


@pytest.mark.parametrize("extra, participant, message", [
    ("", "", "the topology has participant hosts but the experiment has no 'floor:' section"),
    ("floor: {stripe: 3}\n", "", "floor.stripe 3 is not a stripe of the workload"),
    ("floor: {}\n", "", None),
])
def test_floor_spec_errors_are_one_line(tmp_path, extra, participant, message):
    loaded = load_experiment(_with_topology(tmp_path, extra, participant))
    if message is None:
        simulate(loaded, 1)
        return
    with pytest.raises(UserError) as e:
        simulate(loaded, 1)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_unknown_rule_and_unknown_primary_are_one_line(tmp_path):
    with pytest.raises(UserError) as e:
        load_experiment(_with_topology(tmp_path, "floor: {rule: english}\n"))
    assert "floor.rule" in str(e.value) and "\n" not in str(e.value)


def _rename_primary(tmp_path, name: str) -> None:
    topo = (tmp_path / "floor.yaml").read_text().replace("primary: rpnyc, link: {delay_ms: 1.0}",
                                                         f"primary: {name}, link: {{delay_ms: 1.0}}")
    (tmp_path / "floor.yaml").write_text(topo)


@pytest.mark.parametrize("name", ["xr1", "rpnewyork"])
def test_a_participant_primary_that_is_no_primary_fails_at_load(tmp_path, name):
    # at load time (`rmptwin validate`), not when the run builds the participant
    path = _with_topology(tmp_path, "floor: {}\n")
    _rename_primary(tmp_path, name)
    with pytest.raises(UserError) as e:
        load_experiment(path)
    msg = str(e.value)
    assert f"participant pnyc1: primary '{name}' is not a primary host" in msg and "\n" not in msg
    assert "rpnyc, rpldn, rpfra, rpsgp" in msg
    r = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "validate", str(tmp_path / "floor.yaml")],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"}, timeout=120)
    assert r.returncode == 2 and "participant pnyc1" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_participant_primary_outside_the_floor_ring_fails_at_load(tmp_path):
    # rpnyc is a primary, but of stripe 0 only, and the floor runs on stripe 1
    path = _with_topology(tmp_path, "workload: {stripes: 2}\nfloor: {stripe: 1}\n")
    topo = (tmp_path / "floor.yaml").read_text().replace("{name: rpnyc, role: primary, switch: nyc,",
                                                         "{name: rpnyc, role: primary, switch: nyc, stripes: [0],")
    (tmp_path / "floor.yaml").write_text(topo)
    with pytest.raises(UserError) as e:
        load_experiment(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: participant pnyc1: primary 'rpnyc' is not a primary of the floor's ring")
    assert "use one of: rpldn, rpfra, rpsgp" in msg and "\n" not in msg
