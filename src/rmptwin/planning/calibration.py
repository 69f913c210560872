"""This host's cost of a run's work, fitted from emulated runs and cached with its identity.

An emulated run keeps its CPUs busy two ways: work that comes with the run's virtual seconds
(a datagram a node handles, a frame a switch link carries: at a time dilation factor N the
same work is spread over N times the wall time) and a cost per wall second whatever the run
does (event loops, status reports, the switch, dockerd's stats, the samplers). So for each
role r, from the release to STOP,

    node CPU-s  = idle_r x nodes_r x window_s  +  per_datagram_r x datagrams_r

and for everything outside the nodes (the machine's busy time less the nodes')

    other CPU-s = (idle_other + idle_element x elements) x window_s  +  per_frame x switch-link frames,

where elements are the run's hosts and switches: each has its relays, switch ports, container
stream and sampler that cost CPU per wall second, and the controller and the runner's own
samplers do not grow with them. Measured here, a 3-switch line keeps 0.08 CPUs busy this way
and the quickstart (10 switches, 31 hosts) 0.2: one constant alone over-predicted the line by
70 %.

Apart from CPU, the emulated path adds its own latency to every link (Open vSwitch, the relay,
a wake-up): wall time, so N times smaller in virtual time. The calibration keeps it per link
(the first-copy data delay emulated less simulated, times the factor, over the path's links),
and the plan holds it against the experiment's own path delays (``plan.LATENCY_SHARE``).

Runs at two factors give the wall term and the work term apart, and runs of two sizes the
constant and the per-element idle (``fit``); ``runner.calibrate`` makes them. A role run at one
factor only (the venue's) takes the median idle of the others, the rest of its CPU being work.
A role the calibration never ran borrows the dearest calibrated role's costs (said in the plan).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# A change of what a calibration holds, or of what the nodes it measured cost, makes every cached
# one stale. 4: a release deadline's early wake is slept, not spun (node.driver.SPIN_WALL_S): a
# calibration of the spinning nodes over-predicted line3 at factor 1.5 2.1-fold.
# 5: a run of line3 at factor 1 (runner.calibrate.CALIBRATION_RUNS) measures the path's latency.
FORMAT = 5


def network_elements(nodes: dict[str, int], switches: int) -> int:
    """Hosts and switches: what the idle cost outside the nodes grows with."""
    return sum(nodes.values()) + switches


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
    switches: int = 0                     # the run's switches (its hosts are ``nodes``)

    @property
    def elements(self) -> int:
        return network_elements(self.nodes, self.switches)


@dataclass(frozen=True)
class RoleCost:
    idle_cpus: float                 # CPUs one node of the role keeps busy per wall second, idle
    cpu_us_per_datagram: float       # CPU per datagram handled, its timers folded in


@dataclass(frozen=True)
class Calibration:
    identity: dict[str, Any]
    roles: dict[str, RoleCost]
    other_idle_cpus: float           # outside the nodes, per wall second, whatever the run's size
    cpu_us_per_switch_frame: float   # outside the nodes, per frame over a switch-switch link
    setup_s_per_node: float          # wall time around the run (start, trees, collection) per node
    samples: list[RunSample] = field(default_factory=list)
    path_excess_ms_per_hop: float = 0.0   # the emulated path's own latency per link, wall ms
    other_idle_cpus_per_element: float = 0.0   # outside the nodes, per host or switch, per wall second

    def other_idle(self, elements: int) -> float:
        """CPUs a run of ``elements`` hosts and switches keeps busy outside its nodes, idle."""
        return self.other_idle_cpus + self.other_idle_cpus_per_element * elements

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
                "other_idle_cpus_per_element": self.other_idle_cpus_per_element,
                "setup_s_per_node": self.setup_s_per_node, "path_excess_ms_per_hop": self.path_excess_ms_per_hop,
                "samples": [asdict(s) for s in self.samples]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(identity=d["identity"], roles={r: RoleCost(**c) for r, c in d["roles"].items()},
                   other_idle_cpus=d["other_idle_cpus"], cpu_us_per_switch_frame=d["cpu_us_per_switch_frame"],
                   setup_s_per_node=d["setup_s_per_node"], samples=[RunSample(**s) for s in d.get("samples", [])],
                   path_excess_ms_per_hop=d.get("path_excess_ms_per_hop", 0.0),
                   other_idle_cpus_per_element=d.get("other_idle_cpus_per_element", 0.0))


def _nonnegative_fit(rows: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    """Least squares y = sum(c_i x_i) over ``rows`` of (x_1, ..., x_k, y) with every c_i >= 0.

    Every subset of the terms is solved and the best non-negative one kept (k is 2 or 3 here).
    When terms are collinear (a calibration of one size cannot tell the constant idle from the
    idle per element) the smallest subset listed first wins: the earlier term takes it all."""
    x = np.array([r[:-1] for r in rows], dtype=float)
    y = np.array([r[-1] for r in rows], dtype=float)
    k = x.shape[1]
    best: tuple[float, int, tuple[float, ...]] | None = None
    scale = max(float(y @ y), 1e-300)
    for size in range(1, k + 1):
        for cols in itertools.combinations(range(k), size):
            sub = x[:, cols]
            if np.linalg.matrix_rank(sub) < size:
                continue
            c = np.linalg.lstsq(sub, y, rcond=None)[0]
            if (c < 0).any():
                continue
            sse = float(((sub @ c - y) ** 2).sum())
            if best is None or sse < best[0] - 1e-9 * scale:
                coef = [0.0] * k
                for i, v in zip(cols, c):
                    coef[i] = float(v)
                best = (sse, size, tuple(coef))
    return best[2] if best else (0.0,) * k


def fit(samples: list[RunSample], identity: dict[str, Any]) -> Calibration:
    """The costs ``samples`` (two or more runs at different factors) imply."""
    if len({s.tdf for s in samples}) < 2:
        raise ValueError("a calibration needs runs at two or more time dilation factors")
    roles: dict[str, RoleCost] = {}
    every = sorted({r for s in samples for r in s.node_cpu_s})
    rows_of = {role: [(s.nodes.get(role, 0) * s.window_s, s.datagrams.get(role, 0.0), s.node_cpu_s[role])
                      for s in samples if role in s.node_cpu_s] for role in every}
    once = {role for role in every if len({s.tdf for s in samples if role in s.node_cpu_s}) < 2}
    for role in every:
        if role not in once:
            idle, per_dgram = _nonnegative_fit(rows_of[role])
            roles[role] = RoleCost(round(idle, 5), round(per_dgram * 1e6, 2))
    # A role run at one factor only (the venue's) cannot part its idle from its work: it takes
    # the median idle of the roles that could, and the rest of its CPU is work.
    typical = sorted(c.idle_cpus for c in roles.values())
    idle_once = typical[len(typical) // 2] if typical else 0.0
    for role in sorted(once):
        rows = rows_of[role]
        work = sum(max(0.0, cpu - idle_once * node_s) for node_s, _, cpu in rows)
        dgrams = sum(d for _, d, _ in rows)
        roles[role] = RoleCost(round(idle_once, 5), round(work / dgrams * 1e6 if dgrams else 0.0, 2))
    other = [(s.window_s, s.window_s * s.elements, s.switch_frames,
              max(0.0, s.busy_cpus * s.window_s - sum(s.node_cpu_s.values()))) for s in samples]
    other_idle, per_element, per_frame = _nonnegative_fit(other)
    setup = [(s.wall_s - s.tdf * s.run_s) / max(1, sum(s.nodes.values())) for s in samples]
    return Calibration(identity, roles, round(other_idle, 4), round(per_frame * 1e6, 2),
                       round(max(0.0, sum(setup) / len(setup)), 3), list(samples),
                       round(path_excess_per_hop(samples), 4), round(per_element, 5))


def path_excess_per_hop(samples: Sequence[RunSample]) -> float:
    """The emulated path's own latency per link, in wall ms, from the samples' virtual excess.

    That latency is wall time (switch, relay, wake-ups), so a run at factor t over h links shows
    c * h / t of it in virtual time: c is fitted by least squares through the origin, kept
    non-negative (``_nonnegative_fit`` with one term). A plain
    mean of each sample's excess x t / h is not used: at a high factor the excess is smaller than
    the p50's own noise (it was negative, -0.11 ms at 8), and x 8 that noise cancelled the one
    clear signal (0.55 ms at factor 3), planning factor 1 for a tree that then raced (CI, 2026-11-30)."""
    rows = [(s.path_hops / s.tdf, s.path_excess_ms) for s in samples if s.path_excess_ms is not None and s.path_hops]
    return _nonnegative_fit(rows)[0] if rows else 0.0


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


def cache_path(identity: dict[str, Any]) -> Path:
    """Where the calibration of the host ``identity`` names is kept."""
    return cache_dir() / f"{identity_key(identity)}.json"


def cached(identity: dict[str, Any]) -> Calibration | None:
    """This host's calibration, or None when it has none (or only a stale or unreadable one)."""
    path = cache_path(identity)
    try:
        d = json.loads(path.read_text())
        if d.get("format") != FORMAT or d.get("identity") != identity:
            return None
        cal = Calibration.from_dict(d)
        # The samples are the measurement and the fit is code: refit, so a better fit applies to
        # a calibration made before it without running the calibration again.
        return fit(cal.samples, identity) if len({s.tdf for s in cal.samples}) >= 2 else cal
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(cal: Calibration) -> Path:
    path = cache_path(cal.identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cal.to_dict(), indent=1))
    tmp.replace(path)
    return path
