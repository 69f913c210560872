"""`rmptwin claims`: each claim file is a sweep and a verdict; the report is one HTML table; a
claim whose experiment or summary key does not exist yet is a row saying so, not a failure."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rmptwin.claims.evaluate import CLAIMS_DIR, NOT_MEASURED, run_claims, write_report
from rmptwin.claims.model import load_claim, load_claims
from rmptwin.errors import UserError
from rmptwin.sweeps.sweep_loop import run_loop


def _claim_file(tmp_path: Path, name: str, **changes) -> Path:
    doc = yaml.safe_load((CLAIMS_DIR / "one-control-per-data.yaml").read_text())
    doc["experiment"] = str((CLAIMS_DIR / doc["experiment"]).resolve())
    doc["sets"] = {**doc["sets"], "workload.duration_s": [1.0], "duration_s": [1.5]}   # a second of load: fast
    doc["verdict"] = {**doc["verdict"], "high": 1.3}   # idle null tokens weigh more in a short run
    doc.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_every_shipped_claim_file_loads_and_names_its_seed():
    claims = load_claims(CLAIMS_DIR)
    assert len(claims) >= 12
    for c in claims:
        assert c.quote and c.seed_figure and c.source.lower().startswith(("rmp seed", "venue seed"))


def test_quick_subset_report_with_verdicts_and_unmeasured_rows(tmp_path):
    good = load_claim(_claim_file(tmp_path, "one-control"))
    missing = load_claim(_claim_file(tmp_path, "future", experiment=str(tmp_path / "nope.yaml")))
    no_key = load_claim(_claim_file(tmp_path, "no-key", verdict={"kind": "within", "metric": "no_such_key",
                                                                 "low": 0, "high": 1}))
    rows = run_claims([good, missing, no_key], out=tmp_path / "out", runner=run_loop)
    by = {r.name: r for r in rows}
    assert by["one-control"].verdict == "holds" and "control_per_data" in by["one-control"].simulated
    assert by["one-control"].runs == 2 and by["one-control"].emulated == "not run"
    assert by["future"].verdict == NOT_MEASURED and by["no-key"].verdict == NOT_MEASURED
    page = write_report(rows, tmp_path / "out").read_text()
    assert page.count("<tr>") == 4 and "aren’t any losses" in page and "not yet measured" in page
    assert f"Sweeps are in {(tmp_path / 'out').resolve()}/" in page   # where --out put them, not a fixed path
    assert (tmp_path / "out" / "one-control" / "sim").is_dir()


def test_a_claim_that_the_numbers_contradict_does_not_hold(tmp_path):
    strict = load_claim(_claim_file(tmp_path, "strict", verdict={"kind": "within", "metric": "control_per_data",
                                                                 "low": 0.0, "high": 0.5}))
    (row,) = run_claims([strict], out=tmp_path / "out", runner=run_loop)
    assert row.verdict == "does not hold"


def test_bad_claim_file_and_unknown_name_are_one_line(tmp_path):
    bad = _claim_file(tmp_path, "bad", verdict={"kind": "sometimes"})
    with pytest.raises(UserError, match="verdict.kind"):
        load_claim(bad)
    with pytest.raises(UserError, match="--only nope: no such claim"):
        load_claims(CLAIMS_DIR, only="nope")


def test_every_shipped_claim_plans_an_emulated_sweep_or_says_why_not():
    for c in load_claims(CLAIMS_DIR):
        assert c.emulated is not None, f"{c.name}: no emulated sweep and no reason"
        assert c.emulated.not_applicable or c.emulated.seeds >= 1


def test_every_emulated_sweep_builds():
    """Each emulated point is a valid experiment: a topology path or a set key that does not
    exist is caught here, not by the emulated run (issue 26 gave five claims smaller sweeps)."""
    from rmptwin.model import load_experiment
    from rmptwin.model.overrides import make_points

    for c in load_claims(CLAIMS_DIR):
        if c.emulated is None or c.emulated.not_applicable:
            continue
        assert make_points(load_experiment(c.experiment_path), c.emulated.sets or c.sets), c.name


def test_the_security_claims_emulated_sweep_slows_the_flooder_not_another_host():
    """security-sources sets topology.hosts.14.rate_factor: host 14 must stay the flooder."""
    from rmptwin.model import load_experiment
    from rmptwin.model.overrides import make_points

    claim = load_claim(CLAIMS_DIR / "security-sources.yaml")
    (point,) = make_points(load_experiment(claim.experiment_path), claim.emulated.sets)
    host = point.loaded.topology.hosts[14]
    assert (host.role, host.mode, host.rate_factor) == ("attacker", "flood", 2.0)


def test_twin_verdict_compares_the_two_halves_only_when_both_were_judged():
    from rmptwin.claims.evaluate import AGREE, DIFFER, NOT_APPLICABLE, NOT_RUN, twin_verdict

    assert twin_verdict("holds", "holds") == AGREE
    assert twin_verdict("holds", "does not hold") == DIFFER
    assert twin_verdict("partly", "partly") == AGREE
    assert twin_verdict("holds", NOT_RUN) == NOT_RUN
    assert twin_verdict("does not hold", NOT_APPLICABLE) == NOT_APPLICABLE
    assert twin_verdict(NOT_MEASURED, "holds") == NOT_MEASURED


def test_a_claim_that_cannot_run_emulated_says_not_applicable_and_why(tmp_path):
    na = load_claim(_claim_file(tmp_path, "na", emulated={"not_applicable": "needs 1,000 hosts"}))
    (row,) = run_claims([na], out=tmp_path / "out", emulated=True, runner=run_loop)
    assert row.verdict == "holds"
    assert row.emulated == "not applicable: needs 1,000 hosts" and row.emulated_verdict == "not applicable"
    assert row.twin == "not applicable"
    page = write_report([row], tmp_path / "out").read_text()
    assert "twin" in page and "needs 1,000 hosts" in page


def test_an_emulated_sweep_whose_runs_were_overloaded_is_not_judged(tmp_path):
    from rmptwin.claims.evaluate import OVERLOADED, measure, twin_verdict
    from rmptwin.sweeps.task import run_simulated

    claim = load_claim(_claim_file(tmp_path, "hot", emulated={"sets": {"workload.rate_per_source": [20]}, "seeds": 1}))

    def hot_machine(tasks, on_rows):   # a simulated row, as an emulated run on a busy machine reports it
        for task in tasks:
            on_rows([{**run_simulated(task), "runtime.overloaded": True, "runtime.load.timer_lateness_p99_ms": 513.0}])

    verdict, ours, runs = measure(claim, tmp_path / "out", "emulation", runner=hot_machine)
    assert verdict == OVERLOADED and runs == 1
    assert "control_per_data" in ours and "1 of 1 runs overloaded: timer lateness p99 up to 513 ms" in ours
    assert twin_verdict("holds", verdict) == OVERLOADED


def test_an_emulated_figure_names_the_time_dilation_it_ran_at(tmp_path):
    """A dilated figure is the design on a host that many times faster: the row says which."""
    from rmptwin.claims.evaluate import measure
    from rmptwin.sweeps.task import run_simulated

    claim = load_claim(_claim_file(tmp_path, "dilated", emulated={"sets": {"workload.rate_per_source": [20, 50]},
                                                                   "seeds": 1}))

    def at(factors):
        def runner(tasks, on_rows):
            for task, f in zip(tasks, factors):
                on_rows([{**run_simulated(task), "runtime.overloaded": False, "runtime.time_dilation": f}])
        return runner

    verdict, ours, _ = measure(claim, tmp_path / "a", "emulation", runner=at([4.0, 8.0]))
    assert verdict == "holds" and ours.endswith("(time dilation 4/8)"), ours
    _, ours, _ = measure(claim, tmp_path / "b", "emulation", runner=at([6.0, 6.0]))
    assert ours.endswith("(time dilation 6)"), ours
    _, simulated, _ = measure(claim, tmp_path / "c", "sim", runner=run_loop)
    assert "time dilation" not in simulated


def test_an_overloaded_sweep_is_judged_only_where_late_timers_cannot_make_the_claim_pass(tmp_path):
    from rmptwin.claims.evaluate import OVERLOADED, measure
    from rmptwin.sweeps.task import run_simulated

    def hot_machine(tasks, on_rows):
        for task in tasks:
            on_rows([{**run_simulated(task), "runtime.overloaded": True, "runtime.load.timer_lateness_p99_ms": 9.0}])

    why = "counts what must all arrive"
    emulated = {"sets": {"workload.rate_per_source": [20]}, "seeds": 1, "late_timers_cannot_pass": why}
    holds = load_claim(_claim_file(tmp_path, "counts", emulated=emulated))
    verdict, ours, _ = measure(holds, tmp_path / "out", "emulation", runner=hot_machine)
    assert verdict == "holds" and f"timer lateness p99 up to 9 ms; judged: {why}]" in ours

    # The same sweep under a bound it misses: a late timer may be why, so it is not judged.
    fails = load_claim(_claim_file(tmp_path, "counts-fail", emulated=emulated,
                                   verdict={"kind": "within", "metric": "control_per_data", "low": 5, "high": 6}))
    verdict, ours, _ = measure(fails, tmp_path / "out", "emulation", runner=hot_machine)
    assert verdict == OVERLOADED and "judged" not in ours


def test_a_secure_claim_gets_a_key_set_where_it_has_none(tmp_path, monkeypatch):
    from rmptwin.claims.evaluate import _keys_for
    from rmptwin.factories.keys import key_path
    from rmptwin.model import load_experiment

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    loaded = load_experiment(CLAIMS_DIR.parent / "security-attack.yaml")
    assert not key_path(loaded).exists()
    _keys_for(loaded)
    assert key_path(loaded).stat().st_mode & 0o777 == 0o600
    before = key_path(loaded).read_bytes()
    _keys_for(loaded)   # an existing key set is kept
    assert key_path(loaded).read_bytes() == before


def _fairness_rows(spreads: dict, lateness: float | None):
    import pandas as pd

    rows = [{"protocol.delta_a_ms": d, "topology.links.0.loss": 0.1, "fairness_spread_ms.p99": s} for d, s in spreads.items()]
    if lateness is not None:
        rows = [{**r, "timer_lateness_ms.primary.p99": lateness} for r in rows]
    return pd.DataFrame(rows)


def test_fairness_is_zero_within_the_emulated_runs_measured_timer_lateness():
    """The emulated fairness-delta-a sweep (2026-11-26): spread p99 93 ms at Delta_A 0 and 0.827 ms
    at 143 ms, all of the latter the release timers' lateness (fairness_protocol_ms.p99 0), with
    the primaries' timer lateness p99 at 1.84 / 2.00 ms. Before the tolerance the rule asked for
    exactly 0 and said 'does not hold'."""
    from rmptwin.claims.verdicts import judge

    claim = load_claim(CLAIMS_DIR / "fairness-delta-a.yaml")
    params = list(claim.emulated.sets)
    emulated = _fairness_rows({0: 93.020874, 143: 0.826971}, None)
    emulated["timer_lateness_ms.primary.p99"] = [1.838, 2.004]
    verdict, ours = judge(emulated, params, claim.verdict)
    assert verdict == "holds" and "0 = at most timer_lateness_ms.primary.p99 (2 from 143 on)" in ours
    # the releasing role's lateness, not the run's latest role's (2026-11-27: a customer's 41.6 ms)
    emulated["runtime.load.timer_lateness_p99_ms"] = [2.004, 41.584]
    emulated["fairness_spread_ms.p99"] = [93.0, 30.0]
    assert judge(emulated, params, claim.verdict)[0] == "does not hold"
    emulated["fairness_spread_ms.p99"] = [93.0, 0.826971]
    # a spread beyond the run's timer lateness is unfairness, not the machine
    emulated["fairness_spread_ms.p99"] = [93.0, 2.5]
    assert judge(emulated, params, claim.verdict)[0] == "does not hold"
    # the simulator's sweep has no lateness column: its timers are exact, so 0 is 0
    assert judge(_fairness_rows({0: 61.1, 143: 0.0}, None), params, claim.verdict)[0] == "holds"
    assert judge(_fairness_rows({0: 61.1, 143: 0.001}, None), params, claim.verdict)[0] == "does not hold"
    # below the threshold the spread must exceed the lateness to count as above 0
    assert judge(_fairness_rows({0: 1.0, 143: 0.5}, 2.0), params, claim.verdict)[0] == "partly"
