"""Random fault schedules for a campaign: what `rmptwin chaos` draws, and from which
distributions (docs/fault-campaigns.md repeats them).

Per run, from ``random.Random(f"{seed}:{run}")``:

- the number of faults: uniform in 1..``max_faults`` (default 3); each fault's nemesis
  uniform over the ones asked for (``--nemesis``; default all six);
- when: ``at_s`` uniform over the first 80 % of the workload (workload.start_s ..
  start_s + 0.8 duration_s); how long (partition, pause, flap, dup, and the time a crashed
  node stays down): uniform in [0.1, 0.4] x workload.duration_s, cut so every fault is over
  by the end of the workload (the drain after it is left to recover in);
- crash: a ring member (primary or secondary) or a retransmit server; recovered after its
  down time with probability 1/2, else down to the end;
- partition: a uniformly drawn non-empty proper subset of the switches against the rest;
- pause: any ring member, retransmit server or reformation server;
- clock: a ring member; a jump uniform in [-200, 200] ms, a drift uniform in [-500, 500] ppm,
  or both (each with probability 1/3);
- flap: a switch link; period uniform in [50, 300] ms;
- dup: a switch link; duplicate and reorder chances uniform in [0, 0.3] (at least one of them
  drawn above 0), held back uniform in [5, 50] ms.

The majority bound (on unless ``majority=False``, `--no-majority`): a drawn fault is kept only
if at every instant fewer than half of the primaries are down, where down means crashed,
paused, or on the side of a partition holding fewer primaries. Clock, flap and dup faults
take nobody down. A fault that would break the bound is drawn again (at most 20 times, then
the run has fewer faults).

The recovery time: every fault is over when the workload ends, and a campaign runs each
schedule for at least ``model.drain.recovery_s`` after that, as Jepsen heals the
network and waits before its final reads. The checkers of liveness (no acknowledged message
lost, guaranteed customers gap-free) judge the end of the run, so a run that ends before the
ring could have recovered from its last fault would count slow recovery as loss.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

NEMESES = ("crash", "partition", "pause", "clock", "flap", "dup")
MAX_FAULTS = 3
INF = float("inf")


@dataclass(frozen=True)
class Plan:
    """What a campaign draws from: the experiment and the bounds."""

    nemeses: tuple[str, ...] = NEMESES
    max_faults: int = MAX_FAULTS
    majority: bool = True


def _r(x: float) -> float:
    return round(x, 3)


class _Drawer:
    def __init__(self, loaded: LoadedExperiment, rng: random.Random) -> None:
        topo, w = loaded.topology, loaded.experiment.workload
        self.rng, self.topo = rng, topo
        self.start, self.end = w.start_s, w.start_s + w.duration_s
        self.span = w.duration_s
        self.primaries = [h for h in topo.hosts if h.role == "primary"]
        self.ring = [h.name for h in topo.hosts if h.role in ("primary", "secondary")]
        self.crashable = self.ring + [h.name for h in topo.hosts if h.role == "retransmit"]
        self.pausable = self.crashable + [h.name for h in topo.hosts if h.role == "reformation"]
        self.links = [lk.name for lk in topo.links]

    def when(self) -> tuple[float, float]:
        at = self.start + self.rng.uniform(0, 0.8) * self.span
        dur = self.rng.uniform(0.1, 0.4) * self.span
        return _r(at), _r(max(0.05, min(dur, self.end - at)))

    def crash(self) -> list[dict[str, Any]]:
        at, dur = self.when()
        node = self.rng.choice(self.crashable)
        out = [{"at_s": at, "action": "crash", "node": node}]
        if self.rng.random() < 0.5:
            out.append({"at_s": _r(at + dur), "action": "recover", "node": node})
        return out

    def partition(self) -> list[dict[str, Any]]:
        sws = list(self.topo.switches)
        if len(sws) < 2:
            return []
        k = self.rng.randint(1, len(sws) - 1)
        at, dur = self.when()
        return [{"at_s": at, "action": "partition", "groups": [sorted(self.rng.sample(sws, k))], "duration_s": dur}]

    def pause(self) -> list[dict[str, Any]]:
        at, dur = self.when()
        return [{"at_s": at, "action": "pause", "node": self.rng.choice(self.pausable), "duration_s": dur}]

    def clock(self) -> list[dict[str, Any]]:
        at, _ = self.when()
        f = {"at_s": at, "action": "clock", "node": self.rng.choice(self.ring)}
        kind = self.rng.randrange(3)
        if kind in (0, 2):
            f["jump_ms"] = _r(self.rng.uniform(-200, 200))
        if kind in (1, 2):
            f["drift_ppm"] = _r(self.rng.uniform(-500, 500))
        return [f]

    def flap(self) -> list[dict[str, Any]]:
        at, dur = self.when()
        return [{"at_s": at, "action": "flap", "link": self.rng.choice(self.links),
                 "period_ms": _r(self.rng.uniform(50, 300)), "duration_s": dur}]

    def dup(self) -> list[dict[str, Any]]:
        at, dur = self.when()
        dup, reorder = _r(self.rng.uniform(0, 0.3)), _r(self.rng.uniform(0, 0.3))
        if not (dup or reorder):
            dup = 0.1
        return [{"at_s": at, "action": "dup_reorder", "link": self.rng.choice(self.links), "duplicate": dup,
                 "reorder": reorder, "reorder_ms": _r(self.rng.uniform(5, 50)), "duration_s": dur}]


def down_intervals(faults: list[dict[str, Any]], loaded: LoadedExperiment) -> list[tuple[float, float, frozenset[str]]]:
    """(from, to, primaries down) of each fault: crashed (until recovered), paused, or on the
    side of a partition with fewer primaries (a partition without duration: until a heal)."""
    topo = loaded.topology
    primaries = {h.name: h.switch for h in topo.hosts if h.role == "primary"}
    out: list[tuple[float, float, frozenset[str]]] = []
    recover: dict[str, list[float]] = {}
    for f in faults:
        if f["action"] == "recover":
            recover.setdefault(f["node"], []).append(f["at_s"])
    heals = sorted(f["at_s"] for f in faults if f["action"] == "heal")
    for f in faults:
        a, t = f["action"], f["at_s"]
        if a == "crash" and f["node"] in primaries:
            end = min([r for r in recover.get(f["node"], []) if r > t], default=INF)
            out.append((t, end, frozenset([f["node"]])))
        elif a == "pause" and f["node"] in primaries:
            out.append((t, t + f["duration_s"], frozenset([f["node"]])))
        elif a == "partition":
            named = {sw for g in f["groups"] for sw in g}
            sides = [set(g) for g in f["groups"]] + [set(topo.switches) - named]
            counts = [frozenset(p for p, sw in primaries.items() if sw in side) for side in sides]
            cut = sorted(counts, key=len)[:-1]   # every side but the one with the most primaries
            end = t + f["duration_s"] if f.get("duration_s") else min([h for h in heals if h > t], default=INF)
            out.append((t, end, frozenset().union(*cut) if cut else frozenset()))
    return out


def within_majority(faults: list[dict[str, Any]], loaded: LoadedExperiment) -> bool:
    """Fewer than half of the primaries down at every instant."""
    n = sum(1 for h in loaded.topology.hosts if h.role == "primary")
    iv = down_intervals(faults, loaded)
    for t, _, _ in iv:
        down = set().union(*(s for a, b, s in iv if a <= t < b))
        if 2 * len(down) >= n:
            return False
    return True


def draw(loaded: LoadedExperiment, plan: Plan, seed: int, run: int) -> list[dict[str, Any]]:
    """One run's schedule: fault dicts (as in an experiment YAML), in time order."""
    rng = random.Random(f"{seed}:{run}")
    d = _Drawer(loaded, rng)
    n = rng.randint(1, max(1, plan.max_faults))
    faults: list[dict[str, Any]] = []
    for _ in range(n):
        for _attempt in range(20):
            nem = rng.choice(plan.nemeses)
            new = getattr(d, nem)()
            if not new:
                continue
            if not plan.majority or within_majority(faults + new, loaded):
                faults += new
                break
    return sorted(faults, key=lambda f: f["at_s"])


def nemeses_of(faults: list[dict[str, Any]]) -> list[str]:
    """The campaign's nemesis names a schedule uses (dup_reorder is 'dup'; recover is crash's)."""
    names = {"dup_reorder": "dup", "recover": "crash", "heal": "partition", "link_down": "flap", "link_up": "flap"}
    return sorted({names.get(f["action"], f["action"]) for f in faults})
