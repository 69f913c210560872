"""This host's cost of a run's work, fitted from emulated runs and cached with its identity.

An emulated run keeps its CPUs busy two ways: work that comes with the run's virtual seconds
(a datagram a node handles, a frame a switch link carries: at a time dilation factor N the
same work is spread over N times the wall time) and a cost per wall second whatever the run
does (event loops, status reports, the switch, dockerd's stats, the samplers). So for each
role r, from the release to STOP,

    node CPU-s  = idle_r x nodes_r x window_s  +  per_datagram_r x datagrams_r

and for everything outside the nodes (the machine's busy time less the nodes')

    other CPU-s = idle_other x window_s  +  per_frame x switch-link frames.

Apart from CPU, the emulated path adds its own latency to every link (Open vSwitch, the relay,
a wake-up): wall time, so N times smaller in virtual time. The calibration keeps it per link
(the first-copy data delay emulated less simulated, times the factor, over the path's links),
and the plan holds it against the experiment's own path delays (``plan.LATENCY_SHARE``).

Two runs of the same experiment at two factors give the wall term and the work term apart
(``fit``); ``runner.calibrate`` makes them. A role the calibration never ran borrows the
dearest calibrated role's costs (said in the plan).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 2   # a change of what a calibration holds makes every cached one stale


@dataclass(frozen=True)
class RunSample:
    """What one emulated run measured: the planner's inputs and the machine's answer."""

    tdf: float
    run_s: float                     # virtual seconds the run lasted
    window_s: float                  # wall seconds from the release to the end of the drain
    wall_s: float                    # the whole run, set-up and collection included
    busy_cpus: float                 # the machine's mean busy CPUs over the window
    nodes: dict[str, int]            # role -> hosts
    datagrams: dict[str, float]      # role -> datagrams handled in the run (not per second)
    node_cpu_s: dict[str, float]     # role -> CPU-s its nodes used from the release to STOP
    switch_frames: float             # frames the switch-switch links carried in the run
    overloaded: bool = False
    path_excess_ms: float | None = None   # first-copy data delay p50, emulated less simulated (virtual ms)
    path_hops: float = 0.0                # the run's median links from a source to a receiver


@dataclass(frozen=True)
class RoleCost:
    idle_cpus: float                 # CPUs one node of the role keeps busy per wall second, idle
    cpu_us_per_datagram: float       # CPU per datagram handled, its timers folded in


@dataclass(frozen=True)
class Calibration:
    identity: dict[str, Any]
    roles: dict[str, RoleCost]
    other_idle_cpus: float           # outside the nodes, per wall second
    cpu_us_per_switch_frame: float   # outside the nodes, per frame over a switch-switch link
    setup_s_per_node: float          # wall time around the run (start, trees, collection) per node
    samples: list[RunSample] = field(default_factory=list)
    path_excess_ms_per_hop: float = 0.0   # the emulated path's own latency per link, wall ms

    def cost(self, role: str) -> tuple[RoleCost, bool]:
        """The role's cost, and whether it is borrowed (the calibration never ran the role)."""
        if role in self.roles:
            return self.roles[role], False
        dearest = max(self.roles.values(), key=lambda c: c.cpu_us_per_datagram, default=RoleCost(0.0, 0.0))
        idle = max((c.idle_cpus for c in self.roles.values()), default=0.0)
        return RoleCost(idle, dearest.cpu_us_per_datagram), True

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "identity": self.identity,
                "roles": {r: asdict(c) for r, c in sorted(self.roles.items())},
                "other_idle_cpus": self.other_idle_cpus, "cpu_us_per_switch_frame": self.cpu_us_per_switch_frame,
                "setup_s_per_node": self.setup_s_per_node, "path_excess_ms_per_hop": self.path_excess_ms_per_hop,
                "samples": [asdict(s) for s in self.samples]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(identity=d["identity"], roles={r: RoleCost(**c) for r, c in d["roles"].items()},
                   other_idle_cpus=d["other_idle_cpus"], cpu_us_per_switch_frame=d["cpu_us_per_switch_frame"],
                   setup_s_per_node=d["setup_s_per_node"], samples=[RunSample(**s) for s in d.get("samples", [])],
                   path_excess_ms_per_hop=d.get("path_excess_ms_per_hop", 0.0))


def _two_term_fit(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares y = a x1 + b x2 over ``rows`` of (x1, x2, y) with a, b >= 0: the
    unconstrained solution, or the better of the two one-term fits when it goes negative."""
    s11 = sum(x1 * x1 for x1, _, _ in rows)
    s22 = sum(x2 * x2 for _, x2, _ in rows)
    s12 = sum(x1 * x2 for x1, x2, _ in rows)
    s1y = sum(x1 * y for x1, _, y in rows)
    s2y = sum(x2 * y for _, x2, y in rows)
    det = s11 * s22 - s12 * s12
    if det > 1e-12 * max(s11 * s22, 1e-300):
        a, b = (s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det
        if a >= 0 and b >= 0:
            return a, b

    def sse(a: float, b: float) -> float:
        return sum((y - a * x1 - b * x2) ** 2 for x1, x2, y in rows)
    only_a = (max(0.0, s1y / s11) if s11 else 0.0, 0.0)
    only_b = (0.0, max(0.0, s2y / s22) if s22 else 0.0)
    return min(only_a, only_b, key=lambda ab: sse(*ab))


def fit(samples: list[RunSample], identity: dict[str, Any]) -> Calibration:
    """The costs ``samples`` (two or more runs at different factors) imply."""
    if len({s.tdf for s in samples}) < 2:
        raise ValueError("a calibration needs runs at two or more time dilation factors")
    roles: dict[str, RoleCost] = {}
    for role in sorted({r for s in samples for r in s.node_cpu_s}):
        rows = [(s.nodes.get(role, 0) * s.window_s, s.datagrams.get(role, 0.0), s.node_cpu_s[role])
                for s in samples if role in s.node_cpu_s]
        idle, per_dgram = _two_term_fit(rows)
        roles[role] = RoleCost(round(idle, 5), round(per_dgram * 1e6, 2))
    other = [(s.window_s, s.switch_frames, max(0.0, s.busy_cpus * s.window_s - sum(s.node_cpu_s.values())))
             for s in samples]
    other_idle, per_frame = _two_term_fit(other)
    setup = [(s.wall_s - s.tdf * s.run_s) / max(1, sum(s.nodes.values())) for s in samples]
    # The path's own latency is wall time (switch, relay, wake-ups): virtual excess x factor.
    excess = [s.path_excess_ms * s.tdf / s.path_hops for s in samples if s.path_excess_ms is not None and s.path_hops]
    return Calibration(identity, roles, round(other_idle, 4), round(per_frame * 1e6, 2),
                       round(max(0.0, sum(setup) / len(setup)), 3), list(samples),
                       round(max(0.0, sum(excess) / len(excess)), 4) if excess else 0.0)


# ---------------------------------------------------------------------- the host and its cache

def host_identity(node_mode: str, impair: str) -> dict[str, Any]:
    """What a calibration holds for: the CPU, how many, the memory, the kernel, the node mode
    and the link backend. Another of any of them is another host to the planner."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        pass
    return {"format": FORMAT, "cpu": model, "cpus": len(os.sched_getaffinity(0)), "memory_gb": mem_gb,
            "kernel": platform.release(), "node_mode": node_mode, "impair": impair}


def identity_key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def cache_dir() -> Path:
    """$RMPTWIN_CALIBRATION_DIR, else the user's cache ($XDG_CACHE_HOME or ~/.cache)/rmptwin/calibration."""
    if os.environ.get("RMPTWIN_CALIBRATION_DIR"):
        return Path(os.environ["RMPTWIN_CALIBRATION_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmptwin" / "calibration"


def cached(identity: dict[str, Any]) -> Calibration | None:
    """This host's calibration, or None when it has none (or only a stale or unreadable one)."""
    path = cache_dir() / f"{identity_key(identity)}.json"
    try:
        d = json.loads(path.read_text())
        if d.get("format") != FORMAT or d.get("identity") != identity:
            return None
        return Calibration.from_dict(d)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(cal: Calibration) -> Path:
    path = cache_dir() / f"{identity_key(cal.identity)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cal.to_dict(), indent=1))
    tmp.replace(path)
    return path
