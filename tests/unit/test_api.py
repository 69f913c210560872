"""rmptwin.api: load with overrides, simulate, and read a run from Python; bad input is the
command line's one-line UserError, raised."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rmptwin import api
from rmptwin.rundir.run import RunDir

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"


def test_overrides_are_sweeps_set_keys_validated_like_the_yaml():
    exp = api.load_experiment(LINE3, {"protocol.delta_a_ms": 321, "topology.links.0.loss": 0.02})
    assert exp.experiment.protocol.delta_a_ms == 321
    assert exp.topology.links[0].loss.p == pytest.approx(0.02)
    assert api.load_experiment(LINE3).experiment.protocol.delta_a_ms != 321   # the file is untouched
    with pytest.raises(api.UserError, match="no field 'protocol.delta_aa_ms'"):
        api.load_experiment(LINE3, {"protocol.delta_aa_ms": 1})
    with pytest.raises(api.UserError, match="greater than or equal to 0"):
        api.load_experiment(LINE3, {"protocol.delta_a_ms": -5})


def test_load_tells_an_experiment_from_a_topology():
    assert api.load(LINE3).experiment.name == "line3"
    topo = api.load(REPO / "topologies" / "line3.yaml", {"links.0.loss": 0.1})
    assert topo.links[0].loss.p == pytest.approx(0.1)
    with pytest.raises(api.UserError, match="no such file"):
        api.load(REPO / "experiments" / "nope.yaml")
    with pytest.raises(api.UserError, match="links.0.loss"):
        api.load_topology(REPO / "topologies" / "line3.yaml", {"links.0.loss": 7})


def test_simulate_gives_a_run_with_summary_manifest_and_tables(tmp_path):
    run = api.simulate(LINE3, seed=3, out=tmp_path / "a", overrides={"protocol.delta_a_ms": 150})
    assert run.path == tmp_path / "a"
    assert run.manifest["seed"] == 3 and run.manifest["experiment"]["protocol"]["delta_a_ms"] == 150
    assert run.summary == RunDir(run.path).read_summary()
    assert run.summary["agreement"] is True and run.summary["messages_lost"] == 0
    events = run.events()
    assert isinstance(events, pd.DataFrame) and len(events) == run.summary["events"]
    assert {"t_ns", "node", "kind"} <= set(events.columns)
    assert run.events_arrow().num_rows == len(events)
    assert isinstance(run.drops(), pd.DataFrame) and isinstance(run.counts(), pd.DataFrame)
    assert run.counts()["packets"].sum() > 0
    assert (run.metrics, run.report_path, run.analysed) == (None, None, False)
    # a loaded experiment is accepted as well, and the same seed gives the same summary
    again = api.simulate(api.load_experiment(LINE3, {"protocol.delta_a_ms": 150}), seed=3, out=tmp_path / "b")
    assert again.summary == run.summary
    assert api.open_run(tmp_path / "a").summary == run.summary


def test_open_run_on_a_directory_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(api.UserError, match=str(tmp_path)):
        api.open_run(tmp_path)
    with pytest.raises(api.UserError, match="choose sim or emulation"):
        api.sweep(LINE3, {"protocol.delta_a_ms": [1]}, backend="docker")


def test_releases_are_the_samples_of_the_summarys_latency_and_fairness(tmp_path):
    from rmptwin.analysis.stats import percentiles

    # Delta_A 20 ms: shorter than recovering a lost packet, so some messages are released unfairly
    run = api.simulate(LINE3, out=tmp_path / "run", overrides={"protocol.delta_a_ms": 20})
    rel = run.releases()
    assert {"node", "src", "src_seq", "send_ns", "release_ns", "latency_ms", "operable"} <= set(rel.columns)
    assert percentiles(rel.latency_ms.dropna()) == pytest.approx(run.summary["delivery_latency_ms"])
    up = rel[rel.operable].groupby(["stripe", "src", "src_seq"]).release_ns
    spread = (up.max() - up.min()) / 1e6
    assert spread.max() > 0
    assert percentiles(spread) == pytest.approx(run.summary["fairness_spread_ms"])
    assert run.experiment.experiment.protocol.delta_a_ms == 20   # the run's, from its manifest


def test_minc_and_first_copies_without_spark(tmp_path):
    exp = api.load_experiment(REPO / "experiments" / "binary-tree-loss.yaml",
                             {"workload.duration_s": 1.0, "duration_s": 1.5})
    run = api.simulate(exp, out=tmp_path / "tree")
    fc = run.first_copies()
    assert len(fc) == 8 * run.summary["messages_sent"] and 0 < (~fc["first"]).sum() < len(fc) / 4
    m = run.minc()
    assert len(m) == 15 and m.truth.notna().all()
    assert (m.estimate - m.truth).abs().max() < 0.015
    assert m.set_index("link").loc["s5>s11>rp4", "configured"] == pytest.approx(0.10)


def test_compare_gives_the_verdict_as_rules_and_plain_text(tmp_path):
    a = api.simulate(LINE3, out=tmp_path / "a")
    b = api.simulate(a.experiment, seed=a.manifest["seed"], out=tmp_path / "b")
    c = api.compare(a, b, analyze_missing=False)
    assert c.passed is True and c.html is None
    assert list(c.rules.columns) == ["metric", "a", "b", "tolerance", "status", "note"]
    assert "agreement" in set(c.rules.metric) and set(c.rules.status) <= {"pass", "not comparable", "not deterministic"}
    assert c.text.strip().splitlines()[-1].startswith("twin verdict: PASS") and "\x1b[" not in c.text
    # a twin with one more loss on a link is judged, rule by rule
    worse = api.simulate(LINE3, seed=a.manifest["seed"], out=tmp_path / "w", overrides={"topology.links.0.loss": 0.2})
    bad = api.compare(a, worse, analyze_missing=False)
    assert bad.passed is False and "fail" in set(bad.rules.status)


def test_an_in_process_sweep_leaves_the_matplotlib_backend_alone(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg")     # not Agg, the backend the sweep's report once switched every caller to
    try:
        sw = api.sweep(LINE3, {"protocol.delta_a_ms": [20, 150]}, seeds=1, out=tmp_path / "sweep", in_process=True)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert (sw.ran, sw.skipped, len(sw.table)) == (2, 0, 2) and sw.report_path.exists()
    assert sorted(sw.table["protocol.delta_a_ms"]) == [20, 150]
    again = api.sweep(LINE3, {"protocol.delta_a_ms": [20, 150]}, seeds=2, out=tmp_path / "sweep",
                     in_process=True, report=False)   # one more seed: resumes, runs only the new ones
    assert (again.ran, again.skipped, len(again.table), again.report_path) == (2, 2, 4, None)
    with pytest.raises(api.UserError, match="in_process"):
        api.sweep(LINE3, {"protocol.delta_a_ms": [20]}, backend="emulation", in_process=True)


def test_set_strings_parse_as_the_command_line_reads_them():
    sets = api.parse_sets(["protocol.delta_a_ms=100,200", "workload.rate_per_source=2.5"])
    assert sets == {"protocol.delta_a_ms": [100, 200], "workload.rate_per_source": [2.5]}
    with pytest.raises(api.UserError, match="given twice"):
        api.parse_sets(["protocol.delta_a_ms=1", "protocol.delta_a_ms=2"])
    exp = api.load_experiment(LINE3)
    assert api.with_overrides(exp, {"protocol.delta_a_ms": 321}).experiment.protocol.delta_a_ms == 321
    assert exp.experiment.protocol.delta_a_ms != 321 and api.with_overrides(exp, None) is exp


def test_progress_stats_and_a_rerun(tmp_path):
    """What the command line shows comes from the API: progress while simulating, the simulator's
    counters after; rerun repeats a run from its manifest into a new directory."""
    seen = []
    run = api.simulate(LINE3, out=tmp_path / "a", progress=lambda fraction, what: seen.append((fraction, what)))
    assert seen and {w for _, w in seen} == {"running"} and 0 < seen[-1][0] <= 1.0 + 1e-9
    assert run.stats["scheduler_events"] > 0 and run.backend == "sim"
    assert api.open_run(run.path).stats is None       # counters are the making call's, not on disk
    replay = api.replay_of(run.path)
    assert (replay.seed, replay.backend, replay.loaded.experiment.name) == (run.manifest["seed"], "sim", "line3")
    again = api.rerun(run.path, out=tmp_path / "b")
    assert again.manifest["rerun_of"] == str(run.path.resolve()) and again.summary == run.summary
    assert again.stats["scheduler_events"] == run.stats["scheduler_events"]
    with pytest.raises(api.UserError, match="no such run directory"):
        api.rerun(tmp_path / "nope")


def test_a_run_made_here_keeps_the_summarys_order(tmp_path):
    """The command line prints the summary in the order summarize gives it (p50, p99, max, ...);
    summary.json sorts its keys. Both are the same figures."""
    run = api.simulate(LINE3, out=tmp_path / "a")
    opened = api.open_run(run.path)
    assert run.summary == opened.summary
    assert list(run.summary["delivery_latency_ms"])[:2] == ["p50", "p99"]
    assert list(opened.summary["delivery_latency_ms"]) == sorted(opened.summary["delivery_latency_ms"])
