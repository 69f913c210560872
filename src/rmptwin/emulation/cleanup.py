"""`rmptwin net down`: remove everything an emulated network may have left behind.

First what each network recorded in its ``net.json`` (pids, switches, containers),
then a sweep for the project's marks, which also catches a network killed before it
could record anything: OVS bridges ``r<k>s<N>``, root-namespace interfaces of those
bridges and of relay links (``r<k>l<N>a``/``b``), relay and controller processes
(identified by their command lines, which only this project uses), containers
labelled ``rmptwin.net``. Nothing else on the machine is touched.

Several networks may be up at once (each has its tag k and its owner process, recorded
in ``/run/rmptwin/tags/<k>`` and in its ``net.json``). A network whose owner is still
running is left alone unless ``force`` (``rmptwin net down --all``): deciding what to
spare is a plain function (``plan_sweep``) of what is live and what is found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmptwin.emulation import docker_engine as engine
from rmptwin.errors import UserError

REGISTRY = Path("/run/rmptwin/state-dirs")
TAG_DIR = Path("/run/rmptwin/tags")
DEFAULT_STATE_DIR = "/run/rmptwin/net"
BRIDGE_RE = re.compile(r"^r\d+s\d+$")
INTF_RE = re.compile(r"^(r\d+s\d+-eth\d+|r\d+l\d+[ab])$")
TAG_OF_NAME = re.compile(r"^r(\d+)[sl]\d+")             # the network tag in a bridge, interface or link node name
LINK_NODE_RE = re.compile(r"mininet:r(\d+)l\d+\b")     # a relay link's namespace shell
PROCESS_MARKS = ("rmptwin.emulation.relay", "controllers/launch.py")
CONTAINER_LABEL = "rmptwin.net"


def register_state_dir(state_dir: Path) -> None:
    REGISTRY.parent.mkdir(parents=True, exist_ok=True)
    known = set(REGISTRY.read_text().split()) if REGISTRY.exists() else set()
    known.add(str(Path(state_dir).resolve()))
    REGISTRY.write_text("\n".join(sorted(known)) + "\n")


def _create_exclusive(f: Path) -> int:
    """Create ``f`` or fail with FileExistsError; a `net down` in another process may remove
    the (then empty) tag directory between our mkdir and the create: make it again, once."""
    try:
        return os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileNotFoundError:
        f.parent.mkdir(parents=True, exist_ok=True)
        return os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY)


def claim_tag() -> int:
    """The smallest network tag no running network uses (a pid file per tag)."""
    TAG_DIR.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True)
    bridges = r.stdout.split()
    for k in range(1, 1000):
        if any(b.startswith(f"r{k}s") for b in bridges):
            continue
        f = TAG_DIR / str(k)
        try:
            fd = _create_exclusive(f)
        except FileExistsError:
            if _running(_read_pid(f)):
                continue
            f.write_text(str(os.getpid()))   # stale: its network's owner is gone
            return k
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return k
    raise UserError("too many emulated networks are up; run `rmptwin net down`")


# ----------------------------------------------------------------------------- which networks are live


def _read_pid(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _running(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie nobody reaped yet has exited)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def owner_alive(pid: int) -> bool:
    """Whether a network's owner ``pid`` is another process that is still running: only
    then does the network belong to someone else."""
    return pid != os.getpid() and _running(pid)


@dataclass(frozen=True)
class LiveNetwork:
    """A network whose owner process is still running."""

    owner_pid: int
    tag: int | None = None
    state_dir: str | None = None
    topology: str | None = None
    pids: frozenset[int] = frozenset()          # what its net.json recorded: relays, controller, hosts
    containers: frozenset[str] = frozenset()

    def kept_line(self) -> str:
        """The one line `rmptwin net down` prints for this network."""
        name = f"network r{self.tag}" if self.tag is not None else "a network"
        about = ", ".join(x for x in (f"topology {self.topology}" if self.topology else "",
                                      f"state {self.state_dir}" if self.state_dir else "") if x)
        return (f"kept {name}{f' ({about})' if about else ''}: its owner, pid {self.owner_pid}, is running; "
                f"`rmptwin net down --all` removes it too")


def state_dirs(registry: Path | None = None) -> set[str]:
    """Every state dir a network registered, and the default one."""
    registry = registry or REGISTRY
    dirs = set(registry.read_text().split()) if registry.exists() else set()
    return dirs | {DEFAULT_STATE_DIR}


def _net_json(state_dir: str) -> dict[str, Any]:
    try:
        data = json.loads((Path(state_dir) / "net.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def live_networks(tag_dir: Path | None = None, registry: Path | None = None) -> list[LiveNetwork]:
    """The networks whose owner is alive: from each state dir's ``net.json`` (``owner_pid``),
    and from each tag file (the pid that claimed the tag; it covers a network that has
    claimed its tag but not yet written its state)."""
    nets: list[LiveNetwork] = []
    for d in sorted(state_dirs(registry)):
        data = _net_json(d)
        owner = int(data.get("owner_pid") or 0)
        if owner_alive(owner):
            pids = [*data.get("relay_pids", []), data.get("controller_pid") or 0,
                    *data.get("link_node_pids", []), *data.get("host_pids", [])]
            nets.append(LiveNetwork(owner, data.get("tag"), str(Path(d).resolve()), data.get("topology"),
                                    frozenset(p for p in pids if p), frozenset(data.get("containers", []))))
    tagged = {n.tag for n in nets}
    tag_dir = tag_dir or TAG_DIR
    files = sorted(tag_dir.iterdir(), key=lambda f: f.name) if tag_dir.is_dir() else []
    for f in files:
        if f.name.isdigit() and int(f.name) not in tagged and owner_alive(pid := _read_pid(f)):
            nets.append(LiveNetwork(pid, int(f.name)))
    return nets


# ----------------------------------------------------------------------------- what to remove


@dataclass
class Sweep:
    """What a sweep by marks removes (the rest of what it found belongs to live networks)."""

    processes: list[int] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)


def plan_sweep(live: Sequence[LiveNetwork], processes: list[tuple[int, int, str]],
               containers: list[tuple[str, str, str]], bridges: list[str], interfaces: list[str]) -> Sweep:
    """From what the machine has (``processes`` as (pid, parent pid, command line) of the
    project's marks, ``containers`` as (id, name, state-dir label)), what to remove: all of
    it but what belongs to a live network (its tag, its recorded pids and containers, a
    child of its owner, its state dir)."""
    tags = {n.tag for n in live if n.tag is not None}
    owners = {n.owner_pid for n in live}
    pids = set().union(*(n.pids for n in live))
    dirs = {n.state_dir for n in live if n.state_dir}
    names = set().union(*(n.containers for n in live))

    def live_name(name: str) -> bool:
        m = TAG_OF_NAME.match(name)
        return m is not None and int(m.group(1)) in tags

    def live_process(pid: int, ppid: int, cmd: str) -> bool:
        node = LINK_NODE_RE.search(cmd)
        return (pid in pids or ppid in owners or any(d in cmd for d in dirs)
                or (node is not None and int(node.group(1)) in tags))

    return Sweep(
        processes=[pid for pid, ppid, cmd in processes if not live_process(pid, ppid, cmd)],
        containers=[cid for cid, name, state in containers if name not in names and state not in dirs],
        bridges=[b for b in bridges if BRIDGE_RE.match(b) and not live_name(b)],
        interfaces=[i for i in interfaces if INTF_RE.match(i) and not live_name(i)],
    )


# ----------------------------------------------------------------------------- what the machine has


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _project_processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process carrying the project's marks."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            cmd = _cmdline(int(p.name))
            if any(m in cmd for m in PROCESS_MARKS) or LINK_NODE_RE.search(cmd):
                out.append((int(p.name), _parent(int(p.name)), cmd))
    return out


def _project_containers() -> list[tuple[str, str, str]]:
    """(id, name, state dir) of every container labelled as the project's (none without an engine)."""
    try:
        found = engine.labelled_containers(CONTAINER_LABEL)
    except UserError:
        return []   # an engine that fails now leaves nothing to sweep; its containers wait for the next `net down`
    return [(cid, name, labels.get("rmptwin.state", "")) for cid, name, labels in found]


def _project_bridges() -> list[str]:
    if not shutil.which("ovs-vsctl"):
        return []
    r = _run(["ovs-vsctl", "--timeout=5", "list-br"])
    return [b for b in r.stdout.split() if BRIDGE_RE.match(b)] if r.returncode == 0 else []


def _project_interfaces() -> list[str]:
    r = _run(["ip", "-o", "link", "show"])
    out = []
    for line in r.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if INTF_RE.match(name):
                out.append(name)
    return out


# ----------------------------------------------------------------------------- removing


def _kill(pids: list[int], own_pid: int | None = None) -> int:
    """SIGTERM then SIGKILL the given live pids (never ourselves); returns how many existed."""
    pids = [p for p in pids if p and p != os.getpid() and p != own_pid and Path(f"/proc/{p}").exists()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.05)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def _del_bridges(names: list[str]) -> int:
    if not names or not shutil.which("ovs-vsctl"):
        return 0
    n = 0
    for b in names:
        if _run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", b]).returncode == 0:
            n += 1
    return n


def _remove_containers(names: list[str]) -> int:
    """All of them at once (``engine.remove_containers``); how many went."""
    return engine.remove_containers(names)


def _del_interfaces(names: list[str]) -> int:
    return sum(_run(["ip", "link", "del", intf]).returncode == 0 for intf in names)


def cleanup_state_dir(state_dir: Path, own_pid: int | None = None, live: Sequence[LiveNetwork] = ()) -> dict[str, int]:
    """Undo what ``state_dir/net.json`` recorded; returns counts of what was removed. What
    is now a ``live`` network's (its tag reclaimed, a pid reused) stays."""
    path = Path(state_dir) / "net.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    pids = list(data.get("relay_pids", [])) + [data.get("controller_pid") or 0]
    pids += list(data.get("link_node_pids", [])) + list(data.get("host_pids", [])) + list(data.get("shell_pids", []))
    # A pid may have been reused since a crash: only kill what still looks like ours.
    pids = [p for p in pids if p and any(m in _cmdline(p) for m in PROCESS_MARKS + ("mininet:",))]
    # Containers in servers' engines: the owner removes them through its engines' tunnels (by
    # name, docker_engine knows each one's engine); after its crash, tunnels opened anew do.
    on_servers = {n for names in (data.get("server_containers") or {}).values() for n in names}
    crashed = data.get("owner_pid") != own_pid
    here = [c for c in data.get("containers", []) if not (crashed and c in on_servers)]
    mine = plan_sweep(live, [(p, _parent(p), _cmdline(p)) for p in pids],
                      [(c, c, "") for c in here], data.get("switches", []), [])
    done = {
        "processes": _kill(mine.processes, own_pid=own_pid),
        "containers": _remove_containers(mine.containers),
        "switches": _del_bridges(mine.bridges),
    }
    if data.get("servers"):   # a network over several servers: each cleans what it ran, over SSH
        from rmptwin.emulation.cluster import cleanup_servers

        done["servers"] = cleanup_servers(data["servers"], INTF_RE.pattern)
        if on_servers and crashed:
            from rmptwin.emulation.server_engines import remove_server_containers

            done["containers on servers"] = remove_server_containers(data["servers"], data["server_containers"],
                                                                     Path(state_dir) / "engines")
            for sock in (Path(state_dir) / "engines").glob("*.sock"):   # the crashed run's forwards
                sock.unlink(missing_ok=True)
        ssh_pids = list(data.get("ssh_pids", [])) + list(data.get("engine_tunnel_pids", []))
        # then the SSH clients here that carried its shells and tunnels (if still SSH clients)
        done["processes"] += _kill([p for p in ssh_pids if "ssh" in _cmdline(p)], own_pid=own_pid)
    for name in ("net.json", "controller.json"):
        (Path(state_dir) / name).unlink(missing_ok=True)
    if data.get("tag") is not None and data["tag"] not in {n.tag for n in live}:
        (TAG_DIR / str(data["tag"])).unlink(missing_ok=True)
    return done


def _forget(live: list[LiveNetwork]) -> None:
    """Drop the registry and the tag files, but the live networks' entries."""
    keep_dirs = sorted({n.state_dir for n in live if n.state_dir})
    if keep_dirs:
        REGISTRY.write_text("\n".join(keep_dirs) + "\n")
    else:
        REGISTRY.unlink(missing_ok=True)
    keep_tags = {str(n.tag) for n in live if n.tag is not None}
    if not keep_tags:
        shutil.rmtree(TAG_DIR, ignore_errors=True)
        return
    for f in TAG_DIR.iterdir() if TAG_DIR.is_dir() else ():
        if f.name not in keep_tags:
            f.unlink(missing_ok=True)


def cleanup_all(force: bool = False) -> tuple[dict[str, int], list[LiveNetwork]]:
    """What the project left on this machine (the `mn -c` equivalent): every network of a
    dead owner and every untagged leftover; with ``force``, live networks too. Returns the
    counts of what was removed and the live networks kept."""
    live = [] if force else live_networks()
    kept_dirs = {n.state_dir for n in live}
    totals = {"processes": 0, "containers": 0, "switches": 0, "interfaces": 0}
    for d in sorted(state_dirs()):
        if str(Path(d).resolve()) not in kept_dirs:
            for k, v in cleanup_state_dir(Path(d), live=live).items():
                totals[k] = totals.get(k, 0) + v
    sweep = plan_sweep(live, _project_processes(), _project_containers(), _project_bridges(), [])
    totals["processes"] += _kill(sweep.processes)
    totals["containers"] += _remove_containers(sweep.containers)
    totals["switches"] += _del_bridges(sweep.bridges)
    # interfaces last: most went with their bridges and namespaces
    totals["interfaces"] += _del_interfaces(plan_sweep(live, [], [], [], _project_interfaces()).interfaces)
    _forget(live)
    return totals, live
