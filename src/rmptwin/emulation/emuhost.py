"""A host of the running network, and the settings every host gets once built.

On one machine a host is a Mininet node here; on several servers (``emulation.cluster``) it
is a ``RemoteHost`` whose commands and processes go over SSH, which ``EmuHost.popen`` hides
from the runner: the environment is spelled out, and ``kill()`` reaches the process on its
server.
"""

from __future__ import annotations

import signal
import subprocess
from typing import TYPE_CHECKING, Any

from rmptwin.emulation import cluster
from rmptwin.errors import UserError

if TYPE_CHECKING:
    from mininet.node import Host


# groups one socket of a host may join (the kernel's default is 20)
IGMP_MAX_MEMBERSHIPS = 4096


class EmuHost:
    """A host of the running network: Mininet's node plus its name and address."""

    def __init__(self, node: Host, ip: str, intf: str, clock_offset_ns: int = 0) -> None:
        self.node = node
        self.name = node.name
        self.ip = ip
        self.intf = intf
        # its server's clock minus this machine's (emulation.servers.ServerClock); 0 here
        self.clock_offset_ns = clock_offset_ns

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        out: str = self.node.cmd(*args, **kwargs)
        return out

    @property
    def remote(self) -> bool:
        """On a server of its own (emulation.cluster): started over SSH."""
        return cluster.is_remote(self.node)

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """``cmd`` in the host's namespace. On a server, over SSH: the environment given is set
        on the command line, and ``kill()``, ``terminate()`` and ``send_signal()`` signal the
        process there (a tcpdump stopped, a node paused), not only the SSH client here."""
        if not self.remote:
            proc: subprocess.Popen[Any] = self.node.popen(cmd, **kwargs)
            return proc
        env, _ = kwargs.pop("env", None), kwargs.pop("cwd", None)
        words = cluster.remote_command(cmd, env)
        proc = self.node.popen(words, **kwargs)
        ssh_kill = proc.kill

        def send_signal(sig: int) -> None:   # env execs cmd: its command line is cmd's
            cluster.kill_remote(self.node, cmd, signal.Signals(sig).name.removeprefix("SIG"))

        def kill() -> None:
            send_signal(signal.SIGKILL)
            ssh_kill()

        proc.kill = kill  # type: ignore[method-assign]  # this Popen is the SSH client: a kill must reach the server
        proc.terminate = lambda: send_signal(signal.SIGTERM)  # type: ignore[method-assign]  # as kill
        proc.send_signal = send_signal  # type: ignore[method-assign]  # as kill: SIGSTOP pauses the node there
        return proc

    @property
    def pid(self) -> int:
        pid: int = self.node.pid
        return pid

    def __repr__(self) -> str:
        return f"EmuHost({self.name}, {self.ip})"


def configure_host(node: Any, name: str, intf: str, version: int | None) -> None:
    """Multicast route, no transmit checksum offload, and the network sysctls of one host."""
    node.cmd(f"ethtool -K {intf} tx off >/dev/null 2>&1; ip route replace 224.0.0.0/4 dev {intf}")
    # Network sysctls are per namespace; a container's /proc/sys is read-only, so
    # write them from the root mount namespace, entering only the host's netns.
    # igmp_max_memberships: a socket joins one group per stripe it hears, and with edge
    # stripes (seed 4.4) a broker or an R_x hears hundreds; Linux allows 20 (ENOBUFS past it)
    sysctls = {"net/ipv6/conf/all/disable_ipv6": 1, "net/ipv6/conf/default/disable_ipv6": 1,
               "net/ipv4/igmp_max_memberships": IGMP_MAX_MEMBERSHIPS}
    if version:
        sysctls.update({f"net/ipv4/conf/{c}/force_igmp_version": int(version)
                        for c in ("all", "default", intf)})
    script = "; ".join(f"echo {v} > /proc/sys/{k}" for k, v in sysctls.items())
    if cluster.is_remote(node):   # a host on its server: written in its netns there
        said = cluster.on_server(node, f"{script} && echo sysctls-set").strip()
        if not said.endswith("sysctls-set"):
            raise UserError(f"host {name}: cannot set sysctls on its server: {said}")
    else:
        r = subprocess.run(["nsenter", f"--net=/proc/{node.pid}/ns/net", "sh", "-c", script],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise UserError(f"host {name}: cannot set sysctls: {r.stderr.strip()}")
