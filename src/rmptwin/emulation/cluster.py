"""Mininet's cluster edition (``mininet.examples.cluster``) as the engine of a network over
several servers.

One ``MininetCluster`` builds the whole topology: each node is started on its server over
SSH (``RemoteHost`` or ``RemoteDockerHost``, ``RemoteOVSSwitch``, and ``RemoteRelayNode`` for
a relay), each link whose ends are on one server is a veth there, and each link between
servers is ``RemoteLink``'s SSH Ethernet tunnel (``ssh -w``, tap devices at both ends). The one
controller runs here and every server's switches connect to it over the underlay.

What this module adds to the cluster edition: the cluster's own SSH options (never the
user's keys or known hosts), the placement put into the topology before Mininet reads it,
commands that cross SSH with their environment and quoting intact, the count of frames
that crossed servers (the tunnels' tap counters), and the cleanup of each server.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from rmptwin.emulation import servers as srv
from rmptwin.emulation.placement import Placement
from rmptwin.errors import UserError

if TYPE_CHECKING:
    from rmptwin.emulation.topo import RmpTopo


def is_remote(node: Any) -> bool:
    return bool(getattr(node, "isRemote", False))


def remote_command(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """``cmd`` as words that survive SSH's re-splitting by the server's shell, with ``env``
    set explicitly (SSH does not carry the environment)."""
    words = [*(["env", *(f"{k}={v}" for k, v in env.items())] if env else []), *cmd]
    return [shlex.quote(w) for w in words]


def kill_remote(node: Any, cmd: Sequence[str], signal: str = "KILL") -> None:
    """Signal the process started with ``cmd`` (unquoted, without its environment) on
    ``node``'s server: killing the SSH client here would only close its channel, and the
    process would run on."""
    pattern = re.escape(" ".join(cmd))
    on_server(node, f"pkill -{signal} -f -- {shlex.quote(pattern)}")


def on_server(node: Any, script: str) -> str:
    """``script`` run in a remote node's network namespace, with its server's own mounts and
    /proc; its output. A namespace host's shell is just that. A Docker host's shell sees its
    container's /proc (without the processes mnexec attached from outside) and a read-only
    /proc/sys, so for it the server's root shell enters the host's network namespace instead."""
    if getattr(node, "container", None):
        entered = f"nsenter --net=/proc/{int(node.pid)}/ns/net sh -c {shlex.quote(script)}"
        out: str = node.rcmd(["sh", "-c", shlex.quote(entered)])
    else:
        out = node.cmd(script)
    return out


def controller_ip(servers: Sequence[srv.Server]) -> str:
    """This machine's address towards the servers, where the controller listens."""
    if all(s.local for s in servers):
        return srv.MASTER_IP
    r = subprocess.run(["ip", "-o", "route", "get", servers[0].ip], capture_output=True, text=True)
    m = re.search(r"\bsrc (\S+)", r.stdout)
    if not m:
        raise UserError(f"no route from this machine to server {servers[0].name} ({servers[0].ip})")
    return m.group(1)


def place_nodes(topo: RmpTopo, placement: Placement, host_cls: Any = None) -> None:
    """Write each Mininet node's server into the topology (MininetCluster keeps a given
    ``server``): switches as placed, hosts beside their switch, a relay beside the switch at
    its link's first end, and relay nodes made remote. ``host_cls``: the hosts' class where it
    is not the cluster's ``RemoteHost`` (``RemoteDockerHost`` with its options bound)."""
    where = {topo.switch_names[s]: sv for s, sv in placement.switch_server.items()}
    hosts = {h.name for h in topo.topology.hosts}
    for h in topo.topology.hosts:
        where[h.name] = placement.switch_server[h.switch]
    for lk in topo.impaired.values():
        if lk.relay is not None:
            where[lk.relay] = where[topo.switch_names[lk.a]] if lk.a in topo.switch_names else where[lk.a]
    for node in topo.nodes():
        info = topo.nodeInfo(node)
        info["server"] = where[node]
        if node in topo.relay_nodes:
            info["cls"] = RemoteRelayNode
        elif host_cls is not None and node in hosts:
            info["cls"] = host_cls


@functools.cache
def _remote_relay_class() -> Any:
    from mininet.examples.cluster import RemoteMixin

    from rmptwin.emulation.topo import RelayNode

    class _RemoteRelayNode(RemoteMixin, RelayNode):   # type: ignore[misc]  # Mininet is untyped
        """A relay's namespace on a server."""

    return _RemoteRelayNode


@functools.cache
def _remote_switch_class() -> Any:
    from itertools import groupby
    from operator import attrgetter

    from mininet.examples.cluster import RemoteOVSSwitch
    from mininet.node import OVSSwitch

    class _RemoteOVSSwitch(RemoteOVSSwitch):   # type: ignore[misc]  # Mininet is untyped
        """The cluster edition's switch, its start-up commands cut into lines a terminal takes.

        It sends each server's ``ovs-vsctl`` batch through a switch's shell, a terminal over SSH,
        where a line stops at 4,095 characters: ten switches of the quickstart on one server
        made a longer one, and the run waited for the switches until it gave up."""

        argmax = 3000

        @classmethod
        def batchStartup(cls, switches: list[Any], **_kwargs: Any) -> list[Any]:
            server = attrgetter("server")
            for _, group in groupby(sorted(switches, key=server), server):
                batch = tuple(group)
                OVSSwitch.batchStartup.__func__(cls, batch, run=batch[0].cmd)   # Mininet's own, with cls.argmax
            return switches

    return _RemoteOVSSwitch


def RemoteRelayNode(name: str, **params: Any) -> Any:
    return _remote_relay_class()(name, **params)


def join_cgroups_command(pid: str, container_pid: int) -> str:
    """Shell, run on a server in its root namespaces: ``pid`` (a number or ``$$``) into the
    cgroups of the container whose init is ``container_pid`` there (``cgroups.join_cgroups``,
    with this checkout's interpreter and sources, which a server has at the same paths)."""
    src = str(srv.SOURCES.parent)
    return (f"env PYTHONPATH={shlex.quote(src)} {shlex.quote(sys.executable)} -m rmptwin.emulation.cgroups "
            f"{pid} {int(container_pid)}")


@functools.cache
def _remote_docker_host_class() -> Any:
    from mininet.examples.cluster import RemoteMixin
    from mininet.node import Node

    from rmptwin.emulation.dockerhost import DockerHost

    class _RemoteDockerHost(RemoteMixin, DockerHost):   # type: ignore[misc]  # Mininet is untyped
        """A Docker host on a server: its container started in that server's engine (the Docker
        SDK over SSH, ``server_engines``), its shell and processes attached to the container
        over SSH with mnexec there, and moved into the container's cgroups there."""

        def __init__(self, name: str, engines: Mapping[str, str], server: str, **params: Any) -> None:
            super().__init__(name, server=server, engine=engines[server], **params)

        def startShell(self, *args: Any, **kwargs: Any) -> None:
            super().startShell(*args, **kwargs)   # the container, the shell over SSH, its pid there
            assert self.container_pid is not None   # or the container's start raised
            self.rcmd(["sh", "-c", shlex.quote(join_cgroups_command(str(self.pid), self.container_pid))])

        def _join_shell(self) -> None:
            """DockerHost's, called before the shell's pid on the server is known: startShell does it."""

        def popen(self, *args: Any, **kwargs: Any) -> Any:
            # Node's popen over SSH, its process moving itself into the container's cgroups on the
            # server before it attaches to the container (DockerHost.popen would move the SSH client).
            assert self.container_pid is not None   # the shell, which starts the container, came first
            script = f'{join_cgroups_command("$$", self.container_pid)}; exec mnexec -da {int(self.pid)} "$@"'
            return Node.popen(self, *args, tt=False, mncmd=["sh", "-c", shlex.quote(script), "sh"], **kwargs)

    return _RemoteDockerHost


def RemoteDockerHost(name: str, **params: Any) -> Any:
    return _remote_docker_host_class()(name, **params)


@contextlib.contextmanager
def hangup_default() -> Iterator[None]:
    """SIGHUP's default action while Mininet starts its nodes' shells, which inherit it: Mininet
    stops a node by a SIGHUP to its shell (here, its SSH client), and from a runner started
    with SIGHUP ignored (nohup, some CI runners) they would ignore it too. Then every shell
    outlives its network, and over SSH ``Mininet.stop`` waits forever for one (seen under nohup)."""
    if threading.current_thread() is not threading.main_thread():
        yield   # only the main thread may set a handler; a thread's runner keeps what it has
        return
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, old)


def mininet_cluster(topo: RmpTopo, servers: Sequence[srv.Server], datapath: str) -> Any:
    """An unbuilt ``MininetCluster`` over ``servers`` (the placement already in ``topo``)."""
    from mininet.examples import cluster as mc

    ssh = srv.ssh_base()
    # The cluster edition's ssh command lines, with the cluster's configuration file first.
    mc.RemoteMixin.sshbase = [*ssh, "-q", "-o", "BatchMode=yes", "-tt"]
    mc.MininetCluster.sshcmd = [*ssh, "-o", "BatchMode=yes"]
    switch = partial(_remote_switch_class(), datapath=datapath, protocols="OpenFlow13", failMode="secure")
    return mc.MininetCluster(topo=topo, servers=[s.name for s in servers], serverIP={s.name: s.ip for s in servers},
                             user="root", host=mc.RemoteHost, switch=switch, link=mc.RemoteLink, controller=None,
                             build=False, autoSetMacs=False, autoStaticArp=False, waitConnected=False)


def tunnel_counts(net: Any) -> dict[str, dict[str, int]]:
    """Per link between servers (by its two Mininet nodes), the frames each end's tap sent:
    the datagrams that crossed servers."""
    out: dict[str, dict[str, int]] = {}
    for link in net.links:
        if getattr(link, "tunnel", None) is None:
            continue
        sent = {}
        for intf in (link.intf1, link.intf2):
            text = intf.node.cmd(f"cat /sys/class/net/{intf.name}/statistics/tx_packets").strip()
            sent[intf.node.name] = int(text) if text.isdigit() else 0
        out[f"{link.intf1.node.name}-{link.intf2.node.name}"] = sent
    return out


def server_cleanup_script(pids: Sequence[int], bridges: Sequence[str], intf_pattern: str) -> str:
    """Shell for one server: kill every process in the namespaces of the nodes the network
    recorded there (their shells, nodes and relays; a pid only while it is still a Mininet
    shell in a namespace of its own, never the server's), delete its bridges and any project
    interface left over."""
    kill = " ".join(str(int(p)) for p in pids)
    dels = "; ".join(f"ovs-vsctl --timeout=5 --if-exists del-br {shlex.quote(b)}" for b in bridges)
    return (f"for p in {kill}; do grep -qa mininet: /proc/$p/cmdline 2>/dev/null || continue; "
            "ns=$(readlink /proc/$p/ns/net); [ \"$ns\" = \"$(readlink /proc/$$/ns/net)\" ] && continue; "
            "for q in /proc/[0-9]*; do [ \"$(readlink $q/ns/net 2>/dev/null)\" = \"$ns\" ] && kill -9 ${q#/proc/} 2>/dev/null; done; "
            "done; "
            f"{dels or 'true'}; {delete_interfaces(intf_pattern)}")


def ere(pattern: str) -> str:
    """A Python pattern of the project's names as ``grep -E`` reads it (no ``\\d`` there)."""
    return pattern.replace("\\d", "[0-9]")


def delete_interfaces(pattern: str, spare: str = "") -> str:
    """Shell deleting the interfaces whose names match ``pattern`` (``spare``: a further grep).
    A tunnel's end is a tap device, which the SSH process holding it keeps (and ``ip link del``
    cannot delete): that process is the one whose open file says ``iff: <name>``."""
    return (f"for i in $(ip -o link show | awk -F': ' '{{print $2}}' | cut -d@ -f1 | grep -E {shlex.quote(ere(pattern))}{spare}); do "
            "for f in /proc/[0-9]*/fdinfo/*; do grep -qs \"^iff:[[:space:]]*$i\\$\" $f && kill -9 $(echo $f | cut -d/ -f3); done; "
            "ip link del $i 2>/dev/null || ip tuntap del dev $i mode tap 2>/dev/null; done; true")


def run_on(server_ip: str, script: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*srv.ssh_base(), server_ip, script], capture_output=True, text=True, timeout=timeout)


def server_records(net: Any, servers: Sequence[srv.Server], topology: Any, topo: RmpTopo) -> dict[str, Any]:
    """What ``net.json`` keeps per server for cleanup after a crash: the pids of its namespace
    nodes (hosts and relays, as its own kernel numbers them) and its bridges."""
    out: dict[str, Any] = {s.name: {"ip": s.ip, "pids": [], "bridges": []} for s in servers}
    for name in [h.name for h in topology.hosts] + list(topo.relay_nodes):
        node = net.get(name)
        out[node.server]["pids"].append(node.pid)
    for name in topo.switch_names.values():
        node = net.get(name)
        out[node.server]["bridges"].append(name)
    return out


def ssh_client_pids(net: Any) -> list[int]:
    """The SSH clients the cluster edition runs here: each remote node's shell and each tunnel.
    In process groups of their own, they outlive a runner that was killed."""
    shells = [n.shell.pid for n in (*net.hosts, *net.switches) if is_remote(n) and n.shell is not None]
    return shells + [lk.tunnel.pid for lk in net.links if getattr(lk, "tunnel", None) is not None]


def cleanup_servers(record: Mapping[str, Any], intf_pattern: str) -> int:
    """Run each server's cleanup (``server_cleanup_script``); how many servers answered."""
    done = 0
    for name, rec in record.items():
        script = server_cleanup_script(rec.get("pids", []), rec.get("bridges", []), intf_pattern)
        try:
            r = run_on(rec["ip"], script)
        except (OSError, subprocess.TimeoutExpired):
            continue
        done += r.returncode == 0
    return done


def sweep_servers(servers: Sequence[srv.Server], keep: Sequence[int | None] = ()) -> int:
    """Delete every project bridge and interface on each server (the tags in ``keep`` belong to
    live networks and stay); how many servers answered. Processes are left to the records:
    on local servers every process of this machine is visible, and a pattern could hit a live run."""
    from rmptwin.emulation.cleanup import BRIDGE_RE, INTF_RE

    keep_re = "|".join(str(t) for t in keep if t is not None)
    spare = f" | grep -vE '^r({keep_re})[sl]'" if keep_re else ""
    script = (f"for b in $(ovs-vsctl --timeout=5 list-br | grep -E {shlex.quote(ere(BRIDGE_RE.pattern))}{spare}); "
              "do ovs-vsctl --timeout=5 --if-exists del-br $b; done; "
              + delete_interfaces(INTF_RE.pattern, spare))
    done = 0
    for s in servers:
        try:
            r = run_on(s.ip, script)
        except subprocess.TimeoutExpired:
            raise UserError(f"server {s.name} ({s.ip}) did not answer within 60 s") from None
        if r.returncode != 0:
            raise UserError(f"server {s.name} ({s.ip}): {(r.stderr or r.stdout).strip() or 'cannot be reached over SSH'}")
        done += 1
    return done
