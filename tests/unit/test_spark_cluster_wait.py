"""`rmptwin spark up` waits for its daemons: a process it started counts as exited only when it
has exited (not when its /proc cmdline reads oddly, as it does for an instant while spark-class
execs java), and the error says how it ended. No Spark needed: plain processes stand in."""

from __future__ import annotations

import subprocess

import pytest

from rmptwin.analysis import cluster
from rmptwin.errors import UserError


def _cluster(tmp_path, pid: int) -> cluster.Cluster:
    # port 9: nothing listens there, so the master's JSON page is never ready
    c = cluster.Cluster("spark://127.0.0.1:1", "127.0.0.1", 1, 9, 1, 1, "1g", str(tmp_path))
    c.pids["master"] = pid
    return c


def test_a_running_process_is_not_taken_for_an_exited_one(tmp_path):
    proc = subprocess.Popen(["sleep", "30"])   # its cmdline names no Spark class
    try:
        with pytest.raises(UserError, match="not up after"):
            cluster._wait(_cluster(tmp_path, proc.pid), lambda m: True, "the master", 1.2, {"master": proc})
    finally:
        proc.kill()
        proc.wait()


def test_an_exited_daemon_is_named_with_its_exit_code(tmp_path):
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    proc.wait()
    with pytest.raises(UserError, match=r"Spark master exited \(exit code 3\): no log"):
        cluster._wait(_cluster(tmp_path, proc.pid), lambda m: True, "the master", 5, {"master": proc})
