"""Topology mistakes that would silence a role, found before a run.

A scoped remulticast (``region/<r>/<k>``) only crosses the switches of region r
(``tree.multicast_tree``), so a region cut in two, a customer outside its own region or a
region nobody remulticasts into leave a host that hears nothing, and a run that still
reports agreement and 0 lost. These rules catch that from the spec alone. Pure: no I/O.

Each finding is a ``Finding``: the YAML path it points at (for ``file:line``), the field as
printed, and the problem in one line. ``topology_errors`` and ``experiment_errors`` are
rejected by ``model.loading``; ``topology_warnings`` and ``experiment_warnings`` are legal but
likely unintended, printed by ``bound_warnings`` (``--strict`` makes them errors). Every rule
and warning, with an example line, is listed in docs/validation.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from rmptwin.core.striping import host_stripes, serves_stripe

if TYPE_CHECKING:
    from rmptwin.model.experiment import Experiment
    from rmptwin.model.hosts import CustomerHost, HostSpec
    from rmptwin.model.topology import Topology

# Hosts that remulticast a stripe into their regions (R_T), as ``factories.rmp`` has them.
RT_ROLES: Final = ("primary", "secondary")
# Roles whose ``regions`` are groups they join or send on: their switch must be in each.
REGION_ROLES = {
    "primary": "its remulticast into {r} would start outside the region and reach nobody",
    "secondary": "its remulticast into {r} would start outside the region and reach nobody",
    "retransmit": "it would never hear {r}'s remulticast, so it could repair nothing there",
    "customer": "it would never hear {r}'s remulticast",
    "exchange": "it would never hear {r}'s remulticast",
}


@dataclass(frozen=True)
class Finding:
    """One problem: where it is in the YAML, the field as printed, what is wrong."""

    path: tuple[str | int, ...]  # YAML path, e.g. ("regions", "east") or ("hosts", 3, "regions")
    field: str            # e.g. "regions.east"
    message: str
    key: str = ""         # warnings: a stable name (docs/validation.md lists them)


# ----------------------------------------------------------------------------- graph


def _adjacency(topo: Topology) -> dict[str, list[str]]:
    adj: dict[str, list[str]] = {s: [] for s in topo.switches}
    for link in topo.links:
        adj[link.a].append(link.b)
        adj[link.b].append(link.a)
    return adj


def _reach(adj: dict[str, list[str]], start: set[str], allowed: set[str] | None) -> dict[str, str | None]:
    """BFS from ``start`` over ``allowed`` switches (None: all): each reached switch's parent."""
    parent: dict[str, str | None] = {s: None for s in sorted(start)}
    todo = deque(sorted(start))
    while todo:
        u = todo.popleft()
        for v in adj[u]:
            if v not in parent and (allowed is None or v in allowed):
                parent[v] = u
                todo.append(v)
    return parent


def _path(parent: dict[str, str | None], end: str) -> list[str]:
    out = [end]
    while (up := parent[out[-1]]) is not None:
        out.append(up)
    return out[::-1]


def _hosts(topo: Topology) -> list[tuple[int, HostSpec]]:
    return list(enumerate(topo.hosts))


def _names(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")


# ----------------------------------------------------------------------------- topology


def _region_cut(topo: Topology) -> Finding | None:
    """(a) Every region's switches connected using the region's switches alone."""
    adj = _adjacency(topo)
    for region, members in topo.regions.items():
        inside = set(members)
        if not inside:
            continue
        roots = [h.switch for h in topo.hosts if h.role in RT_ROLES and region in h.regions and h.switch in inside]
        root = roots[0] if roots else members[0]
        held = _reach(adj, {root}, inside)
        cut = [s for s in members if s not in held]
        if not cut:
            continue
        lost = cut[0]
        way = _path(_reach(adj, set(held), None), lost)
        outside = [s for s in way if s not in inside]
        need = (f"its shortest path {' - '.join(way)} leaves the region at {', '.join(outside)}: add "
                f"{'it' if len(outside) == 1 else 'them'} to {region}, or link {way[0]} and {lost} directly"
                ) if outside else f"add a link from {way[0]} to {lost}"
        return Finding(("regions", region), f"regions.{region}",
                       f"switch {lost!r} is cut off from {root!r} inside region {region} (a region's remulticast "
                       f"only crosses the region's own switches, so hosts at {lost} would hear nothing); {need}")
    return None


def _switch_outside_region(topo: Topology) -> Finding | None:
    """(b) A host joining or sending on a region's group sits on one of its switches."""
    for i, h in _hosts(topo):
        why = REGION_ROLES.get(h.role)
        regions = list(getattr(h, "regions", []) or [])
        if h.role == "attacker" and h.region is not None:
            why, regions = "it could not reach the region's customers", [h.region]
        for r in regions if why else ():
            if h.switch not in topo.regions.get(r, ()):
                assert why is not None
                field = "region" if h.role == "attacker" else "regions"
                return Finding(("hosts", i, field), f"hosts.{i}.{field}",
                               f"{h.role} {h.name} is attached to switch {h.switch}, which is not in region {r} "
                               f"({r}: {', '.join(topo.regions[r]) or 'no switches'}): {why.format(r=r)}; attach it "
                               f"to one of the region's switches or add {h.switch} to {r}")
    return None


def _region_without_rt(topo: Topology) -> Finding | None:
    """(c) A region customers listen to has an R_T remulticasting into it."""
    fed = {r for h in topo.hosts if h.role in RT_ROLES for r in h.regions}
    for region in topo.regions:
        if region in fed:
            continue
        listeners = [h.name for h in topo.hosts if h.role == "customer" and region in h.regions]
        if listeners:
            return Finding(("regions", region), f"regions.{region}",
                           f"customers {_names(listeners)} listen to region {region}, but no primary or secondary "
                           f"remulticasts into it (add {region} to the regions of an R_P or R_S on its switches)")
    return None


def _retransmit_outside_region(topo: Topology) -> Finding | None:
    """(d) A guaranteed customer's R_x serves one of the customer's regions."""
    by_name: dict[str, Any] = {h.name: h for h in topo.hosts}   # the validator made h.retransmit an R_x
    for i, h in _hosts(topo):
        if h.role != "customer" or h.grade != "guaranteed" or h.retransmit is None:
            continue
        rx = by_name[h.retransmit]
        if not set(rx.regions) & set(h.regions):
            return Finding(("hosts", i, "retransmit"), f"hosts.{i}.retransmit",
                           f"guaranteed customer {h.name} (regions {', '.join(h.regions)}) re-requests from "
                           f"{rx.name}, which serves {', '.join(rx.regions)}: an R_x caches only its own regions' "
                           f"remulticast and repairs only requesters of its regions; name an R_x of "
                           f"{' or '.join(h.regions)}")
    return None


def _secondary_primary_stripes(topo: Topology) -> Finding | None:
    """A secondary ring on a stripe starts at its R_P, which must serve that stripe too."""
    by_name: dict[str, Any] = {h.name: h for h in topo.hosts}   # the validator made h.primary an R_P
    for i, h in _hosts(topo):
        if h.role != "secondary" or h.stripes is None:
            continue
        p = by_name[h.primary]
        missing = [k for k in h.stripes if not serves_stripe(p.stripes, k)]
        if missing:
            return Finding(("hosts", i, "stripes"), f"hosts.{i}.stripes",
                           f"secondary {h.name} serves stripe {missing[0]}, but its primary {p.name} does not "
                           f"(stripes {p.stripes}): the secondary ring of that stripe would have no R_P")
    return None


def topology_errors(topo: Topology) -> list[Finding]:
    """Rules (a)-(d) of docs/validation.md, in a fixed order."""
    checks = (_region_cut, _switch_outside_region, _region_without_rt, _retransmit_outside_region,
              _secondary_primary_stripes)
    return [f for f in (c(topo) for c in checks) if f is not None]


def topology_warnings(topo: Topology) -> list[Finding]:
    """Legal but likely unintended (docs/validation.md, warnings)."""
    out: list[Finding] = []
    named = {r for h in topo.hosts for r in (getattr(h, "regions", None) or [])}
    named |= {h.region for h in topo.hosts if h.role == "attacker" and h.region}
    listeners = {r for h in topo.hosts if h.role in ("customer", "retransmit", "exchange") for r in h.regions}
    unused = [r for r in topo.regions if r not in named]
    if unused:
        out.append(Finding(("regions", unused[0]), f"regions.{unused[0]}",
                           f"no host names region{'s' if len(unused) > 1 else ''} {_names(unused)}: "
                           f"{'they scope' if len(unused) > 1 else 'it scopes'} nothing", "region_unused"))
    for region in topo.regions:
        if region in named and region not in listeners and \
                any(h.role in RT_ROLES and region in h.regions for h in topo.hosts):
            out.append(Finding(("regions", region), f"regions.{region}",
                               f"R_T remulticast into region {region}, but no customer, R_x or exchange listens "
                               "there: every packet to it is wasted", "region_unheard"))
    hosts: list[Any] = topo.hosts   # getattr does not narrow a HostSpec to the roles that have retransmit
    asked = {h.retransmit for h in hosts if getattr(h, "retransmit", None)}
    for i, h in _hosts(topo):
        if h.role == "retransmit" and h.name not in asked:
            out.append(Finding(("hosts", i, "name"), f"hosts.{i}",
                               f"retransmit server {h.name} is named by no customer: it caches for nobody",
                               "retransmit_unused"))
        if h.role == "customer" and h.grade == "best_effort" and h.retransmit is not None:
            out.append(Finding(("hosts", i, "retransmit"), f"hosts.{i}.retransmit",
                               f"best-effort customer {h.name} names retransmit server {h.retransmit}, which it "
                               "never asks (best effort skips gaps); make it guaranteed or drop retransmit",
                               "best_effort_retransmit"))
    return out


# ----------------------------------------------------------------------------- experiment


def experiment_errors(exp: Experiment, topo: Topology,
                      customer_stripes: Callable[[CustomerHost], list[int]]) -> list[Finding]:
    """(e) and the stripe-level (c): every stripe in use has a primary ring, and every stripe a
    customer joins is remulticast into one of its regions. ``customer_stripes(host)`` is
    ``model.queries.customer_stripes`` bound to the experiment (passed in: the factories
    import the spec)."""
    n = exp.workload.stripes
    primaries = topo.hosts_with_role("primary")
    if not primaries:
        return []   # no token ring at all (venue, taxonomy): RMP stripes are unused
    out: list[Finding] = []
    for k in range(n):
        ring = [p.name for p in primaries if serves_stripe(p.stripes, k)]
        if ring:
            continue
        users = [h.name for h in topo.hosts if h.role in ("source", "secondary", "portal")
                 and k in host_stripes(getattr(h, "stripes", None), n)]
        users += [h.name for h in topo.hosts_with_role("customer") if k in customer_stripes(h)]
        if users:
            out.append(Finding(("workload", "stripes"), "workload.stripes",
                               f"stripe {k} has no primary (it needs a ring of at least 1 R_P; {_names(users)} use "
                               f"it): give a primary stripes including {k}, or leave its stripes out for all"))
            break
    rts = topo.hosts_with_role(*RT_ROLES)
    for h in topo.hosts_with_role("customer"):
        for k in customer_stripes(h):
            if not any(set(r.regions) & set(h.regions) and serves_stripe(r.stripes, k) for r in rts):
                out.append(Finding(("workload", "stripes"), "workload.stripes",
                                   f"customer {h.name} joins stripe {k}, but no primary or secondary serving "
                                   f"stripe {k} remulticasts into its regions ({', '.join(h.regions)})"))
                return out
    return out


def experiment_warnings(exp: Experiment, topo: Topology) -> list[Finding]:
    """A crash fault on the only primary of a stripe stops the stripe until it recovers."""
    n = exp.workload.stripes
    primaries = topo.hosts_with_role("primary")
    out: list[Finding] = []
    for i, f in enumerate(exp.faults):
        if f.action != "crash":
            continue
        for k in range(n):
            ring = [p.name for p in primaries if serves_stripe(p.stripes, k)]
            if ring == [f.node]:
                out.append(Finding(("faults", i, "node"), f"faults.{i}.node",
                                   f"crashes {f.node}, the only primary of stripe {k}: nothing is sequenced on it "
                                   "until it recovers (a ring of one cannot re-form)", "lone_primary_crashed"))
                break
    return out
