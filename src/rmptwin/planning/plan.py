"""The time dilation factor an emulated run needs on this host, and what a run showed of it.

At factor N the run's work (``demand.Demand``, per virtual second) is spread over N wall
seconds, the idle costs are not: busy CPUs = idle + work / N (``calibration``). The plan is
the smallest factor of ``LADDER`` whose busy CPUs stay within ``HEADROOM`` of the host's CPUs
and whose emulated path adds little latency against the experiment's own (``LATENCY_SHARE``).
The CPU's rest is for bursts a mean does not show: a fair release wakes every receiver,
remulticaster and customer at one instant, and a customer's timer due then waits behind the
release path (real-time priority) and the relays. Measured on a 2-CPU machine
(docs/virtual-time.md), the quickstart was flagged overloaded by such bursts at factors 1 and
1.5 in every ladder and at 2 or 3 in some, at 0.57-1.06 CPUs busy on average, and on time at 4
and above (0.34-0.54): a quarter of the CPUs is what the plan allows. After the run, ``assess``
puts the machine's measured busy CPUs beside the prediction and, for a run that was overloaded,
names the factor that would have been enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rmptwin.planning.calibration import Calibration
from rmptwin.planning.demand import Demand

LADDER = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0)
HEADROOM = 0.25   # plan for at most this share of the CPUs busy on average (bursts: see above)
# The emulated path's own latency (calibration.path_excess_ms_per_hop, wall) may add at most this
# share of the median source-to-receiver delay in virtual time. On a generated tree of 1-4 ms
# links (a 10 ms median path) a repair reached the token site 0.34 ms before its tick simulated
# (tests/runtime/test_generated_twin.py): with 3.7 ms of added latency at factor 1, and 1.6 ms at
# factor 3 in one run of two, it lost that race and control per data left its rule.
LATENCY_SHARE = 0.03


@dataclass(frozen=True)
class Prediction:
    tdf: float
    busy_cpus: float                        # mean over the run's window
    roles: dict[str, float]                 # role -> CPUs its nodes keep busy
    other_cpus: float                       # relays, switch, captures, daemons
    wall_s: float                           # the whole run, set-up included
    idle_cpus: float                        # of busy_cpus, what the run keeps busy whatever it does
    borrowed: tuple[str, ...] = ()          # roles costed as the dearest calibrated one
    path_excess_ms: float = 0.0             # the emulated path's own latency on a median path, virtual ms
    bound_by: str = "cpu"                   # what set the factor: cpu, or latency


def predict(demand: Demand, cal: Calibration, tdf: float) -> Prediction:
    """Busy CPUs and wall time of a run with ``demand`` at factor ``tdf`` on the calibrated host."""
    roles: dict[str, float] = {}
    borrowed = []
    outside = cal.other_idle(demand.elements)
    idle = outside
    for role, n in sorted(demand.nodes.items()):
        cost, lent = cal.cost(role)
        if lent:
            borrowed.append(role)
        idle += cost.idle_cpus * n
        roles[role] = cost.idle_cpus * n + cost.cpu_us_per_datagram * 1e-6 * demand.datagrams.get(role, 0.0) / tdf
    other = outside + cal.cpu_us_per_switch_frame * 1e-6 * demand.switch_frames / tdf
    wall = cal.setup_s_per_node * sum(demand.nodes.values()) + tdf * demand.run_s
    excess = cal.path_excess_ms_per_hop * demand.path_hops / tdf
    return Prediction(tdf, sum(roles.values()) + other, roles, other, wall, idle, tuple(borrowed), excess)


def latency_ok(p: Prediction, demand: Demand) -> bool:
    """The emulated path's own latency within ``LATENCY_SHARE`` of the median path's delay."""
    return p.path_excess_ms <= LATENCY_SHARE * demand.path_delay_ms


def choose(demand: Demand, cal: Calibration, cpus: int | None = None, headroom: float = HEADROOM) -> Prediction:
    """The smallest factor of ``LADDER`` on time and whose path latency is small against the
    experiment's delays; the largest when none is (said by its figures)."""
    cpus = cpus or int(cal.identity.get("cpus") or 1)
    first_fit: Prediction | None = None   # the smallest factor the CPU allows (busy falls with N)
    for tdf in LADDER:
        p = predict(demand, cal, tdf)
        if first_fit is None and p.busy_cpus <= headroom * cpus:
            first_fit = p
        if first_fit is not None and latency_ok(p, demand):
            return p if p is first_fit else replace(p, bound_by="latency")
    return first_fit or p


def enough_tdf(tdf: float, busy_cpus: float, idle_cpus: float, cpus: int, headroom: float = HEADROOM) -> float:
    """The factor at which a run that kept ``busy_cpus`` busy at ``tdf`` (``idle_cpus`` of
    them whatever it did) would have used ``headroom`` of ``cpus``: its work scaled by tdf/N.
    A run pinned at all its CPUs did more work than it shows: the answer is then a floor."""
    work = max(0.0, busy_cpus - idle_cpus) * tdf
    room = headroom * cpus - idle_cpus
    if room <= 0:
        return math.inf
    need = work / room
    return next((n for n in LADDER if n >= need), LADDER[-1])


def plan_record(pred: Prediction, demand: Demand, cal: Calibration, requested: Any) -> dict[str, Any]:
    """The plan as the manifest and the summary keep it."""
    return {"requested": requested, "tdf": pred.tdf, "headroom": HEADROOM, "cpus": cal.identity.get("cpus"),
            "predicted_busy_cpus": round(pred.busy_cpus, 3),
            "predicted_roles_cpus": {r: round(v, 3) for r, v in pred.roles.items()},
            "predicted_other_cpus": round(pred.other_cpus, 3), "predicted_idle_cpus": round(pred.idle_cpus, 3),
            "predicted_wall_s": round(pred.wall_s, 1), "bound_by": pred.bound_by,
            "predicted_path_excess_ms": round(pred.path_excess_ms, 3), "latency_share": LATENCY_SHARE,
            "borrowed_roles": list(pred.borrowed), "demand": demand.to_dict(),
            "calibration": {"identity": cal.identity, "runs": len(cal.samples)}}


def assess(record: dict[str, Any], load: dict[str, Any], overloaded: bool) -> dict[str, Any]:
    """The plan beside what the run measured: busy CPUs, the prediction's error, and for an
    overloaded run the factor that would have been enough (a run without a calibration counts
    every busy CPU as work: its answer is then an upper bound)."""
    out = dict(record)
    idle_cpus = float(record.get("predicted_idle_cpus") or 0.0)
    busy = load.get("busy_cpus")
    cpus = int(load.get("cpus") or record.get("cpus") or 1)
    out["measured_busy_cpus"] = busy
    if busy is not None and record.get("predicted_busy_cpus") is not None:
        out["error_pct"] = round(100.0 * (record["predicted_busy_cpus"] - busy) / busy, 1) if busy else None
    out["on_time"] = not overloaded
    if overloaded and busy is not None:
        n = enough_tdf(record["tdf"], busy, idle_cpus, cpus)
        out["enough_tdf"] = None if math.isinf(n) else n
        out["enough_tdf_is_floor"] = busy >= 0.95 * cpus
    return out


def describe(pred: Prediction, cpus: int) -> str:
    """One line: the factor, the CPUs it keeps busy, and the wall time it takes."""
    why = (f"; set by the path's own latency, {pred.path_excess_ms:.2f} ms on a median path"
           if pred.bound_by == "latency" else "")
    return (f"time dilation {pred.tdf:g}: {pred.busy_cpus:.2f} of {cpus} CPUs busy predicted "
            f"(plan for <= {HEADROOM * cpus:.1f}){why}, about {pred.wall_s:.0f} s of wall time")
