"""Constants and helpers shared by the emulation tests and their conftest."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
NET4 = HERE / "net4.yaml"
# IGMP version per host: v2 and v3 hosts in the same network, so joins and leaves of
# both versions are exercised by the same tests.
IGMP = {"h1": 3, "h6": 2, "h2": 2, "h3": 3, "h4": 2, "h5": 3}
METER_PPS = 1000
# Container limits of the Docker hosts (checked in their cgroups, v1 or v2).
DOCKER_CPUS = 1.5
DOCKER_MEMORY_MB = 512


def link_count(net, link: str, from_node: str):
    """One direction's packet counters of an impaired link, from whichever backend runs it:
    the relay's counts, or the netem qdisc on the sending end's interface."""
    from rmptwin.emulation.impair import NetemLink
    from rmptwin.emulation.losscheck import netem_count, relay_count

    lk = net.links[link]
    if not isinstance(lk, NetemLink):
        return relay_count(net.link_counts(), link, from_node)
    sender = net.sw_name.get(from_node, from_node)
    intf = next(i for i in (lk.link.intf1, lk.link.intf2) if i.node.name == sender)
    return netem_count(intf.node.cmd(f"tc -s -j qdisc show dev {intf.name}"))


def _run(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout if r.returncode == 0 else ""


def _cmdlines() -> dict[int, str]:
    out = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                out[int(p.name)] = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return out


def _recorded_host_pids() -> set[int]:
    """Host shells of every network that registered a state dir (their namespaces)."""
    from rmptwin.emulation.cleanup import REGISTRY

    pids: set[int] = set()
    dirs = set(REGISTRY.read_text().split()) if REGISTRY.exists() else set()
    for d in dirs | {"/run/rmptwin/net"}:
        try:
            pids |= set(json.loads((Path(d) / "net.json").read_text()).get("host_pids", []))
        except (OSError, ValueError):
            continue
    return pids


def project_leftovers() -> dict[str, list[str]]:
    """Everything of an emulated network on this machine that `rmptwin net down` removes."""
    from rmptwin.emulation.cleanup import BRIDGE_RE, CONTAINER_LABEL, PROCESS_MARKS, _project_interfaces

    cmdlines = _cmdlines()
    hosts = _recorded_host_pids()
    namespaces, processes = [], []
    for pid, cmd in sorted(cmdlines.items()):
        m = re.search(r"mininet:(\S+)", cmd)
        if m and (re.fullmatch(r"r\d+l\d+", m.group(1)) or pid in hosts):
            namespaces.append(f"{m.group(1)} (pid {pid})")
        elif any(mark in cmd for mark in PROCESS_MARKS):
            processes.append(f"{cmd.strip()[:80]} (pid {pid})")
    return {
        "switches": [b for b in _run(["ovs-vsctl", "--timeout=5", "list-br"]).split() if BRIDGE_RE.match(b)],
        "interfaces": _project_interfaces(),
        "namespaces": namespaces,
        "processes": processes,
        "containers": _run(["docker", "ps", "-a", "--filter", f"label={CONTAINER_LABEL}",
                            "--format", "{{.Names}}"]).split(),
    }


def describe_leftovers(left: dict[str, list[str]]) -> str:
    """One line naming what is left, at most a few of each kind."""
    parts = []
    for kind, items in left.items():
        if items:
            more = f" and {len(items) - 4} more" if len(items) > 4 else ""
            parts.append(f"{len(items)} {kind} ({', '.join(items[:4])}{more})")
    return "; ".join(parts)
