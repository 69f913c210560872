"""Docker containers as Mininet hosts.

The container runs ``sleep infinity`` with no Docker network (``--network none``) and
only NET_ADMIN, NET_RAW and SYS_NICE (``--privileged`` fails in this sandbox: runc cannot apply the
capability set). Mininet's shell for the host is attached to the container's network
and mount namespaces with ``mnexec -a <container pid>``, so links made by Mininet land
in the container and commands run on the container's filesystem. The shell and every
process started with ``popen`` are moved into the container's cgroups, so the engine's
CPU and memory limits apply to them.

The repository is bind-mounted read-only at its own path: ``<repo>/.venv/bin/python``
works inside with the project's pinned dependencies.

The engine is driven through the Docker SDK (``engine``), not the docker CLI: this machine's,
or a server's reached over SSH (``server_engines``; ``cluster.RemoteDockerHost`` is the host
on a server).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mininet.node import Host

from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.cgroups import join_cgroups
from rmptwin.emulation.cleanup import CONTAINER_LABEL
from rmptwin.errors import UserError

REPO = Path(__file__).resolve().parents[3]
# What the hosts need instead of --privileged: links and raw sockets (tcpdump, AF_PACKET),
# and raising the release path's priority (node.priority).
CAPABILITIES = ("NET_ADMIN", "NET_RAW", "SYS_NICE")


class DockerHost(Host):   # type: ignore[misc]  # Mininet is untyped: its Host is Any
    """A Mininet host whose namespaces are a Docker container's."""

    inNamespace: bool   # Mininet's Node sets it

    def __init__(self, name: str, image: str, cpus: float | None = None, memory_mb: int | None = None,
                 mounts: Sequence[tuple[str, str, str]] | None = (),
                 on_container: Callable[[str, str | None], None] | None = None, state_dir: str = "",
                 remove_on_terminate: bool = True, engine: str | None = None, **params: Any) -> None:
        self.image = image
        self.engine = engine   # the Docker engine's base URL (a server's); None: this machine's
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.mounts = list(mounts or [])
        self.on_container = on_container
        self.state_dir = str(state_dir)
        # EmulatedNetwork removes all its containers at once (much faster than one by one).
        self.remove_on_terminate = remove_on_terminate
        self.container = f"rmptwin-{name}-{uuid.uuid4().hex[:8]}"
        self.container_pid: int | None = None
        super().__init__(name, **params)

    def _start_container(self) -> None:
        mounts = list(self.mounts)
        if not any(Path(dst) == REPO for _, dst, _ in mounts):
            mounts.insert(0, (str(REPO), str(REPO), "ro"))
        if self.on_container:
            self.on_container(self.container, self.engine)
        self.container_pid = engine.start_container(
            self.container, self.image, ["sleep", "infinity"], hostname=self.name,
            labels={CONTAINER_LABEL: "1", "rmptwin.state": self.state_dir}, mounts=mounts,
            cap_add=list(CAPABILITIES), network="none", cpus=self.cpus, memory_mb=self.memory_mb,
            engine=self.engine)
        if not self.container_pid:
            raise UserError(f"container {self.container} for host {self.name} is not running")

    def startShell(self, mnopts: str | None = None) -> None:
        self._start_container()
        assert self.container_pid is not None   # or _start_container raised
        # Mininet appends 'n' (new namespaces) for namespaced hosts; here the shell must
        # join the container's instead, so start it as a "root namespace" node whose
        # mnexec options attach to the container (-a<pid>). Over SSH the cluster edition
        # asks for -c alone: a shell detached from its terminal (-d) never answers through it.
        was = self.inNamespace
        self.inNamespace = False
        try:
            super().startShell(mnopts=f"{mnopts or '-cd'}a{self.container_pid}")
        finally:
            self.inNamespace = was
        self._join_shell()

    def _join_shell(self) -> None:
        """The shell into the container's cgroups (on a server: ``cluster``'s remote host does it there)."""
        assert self.container_pid is not None
        join_cgroups(self.pid, self.container_pid)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        p: subprocess.Popen[Any] = super().popen(*args, **kwargs)
        assert self.container_pid is not None   # the shell, which starts the container, came first
        join_cgroups(p.pid, self.container_pid)
        return p

    def terminate(self) -> None:
        try:
            super().terminate()
        finally:
            if self.remove_on_terminate:
                engine.remove_containers([self.container], self.engine)
