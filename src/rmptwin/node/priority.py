"""A higher scheduling priority for the release path, set by the runner (root) from outside.

A receiver (R_P, R_S) releases at ack ts + Delta_A; when its process is woken late the
release is late and the fairness spread grows with the machine's load, not the protocol.
The runner asks for, in order:

1. real-time round-robin at ``RT_PRIORITY``, one above the relays and the switch: a woken
   receiver preempts every other process at once (its work per wake-up is short). The kernel's RT throttling still leaves 5 % of each
   second to the others. With cgroup v1 RT group scheduling a Docker container's cgroup has
   no RT budget and the kernel refuses; then the container (and /docker above it) is given
   an RT budget, ``RT_BUDGET_US`` per second shared by the release-path containers, and RR
   is asked again. A receiver needing more CPU than its share would be throttled until the
   next second; at the quickstart's rates a receiver uses a few per cent of a CPU.
   If that fails too:
2. nice -10 *and* ``CPU_SHARES`` in the process's own cpu cgroup (only a container's: one
   whose path names docker). Inside its container a node is alone, so nice alone changes
   nothing against the other containers; their cgroups compete by cpu.shares (1024 each).
   And all containers together are one group under the root (``/docker``, 1024 shares):
   against every busy thread outside (the switch, a JVM) they would weigh as one, so for the
   run that group gets ``DOCKER_SHARES``. ``ReleasePriority.restore`` puts both back.
"""

from __future__ import annotations

import os
from pathlib import Path

CPU_SHARES = 8192      # 8x a default container's: the release path first when the CPUs are contended
DOCKER_SHARES = 32768  # every container together weighs like 32 busy processes outside, not 1
NICE = -10
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
RT_BUDGET_US = 900_000  # of the kernel's 950 000 per 1 s period
RT_PRIORITY = 2         # relays (emulation.relay.boost_priority) run at 1


def cpu_cgroup_of(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The cgroup v1 cpu controller path of ``pid`` (e.g. "/docker/<id>"), or None."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return None


class ReleasePriority:
    """Boosts release-path node processes; remembers the cgroup files it changed."""

    def __init__(self, n_release: int = 1, cgroup_cpu: Path = CGROUP_CPU) -> None:
        self.root = cgroup_cpu
        self.rt_each_us = RT_BUDGET_US // max(1, n_release)
        self.changed: dict[Path, str] = {}   # file -> its value before the run (in the order changed)

    def _write(self, path: Path, value: int) -> bool:
        try:
            old = path.read_text().strip()
            if int(old) < value:
                path.write_text(str(value))
                self.changed.setdefault(path, old)
            return True
        except (OSError, ValueError):
            return False

    def _raise_container_shares(self, pid: int) -> bool:
        container = self._container(pid)
        if container is None:
            return False
        self._write(container.parent / "cpu.shares", DOCKER_SHARES)
        return self._write(container / "cpu.shares", CPU_SHARES)

    def _container(self, pid: int) -> Path | None:
        path = cpu_cgroup_of(pid)
        if not path or "docker" not in path:
            return None  # never touch a cgroup that is not a container's
        return self.root / path.lstrip("/")

    def _rr(self, pid: int) -> bool:
        try:
            os.sched_setscheduler(pid, os.SCHED_RR, os.sched_param(RT_PRIORITY))
            return True
        except (OSError, AttributeError):
            return False

    def _rr_with_budget(self, pid: int) -> bool:
        container = self._container(pid)
        if container is None:
            return False
        return (self._write(container.parent / "cpu.rt_runtime_us", RT_BUDGET_US)
                and self._write(container / "cpu.rt_runtime_us", self.rt_each_us) and self._rr(pid))

    def boost(self, pid: int) -> str:
        """What ``pid`` got: "rr", "rr+budget", "nice+shares", "nice", "shares" or "none"."""
        if self._rr(pid):
            return "rr"
        if self._rr_with_budget(pid):
            return "rr+budget"
        return self.favour(pid)

    def favour(self, pid: int) -> str:
        """A source's scheduling: nice -10 and its container's ``CPU_SHARES``, no RT budget
        (that goes to the release path). Its publication timers are the ticker's schedule:
        on a loaded machine the real-time relays, switch and receivers leave the normal
        processes a fraction of the CPUs, and a source at the default weight fell seconds
        behind a 1,000 msg/s schedule (offering far less than the rate asked). What it got:
        "nice+shares", "nice", "shares" or "none"."""
        try:
            os.setpriority(os.PRIO_PROCESS, pid, NICE)
            got = "nice"
        except OSError:
            got = "none"
        if self._raise_container_shares(pid):
            got = "nice+shares" if got == "nice" else "shares"
        return got

    def restore(self) -> None:
        """The cgroup values from before the run (a container's own go with it anyway)."""
        for path, old in reversed(list(self.changed.items())):  # a child's RT budget before its parent's
            try:
                path.write_text(old)
            except OSError:
                pass  # the container is gone already
        self.changed.clear()
