"""`rmptwin spark up/down` bookkeeping without starting a JVM: a busy port is one line before
anything starts, `down` stops only Spark daemons it recorded (never a recycled pid)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.analysis import cluster
from rmptwin.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def test_busy_port_is_refused_before_any_jvm_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(UserError, match=f"--port {busy}: 127.0.0.1:{busy} is in use"):
            cluster.up(port=busy, webui_port=0, directory=tmp_path)
    assert cluster.read_state(tmp_path) is None


def test_down_leaves_a_pid_that_is_no_spark_daemon_alone(tmp_path):
    # a recorded pid now held by another program (here: this test) must survive `down`
    state = cluster.Cluster("spark://127.0.0.1:7177", "127.0.0.1", 7177, 8181, 1, 1, "1g", str(tmp_path),
                            {"master": os.getpid()})
    (tmp_path / cluster.STATE_FILE).write_text(json.dumps(state.__dict__))
    assert cluster.down(tmp_path) == []
    assert cluster.read_state(tmp_path) is None    # the stale state is gone


def test_cli_down_without_a_cluster_says_so(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "spark", "down", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                          check=False)
    assert proc.returncode == 0 and "no Spark cluster was running" in proc.stdout
    status = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "spark", "status", "--state-dir", str(tmp_path)],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                            check=False)
    assert status.returncode == 1 and "no Spark cluster is running" in status.stdout


def test_a_corrupt_state_file_is_one_line(tmp_path):
    (tmp_path / cluster.STATE_FILE).write_text("{not json")
    with pytest.raises(UserError, match="not a cluster state file"):
        cluster.read_state(tmp_path)
