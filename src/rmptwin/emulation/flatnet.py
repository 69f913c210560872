"""A flat emulated network: one network namespace per host on one Linux bridge.

No switches, no controller, no impairment: every multicast datagram floods to every host
(the bridge's IGMP snooping is off) and the kernel filters by membership. It is what the
runtime needs to run the same cores on real sockets when Open vSwitch is not wanted, for
smoke tests and a quick `rmptwin run --nodes flat`. Names carry the ``rmptf`` mark.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from rmptwin.core.groups import host_ip
from rmptwin.errors import UserError
from rmptwin.model import Topology
from rmptwin.records.tables import DROP_SCHEMA, LINK_COUNT_SCHEMA

PREFIX = "rmptf"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise UserError(f"flat network: `ip {' '.join(args)}` failed: {r.stderr.strip()}")
    return r


class FlatHost:
    remote = False   # always on this machine (EmuHost's may be on a server)

    def __init__(self, name: str, ns: str, ip: str) -> None:
        self.name, self.ns, self.ip, self.intf = name, ns, ip, "eth0"

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *cmd], **kwargs)

    def cmd(self, command: str) -> str:
        r = subprocess.run(["ip", "netns", "exec", self.ns, "sh", "-c", command], capture_output=True, text=True)
        return r.stdout + r.stderr


def leftover_namespaces() -> list[str]:
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)]


def cleanup_flat() -> None:
    for ns in leftover_namespaces():
        _ip("netns", "del", ns, check=False)


class FlatNetwork:
    """Context manager with the subset of ``EmulatedNetwork`` the runtime uses."""

    impair = "none"

    def __init__(self, topology: Topology, tag: str = "0") -> None:
        self.topo = topology
        self.tag = tag
        self.hosts: dict[str, FlatHost] = {}
        self.bridge_ns = f"{PREFIX}{tag}br"
        self._made: list[str] = []

    def __enter__(self) -> FlatNetwork:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        _ip("netns", "add", self.bridge_ns)
        self._made.append(self.bridge_ns)
        br = ["netns", "exec", self.bridge_ns, "ip"]
        _ip(*br, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        _ip(*br, "link", "set", "br0", "up")
        for i, h in enumerate(self.topo.hosts):
            ns = f"{PREFIX}{self.tag}-{h.name}"
            _ip("netns", "add", ns)
            self._made.append(ns)
            a, b = f"{PREFIX}{i}a", f"{PREFIX}{i}b"
            _ip("link", "add", a, "netns", ns, "type", "veth", "peer", "name", b, "netns", self.bridge_ns)
            _ip(*br, "link", "set", b, "master", "br0", "up")
            hs = ["netns", "exec", ns, "ip"]
            _ip(*hs, "link", "set", a, "name", "eth0")
            _ip(*hs, "addr", "add", f"{host_ip(i)}/8", "dev", "eth0")
            _ip(*hs, "link", "set", "eth0", "up")
            _ip(*hs, "link", "set", "lo", "up")
            _ip(*hs, "route", "add", "224.0.0.0/4", "dev", "eth0")
            self.hosts[h.name] = FlatHost(h.name, ns, host_ip(i))

    def host(self, name: str) -> FlatHost:
        try:
            return self.hosts[name]
        except KeyError:
            raise UserError(f"no host {name!r} in topology {self.topo.name}") from None

    def _no_impairment(self, *_a: object, **_k: object) -> None:
        raise UserError("the flat network has no link impairment; run with --nodes ns or docker")

    set_loss = set_link = set_delay = _no_impairment

    def drops(self, extra: Sequence[Any] = ()) -> pa.Table:   # no links, so no node shapes one: extra is empty
        return DROP_SCHEMA.empty_table()

    def link_counts(self, extra: Sequence[dict[str, Any]] = ()) -> pa.Table:
        return LINK_COUNT_SCHEMA.empty_table()

    def stop(self) -> None:
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made.clear()
        self.hosts.clear()
