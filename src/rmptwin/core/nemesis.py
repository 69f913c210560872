"""Nemeses: each fault of an experiment's schedule as timed steps, the same for both backends.

``steps(faults)`` turns the schedule into primitive steps in schedule order (a fault's own
steps follow each other; no sorting, so faults at one instant keep their order):

    crash, recover, link_down, link_up, loss     as written
    partition (groups, duration_s)               partition, then heal at + duration_s (if given)
    heal                                         every link a partition cut comes back
    pause (node, duration_s[, member])           pause, resume at + duration_s (member: one etcd member)
    clock (node, jump_ms, drift_ppm)             clock
    flap (link, period_ms, duration_s)           link_down, link_up, ... every period; ends up
    dup_reorder (link, duplicate, reorder, ...)  link_chaos, then link_calm at + duration_s (if given)

``partition_links(topology, groups)`` names the switch links a partition cuts: those whose
ends are in different sets (the switches named in no set form one more set). Pure: the
fault and topology objects are read, never imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

FAULT_FIELDS = ("node", "link", "loss", "groups", "jump_ms", "drift_ppm", "duplicate", "reorder", "reorder_ms",
                "member")


@dataclass(frozen=True)
class Step:
    at_ns: int
    action: str
    node: str | None = None
    link: str | None = None
    loss: Any = None                # a spec loss model, passed on as it is (read by linkmodel.loss_config)
    groups: tuple[tuple[str, ...], ...] | None = None
    jump_ms: float | None = None
    drift_ppm: float | None = None
    duplicate: float | None = None
    reorder: float | None = None
    reorder_ms: float = 20.0
    member: int | None = None      # pause/resume of one etcd member of a sequencer host


def _ns(s: float) -> int:
    return round(s * 1e9)


def _step(fault: Any, at_ns: int, action: str | None = None) -> Step:
    kw: dict[str, Any] = {k: getattr(fault, k, None) for k in FAULT_FIELDS}
    if kw["groups"] is not None:
        kw["groups"] = tuple(tuple(g) for g in kw["groups"])
    if kw["reorder_ms"] is None:
        kw.pop("reorder_ms")
    return Step(at_ns, action or fault.action, **kw)


def steps(faults: Iterable[Any]) -> list[Step]:
    """``faults``: the spec's fault schedule (read, never imported: a layer above)."""
    out: list[Step] = []
    for f in faults:
        t = _ns(f.at_s)
        a = f.action
        if a == "partition":
            out.append(_step(f, t))
            if f.duration_s is not None:
                out.append(Step(t + _ns(f.duration_s), "heal"))
        elif a == "pause":
            out += [_step(f, t), Step(t + _ns(f.duration_s), "resume", node=f.node, member=getattr(f, "member", None))]
        elif a == "flap":
            period, end = max(1, round(f.period_ms * 1e6)), t + _ns(f.duration_s)
            down, at = True, t
            while at < end:
                out.append(Step(at, "link_down" if down else "link_up", link=f.link))
                down, at = not down, at + period
            if not down:
                out.append(Step(end, "link_up", link=f.link))
        elif a == "dup_reorder":
            out.append(_step(f, t, "link_chaos"))
            if f.duration_s is not None:
                out.append(Step(t + _ns(f.duration_s), "link_calm", link=f.link))
        else:
            out.append(_step(f, t))
    return out


def partition_links(topology: Any, groups: Iterable[Iterable[str]]) -> list[str]:
    """Names of the switch links whose ends the partition ``groups`` puts in different sets."""
    side = {sw: -1 for sw in topology.switches}   # -1: the rest
    for i, g in enumerate(groups):
        for sw in g:
            side[sw] = i
    return [lk.name for lk in topology.links if side.get(lk.a, -1) != side.get(lk.b, -1)]
