"""Parameter sanity (issue 9, item 4): each seed bound warns when an experiment breaks it and
is silent when it holds; `validate`, `sim` and `run` print the warnings, `--strict` makes them
an error (exit 2, one line per bound, then one error line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.model import Bernoulli, GilbertElliott, LoadedExperiment, load_experiment
from rmptwin.model.bounds import format_violation, violated_bounds

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"              # event-driven, satisfies every bound
LINE3_CRASH = REPO / "experiments" / "line3-crash.yaml"  # time-driven; tau_t 50 ms < dN + 2 k_r tau_r


def _with(path: Path, topo_links: dict | None = None, **protocol) -> LoadedExperiment:
    """A shipped experiment with some protocol fields and link losses replaced, in memory."""
    base = load_experiment(path)
    exp = base.experiment.model_copy(update={"protocol": base.experiment.protocol.model_copy(update=protocol)})
    topo = base.topology
    if topo_links:
        links = [lk.model_copy(update=topo_links.get(lk.name, {})) for lk in topo.links]
        topo = topo.model_copy(update={"links": links})
    return LoadedExperiment(experiment=exp, topology=topo, path=base.path)


def _keys(loaded: LoadedExperiment) -> set[str]:
    return {v.key for v in violated_bounds(loaded)}


def _only(loaded: LoadedExperiment, key: str):
    [v] = [v for v in violated_bounds(loaded) if v.key == key]
    return v


# Time-driven line3 with every bound met: tau_t 300 >= dN + 2 k_r tau_r = 20 + 6 x 41 = 266.
TD_OK = {"tau_t_ms": 300, "delta_a_ms": 300}


def test_a_sound_experiment_warns_of_nothing():
    assert violated_bounds(load_experiment(LINE3)) == []
    assert violated_bounds(_with(LINE3_CRASH, **TD_OK)) == []


def test_dn_below_the_longest_path_delay_warns():
    v = _only(_with(LINE3, dn_ms=5, tau_r_ms=41), "dn_vs_path_delay")
    # line3's longest path: rp3 (s3) to src1 (s1) = 0.1 + 5 + 5 + 0.1 ms; a customer's access adds 0.5
    assert "dN 5 ms <" in v.numbers and "d(" in v.numbers
    assert "dn_vs_path_delay" not in _keys(_with(LINE3, dn_ms=11, tau_r_ms=41))


def test_tau_r_below_the_real_round_trip_warns():
    v = _only(_with(LINE3, tau_r_ms=15), "tau_r_vs_round_trip")
    assert v.section == "seed 5.1" and "tau_r 15 ms <" in v.numbers
    assert "tau_r_vs_round_trip" not in _keys(_with(LINE3, tau_r_ms=25))
    # It judges the topology's real delays, not the configured dN: slower links, same tau_r.
    slow = {"s1-s2": {"delay_ms": 30.0}, "s2-s3": {"delay_ms": 30.0}}
    assert "tau_r_vs_round_trip" in _keys(_with(LINE3, topo_links=slow, dn_ms=70, tau_r_ms=100))
    assert "tau_r_vs_round_trip" not in _keys(_with(LINE3, topo_links=slow, dn_ms=70, tau_r_ms=130))


def test_tau_r_below_tau_t_alone_is_what_the_seed_asks_and_is_silent():
    # seed 5.1 requires tau_t >= dN + 2 k_r tau_r, so tau_r < tau_t; only the round trip matters
    loaded = _with(LINE3_CRASH, tau_t_ms=300, tau_r_ms=25, delta_a_ms=300)
    assert loaded.experiment.protocol.tau_r < loaded.experiment.protocol.tau_t
    assert violated_bounds(loaded) == []


def test_delta_a_below_tau_t_warns_for_time_driven_rings():
    v = _only(_with(LINE3_CRASH, tau_t_ms=300, delta_a_ms=250), "delta_a_vs_tau_t")
    assert v.formula == "Delta_A >= tau_t" and "Delta_A 250 ms < tau_t 300 ms" in v.numbers
    assert "delta_a_vs_tau_t" not in _keys(_with(LINE3_CRASH, tau_t_ms=300, delta_a_ms=300))
    # the event-driven protocol makes no fairness promise (seed 5.1): no bound to break
    assert "delta_a_vs_tau_t" not in _keys(_with(LINE3, tau_t_ms=300, delta_a_ms=10))


def test_safe_delivery_needs_delta_a_to_cover_m_minus_1_token_passes():
    # line3: 3 primaries, so (3 - 1) x 300 + 20 = 620 ms
    v = _only(_with(LINE3_CRASH, delivery="safe", tau_t_ms=300, delta_a_ms=600), "delta_a_vs_tau_t")
    assert "(m - 1) tau_t + dN" in v.formula and "= 620 ms" in v.numbers
    assert "delta_a_vs_tau_t" not in _keys(_with(LINE3_CRASH, delivery="safe", tau_t_ms=300, delta_a_ms=620))


def test_tau_t_below_dn_plus_2_k_r_tau_r_warns():
    v = _only(load_experiment(LINE3_CRASH), "tau_t_vs_recovery")
    assert v.formula == "tau_t >= dN + 2 k_r tau_r"
    assert "tau_t 50 ms < 20 + 2 x 3 x 41 = 266 ms" in v.numbers
    assert "tau_t_vs_recovery" not in _keys(_with(LINE3_CRASH, tau_t_ms=266, delta_a_ms=300))
    assert "tau_t_vs_recovery" not in _keys(_with(LINE3, tau_t_ms=50))  # event-driven: tau_t is no period


def test_the_seeds_default_tau_t_is_flagged_as_the_seeds_own_shortfall():
    v = _only(_with(LINE3_CRASH, tau_t_ms=None, delta_a_ms=None), "tau_t_vs_recovery")
    assert "the default, the seed's formula" in v.message and "set tau_t_ms to at least 266" in v.message


def test_more_arrivals_per_token_period_than_one_ack_holds_warns():
    # line3-crash: one source at 100 msg/s, tau_t 300 ms: 30 messages per pass
    v = _only(_with(LINE3_CRASH, batch_limit=20, **TD_OK), "batch_limit_vs_rate")
    assert "30 > batch_limit 20" in v.numbers
    assert "batch_limit_vs_rate" not in _keys(_with(LINE3_CRASH, batch_limit=30, **TD_OK))


def test_loss_that_makes_k_r_tries_of_a_token_pass_fail_warns():
    lossy = {"s1-s2": {"loss": Bernoulli(p=0.1)}, "s2-s3": {"loss": Bernoulli(p=0.1)}}
    v = _only(_with(LINE3_CRASH, topo_links=lossy, **TD_OK), "k_r_vs_loss")
    assert "worst pass rp3->rp1" in v.numbers  # the ring's wrap-around crosses both lossy links
    assert "k_r_vs_loss" not in _keys(_with(LINE3_CRASH, topo_links=lossy, k_r=6, **TD_OK))
    assert "k_r_vs_loss" not in _keys(_with(LINE3_CRASH, **TD_OK))  # the shipped 2 % links


def test_gilbert_elliott_loss_counts_at_its_stationary_mean():
    # Rare, dense bursts: loss_bad 1.0 but a stationary mean of 0.5 %: no warning.
    rare = GilbertElliott(p_gb=0.005, p_bg=0.995, loss_bad=1.0)
    # Long bursts: a stationary mean of 20 %, worse than the 10 % Bernoulli links above.
    heavy = GilbertElliott(p_gb=0.05, p_bg=0.2, loss_bad=1.0)
    assert rare.mean < 0.01 and heavy.mean == pytest.approx(0.2)
    links = lambda m: {"s1-s2": {"loss": m}, "s2-s3": {"loss": m}}
    assert "k_r_vs_loss" not in _keys(_with(LINE3_CRASH, topo_links=links(rare), **TD_OK))
    assert "k_r_vs_loss" in _keys(_with(LINE3_CRASH, topo_links=links(heavy), **TD_OK))


def test_venue_experiments_run_no_ring_and_get_no_rmp_warnings():
    assert violated_bounds(load_experiment(REPO / "experiments" / "venue-gap.yaml")) == []


def test_a_violation_is_one_line_with_formula_and_numbers():
    v = _only(load_experiment(LINE3_CRASH), "tau_t_vs_recovery")
    line = format_violation(v)
    assert "\n" not in line and v.key in line and v.formula in line and v.numbers in line and "seed 5.1" in line


# ----------------------------------------------------------------------------- command line

WARNED = """\
name: warned
topology: {topo}
duration_s: auto
protocol: {{token_mode: time_driven, dn_ms: 20, k_r: 3, p_ms: 1, tau_t_ms: 50, delta_a_ms: {delta_a}}}
workload: {{rate_per_source: 50, duration_s: 1.0}}
"""


def _experiment(tmp_path: Path, delta_a: int = 40) -> Path:
    p = tmp_path / "warned.yaml"
    p.write_text(WARNED.format(topo=REPO / "topologies" / "line3.yaml", delta_a=delta_a))
    return p


def _cli(*args: str, **env) -> subprocess.CompletedProcess:
    """Colourless unless ``env`` forces colour, whatever the calling shell set."""
    plain = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**plain, **env})


def test_validate_prints_one_warning_line_per_violated_bound(tmp_path):
    exp = _experiment(tmp_path)  # tau_t 50 < 266 and Delta_A 40 < tau_t 50
    r = _cli("validate", str(exp))
    assert r.returncode == 0 and "valid experiment 'warned'" in " ".join(r.stdout.split())
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and all(ln.startswith(f"warning: {exp}: ") for ln in lines), r.stderr
    assert "delta_a_vs_tau_t: Delta_A >= tau_t" in lines[0] and "Delta_A 40 ms < tau_t 50 ms" in lines[0]
    assert "tau_t_vs_recovery: tau_t >= dN + 2 k_r tau_r" in lines[1] and "266 ms" in lines[1]
    colored = _cli("validate", str(exp), FORCE_COLOR="1", TERM="xterm")
    assert "33mwarning:" in colored.stderr  # the prefix is yellow on a terminal


def test_validate_strict_turns_warnings_into_an_error(tmp_path):
    exp = _experiment(tmp_path)
    r = _cli("validate", "--strict", str(exp))
    assert r.returncode == 2 and "valid" not in r.stdout and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 3 and lines[0].startswith("warning:") and lines[1].startswith("warning:")
    assert lines[2].startswith(f"rmptwin: {exp}: 2 seed bounds violated") and "--strict" in lines[2]
    clean = _cli("validate", "--strict", str(LINE3))
    assert clean.returncode == 0 and clean.stderr == ""


def test_sim_and_run_warn_before_starting_and_refuse_under_strict(tmp_path):
    exp = _experiment(tmp_path)
    out = tmp_path / "run"
    r = _cli("sim", "--strict", str(exp), "--out", str(out))
    assert r.returncode == 2 and not out.exists(), r.stderr
    assert [ln.split(": ")[2] for ln in r.stderr.splitlines()[:2]] == ["delta_a_vs_tau_t", "tau_t_vs_recovery"]
    # run checks before anything else: with a bad --nodes too, the bound error comes first
    r = _cli("run", "--strict", str(exp), "--nodes", "vm", "--out", str(out))
    assert r.returncode == 2 and "seed bounds violated" in r.stderr and "docker, ns or flat" not in r.stderr
    r = _cli("run", str(exp), "--nodes", "vm", "--out", str(out))  # without --strict: warn, then go on
    assert r.returncode == 2 and r.stderr.count("warning:") == 2 and "docker, ns or flat" in r.stderr
