"""A run lasts as long as its work (model.drain, analysis.drain_state): ``duration_s: auto``, a
warning for an explicit duration too short for its work, and a short run reported as that,
never as a loss or a protocol violation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin import api
from rmptwin.analysis.summary import MESSAGE_WORK
from rmptwin.checkers import SHORT, VIOLATION
from rmptwin.checkers.suite import DRAIN, check_run
from rmptwin.factories.keys import generate, key_path, write_keys
from rmptwin.model import Experiment
from rmptwin.model.drain import auto_duration_s, workload_end_s
from rmptwin.rundir.run import RunDir

REPO = Path(__file__).resolve().parents[2]
MINC = REPO / "labs" / "loss-minc" / "tree.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, check=False)


def test_a_short_duration_is_warned_with_the_figure_also_after_set():
    r = _cli("validate", str(MINC), "--set", "duration_s=5.5")
    err = " ".join(r.stderr.split())
    assert r.returncode == 0 and "duration_vs_drain: 5.5 s ends the run before its work" in err
    assert "6.2 s in all" in err
    # the shipped lab itself runs auto and is not warned; validate says how long it runs
    r = _cli("validate", str(MINC))
    assert "duration_vs_drain" not in r.stderr
    assert "runs 6.2 s (auto: the work ends at 5.1 s" in " ".join(r.stdout.split())


def test_a_run_cut_before_its_drain_says_so_and_loses_nothing(tmp_path):
    # The MINC lab at its old 5.5 s: every receiver had released 4,883 of 5,000 messages.
    short = api.simulate(api.load_experiment(MINC, {"duration_s": 5.5}), out=tmp_path / "short")
    s = short.summary
    cut = s["ended_before_drain"]
    assert cut["messages"] > 50 and cut["run_s"] == 5.5 and cut["needs_s"] == 6.2
    assert s["messages_lost"] == 0
    verdicts = {v.checker: v for v in check_run(RunDir(short.path))}
    assert not any(v.status == VIOLATION for v in verdicts.values())
    assert verdicts[DRAIN].status == SHORT and f"{cut['messages']} messages" in verdicts[DRAIN].note
    # `rmptwin check` exits 0 on a short run and prints why
    r = _cli("check", str(short.path))
    assert r.returncode == 0 and "ended before its drain" in " ".join(r.stdout.split())
    # the same lab at duration_s: auto ends with agreement and nothing open
    full = api.simulate(api.load_experiment(MINC), out=tmp_path / "auto")
    assert full.summary["agreement"] is True and "ended_before_drain" not in full.summary
    assert full.summary["messages_delivered_min"] == full.summary["messages_sent"] == 5000


def test_a_run_that_ends_before_its_workload_says_how_much_was_never_sent(tmp_path):
    exp = api.load_experiment(REPO / "experiments" / "line3.yaml",
                              {"workload.duration_s": 20, "duration_s": 4.7})
    run = api.simulate(exp, out=tmp_path / "cut")
    cut = run.summary["ended_before_drain"]
    assert cut["run_s"] == 4.7 and cut["work_end_s"] == pytest.approx(20.2)
    printed = _cli("validate", str(REPO / "experiments" / "line3.yaml"), "--set", "workload.duration_s=20",
                   "--set", "duration_s=4.7")
    assert "duration_vs_drain: 4.7 s" in " ".join(printed.stderr.split())


SHIPPED = sorted([*REPO.glob("experiments/*.yaml"), *REPO.glob("labs/*/*.yaml")])
# Not simulated here: the unified orders run 126 s each (tests/sim/test_unified_orders.py runs
# them); the venue-only experiments (no ring: nothing for the drain to find) take 10-50 s of CPU
# each, and their last request completes at the workload's end (measured: 0.00 s after it), so
# the static check below holds them to their drain.
SLOW = {"unified-orders.yaml", "unified-orders-direct.yaml", "venue-failover.yaml", "venue-failover-standby.yaml",
        "venue-gap.yaml", "venue-latency.yaml", "failover.yaml"}


def test_every_shipped_experiment_lasts_its_work_and_drain():
    for path in SHIPPED:
        loaded = api.load_experiment(path)
        assert loaded.duration_s >= auto_duration_s(loaded.experiment, loaded.topology), path


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.name not in SLOW], ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_experiment_ends_with_nothing_open(path, tmp_path):
    """Simulated, seed as shipped: agreement, nothing open, and the last message work (a send,
    an ack, a release, a customer's receipt) comes before the run's end."""
    loaded = api.load_experiment(path)
    security = getattr(loaded.experiment, "security", None)
    if security is not None and security.enabled and not key_path(loaded).exists():
        write_keys(generate(loaded), key_path(loaded))   # a fresh machine has none yet
    run = api.simulate(loaded, out=tmp_path / "run")
    s = run.summary
    assert "ended_before_drain" not in s, s.get("ended_before_drain")
    if loaded.topology.hosts_with_role("primary"):
        assert s["agreement"] is True and s["messages_lost"] == 0
    ev = run.events()
    work = ev[ev.kind.isin([str(k) for k in MESSAGE_WORK])]
    assert int(work.t_ns.max()) <= round(loaded.duration_s * 1e9)
    assert loaded.duration_s >= workload_end_s(loaded.experiment, loaded.topology)


def test_auto_is_the_default_and_what_the_shipped_comments_say():
    """Every shipped ``duration_s: auto  # N s: ...`` comment states the figure auto resolves to."""
    import re

    for path in SHIPPED:
        m = re.search(r"^duration_s: auto\s+# ([0-9.]+) s:", path.read_text(), re.M)
        if m:
            loaded = api.load_experiment(path)
            assert float(m.group(1)) == auto_duration_s(loaded.experiment, loaded.topology), path
    assert Experiment.model_fields["duration_s"].default == "auto"


def test_a_sweep_warns_of_its_points_too_short_for_their_work(capfd):
    from rmptwin.cli.bound_warnings import print_sweep_run_length_warnings

    crash = REPO / "labs" / "ring-crash" / "crash.yaml"     # duration_s 6.0, for its faults
    loaded = api.load_experiment(crash)
    print_sweep_run_length_warnings(loaded, {"protocol.tau_t_ms": [50, 400]}, crash)
    err = " ".join(capfd.readouterr().err.split())
    assert "duration_vs_drain: protocol.tau_t_ms=400: 6 s ends the run before its work" in err
    assert "tau_t_ms=50:" not in err
    print_sweep_run_length_warnings(loaded, {"protocol.tau_t_ms": [50]}, crash)
    assert capfd.readouterr().err == ""
