"""Each server's Docker engine, reached with the Docker SDK over SSH.

A run over servers with Docker hosts starts each host's container in the engine of the server
its switch is placed on. The SDK talks to that engine's API socket through an SSH channel:
``ssh -N -L <local socket>:/var/run/docker.sock`` with the cluster's own SSH configuration
(``servers.ssh_base``), so the key and host-key rules are the cluster's, never the user's, and
the server needs only sshd and dockerd (no docker CLI for ``docker system dial-stdio``). The
SDK's own ``ssh://`` transport was not used: it cannot be given the cluster's configuration
file, and it runs the docker CLI on the server.

The forwarded sockets live in the run's state directory; ``EngineTunnels`` opens one per
server, checks that the engine answers and holds the node image, and closes them in the
run's teardown (their SSH clients are recorded in ``net.json`` for a cleanup after a crash).
On local servers every tunnel reaches this machine's one dockerd: what they show is the path
(SDK, SSH channel, a container per server's engine), not separate engines.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.servers import Server, ssh_base
from rmptwin.errors import UserError

REMOTE_SOCKET = "/var/run/docker.sock"
OPEN_TIMEOUT_S = 15.0
SWEEP_DIR = Path("/run/rmptwin/sweep-engines")   # the sockets of `net down --servers`, a run's are in its state dir


def forward_command(server: Server, local_socket: Path) -> list[str]:
    """The SSH client that forwards ``local_socket`` here to the server's engine socket."""
    return [*ssh_base(), "-N", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
            "-L", f"{local_socket}:{REMOTE_SOCKET}", server.ip]


class EngineTunnels:
    """One forwarded engine socket per server: ``base_url[server name]`` for the Docker SDK."""

    def __init__(self, servers: Sequence[Server], directory: Path) -> None:
        self.servers = list(servers)
        self.directory = Path(directory)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.base_url: dict[str, str] = {}

    def open(self, image: str | None = None) -> EngineTunnels:
        """Forward every server's engine socket and wait until each engine answers; with
        ``image``, also check that each engine holds it. One line if a server cannot serve."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for s in self.servers:
            sock = self.directory / f"docker-{s.name}.sock"
            sock.unlink(missing_ok=True)
            self.procs[s.name] = subprocess.Popen(forward_command(s, sock), stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                  start_new_session=True)
            self.base_url[s.name] = f"unix://{sock}"
        for s in self.servers:
            self._wait(s)
            if image and engine.image_id(image, self.base_url[s.name]) is None:
                raise UserError(f"server {s.name} ({s.ip}) has no node image {image}: run `sudo .venv/bin/rmptwin "
                                "image build` in the checkout there, the same commit as here (docs/cluster.md)")
        return self

    def _wait(self, s: Server) -> None:
        proc, url = self.procs[s.name], self.base_url[s.name]
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                said = (proc.stderr.read().decode(errors="replace").strip().splitlines() if proc.stderr else [])
                raise UserError(f"server {s.name} ({s.ip}): cannot forward its Docker engine's socket over SSH "
                                f"({said[-1] if said else f'ssh exited {proc.returncode}'})")
            if engine.running(url):
                return
            time.sleep(0.1)
        raise UserError(f"server {s.name} ({s.ip}): no Docker engine answers at {REMOTE_SOCKET} there; "
                        "start dockerd on it (scripts/provision.sh --server installs docker.io)")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def close(self) -> None:
        """Forget each engine's client, stop its SSH client and remove its socket; safe twice."""
        for name, proc in self.procs.items():
            engine.forget_engine(self.base_url[name])
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
            Path(self.base_url[name].removeprefix("unix://")).unlink(missing_ok=True)
        self.procs.clear()


@contextlib.contextmanager
def engines(servers: Sequence[Server], directory: Path) -> Iterator[EngineTunnels]:
    """``EngineTunnels`` open for the block, closed after it (also after an error)."""
    tunnels = EngineTunnels(servers, directory)
    try:
        yield tunnels.open()
    finally:
        tunnels.close()


def remove_server_containers(servers: dict[str, dict[str, object]], containers: dict[str, list[str]],
                             directory: Path) -> int:
    """After a crash: the containers ``net.json`` recorded per server (``containers``), removed
    from each server's engine through a tunnel opened for it (``servers``: name -> its record,
    with ``ip``). How many went; a server that cannot be reached keeps its containers (the next
    ``rmptwin net down --servers`` tries again)."""
    removed = 0
    for name, names in containers.items():
        rec = servers.get(name) or {}
        if not names or not rec.get("ip"):
            continue
        try:
            with engines([Server(name, str(rec["ip"]), local=False)], directory) as tunnels:
                removed += engine.remove_containers(list(names), tunnels.base_url[name])
        except UserError:
            continue
    return removed


def sweep_server_containers(servers: Sequence[Server], keep_state_dirs: Sequence[str],
                            directory: Path = SWEEP_DIR) -> int:
    """`rmptwin net down --servers`: every container labelled as the project's in each server's
    engine, but those of the live networks (their ``rmptwin.state`` label in ``keep_state_dirs``),
    removed; how many went. A server without an engine socket has none to remove."""
    from rmptwin.emulation.cleanup import CONTAINER_LABEL

    removed = 0
    for s in servers:
        probe = subprocess.run([*ssh_base(), s.ip, f"test -S {REMOTE_SOCKET}"], capture_output=True, timeout=30)
        if probe.returncode != 0:
            continue
        with engines([s], directory) as tunnels:
            url = tunnels.base_url[s.name]
            found = engine.labelled_containers(CONTAINER_LABEL, url)
            names = [name for _, name, labels in found if labels.get("rmptwin.state", "") not in keep_state_dirs]
            removed += engine.remove_containers(names, url)
    return removed
