"""`rmptwin spark up` starts a two-worker standalone cluster on loopback; `analyze` and `sweep`
with --master spark://... give the same metrics.json (byte for byte) and the same sweep table
as embedded mode; `rmptwin spark down` stops it. CPU-heavy: several JVMs on this machine.

The embedded side is conftest's line3_analysed and line3_sweep: the same analysis and sweep in
the tests' own local[2] session (what `rmptwin analyze` and `rmptwin sweep` run without
--master), made once for test_api_spark too, instead of two more command-line JVMs here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from shared_runs import LINE3, LINE3_SWEEP

from rmptwin.analysis import cluster

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


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
def test_standalone_cluster_gives_embedded_results(tmp_path, line3_run, line3_analysed, line3_sweep):
    port, webui = _free_port(7177), _free_port(8181)
    state = tmp_path / "spark-state"
    master = f"spark://127.0.0.1:{port}"
    embedded, on_cluster = line3_analysed[0].path, tmp_path / "cluster"
    shutil.copytree(line3_run, on_cluster)
    try:
        up = _cli("spark", "up", "--workers", "2", "--cores", "1", "--memory", "1g", "--port", str(port),
                  "--webui-port", str(webui), "--state-dir", str(state))
        assert master in up.stdout
        running = cluster.read_state(state)
        assert len(running.pids) == 3 and all(cluster._is_spark_daemon(p) for p in running.pids.values())

        _cli("analyze", str(on_cluster), "--master", master)
        a = (embedded / "analysis" / "metrics.json").read_text()
        b = (on_cluster / "analysis" / "metrics.json").read_text()
        assert a.replace(str(embedded), "RUN") == b.replace(str(on_cluster), "RUN")

        values = ",".join(map(str, LINE3_SWEEP["protocol.delta_a_ms"]))
        _cli("sweep", str(LINE3), "--set", f"protocol.delta_a_ms={values}", "--seeds", "1",
             "--out", str(tmp_path / "sweep-cluster"), "--master", master)
        t1, t2 = _table(line3_sweep.path), _table(tmp_path / "sweep-cluster")
        assert len(t1) == 2
        assert t1.equals(t2), f"\n{t1.T}\n{t2.T}"
    finally:
        down = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "spark", "down", "--state-dir", str(state)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                              timeout=120, check=False)
    assert "master" in down.stdout
    assert not any(cluster._is_spark_daemon(p) for p in running.pids.values())
    assert cluster.read_state(state) is None
