"""Application runs in summary.json and in the table `rmptwin sim` prints: a sequencer-taxonomy
run gets its own section (members, agreement, loss, latency, resume) and its rows in the
"applications" table; a ticker run gets neither; `taxonomy measure` reports the same figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin.cli.main import app
from rmptwin.rundir.run import RunDir
from rmptwin.studies.taxonomy_compare import measure_run

REPO = Path(__file__).resolve().parents[2]
WIDE = {"COLUMNS": "200"}  # one table row per line, whatever the terminal


def _sim(experiment: str, out: Path):
    res = CliRunner().invoke(app, ["sim", str(REPO / "experiments" / experiment), "--seed", "1", "--out", str(out)],
                             env=WIDE, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output, RunDir(out).read_summary()


@pytest.fixture(scope="module")
def ub(tmp_path_factory):
    out = tmp_path_factory.mktemp("ub") / "run"
    output, summary = _sim("taxonomy/ub.yaml", out)
    return out, output, summary


def test_a_taxonomy_run_summary_counts_its_members_and_survives_the_sequencer_crash(ub):
    _, _, s = ub
    t = s["taxonomy"]
    assert s["receivers"] == t["members"] == 5        # seq and r1..r4; the ticker's count would be 0
    assert s["agreement"] is True and s["messages_lost"] == 0
    assert t["protocol"] == "ub" and t["operable_members"] == 4   # seq crashed at 2 s
    assert t["messages_sent"] > 0 and t["messages_delivered_min"] == t["messages_sent"]
    assert t["latency_ms"]["n"] > 0 and 0 < t["latency_ms"]["p50"] <= t["latency_ms"]["p99"]
    assert t["resume_ms"] is not None and t["resume_ms"] > 0


def test_taxonomy_measure_reports_the_summary_figures(ub):
    out, _, s = ub
    t, m = s["taxonomy"], measure_run(out)
    assert (m["sent"], m["lost"], m["agree"]) == (t["messages_sent"], t["messages_lost"], t["agreement"])
    assert m["latency_p50_ms"] == round(t["latency_ms"]["p50"], 3)
    assert m["resume_ms"] == round(t["resume_ms"], 3)


def _row(output: str, label: str) -> str:
    lines = [ln for ln in output.splitlines() if f" {label} " in ln]
    assert lines, f"no row {label!r} in:\n{output}"
    return lines[0]


def test_sim_prints_the_taxonomy_rows_under_the_ticker_table(ub):
    _, output, s = ub
    assert "applications" in output
    assert "ub" in _row(output, "protocol") and "True" in _row(output, "agreement")
    assert _row(output, "messages lost").rstrip(" │").endswith("0")
    assert f"p50={s['taxonomy']['latency_ms']['p50']:.2f}" in _row(output, "latency ms")


def test_sim_prints_the_trading_floor_rows(tmp_path):
    output, s = _sim("trading-floor.yaml", tmp_path / "run")
    assert f"confirmed={s['trades_confirmed']}" in _row(output, "trades") and s["trades_confirmed"] > 0
    assert "True" in _row(output, "participants_agree")
    assert "confirm latency p50 ms" in output


def test_a_ticker_run_has_no_application_section_or_rows(tmp_path):
    output, s = _sim("quickstart.yaml", tmp_path / "run")
    assert "taxonomy" not in s and s["receivers"] > 0
    assert "applications" not in output
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == s
