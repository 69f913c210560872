"""Nemeses: an experiment's fault schedule as timed steps, and the one interpreter of those steps.

``steps(faults)`` turns the schedule into primitive steps in schedule order (a fault's own
steps follow each other; no sorting, so faults at one instant keep their order):

    crash, recover, link_down, link_up, loss     as written
    partition (groups, duration_s)               partition, then heal at + duration_s (if given)
    heal                                         every link a partition cut comes back
    pause (node, duration_s[, member])           pause, resume at + duration_s (member: one etcd member)
    clock (node, jump_ms, drift_ppm)             clock
    flap (link, period_ms, duration_s)           link_down, link_up, ... every period; ends up
    dup_reorder (link, duplicate, reorder, ...)  link_chaos, then link_calm at + duration_s (if given)

``FaultInterpreter`` applies a step to a backend through ``FaultTarget``, the few things a
backend must be able to do to a host or a link: the simulator (``rmptwin.sim.simulate``) and
the emulated runner (``rmptwin.emulation.emulate``) each implement it, so a partition cuts the
same links and a heal restores the same ones in both. Every time is true run time in ns, and
every duration in a step is in ns (a spec's ms become ns once, here).

``partition_links(topology, groups)`` names the switch links a partition cuts: those whose
ends are in different sets (the switches named in no set form one more set). Pure: the
fault and topology objects are read, never imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from rmptwin.errors import UserError

FAULT_FIELDS = ("node", "link", "loss", "groups", "drift_ppm", "duplicate", "reorder", "member")
DEFAULT_REORDER_NS = 20_000_000   # the spec's reorder_ms default


@dataclass(frozen=True)
class Step:
    at_ns: int
    action: str
    node: str | None = None
    link: str | None = None
    loss: Any = None                # a spec loss model, passed on as it is (read by linkmodel.loss_config)
    groups: tuple[tuple[str, ...], ...] | None = None
    jump_ns: int | None = None
    drift_ppm: float | None = None
    duplicate: float | None = None
    reorder: float | None = None
    reorder_ns: int = DEFAULT_REORDER_NS
    member: int | None = None      # pause/resume of one etcd member of a sequencer host


def _ns(s: float) -> int:
    return round(s * 1e9)


def _ms_ns(ms: float | None) -> int | None:
    return None if ms is None else round(ms * 1e6)


def _step(fault: Any, at_ns: int, action: str | None = None) -> Step:
    kw: dict[str, Any] = {k: getattr(fault, k, None) for k in FAULT_FIELDS}
    if kw["groups"] is not None:
        kw["groups"] = tuple(tuple(g) for g in kw["groups"])
    kw["jump_ns"] = _ms_ns(getattr(fault, "jump_ms", None))
    reorder_ns = _ms_ns(getattr(fault, "reorder_ms", None))
    if reorder_ns is not None:
        kw["reorder_ns"] = reorder_ns
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


class FaultTarget(Protocol):
    """What a backend does for each primitive step (``t``: true run time in ns)."""

    def crash(self, t: int, node: str) -> None: ...
    def recover(self, t: int, node: str) -> None: ...
    def pause(self, t: int, node: str, member: int | None) -> None: ...
    def resume(self, t: int, node: str, member: int | None) -> None: ...
    def set_link(self, t: int, link: str, up: bool) -> None: ...
    def set_loss(self, t: int, link: str, loss: Any) -> None: ...
    def set_chaos(self, t: int, link: str, duplicate: float, reorder: float, reorder_ns: int) -> None: ...
    def clock(self, t: int, node: str, jump_ns: int | None, drift_ppm: float | None) -> None: ...


class FaultInterpreter:
    """Applies steps to a ``FaultTarget``; keeps what spans steps (the links a partition cut)."""

    def __init__(self, topology: Any, target: FaultTarget) -> None:
        self.topology = topology
        self.target = target
        self.cut: list[str] = []   # links a partition cut, until it heals

    def apply(self, t: int, step: Step) -> None:
        a, do = step.action, self.target
        if a == "crash":
            do.crash(t, _node(step))
        elif a == "recover":
            do.recover(t, _node(step))
        elif a in ("link_down", "link_up"):
            do.set_link(t, _link(step), a == "link_up")
        elif a == "loss":
            do.set_loss(t, _link(step), step.loss)
        elif a == "partition":
            for link in partition_links(self.topology, step.groups or ()):
                if link not in self.cut:
                    self.cut.append(link)
                    do.set_link(t, link, False)
        elif a == "heal":
            for link in self.cut:
                do.set_link(t, link, True)
            self.cut = []
        elif a == "link_chaos":
            do.set_chaos(t, _link(step), step.duplicate or 0.0, step.reorder or 0.0, step.reorder_ns)
        elif a == "link_calm":
            do.set_chaos(t, _link(step), 0.0, 0.0, 0)
        elif a == "pause":
            do.pause(t, _node(step), step.member)
        elif a == "resume":
            do.resume(t, _node(step), step.member)
        elif a == "clock":
            do.clock(t, _node(step), step.jump_ns, step.drift_ppm)
        else:
            raise UserError(f"fault action {a!r}: no backend knows it")


def _node(step: Step) -> str:
    """The host a node step acts on (the spec requires one for these actions)."""
    if step.node is None:
        raise UserError(f"fault {step.action!r} at {step.at_ns} ns names no host")
    return step.node


def _link(step: Step) -> str:
    """The link a link step acts on (the spec requires one for these actions)."""
    if step.link is None:
        raise UserError(f"fault {step.action!r} at {step.at_ns} ns names no link")
    return step.link
