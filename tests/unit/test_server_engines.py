"""Docker hosts on servers, the parts that need no server: the SSH forward of an engine's socket,
the command that moves a process into a container's cgroups on a server, and the refusals.
The run itself is tests/runtime/test_cluster_docker.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.cluster import join_cgroups_command
from rmptwin.emulation.emulated_network import EmulatedNetwork
from rmptwin.emulation.server_engines import REMOTE_SOCKET, forward_command
from rmptwin.emulation.servers import SSH_CONFIG, Server
from rmptwin.errors import UserError
from rmptwin.model import load_experiment

REPO = Path(__file__).resolve().parents[2]
SERVER = Server("rts1", "198.18.250.11", local=True)


def test_the_engine_is_forwarded_with_the_clusters_ssh_configuration(tmp_path):
    sock = tmp_path / "docker-rts1.sock"
    cmd = forward_command(SERVER, sock)
    assert cmd[:3] == ["ssh", "-F", str(SSH_CONFIG)]   # the cluster's key and host-key rules, never the user's
    assert "-N" in cmd and cmd[-1] == SERVER.ip
    assert cmd[cmd.index("-L") + 1] == f"{sock}:{REMOTE_SOCKET}"
    # a forward that cannot be made ends the client (one line), and a stale socket file is replaced
    assert "ExitOnForwardFailure=yes" in cmd and "StreamLocalBindUnlink=yes" in cmd


@pytest.mark.skipif(os.geteuid() != 0, reason="moving a process between cgroups needs root")
def test_the_cgroup_join_runs_on_a_server_with_this_checkouts_interpreter():
    """The words run there by sh, ``$$`` expanded by that sh: the process moves itself. Here it
    joins pid 1's cgroups (this machine's root ones), which any process may be moved into."""
    cmd = join_cgroups_command("$$", 1)
    assert sys.executable in cmd and str(REPO / "src") in cmd and "-m rmptwin.emulation.cgroups $$ 1" in cmd
    r = subprocess.run(["sh", "-c", f"{cmd} && echo joined"], capture_output=True, text=True, cwd="/", timeout=30)
    assert r.returncode == 0 and r.stdout.strip() == "joined", r.stderr


def test_docker_hosts_on_isolated_local_servers_are_one_line():
    topology = load_experiment(REPO / "experiments" / "line3.yaml").topology
    isolated = [Server(f"rts{i}", f"198.18.250.{10 + i}", local=True, isolated=True) for i in (1, 2)]
    with pytest.raises(UserError, match="would mount this machine's files"):
        EmulatedNetwork(topology, nodes="docker", servers=isolated)
    EmulatedNetwork(topology, nodes="ns", servers=isolated)   # namespace hosts carry their files over SSH


def test_containers_of_an_engine_that_does_not_answer_are_not_removed_and_nothing_raises(tmp_path):
    """Teardown goes on: a server's engine gone (its tunnel closed) removes nothing, quietly."""
    gone = f"unix://{tmp_path / 'no-such.sock'}"
    assert engine.remove_containers(["rmptwin-x-0000"], gone) == 0
    assert engine.labelled_containers("rmptwin", gone) == []


V1 = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct,xattr
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
22 1 0:20 / /proc rw - proc proc rw"""
V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"


def test_a_local_server_mounts_this_machines_cgroup_hierarchies_again():
    """`ip netns exec` gives a local server a sysfs without cgroups; its keeper mounts the same
    hierarchies again (same controllers or name: the same hierarchy), on either layout."""
    from rmptwin.emulation.servers import cgroup_mounts_script

    v1 = cgroup_mounts_script(V1).splitlines()
    assert v1[0] == "mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || true"
    assert "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu" in v1[1]
    assert "-o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct" in v1[2]   # flags such as xattr dropped
    assert "-o none,name=systemd cgroup /sys/fs/cgroup/systemd" in v1[3]
    assert "mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified" in v1[4] and len(v1) == 5   # /proc is not one
    assert cgroup_mounts_script(V2) == "mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup || true"
