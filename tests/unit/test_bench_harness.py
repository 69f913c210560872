"""`make bench`: repeated measurements reduced to median / min / max, goals judged on the
median, figures compared with the reference copy and regressions of more than 20 % flagged
in the direction each row declares."""

from __future__ import annotations

import json
import sys
import types

import pytest

from rmptwin.bench import __main__ as bench
from rmptwin.bench import harness


def run_rows(*values, **extra):
    return [{"bench": "b", "metric": "speed", "value": v, "unit": "x/s", "better": "higher",
             "note": f"run with {v}", **extra} for v in values]


# ---------------------------------------------------------------------------- aggregation
def test_three_runs_give_median_min_max_and_the_median_runs_note():
    row = harness.aggregate(run_rows(300.0, 100.0, 200.0))
    assert (row["value"], row["min"], row["max"], row["n"]) == (200.0, 100.0, 300.0, 3)
    assert row["note"] == "run with 200.0"


def test_samples_of_one_run_are_reduced_the_same_way():
    row = harness.aggregate([{"bench": "b", "metric": "speed", "samples": [5.0, 1.0, 4.0, 2.0], "unit": "x/s"}])
    assert (row["value"], row["min"], row["max"], row["n"]) == (3.0, 1.0, 5.0, 4)
    assert "samples" not in row


def test_goal_is_judged_on_the_median_not_on_one_lucky_run():
    rows = run_rows(400.0, 90.0, 95.0, goal_min=100, ok=True)      # one run met the goal, the median did not
    assert harness.aggregate(rows)["ok"] is False
    assert harness.aggregate(run_rows(120.0, 90.0, 130.0, goal_min=100))["ok"] is True
    assert harness.aggregate(run_rows(1.2, 1.0, 1.05, goal_min=0.95, goal_max=1.15))["ok"] is True


def test_non_numeric_values_are_kept_not_averaged():
    row = harness.aggregate([{"bench": "b", "metric": "etcd", "value": "skipped", "note": "etcd not installed"}])
    assert row["value"] == "skipped" and row["min"] is None and row["n"] == 1


def test_merge_runs_keeps_metric_order_and_counts_missing_runs():
    runs = [run_rows(1.0) + [{"bench": "b", "metric": "late", "value": 7.0}],
            run_rows(3.0),
            run_rows(2.0) + [{"bench": "b", "metric": "late", "value": 9.0}]]
    merged = harness.merge_runs(runs)
    assert [r["metric"] for r in merged] == ["speed", "late"]
    assert merged[0]["value"] == 2.0 and merged[0]["n"] == 3
    assert merged[1]["value"] == 8.0 and merged[1]["n"] == 2


# ---------------------------------------------------------------------------- regressions
@pytest.mark.parametrize("better, ref, value, regression", [
    ("higher", 1000.0, 790.0, True),       # 21 % fewer orders/s
    ("higher", 1000.0, 810.0, False),      # 19 % fewer: within tolerance
    ("higher", 1000.0, 1500.0, False),     # faster
    ("lower", 10.0, 12.5, True),           # 25 % more seconds
    ("lower", 10.0, 11.5, False),
    ("lower", 10.0, 5.0, False),           # half the latency: better, not a regression
])
def test_regression_follows_the_rows_direction(better, ref, value, regression):
    row = {"bench": "b", "metric": "m", "value": value, "unit": "u", "better": better}
    out = harness.compare(row, {"bench": "b", "metric": "m", "value": ref, "unit": "u"})
    assert out["regression"] is regression
    assert out["reference"] == ref
    assert (out["worse_by"] > 0) == (value != ref and (value < ref) == (better == "higher"))


def test_rows_without_direction_reference_or_same_unit_are_not_compared():
    ref = {"bench": "b", "metric": "m", "value": 1.0, "unit": "ratio"}
    assert harness.compare({"metric": "m", "value": 0.1, "unit": "ratio"}, ref)["regression"] is None
    assert harness.compare({"metric": "m", "value": 0.1, "unit": "ms", "better": "lower"}, ref)["regression"] is None
    out = harness.compare({"metric": "m", "value": 0.1, "unit": "ratio", "better": "higher"}, None)
    assert out["regression"] is None and out["reference"] is None


def test_compare_all_uses_the_reference_of_the_same_mode_only():
    reference = {"modes": {"full": {"rows": [{"bench": "b", "metric": "speed", "value": 1000.0, "unit": "x/s"}]}}}
    rows = [harness.aggregate(run_rows(500.0))]
    assert harness.compare_all(rows, reference, "full")[0]["regression"] is True
    assert harness.compare_all(rows, reference, "quick")[0]["reference"] is None


def test_updated_reference_replaces_only_the_benchmarks_run_and_lists_absent_ones():
    old = {"modes": {"quick": {"rows": [{"bench": "a", "metric": "x", "value": 1.0},
                                        {"bench": "b", "metric": "speed", "value": 1.0}], "absent": {}}}}
    new_rows = [harness.aggregate(run_rows(5.0, 6.0, 7.0)),
                {"bench": "b", "metric": "(failed)", "value": "RuntimeError"}]
    ref = harness.updated_reference(old, new_rows, "quick", ["a", "b", "c"], {"git_commit": "abc"})
    rows = ref["modes"]["quick"]["rows"]
    assert [(r["bench"], r["metric"], r["value"]) for r in rows] == [("a", "x", 1.0), ("b", "speed", 6.0)]
    assert rows[1]["min"] == 5.0 and rows[1]["better"] == "higher"
    assert list(ref["modes"]["quick"]["absent"]) == ["c"]
    assert ref["modes"]["quick"]["git_commit"] == "abc"


# ---------------------------------------------------------------------------- the command
def install_fake_benchmarks(monkeypatch, good_run) -> None:
    """Benchmarks ``zzgood`` (runs ``good_run``) and ``zzbad`` (always raises), importable by name."""
    good = types.ModuleType("rmptwin.bench.bench_zzgood")
    good.run = good_run
    bad = types.ModuleType("rmptwin.bench.bench_zzbad")

    def boom(quick):
        raise RuntimeError("no")
    bad.run = boom
    monkeypatch.setitem(sys.modules, good.__name__, good)
    monkeypatch.setitem(sys.modules, bad.__name__, bad)


@pytest.fixture
def fake_bench(monkeypatch):
    """A benchmark that measures 100, 200, 300 in its three runs, and one that always fails."""
    values = iter([100.0, 300.0, 200.0])
    install_fake_benchmarks(monkeypatch, lambda quick: [
        {"metric": "speed", "value": next(values), "unit": "x/s", "better": "higher",
         "goal": ">= 150", "goal_min": 150, "conditions": "hand-made"}])
    monkeypatch.setattr(bench, "discover", lambda: ["zzbad", "zzgood"])


def test_discovers_benchmarks_and_rejects_unknown_names(capsys):
    assert "sim" in bench.discover()
    assert bench.main(["--only", "no_such_bench"]) == 2
    assert "no_such_bench" in capsys.readouterr().err


def test_one_run_gives_rows_a_broken_benchmark_does_not_stop_the_rest(tmp_path, monkeypatch):
    install_fake_benchmarks(monkeypatch, lambda quick: [
        {"metric": "speed", "value": 1234.5, "unit": "x/s", "goal": ">= 1k", "ok": quick}])
    rows = bench.run_one("zzgood", True) + bench.run_one("zzbad", True)
    assert rows[0] == {"bench": "zzgood", "metric": "speed", "value": 1234.5, "unit": "x/s", "goal": ">= 1k", "ok": True}
    assert rows[1]["metric"] == "benchmark wall time"
    assert rows[2]["bench"] == "zzbad" and rows[2]["ok"] is False and "RuntimeError: no" in rows[2]["note"]
    files = harness.BenchFiles(tmp_path)
    bench.write_report(harness.merge_runs([rows]), files, bench.header(quick=True))
    text = files.markdown_path.read_text()
    assert "| zzgood | speed | 1,234 |" in text and "| zzbad | (failed) |" in text
    assert files.json_path.exists()


def test_bench_writes_json_and_markdown_and_flags_a_regression(tmp_path, fake_bench, capsys):
    ref = tmp_path / "reference.json"
    ref.write_text(json.dumps({"modes": {"quick": {"rows": [
        {"bench": "zzgood", "metric": "speed", "value": 400.0, "unit": "x/s"}]}}}))
    assert bench.main(["--quick", "--out", str(tmp_path / "out"), "--reference", str(ref)]) == 0
    printed = capsys.readouterr().out
    assert "REGRESSION zzgood: speed" in printed
    doc = json.loads((tmp_path / "out" / "bench.json").read_text())
    speed = next(r for r in doc["rows"] if r["metric"] == "speed")
    assert (speed["value"], speed["min"], speed["max"], speed["n"]) == (200.0, 100.0, 300.0, 3)
    assert speed["ok"] is True and speed["regression"] is True and speed["conditions"] == "hand-made"
    failed = next(r for r in doc["rows"] if r["bench"] == "zzbad")
    assert failed["metric"] == "(failed)" and failed["n"] == 1 and "RuntimeError: no" in failed["note"]
    md = (tmp_path / "out" / "bench.md").read_text()
    assert "| zzgood | speed | 200 | 100 – 300 | 3 | x/s | higher |  |  | 400 | 50% REGRESSION |" in md


def test_write_reference_then_an_equal_run_is_no_regression(tmp_path, fake_bench, capsys):
    ref = tmp_path / "ref" / "reference.json"
    args = ["--quick", "--only", "zzgood", "--runs", "1", "--out", str(tmp_path / "out"), "--reference", str(ref)]
    assert bench.main(args + ["--write-reference"]) == 0
    stored = json.loads(ref.read_text())["modes"]["quick"]
    assert [r["metric"] for r in stored["rows"]] == ["speed", "benchmark wall time"]
    assert stored["absent"] == {"zzbad": "not measured on the reference machine yet"}
    capsys.readouterr()
    assert bench.main(args) == 0                     # 300 against a reference of 100: better
    assert "REGRESSION" not in capsys.readouterr().out


def test_a_broken_reference_is_one_clear_line(tmp_path, fake_bench, capsys):
    ref = tmp_path / "reference.json"
    ref.write_text("{not json")
    assert bench.main(["--quick", "--only", "zzgood", "--reference", str(ref), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    # one line on stderr, whatever the temporary path's length (pytest-0 or pytest-17) or COLUMNS
    assert err.count("\n") == 1 and "not valid JSON" in err and str(ref) in err, err
