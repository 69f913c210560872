"""Which cgroups a process is in and which CPU and memory limits they give it, on either
cgroup layout:

- v1 (and the "hybrid" layout of older systemd): one hierarchy per controller, e.g.
  ``/sys/fs/cgroup/memory/<path>/memory.limit_in_bytes`` and
  ``/sys/fs/cgroup/cpu/<path>/cpu.cfs_quota_us``;
- v2 (stock Debian 12): one unified hierarchy, ``/sys/fs/cgroup/<path>/memory.max`` and
  ``cpu.max``.

The parsers are pure functions of the kernel's text (``/proc/self/mountinfo``,
``/proc/<pid>/cgroup``, the limit files) so both layouts are unit-tested on any machine;
``process_cgroup`` is the thin reader. ``join_cgroups`` moves a process into another's cgroups
(a Docker host's processes into its container's); on a server it runs there as
``python -m rmptwin.emulation.cgroups PID OF_PID`` (``cluster``'s remote Docker host).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

V1_CONTROLLERS = frozenset({"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
                            "blkio", "perf_event", "hugetlb", "pids", "rdma", "misc"})
# cgroup v1 reports "no limit" as the largest page-aligned signed 64-bit number.
V1_UNLIMITED_BYTES = 1 << 62


@dataclass(frozen=True)
class Mount:
    point: str    # where the hierarchy is mounted
    root: str     # the cgroup the mount shows at its top ("/" unless in a cgroup namespace)

    def path_of(self, cgroup: str) -> Path:
        """The directory of ``cgroup`` (a path as /proc/<pid>/cgroup names it)."""
        rel = cgroup
        if self.root != "/" and (cgroup == self.root or cgroup.startswith(self.root + "/")):
            rel = cgroup[len(self.root):]
        return Path(self.point) / rel.lstrip("/")


@dataclass(frozen=True)
class CgroupMounts:
    v1: dict[str, Mount]      # controller (or "name=systemd") -> its hierarchy's mount
    v2: Mount | None          # the unified hierarchy, where mounted

    @property
    def version(self) -> str:
        """'v2' when CPU and memory are controlled in the unified hierarchy; 'v1' when a v1
        hierarchy controls them (also the hybrid layout, whose cgroup2 mount at
        /sys/fs/cgroup/unified has no controllers); 'none' when nothing is mounted."""
        if {"cpu", "memory"} & self.v1.keys():
            return "v1"
        return "v2" if self.v2 is not None else "none"


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> CgroupMounts:
    """The cgroup hierarchies of a ``/proc/<pid>/mountinfo`` text."""
    v1: dict[str, Mount] = {}
    v2: Mount | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 1:
            continue
        mount = Mount(point=_unescape(fields[4]), root=_unescape(fields[3]))
        fstype, superopts = tail[0], (tail[2] if len(tail) > 2 else "")
        if fstype == "cgroup2" and (v2 is None or mount.point == "/sys/fs/cgroup"):
            v2 = mount
        elif fstype == "cgroup":
            for opt in superopts.split(","):
                if opt in V1_CONTROLLERS or opt.startswith("name="):
                    v1.setdefault(opt, mount)
    return CgroupMounts(v1, v2)


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` -> {controller: cgroup path}; the unified hierarchy's key is ""."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None    # None: unlimited
    cpus: float | None          # quota / period; None: unlimited


@dataclass(frozen=True)
class ProcessCgroup:
    version: str
    memory: str                 # cgroup path that sets its memory limit
    cpu: str                    # cgroup path that sets its CPU quota
    limits: Limits


def limit_files(mounts: CgroupMounts, cgroups: dict[str, str]) -> dict[str, Path]:
    """The files holding the memory limit and CPU quota of a process in ``cgroups``."""
    if mounts.version == "none":
        raise ValueError("no cgroup hierarchy with the cpu and memory controllers is mounted")
    if mounts.version == "v2":
        assert mounts.v2 is not None   # what version v2 means
        d = mounts.v2.path_of(cgroups.get("", "/"))
        return {"memory": d / "memory.max", "cpu": d / "cpu.max"}
    mem = mounts.v1["memory"].path_of(cgroups.get("memory", "/"))
    cpu = mounts.v1["cpu"].path_of(cgroups.get("cpu", "/"))
    return {"memory": mem / "memory.limit_in_bytes", "cpu_quota": cpu / "cpu.cfs_quota_us",
            "cpu_period": cpu / "cpu.cfs_period_us"}


def parse_limits(version: str, files: dict[str, str]) -> Limits:
    """Limits from the text of the files ``limit_files`` names (same keys)."""
    if version == "v2":
        mem = files["memory"].strip()
        quota, _, period = files["cpu"].strip().partition(" ")
        return Limits(None if mem == "max" else int(mem),
                      None if quota == "max" else int(quota) / int(period or 100000))
    mem_bytes = int(files["memory"].strip())
    quota_us = int(files["cpu_quota"].strip())
    return Limits(None if mem_bytes >= V1_UNLIMITED_BYTES else mem_bytes,
                  None if quota_us < 0 else quota_us / int(files["cpu_period"].strip()))


def process_cgroup(pid: int, mountinfo: str | None = None) -> ProcessCgroup:
    """Where process ``pid`` sits in the memory and CPU controllers, and its limits there."""
    mounts = parse_mountinfo(mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text())
    cgroups = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    files = limit_files(mounts, cgroups)
    limits = parse_limits(mounts.version, {k: p.read_text() for k, p in files.items()})
    if mounts.version == "v2":
        return ProcessCgroup("v2", cgroups.get("", "/"), cgroups.get("", "/"), limits)
    return ProcessCgroup(mounts.version, cgroups.get("memory", "/"), cgroups.get("cpu", "/"), limits)


def join_cgroups(pid: int, of_pid: int) -> None:
    """Move ``pid`` into every cgroup (v1 or v2) that ``of_pid`` is in."""
    try:
        lines = Path(f"/proc/{of_pid}/cgroup").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if path == "/":
            continue
        dirs = ([Path("/sys/fs/cgroup/unified") / path.lstrip("/"), Path("/sys/fs/cgroup") / path.lstrip("/")]
                if not ctrls else
                [Path("/sys/fs/cgroup") / c.removeprefix("name=") / path.lstrip("/") for c in ctrls.split(",")])
        for d in dirs:
            try:
                (d / "cgroup.procs").write_text(str(pid))
                break
            except OSError:
                continue


if __name__ == "__main__":   # on a server, where the process and the container are that kernel's
    import sys

    join_cgroups(int(sys.argv[1]), int(sys.argv[2]))
