"""`rmptwin net down`: remove everything an emulated network may have left behind.

First what each network recorded in its ``net.json`` (pids, switches, containers),
then a sweep for the project's marks, which also catches a network killed before it
could record anything: OVS bridges ``r<k>s<N>``, root-namespace interfaces of those
bridges and of relay links (``r<k>l<N>a``/``b``), relay and controller processes
(identified by their command lines, which only this project uses), containers
labelled ``rmptwin.net``. Nothing else on the machine is touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..errors import UserError

REGISTRY = Path("/run/rmptwin/state-dirs")
TAG_DIR = Path("/run/rmptwin/tags")
BRIDGE_RE = re.compile(r"^r\d+s\d+$")
INTF_RE = re.compile(r"^(r\d+s\d+-eth\d+|r\d+l\d+[ab])$")
PROCESS_MARKS = ("rmptwin.emulation.relay", "controllers/launch.py")
CONTAINER_LABEL = "rmptwin.net"


def register_state_dir(state_dir: Path) -> None:
    REGISTRY.parent.mkdir(parents=True, exist_ok=True)
    known = set(REGISTRY.read_text().split()) if REGISTRY.exists() else set()
    known.add(str(Path(state_dir).resolve()))
    REGISTRY.write_text("\n".join(sorted(known)) + "\n")


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
            fd = os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(f.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and Path(f"/proc/{pid}").exists():
                continue
            f.write_text(str(os.getpid()))   # stale: its network's owner is gone
            return k
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return k
    raise UserError("too many emulated networks are up; run `rmptwin net down`")


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


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
    if not names or not shutil.which("docker"):
        return 0
    r = _run(["docker", "rm", "-f", *names])
    return len(names) if r.returncode == 0 else 0


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


def cleanup_state_dir(state_dir: Path, own_pid: int | None = None) -> dict:
    """Undo what ``state_dir/net.json`` recorded; returns counts of what was removed."""
    path = Path(state_dir) / "net.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    pids = list(data.get("relay_pids", [])) + [data.get("controller_pid") or 0]
    pids += list(data.get("link_node_pids", [])) + list(data.get("host_pids", []))
    # A pid may have been reused since a crash: only kill what still looks like ours.
    pids = [p for p in pids if p and any(m in _cmdline(p) for m in PROCESS_MARKS + ("mininet:",))]
    done = {
        "processes": _kill(pids, own_pid=own_pid),
        "containers": _remove_containers(data.get("containers", [])),
        "switches": _del_bridges(data.get("switches", [])),
    }
    for name in ("net.json", "controller.json"):
        (Path(state_dir) / name).unlink(missing_ok=True)
    if data.get("tag") is not None:
        (TAG_DIR / str(data["tag"])).unlink(missing_ok=True)
    return done


def cleanup_all() -> dict:
    """Everything the project may have left on this machine (the `mn -c` equivalent)."""
    totals = {"processes": 0, "containers": 0, "switches": 0, "interfaces": 0}
    dirs = set(REGISTRY.read_text().split()) if REGISTRY.exists() else set()
    dirs.add("/run/rmptwin/net")
    for d in sorted(dirs):
        for k, v in cleanup_state_dir(Path(d)).items():
            totals[k] += v
    # Sweep by marks.
    ours = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            cmd = _cmdline(int(p.name))
            if any(m in cmd for m in PROCESS_MARKS) or re.search(r"mininet:r\d+l\d+\b", cmd):
                ours.append(int(p.name))
    totals["processes"] += _kill(ours)
    if shutil.which("docker") and os.path.exists("/var/run/docker.sock"):
        r = _run(["docker", "ps", "-aq", "--filter", f"label={CONTAINER_LABEL}"])
        ids = r.stdout.split() if r.returncode == 0 else []
        totals["containers"] += _remove_containers(ids)
    if shutil.which("ovs-vsctl"):
        r = _run(["ovs-vsctl", "--timeout=5", "list-br"])
        if r.returncode == 0:
            totals["switches"] += _del_bridges([b for b in r.stdout.split() if BRIDGE_RE.match(b)])
    for intf in _project_interfaces():
        if _run(["ip", "link", "del", intf]).returncode == 0:
            totals["interfaces"] += 1
    REGISTRY.unlink(missing_ok=True)
    shutil.rmtree(TAG_DIR, ignore_errors=True)
    return totals
