"""`rmptwin analyze` end to end on a synthetic run: files, report rendering in headless
Chromium, metrics consistent with the generated log, compare, and one-line errors."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from rmptwin.analysis import compare, job, plots, synthetic
from rmptwin.cli.console import make_console
from rmptwin.rundir.run import RunDir

pytestmark = pytest.mark.spark

CONTAINER_STATS = {n: {"cpu_s": 1.5, "cpu_mean_pct": 30.0, "cpu_max_pct": 80.0, "cpu_throttled_s": 0.0,
                       "mem_mean_mib": 40.0, "mem_max_mib": 42.5, "window_s": 5.0, "samples": 6} for n in ("s1", "rt1")}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory):
    run = synthetic.write_run(tmp_path_factory.mktemp("run") / "r", packets=2_000, seed=3)
    # what an emulated run with Docker hosts adds to its summary (emulation.containerstats)
    RunDir(run).write_summary({"runtime": {"nodes": "docker", "container_stats": CONTAINER_STATS}})
    report = job.analyze(spark, run)
    return run, report


def test_report_files_and_plots(analysed):
    run, report = analysed
    assert report == RunDir(run).report_path
    html = report.read_text()
    for name in plots.PLOTS:
        png = RunDir(run).analysis_path(name)
        assert png.exists() and png.stat().st_size > 1000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"src='{name}'" in html  # relative link: the directory can be moved or mailed
    # the Docker hosts' CPU and memory from summary.json, a row per node
    assert "Node containers: CPU and memory" in html and "<td>rt1</td>" in html and "42.5" in html
    assert [r["node"] for r in RunDir(run).read_metrics()["container_stats"]] == ["rt1", "s1"]
    for table in ("latency", "fairness", "receiver_loss", "correlation", "minc", "throughput"):
        assert pq.read_table(RunDir(run).analysis_path(f"{table}.parquet")).num_rows > 0, table


def test_metrics_match_the_generated_log(analysed):
    run, _ = analysed
    m = RunDir(run).read_metrics()
    events = RunDir(run).read_events().to_pandas()
    h = m["headline"]
    assert h["packets"] == 2_000 and h["events"] == len(events) and h["receivers"] == 8
    recv = events[events.kind == "recv"]
    first_loss = recv.groupby("node").detail.apply(lambda d: (d == '{"repair":true}').mean())
    got = {r["node"]: r["first_loss"] for r in m["receiver_loss"]}
    assert got == pytest.approx(first_loss.to_dict())
    assert h["residual_loss_max"] == 0.0
    # One ACK per message in the synthetic log, plus one NACK per loss event.
    nacks = (events.kind == "nack_sent").sum()
    assert h["control_per_data"] == pytest.approx((2_000 + nacks) / 2_000)
    assert h["token_pass_mean_ms"] == pytest.approx(1.0, rel=0.01)  # messages every 1 ms
    assert h["release_spread_p50_ms"] == pytest.approx(2.0)  # east R_T releases 2 ms after west


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/provision.sh installs it)")
def test_report_renders_in_headless_chromium(analysed, tmp_path):
    _, report = analysed
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
         f"file://{report}"],
        check=True, capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000  # a blank page is a few KB


def test_compare_side_by_side(analysed, tmp_path):
    run, _ = analysed
    out = compare.compare(run, run, make_console(), tmp_path / "cmp.html")
    rows = compare.rows(*(compare.load_metrics(run),) * 2)
    assert {k for k, *_ in rows} >= {"packets", "deliver_latency_p50_ms", "first_loss_mean"}
    assert all(r is None or r == pytest.approx(1.0) for *_, r in rows)
    assert "deliver_latency_p50_ms" in out.read_text()


def test_analyze_bad_directory_is_one_line(tmp_path):
    (tmp_path / "notarun").mkdir()
    for target in (tmp_path / "missing", tmp_path / "notarun"):
        p = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "analyze", str(target)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and str(target) in lines[0] and "Traceback" not in p.stderr
