"""A run over servers that share nothing with this machine but SSH, as real machines do:
two local servers made `--isolated` (each sees an empty /run/rmptwin and /var/tmp of its own)
and a run directory under /var/tmp. The run must carry its node config there and its nodes'
logs, captures and relays' drop logs back (``emulation.server_files``): the quickstart ends with
agreement, nothing lost, every guaranteed customer complete, the customers' captures here, and
the twin verdict against the simulator passing every rule it passes on one machine, the
per-link first-copy loss among them (it reads the relays' drop logs). Nothing of the run is
left on either server. Needs root, Mininet, Open vSwitch and sshd.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from twin_checks import assert_twin_verdict

from rmptwin.emulation.servers import local_servers, ssh_base
from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]
RMPTWIN = [sys.executable, "-m", "rmptwin.cli.main"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*RMPTWIN, *args], capture_output=True, text=True, timeout=600, cwd=REPO)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def on_server(name: str, script: str) -> str:
    ip = next(s.ip for s in local_servers() if s.name == name)
    return subprocess.run([*ssh_base(), ip, script], capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture(scope="module")
def isolated():
    cli("servers", "down", "--local", check=False)   # servers made without --isolated are refused
    names = cli("servers", "up", "--local", "2", "--isolated").stdout.split()
    scratch = Path("/var/tmp") / f"rmptwin-isolated-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        assert names == ["rts1", "rts2"]
        yield names, scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        cli("net", "down", check=False)
        cli("servers", "down", "--local")


def test_an_isolated_server_does_not_see_this_machines_run_files(isolated):
    names, scratch = isolated
    (scratch / "here").write_text("x")
    for name in names:
        assert on_server(name, f"test -e {scratch}/here && echo seen || echo unseen") == "unseen"
        assert on_server(name, f"test -e {REPO}/src/rmptwin/__init__.py && echo seen") == "seen"   # the code is
        assert on_server(name, "ls /run/rmptwin") == "servers"


def test_quickstart_over_isolated_servers_brings_every_file_back(isolated):
    names, scratch = isolated
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    sim = run_experiment(loaded, "sim", out=scratch / "sim")
    at_auto = loaded.model_copy(update={"experiment": loaded.experiment.model_copy(update={"time_dilation": "auto"})})
    emu = run_experiment(at_auto, "emulation", out=scratch / "emu",
                         options=EmulationOptions(nodes="ns", impair="relay", servers=tuple(names)))
    s = emu.summary
    assert s["agreement"] and s["messages_lost"] == 0 and s["messages_sent"] > 0
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"] > 0
    hosts = {h.name for h in loaded.topology.hosts}
    logged = {p.name.split(".")[0] for p in emu.run_dir.node_event_logs()} - {"runner"}
    assert logged == hosts, f"no event log came back from {sorted(hosts - logged)}"
    captured = {p.stem for p in emu.run_dir.pcap_files() if p.stat().st_size > 24}   # more than the header
    wanted = {h.name for h in loaded.topology.hosts if h.role == "customer"}
    assert wanted <= captured, f"no capture came back from {sorted(wanted - captured)}"
    assert emu.run_dir.drops_path.exists() and emu.run_dir.counts_path.exists()
    manifest = emu.run_dir.read_manifest()
    placement = manifest["placement"]
    assert manifest["servers"] == names and set(placement["switch_server"].values()) == set(names)
    assert placement["cut_links"], "the quickstart over two servers must cut links"
    crossed = s["runtime"]["cross_server"]
    # every cut link is a tunnel that carried frames both ways
    assert len(crossed["tunnels"]) == len(placement["cut_links"]), crossed
    assert all(n > 0 for ends in crossed["tunnels"].values() for n in ends.values()), crossed
    rules = assert_twin_verdict(sim.run_dir, emu.run_dir)
    assert rules["first_copy_loss_per_link"].status == "pass"   # the relays' drop logs came back
    for name in names:
        assert on_server(name, f"ls -A {scratch}; ls -d /run/rmptwin/run-* 2>/dev/null; true") == "", \
            f"{name} kept the run's files"
