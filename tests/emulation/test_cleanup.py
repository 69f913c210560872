"""`rmptwin net up` leaves nothing behind after Ctrl-C, and `rmptwin net down` removes what
a killed one left: no switches, interfaces, namespaces' processes or containers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emukit import NET4, describe_leftovers, project_leftovers  # tests/emulation is on sys.path (rootdir conftest)

pytestmark = [pytest.mark.root, pytest.mark.emulation]
RMPTWIN = [sys.executable, "-m", "rmptwin.cli.main"]


def _leftovers(state: Path, tag: int) -> dict:
    """What the network with this state dir and tag still has on the machine (other
    helpers' networks, with other tags, do not count)."""
    from rmptwin.emulation.cleanup import _project_interfaces

    mine = re.compile(rf"^r{tag}[sl]\d+")
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
    procs = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(state) in cmd and "pytest" not in cmd:
                procs.append(cmd)
    containers = []
    if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        containers = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=rmptwin.state={state.resolve()}"],
                                    capture_output=True, text=True).stdout.split()
    return {"bridges": [b for b in bridges if mine.match(b)], "interfaces": [i for i in _project_interfaces()
                                                                          if mine.match(i)],
            "processes": procs, "containers": containers}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _up(state: Path, nodes: str) -> tuple[subprocess.Popen, int]:
    # Started with SIGINT ignored, as a shell starts a background job (CI runners do): Ctrl-C
    # must stop it all the same (a rehearsal's `net up` once waited forever there).
    p = subprocess.Popen([*RMPTWIN, "net", "up", str(NET4), "--nodes", nodes, "--state-dir", str(state)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=_ignore_sigint)
    deadline = time.monotonic() + 180
    seen = ""
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        seen += line
        if "network up." in line:
            return p, json.loads((state / "net.json").read_text())["tag"]
        if not line and p.poll() is not None:
            break
    p.kill()
    raise AssertionError(f"net up did not come up:\n{seen}")


def _empty(d: dict) -> bool:
    return not any(d.values())


def test_ctrl_c_leaves_nothing(tmp_path):
    state = tmp_path / "state"
    p, tag = _up(state, "ns")
    assert _leftovers(state, tag)["bridges"]          # it really was up
    p.send_signal(signal.SIGINT)
    try:
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:   # it did not stop: take its network down, so later tests start clean
            p.terminate()
            p.wait(timeout=120)
    assert p.returncode == 0, out
    left = _leftovers(state, tag)
    assert _empty(left), left


@pytest.mark.docker
def test_net_down_cleans_up_after_a_killed_network(tmp_path, node_image):
    # `net down` removes every network on the machine whose owner is gone, so it must start
    # from a clean one: anything left is a failure (of an earlier test or run), never a skip.
    left = project_leftovers()
    assert not any(left.values()), (
        f"an emulated network is up or was left behind: {describe_leftovers(left)}; "
        "remove it with `.venv/bin/rmptwin net down` (as root) and run the tests again")
    state = tmp_path / "state"
    p, tag = _up(state, "docker")
    assert _leftovers(state, tag)["containers"]
    os.kill(p.pid, signal.SIGKILL)                    # a crash: no teardown at all
    p.wait(timeout=30)
    assert not _empty(_leftovers(state, tag))
    r = subprocess.run([*RMPTWIN, "net", "down"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    left = _leftovers(state, tag)
    assert _empty(left), left


def test_selftest_measures_every_impaired_link_in_tolerance(tmp_path):
    r = subprocess.run([*RMPTWIN, "net", "selftest", str(NET4), "--count", "3000", "--state-dir", str(tmp_path / "st")],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("│ s")]
    # Every configured link: loss and delay; the bandwidth-limited one also bandwidth.
    assert sum("loss" in ln for ln in rows) == 3 and sum("bandwidth" in ln for ln in rows) == 1
    assert all(ln.rstrip(" │").endswith("ok") for ln in rows), "\n".join(rows)
