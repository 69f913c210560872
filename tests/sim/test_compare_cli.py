"""`rmptwin compare SIM_RUN EMU_RUN` on real simulated line3 runs: the twin verdict passes on
two runs of one seed (they are identical) and fails, with a non-zero exit code, on the
per-link loss rule when the second run's links lose more; a run that reads as netem's (its
own loss draw) is judged on control per data by the simulator's spread over other seeds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin.analysis.twin_verdict import FAIL, PASS, inputs_of, twin_verdict
from rmptwin.cli.main import app
from rmptwin.model import LoadedExperiment, Topology, load_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import run_experiment

REPO = Path(__file__).resolve().parents[2]


def _line3(core_loss: float | None = None) -> LoadedExperiment:
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    if core_loss is None:
        return loaded
    topo = loaded.topology.model_dump(mode="json")
    for link in topo["links"]:
        link["loss"] = {"model": "bernoulli", "p": core_loss}
    return LoadedExperiment(experiment=loaded.experiment, topology=Topology.model_validate(topo), path=loaded.path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("twin")
    out = {}
    for name, loss in (("a", None), ("b", None), ("lossier", 0.08)):
        out[name] = run_experiment(_line3(loss), "sim", seed=1, out=base / name).run_dir.path
    return out


def _compare(a: Path, b: Path):
    return CliRunner().invoke(app, ["compare", str(a), str(b), "--no-analyze"], catch_exceptions=False)


def test_same_seed_twice_passes_every_rule(runs):
    res = _compare(runs["a"], runs["b"])
    assert res.exit_code == 0, res.output
    assert "twin verdict: PASS" in res.output
    rules = {r.metric: r for r in twin_verdict(inputs_of(RunDir(runs["a"])), inputs_of(RunDir(runs["b"])))}
    # line3 has one source on one stripe: the order rule is judged, not skipped.
    assert {r.status for r in rules.values()} == {PASS}, rules
    assert len(rules) == 8


def test_more_loss_fails_the_per_link_loss_rule_and_exits_non_zero(runs):
    res = _compare(runs["a"], runs["lossier"])
    assert res.exit_code == 1, res.output
    assert "twin verdict: FAIL" in res.output
    # The failed rule is named on one unwrapped line after the verdict (a log's tail shows it).
    failed = [ln for ln in res.output.splitlines() if ln.startswith("failed: ")]
    assert any(ln.startswith("failed: first_copy_loss_per_link: A 0.00 %, B ") for ln in failed), res.output
    assert len(failed) == res.output.count("│ fail "), res.output
    rules = {r.metric: r for r in twin_verdict(inputs_of(RunDir(runs["a"])), inputs_of(RunDir(runs["lossier"])))}
    assert rules["first_copy_loss_per_link"].status == FAIL
    assert "s1>s2" in rules["first_copy_loss_per_link"].note or "s2>s3" in rules["first_copy_loss_per_link"].note


def test_no_analyze_with_no_verdict_is_one_error_line(runs):
    p = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "compare", str(runs["a"]), str(runs["lossier"]),
                        "--no-analyze", "--no-verdict"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "nothing to show" in p.stderr


def test_the_compare_page_carries_the_twin_verdict(runs, tmp_path):
    """The HTML page says what the terminal says: every rule and the final PASS/FAIL line."""
    import json

    from rmptwin.analysis.compare import compare, verdict_rules
    from rmptwin.cli.console import make_console

    for name in ("a", "lossier"):   # the side-by-side table reads metrics.json (Spark's); a stand-in
        RunDir(runs[name]).metrics_path.parent.mkdir(parents=True, exist_ok=True)
        RunDir(runs[name]).metrics_path.write_text(json.dumps({"headline": {"packets": 10}}))
    rules = verdict_rules(runs["a"], runs["lossier"])
    page = compare(runs["a"], runs["lossier"], make_console(), tmp_path / "cmp.html", rules).read_text()
    assert "twin verdict: FAIL" in page and "first_copy_loss_per_link" in page
    assert page.count("<tr>") >= len(rules) + 2
    for name in ("a", "lossier"):
        RunDir(runs[name]).metrics_path.unlink()


def _as_netem(run: Path) -> Path:
    """The run as an emulated run under netem reads to the verdict: the kernel drew its losses
    and kept no drop log (the manifest's ``impair``), so only the seed spread can judge it."""
    import json

    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "impair": "netem"}))
    return run


@pytest.fixture(scope="module")
def netem_like(tmp_path_factory) -> dict[str, Path]:
    """Simulated runs at a seed outside the spread's (A's seed 1: seeds 2 to 13), made to read
    as netem runs: one of the same experiment (another draw of the same losses) and one whose
    links lose 15 % instead of 2 % (control per data 3.1 against the spread's interval of 0.97
    to 2.6: one run of 100 messages cannot tell 8 % links, 2.4, from a rare draw)."""
    base = tmp_path_factory.mktemp("netem")
    return {name: _as_netem(run_experiment(_line3(loss), "sim", seed=40, out=base / name).run_dir.path)
            for name, loss in (("same", None), ("lossier", 0.15))}


def test_under_netem_control_per_data_is_judged_by_the_simulators_seed_spread(runs, netem_like):
    """Another draw of the same losses falls inside the simulator's spread over seeds and passes;
    the lossier links' re-sends fall outside it and fail, saying so. `--spread-seeds 0` leaves
    the rule not judged."""
    from rmptwin.analysis.compare import verdict_rules

    same = {r.metric: r for r in verdict_rules(runs["a"], netem_like["same"])}
    assert same["control_per_data"].status == PASS, same["control_per_data"]
    assert "13 seeds" in same["control_per_data"].note
    assert same["first_copy_loss_per_link"].status == "not comparable"
    lossier = {r.metric: r for r in verdict_rules(runs["a"], netem_like["lossier"])}
    assert lossier["control_per_data"].status == FAIL
    assert "more re-sends than one seed in 1,000" in lossier["control_per_data"].note
    res = CliRunner().invoke(app, ["compare", str(runs["a"]), str(netem_like["same"]), "--no-analyze",
                                   "--spread-seeds", "0"], catch_exceptions=False)
    assert res.exit_code == 0 and "not judged" in res.output and "control_per_data" in res.output, res.output
