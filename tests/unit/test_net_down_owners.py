"""`rmptwin net down` keeps the networks whose owner process is still running (another
engineer's run, a `net up` in another shell) unless `--all`, and removes those of dead
owners and untagged leftovers. No network is built: the tag files and state dirs are
fakes in a temporary directory, the owners are child processes of the test, and every
command that would touch OVS, Docker, links or processes is replaced by a recorder."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rmptwin.emulation import cleanup
from rmptwin.emulation.cleanup import LiveNetwork, live_networks, owner_alive, plan_sweep


@pytest.fixture
def live_owner():
    """A running process standing in for another network's owner."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield p.pid
    p.kill()
    p.wait()


def _exited_pid(reap: bool) -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    if reap:
        p.wait()
    else:                          # exited but not reaped: a zombie is not an owner
        while open(f"/proc/{p.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
            pass
    return p.pid


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """Fake tag dir, registry and default state dir; every gatherer and remover recorded."""
    tags, registry = tmp_path / "tags", tmp_path / "state-dirs"
    tags.mkdir()
    monkeypatch.setattr(cleanup, "TAG_DIR", tags)
    monkeypatch.setattr(cleanup, "REGISTRY", registry)
    monkeypatch.setattr(cleanup, "DEFAULT_STATE_DIR", str(tmp_path / "default-state"))

    def no_commands(cmd):
        raise AssertionError(f"the test ran a real command: {cmd}")

    monkeypatch.setattr(cleanup, "_run", no_commands)
    found = {"processes": [], "containers": [], "bridges": [], "interfaces": []}
    removed = {"processes": [], "containers": [], "bridges": [], "interfaces": []}
    monkeypatch.setattr(cleanup, "_project_processes", lambda: found["processes"])
    monkeypatch.setattr(cleanup, "_project_containers", lambda: found["containers"])
    monkeypatch.setattr(cleanup, "_project_bridges", lambda: found["bridges"])
    monkeypatch.setattr(cleanup, "_project_interfaces", lambda: found["interfaces"])
    monkeypatch.setattr(cleanup, "_cmdline", lambda pid: "python -m rmptwin.emulation.relay cfg.json")

    def recorder(kind):
        def remove(items, own_pid=None):
            removed[kind].extend(items)
            return len(items)
        return remove

    monkeypatch.setattr(cleanup, "_kill", recorder("processes"))
    monkeypatch.setattr(cleanup, "_remove_containers", recorder("containers"))
    monkeypatch.setattr(cleanup, "_del_bridges", recorder("bridges"))
    monkeypatch.setattr(cleanup, "_del_interfaces", recorder("interfaces"))

    def network(tag: int, owner: int, relay: int) -> str:
        """A network with its tag file, registered state dir and net.json; returns the dir."""
        (tags / str(tag)).write_text(str(owner))
        state = tmp_path / f"state{tag}"
        state.mkdir()
        (state / "net.json").write_text(json.dumps({
            "owner_pid": owner, "tag": tag, "topology": f"topo{tag}", "switches": [f"r{tag}s1"],
            "containers": [f"mn.h{tag}"], "relay_pids": [relay]}))
        known = registry.read_text() if registry.exists() else ""
        registry.write_text(known + f"{state}\n")
        found["bridges"].append(f"r{tag}s1")
        found["interfaces"].append(f"r{tag}l1a")
        found["containers"].append((f"id{tag}", f"mn.h{tag}", str(state)))
        found["processes"].append((relay, owner, f"python -m rmptwin.emulation.relay {state}/links/l1.json"))
        return str(state)

    return tags, registry, network, found, removed


def test_owner_alive_only_for_another_running_process(live_owner):
    import os

    assert owner_alive(live_owner)
    assert not owner_alive(_exited_pid(reap=True))
    assert not owner_alive(_exited_pid(reap=False))
    assert not owner_alive(os.getpid())          # a process may always remove its own network
    assert not owner_alive(0)


def test_live_networks_are_those_of_running_owners(machine, live_owner):
    tags, registry, network, _, _ = machine
    live_dir = network(1, live_owner, relay=9001)
    network(2, _exited_pid(reap=True), relay=9002)
    (tags / "3").write_text(str(live_owner))          # tag claimed, state not written yet
    (tags / "4").write_text(str(_exited_pid(reap=False)))
    live = {n.tag: n for n in live_networks()}
    assert set(live) == {1, 3}
    assert live[1] == LiveNetwork(live_owner, 1, live_dir, "topo1", frozenset({9001}), frozenset({"mn.h1"}))
    assert live[3].owner_pid == live_owner and live[3].state_dir is None


def test_plan_sweep_spares_what_belongs_to_a_live_network():
    live = [LiveNetwork(500, 1, "/tmp/live-state", "topo1", frozenset({501}), frozenset({"mn.h1"}))]
    processes = [
        (501, 1, "python -m rmptwin.emulation.relay x.json"),             # recorded by the live network
        (502, 500, "python controllers/launch.py --state-dir rel/state"),  # the live owner's child
        (503, 1, "python -m rmptwin.emulation.relay /tmp/live-state/links/l2.json"),
        (504, 1, "bash --norc -is mininet:r1l2"),                           # a live tag's link node
        (505, 1, "bash --norc -is mininet:r2l1"),                           # a dead network's link node
        (506, 1, "python -m rmptwin.emulation.relay /tmp/dead-state/links/l1.json"),
    ]
    containers = [("c1", "mn.h1", "/tmp/live-state"), ("c2", "mn.h2", "/tmp/live-state"),
                  ("c3", "mn.h3", "/tmp/dead-state"), ("c4", "mn.h4", "")]
    bridges = ["r1s1", "r1s12", "r2s1", "r9s1", "br0"]
    interfaces = ["r1s1-eth1", "r1l3a", "r2l1b", "r12s1-eth2"]
    sweep = plan_sweep(live, processes, containers, bridges, interfaces)
    assert sweep.processes == [505, 506]
    assert sweep.containers == ["c3", "c4"]
    assert sweep.bridges == ["r2s1", "r9s1"]                 # never a bridge that is not the project's
    assert sweep.interfaces == ["r2l1b", "r12s1-eth2"]       # tag 12 is not tag 1
    everything = plan_sweep([], processes, containers, bridges, interfaces)
    assert len(everything.processes) == 6 and len(everything.bridges) == 4


def test_cleanup_keeps_live_networks_and_removes_dead_ones(machine, live_owner):
    tags, registry, network, found, removed = machine
    live_dir = network(1, live_owner, relay=9001)
    dead_dir = network(2, _exited_pid(reap=True), relay=9002)
    found["bridges"].append("r7s1")                       # an untagged leftover: no tag file, no state
    done, kept = cleanup.cleanup_all()
    assert [n.tag for n in kept] == [1]
    assert "r1s1" not in removed["bridges"] and {"r2s1", "r7s1"} <= set(removed["bridges"])
    assert 9001 not in removed["processes"] and 9002 in removed["processes"]
    assert "mn.h1" not in removed["containers"] and "id1" not in removed["containers"]
    assert "r1l1a" not in removed["interfaces"] and "r2l1a" in removed["interfaces"]
    assert done["switches"] == len(removed["bridges"])
    # the live network's bookkeeping stays, so a later `net down` still finds it
    assert (tags / "1").exists() and not (tags / "2").exists()
    assert registry.read_text().split() == [live_dir]
    assert json.loads((tags.parent / "state1" / "net.json").read_text())["owner_pid"] == live_owner
    assert not (tags.parent / "state2" / "net.json").exists() and dead_dir


def test_a_dead_networks_state_spares_its_tag_reclaimed_by_a_live_one(machine, live_owner):
    tags, _, network, _, removed = machine
    old = network(1, _exited_pid(reap=True), relay=9001)   # its owner died; its net.json stayed
    (tags / "1").write_text(str(live_owner))                # a new network claimed tag 1 since
    _, kept = cleanup.cleanup_all()
    assert [n.tag for n in kept] == [1] and kept[0].state_dir is None
    assert "r1s1" not in removed["bridges"] and "r1l1a" not in removed["interfaces"]
    assert (tags / "1").read_text() == str(live_owner)
    assert not (tags.parent / "state1" / "net.json").exists() and old


def test_cleanup_all_force_removes_live_networks_too(machine, live_owner):
    tags, registry, network, _, removed = machine
    network(1, live_owner, relay=9001)
    _, kept = cleanup.cleanup_all(force=True)
    assert kept == [] and "r1s1" in removed["bridges"] and 9001 in removed["processes"]
    assert not tags.exists() and not registry.exists()


def test_net_down_names_each_kept_network_and_all(machine, live_owner, monkeypatch):
    from rmptwin.cli.main import app
    from rmptwin.emulation import env

    _, _, network, _, removed = machine
    network(1, live_owner, relay=9001)
    network(2, _exited_pid(reap=True), relay=9002)
    monkeypatch.setattr(env, "require_root", lambda what="": None)
    r = CliRunner().invoke(app, ["net", "down"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    kept = [ln for ln in r.output.splitlines() if ln.startswith("kept")]
    assert len(kept) == 1 and "r1" in kept[0] and f"pid {live_owner}" in kept[0] and "--all" in kept[0]
    assert "r1s1" not in removed["bridges"] and "r2s1" in removed["bridges"]
    r = CliRunner().invoke(app, ["net", "down", "--all"], env={"COLUMNS": "300"})
    assert r.exit_code == 0 and "kept" not in r.output and "r1s1" in removed["bridges"]
