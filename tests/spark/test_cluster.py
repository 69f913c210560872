"""`rmptwin spark up` starts a two-worker standalone cluster on loopback; `analyze` and `sweep`
with --master spark://... give the same metrics.json (byte for byte) and the same sweep table
as embedded mode; `rmptwin spark down` stops it. CPU-heavy: several JVMs on this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmptwin.analysis import cluster
from rmptwin.runs.experiment import run_experiment
from rmptwin.spec import load_experiment

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments" / "line3.yaml"


def _free_port(preferred: int) -> int:
    """``preferred`` if nothing listens there (not Spark's defaults 7077/8080), else any free port."""
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise AssertionError("no free port")


def _cli(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, f"rmptwin {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _table(sweep_dir: Path):
    df = pq.read_table(next(sweep_dir.rglob("sweep.parquet"))).to_pandas()
    return df.drop(columns=["wall_s"]).sort_values(["point", "seed"]).reset_index(drop=True)


@pytest.mark.timeout(3600)   # five JVMs and two analyses: tens of minutes on a loaded 2-CPU machine
def test_standalone_cluster_gives_embedded_results(tmp_path):
    port, webui = _free_port(7177), _free_port(8181)
    state = tmp_path / "spark-state"
    master = f"spark://127.0.0.1:{port}"
    run = run_experiment(load_experiment(EXPERIMENT), out=tmp_path / "run").run_dir.path
    embedded, on_cluster = tmp_path / "embedded", tmp_path / "cluster"
    for d in (embedded, on_cluster):
        subprocess.run(["cp", "-r", str(run), str(d)], check=True)
    try:
        up = _cli("spark", "up", "--workers", "2", "--cores", "1", "--memory", "1g", "--port", str(port),
                  "--webui-port", str(webui), "--state-dir", str(state))
        assert master in up.stdout
        running = cluster.read_state(state)
        assert len(running.pids) == 3 and all(cluster._is_spark_daemon(p) for p in running.pids.values())

        _cli("analyze", str(embedded))
        _cli("analyze", str(on_cluster), "--master", master)
        a = (embedded / "analysis" / "metrics.json").read_text()
        b = (on_cluster / "analysis" / "metrics.json").read_text()
        assert a.replace(str(embedded), "RUN") == b.replace(str(on_cluster), "RUN")

        sweep = ["sweep", str(EXPERIMENT), "--set", "protocol.delta_a_ms=20,150", "--seeds", "1"]
        _cli(*sweep, "--out", str(tmp_path / "sweep-embedded"))
        _cli(*sweep, "--out", str(tmp_path / "sweep-cluster"), "--master", master)
        t1, t2 = _table(tmp_path / "sweep-embedded"), _table(tmp_path / "sweep-cluster")
        assert len(t1) == 2
        assert t1.equals(t2), f"\n{t1.T}\n{t2.T}"
    finally:
        down = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "spark", "down", "--state-dir", str(state)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                              timeout=120, check=False)
    assert "master" in down.stdout
    assert not any(cluster._is_spark_daemon(p) for p in running.pids.values())
    assert cluster.read_state(state) is None
