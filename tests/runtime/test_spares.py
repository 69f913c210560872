"""Spare incarnations (``emulation.nodeproc.Spares``, ``node.main --spare``): a node the fault
schedule recovers has its next incarnation started ahead, imported and parsed, opening nothing
until ``WAKE <t0_ns>``. (Measured: started at its recover fault, a restarted EV spent 2.5 s
importing on the loaded 2-CPU machine, past the 3.5 s run's end; the claim venue-sync-5ms
read "n/a". With a spare it synced 243 ms after the fault, the run flagged overloaded.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.core.groups import group_ip
from rmptwin.emulation.nodeproc import NodeProc, Spares
from rmptwin.model import load_experiment
from rmptwin.node.main import hold_groups, wake_time
from rmptwin.node.node_config import NodeConfig
from rmptwin.rundir.run import NODE_FILES
from rmptwin.venue import wire

REPO = Path(__file__).resolve().parents[2]
WAITS_FOR_A_LINE = [sys.executable, "-c", "import sys; sys.stdin.readline()"]


def _starter(started: list):
    def start(name: str, incarnation: int) -> NodeProc:
        np = NodeProc(name, "venue", incarnation, subprocess.Popen(WAITS_FOR_A_LINE, stdin=subprocess.PIPE))
        started.append(np)
        return np
    return start


def test_one_spare_per_recover_still_to_come_and_only_the_right_incarnation_is_taken():
    started: list[NodeProc] = []
    spares = Spares(_starter(started), {"ev1": 2, "gw1": 0})
    try:
        assert spares.prepare("gw1", 1) is None            # never recovered: no spare
        first = spares.prepare("ev1", 1)
        assert first is not None and spares.prepare("ev1", 1) is None   # one waits at a time
        assert spares.take("ev1", 1) is first
        assert spares.take("ev1", 1) is None               # taken: the next needs prepare
        second = spares.prepare("ev1", 2)
        assert second is not None and second.incarnation == 2
        assert spares.prepare("ev1", 3) is None            # both recovers have their spare
        assert spares.take("ev1", 3) is None and second.proc.poll() is not None   # wrong one: ended
    finally:
        spares.close()
        for np in started:
            np.proc.kill()
            np.proc.wait()


def test_close_ends_every_waiting_spare():
    started: list[NodeProc] = []
    spares = Spares(_starter(started), {"ev1": 1, "ev2": 1})
    spares.prepare("ev1", 1)
    spares.prepare("ev2", 1)
    spares.close()
    assert [np.proc.poll() for np in started] == [0, 0]


def test_wake_time_reads_only_a_well_formed_wake():
    assert wake_time("WAKE 1795734919123575699\n") == 1795734919123575699
    assert wake_time("") is None and wake_time("WAKE soon") is None and wake_time("GO 5") is None


def test_a_spare_node_says_spare_opens_nothing_and_leaves_quietly_without_wake(tmp_path):
    loaded = load_experiment(REPO / "labs" / "venue-failover" / "failover.yaml")
    hosts = {h.name: f"10.0.0.{i + 1}" for i, h in enumerate(loaded.topology.hosts)}
    cfg = NodeConfig.for_run(loaded, 1, hosts, tmp_path / "nodes", NODE_FILES).write(tmp_path / "config.json")
    p = subprocess.run([sys.executable, "-m", "rmptwin.node.main", str(cfg), "ev1", "--incarnation", "1", "--spare"],
                       input=b"", capture_output=True, timeout=120, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().split() == ["SPARE"]
    assert not (tmp_path / "nodes").exists()   # no event log, no state: nothing opened


@pytest.mark.root
def test_a_spare_holds_the_groups_it_is_given_so_a_crash_withdraws_no_membership(tmp_path):
    """HOLD makes the host a member of the crashed incarnation's groups (the kernel's own
    membership table, which the switch's IGMP view follows) until the spare exits."""
    loaded = load_experiment(REPO / "labs" / "venue-failover" / "failover.yaml")
    hosts = {h.name: f"10.77.0.{i + 1}" for i, h in enumerate(loaded.topology.hosts)}
    cfg = NodeConfig.for_run(loaded, 1, hosts, tmp_path / "nodes", NODE_FILES).write(tmp_path / "config.json")
    ns = f"rmptw-spare-{os.getpid()}"
    groups = [wire.REQUEST_GROUP, wire.HARDENED_GROUP]

    def members() -> set[str]:
        out = subprocess.run(["ip", "-n", ns, "maddr", "show", "dev", "d0"], capture_output=True, text=True).stdout
        return {w for line in out.splitlines() for w in line.split() if w.startswith("239.")}

    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for cmd in (["link", "add", "d0", "type", "veth", "peer", "name", "d1"], ["link", "set", "d1", "up"],
                    ["addr", "add", f"{hosts['ev1']}/24", "dev", "d0"], ["link", "set", "d0", "up", "multicast", "on"]):
            subprocess.run(["ip", "-n", ns, *cmd], check=True)
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "rmptwin.node.main", str(cfg), "ev1",
                              "--incarnation", "1", "--spare"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
        try:
            assert p.stdout.readline().split() == [b"SPARE"]
            assert members() == set()
            p.stdin.write(("HOLD " + json.dumps(groups) + "\n").encode())
            p.stdin.flush()
            assert p.stdout.readline().split() == [b"HELD", b"2"]
            assert members() == {group_ip(g) for g in groups}
            p.stdin.close()   # the runner ended without WAKE: the spare exits, its memberships with it
            assert p.wait(timeout=30) == 0
            assert members() == set()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_hold_reads_only_a_json_list_of_group_names():
    assert hold_groups('HOLD ["venue/req", "venue/hr"]\n') == ["venue/req", "venue/hr"]
    assert hold_groups("HOLD []") == [] and hold_groups("HOLD {}") is None and hold_groups("HOLD [") is None
    assert hold_groups("WAKE 5") is None
