"""A topology from an Internet-Topology-Zoo-style graph (GraphML or GML), read with networkx.

What becomes what (also in docs/bring-your-own-topology.md):

- A node is a switch, named from its ``label`` (lower case, letters and digits, at most 12
  characters, so a table stays readable), made unique with a number.
- A link's one-way delay is the great-circle distance between its ends' ``Latitude`` and
  ``Longitude`` (haversine, mean Earth radius 6371.0088 km) at 2/3 of the speed of light in
  vacuum (199,861.6 km/s, light in fibre), times ``route_factor`` (default 1: real fibre runs
  longer than the great circle; say 1.2-1.5 to model that), plus ``overhead_ms`` per link
  (default 0.1 ms: switching and the local loops at both ends; it also keeps two nodes in
  one city from a 0 ms link):

      d = 2 R asin( sqrt( sin^2((lat2 - lat1)/2) + cos lat1 cos lat2 sin^2((lon2 - lon1)/2) ) )
      delay_ms = route_factor x d / 199.8616 km/ms + overhead_ms

- Bandwidth where the file gives it: ``LinkSpeedRaw`` (bit/s), else ``LinkSpeed`` with
  ``LinkSpeedUnits`` (k, M, G, T); else the link is unlimited.
- ``--loss P``: every switch link loses with Bernoulli probability P (the zoo has no loss).
- Regions: with ``region_by`` (a node attribute such as ``Country``), one region per connected
  group of nodes sharing a value of it (a value whose nodes form two islands gives two
  regions, ``<value>``, ``<value>2``); nodes without the attribute are in no region.
  Without it, one region ``net`` of every switch.

Stated choices for what a real graph holds:

- a node without coordinates: an error naming it, or with ``drop_uncoordinated`` the node
  and its links are left out (then the rest must still be connected);
- parallel edges: merged into one link (one delay: the same two cities); their bandwidths,
  where given, add up (parallel circuits add capacity);
- a self loop: left out (a link from a switch to itself carries nothing);
- a disconnected graph: an error naming the components, or with ``largest_component`` only
  the largest is kept.

Each choice made is returned as a note line, which the command prints.

Roles (``place_roles``), a small fixed rule set; ranking nodes by degree (then name):
sources on the highest-degree switches; per region (largest first) a primary R_P
remulticasting into it on the region's highest-degree switch, and an R_x beside it; further
primaries on the next highest-degree switches without one (no region); one reformation server
on the highest-degree switch; per region ``customers_per_region`` customers on the region's
switches farthest (by delay) from its R_T, alternately guaranteed (re-requesting from the
region's R_x) and best effort. ``primaries`` is raised to the number of regions if lower:
every region with customers needs an R_T inside it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmptwin.errors import UserError

if TYPE_CHECKING:
    import networkx as nx

EARTH_RADIUS_KM = 6371.0088
FIBRE_KM_PER_MS = 299_792.458 * 2 / 3 / 1000     # 2/3 c: 199.86 km per ms
UNIT = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


@dataclass(frozen=True)
class ImportOptions:
    region_by: str | None = None
    sources: int = 1
    primaries: int = 3
    customers_per_region: int = 2
    route_factor: float = 1.0
    overhead_ms: float = 0.1
    loss: float = 0.0
    drop_uncoordinated: bool = False
    largest_component: bool = False


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km between two points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def link_delay_ms(km: float, route_factor: float = 1.0, overhead_ms: float = 0.1) -> float:
    return route_factor * km / FIBRE_KM_PER_MS + overhead_ms


def read_graph(path: Path) -> nx.MultiGraph:
    """The file as a networkx MultiGraph (parallel edges kept for ``to_topology`` to merge)."""
    import networkx as nx

    suffix = path.suffix.lower()
    if not path.exists():
        raise UserError(f"{path}: no such file")
    try:
        if suffix == ".graphml":
            g = nx.read_graphml(path, force_multigraph=True)
        elif suffix == ".gml":
            g = nx.read_gml(path, label="id")
        else:
            raise UserError(f"{path}: expected a .graphml or .gml file")
    except UserError:
        raise
    except nx.NetworkXError as e:
        msg = str(e).splitlines()[0]
        hint = " (a GML with parallel edges must say 'multigraph 1')" if "duplicated" in msg else ""
        raise UserError(f"{path}: not a readable graph ({msg}){hint}") from None
    except Exception as e:   # a parse error from the XML or GML reader
        raise UserError(f"{path}: not a readable graph ({str(e).splitlines()[0] if str(e) else type(e).__name__})") \
            from None
    if g.is_directed():
        g = g.to_undirected()
    return nx.MultiGraph(g)


def _name(label: str) -> str:
    n = re.sub(r"[^a-z0-9]", "", label.lower())
    if not n or not n[0].isalpha():
        n = "n" + n
    return n[:12]


def _coord(attrs: dict[str, Any], key: str) -> float | None:
    v = attrs.get(key)
    try:
        return float(v) if v is not None and v != "" else None
    except (TypeError, ValueError):
        return None


def _bandwidth_mbps(attrs: dict[str, Any]) -> float | None:
    raw = attrs.get("LinkSpeedRaw")
    try:
        if raw not in (None, ""):
            return float(raw) / 1e6 if float(raw) > 0 else None
        speed, unit = attrs.get("LinkSpeed"), str(attrs.get("LinkSpeedUnits", "")).strip().lower()[:1]
        if speed not in (None, "") and unit in UNIT and float(speed) > 0:
            return float(speed) * UNIT[unit] / 1e6
    except (TypeError, ValueError):
        pass
    return None


def to_topology(path: Path, g: nx.MultiGraph, opts: ImportOptions, name: str) -> tuple[dict[str, Any], list[str]]:
    """(the topology's switches, regions and links as a YAML-shaped dict, notes on choices made)."""
    import networkx as nx

    notes: list[str] = []
    labels = {n: str(a.get("label", n)) for n, a in g.nodes(data=True)}
    missing = [n for n, a in g.nodes(data=True) if _coord(a, "Latitude") is None or _coord(a, "Longitude") is None]
    if missing:
        if not opts.drop_uncoordinated:
            shown = ", ".join(repr(labels[n]) for n in missing[:5]) + (" …" if len(missing) > 5 else "")
            raise UserError(f"{path}: {len(missing)} node(s) without Latitude/Longitude: {shown}; add coordinates "
                            "or pass --drop-uncoordinated to leave them out")
        g = g.copy()
        g.remove_nodes_from(missing)
        notes.append(f"left out {len(missing)} node(s) without coordinates: "
                     + ", ".join(labels[n] for n in missing))
    loops = list(nx.selfloop_edges(g))
    if loops:
        g = g.copy()
        g.remove_edges_from(loops)
        notes.append(f"left out {len(loops)} self loop(s): " + ", ".join(sorted({labels[u] for u, _ in loops})))
    if g.number_of_nodes() == 0:
        raise UserError(f"{path}: no node with coordinates")
    parts = sorted(nx.connected_components(g), key=lambda c: (-len(c), sorted(labels[n] for n in c)))
    if len(parts) > 1:
        if not opts.largest_component:
            others = "; ".join(", ".join(sorted(labels[n] for n in p)[:3]) for p in parts[1:4])
            raise UserError(f"{path}: the graph is not connected ({len(parts)} components; besides the largest "
                            f"({len(parts[0])} nodes): {others}); connect them or pass --largest-component")
        dropped = set().union(*parts[1:])
        g = g.subgraph(parts[0]).copy()
        notes.append(f"kept the largest component ({len(parts[0])} nodes), left out {len(dropped)}: "
                     + ", ".join(sorted(labels[n] for n in dropped)))
    nodes = sorted(g.nodes, key=lambda n: (labels[n], str(n)))
    names: dict[Any, str] = {}   # graph node -> switch name
    taken: set[str] = set()
    for n in nodes:
        base = _name(labels[n])
        cand, i = base, 2
        while cand in taken:
            cand = f"{base[:12 - len(str(i))]}{i}"
            i += 1
        taken.add(cand)
        names[n] = cand
    links: list[dict[str, Any]] = []
    merged = 0
    for u, v in sorted({tuple(sorted((a, b), key=lambda x: names[x])) for a, b in g.edges()},
                       key=lambda e: (names[e[0]], names[e[1]])):
        between = list(g.get_edge_data(u, v).values())
        merged += len(between) - 1
        au, av = g.nodes[u], g.nodes[v]
        lat_u, lon_u = _coord(au, "Latitude"), _coord(au, "Longitude")
        lat_v, lon_v = _coord(av, "Latitude"), _coord(av, "Longitude")
        # nodes without coordinates were left out above
        assert lat_u is not None and lon_u is not None and lat_v is not None and lon_v is not None
        km = haversine_km(lat_u, lon_u, lat_v, lon_v)
        row: dict[str, Any] = {"a": names[u], "b": names[v],
               "delay_ms": round(link_delay_ms(km, opts.route_factor, opts.overhead_ms), 3)}
        bws = [b for b in (_bandwidth_mbps(e) for e in between) if b is not None]
        if bws:
            row["bandwidth_mbps"] = round(sum(bws), 3)
        if opts.loss:
            row["loss"] = opts.loss
        links.append(row)
    if merged:
        notes.append(f"merged {merged} parallel edge(s) into one link each (bandwidths added)")
    regions = _regions(path, g, names, labels, opts.region_by)
    return {"name": name, "switches": [names[n] for n in nodes], "regions": regions, "links": links}, notes


def _regions(path: Path, g: nx.MultiGraph, names: dict[Any, str], labels: dict[Any, str],
             attr: str | None) -> dict[str, list[str]]:
    import networkx as nx

    if attr is None:
        return {"net": sorted(names.values())}
    values: dict[str, list[Any]] = {}
    for n, a in g.nodes(data=True):
        if a.get(attr) not in (None, ""):
            values.setdefault(str(a[attr]), []).append(n)
    if not values:
        raise UserError(f"{path}: --region-by {attr}: no node has attribute {attr!r}")
    regions: dict[str, list[str]] = {}
    for value in sorted(values):
        islands = sorted(nx.connected_components(g.subgraph(values[value])),
                         key=lambda c: (-len(c), sorted(names[n] for n in c)))
        base = re.sub(r"[^a-z0-9]", "", value.lower()) or "region"
        for i, island in enumerate(islands):
            key = base if i == 0 else f"{base}{i + 1}"
            while key in regions:
                key += "x"
            regions[key] = sorted(names[n] for n in island)
    return regions


def place_roles(topology: dict[str, Any], opts: ImportOptions) -> dict[str, Any]:
    """The topology with hosts placed by the rule set of the module docstring."""
    links = topology["links"]
    degree = {s: 0 for s in topology["switches"]}
    adj: dict[str, list[tuple[str, float]]] = {s: [] for s in topology["switches"]}
    for lk in links:
        degree[lk["a"]] += 1
        degree[lk["b"]] += 1
        adj[lk["a"]].append((lk["b"], lk["delay_ms"]))
        adj[lk["b"]].append((lk["a"], lk["delay_ms"]))
    ranked = sorted(topology["switches"], key=lambda s: (-degree[s], s))
    hosts: list[dict[str, Any]] = []

    def host(name: str, role: str, switch: str, **extra: Any) -> None:
        hosts.append({"name": name, "role": role, "switch": switch, "link": {"delay_ms": 0.1}, **extra})

    for i in range(opts.sources):
        host(f"src{i + 1}", "source", ranked[i % len(ranked)])
    regions = sorted(topology["regions"].items(), key=lambda kv: (-len(kv[1]), kv[0]))
    rt: dict[str, str] = {}
    for i, (region, members) in enumerate(regions):
        site = min(members, key=lambda s: (-degree[s], s))
        rt[region] = site
        host(f"rp{i + 1}", "primary", site, regions=[region])
    placed = set(rt.values())
    n = len(regions)
    for s in ranked:
        if n >= opts.primaries:
            break
        if s not in placed:
            n += 1
            placed.add(s)
            host(f"rp{n}", "primary", s)
    while n < opts.primaries:   # fewer switches than primaries: share the busiest
        n += 1
        host(f"rp{n}", "primary", ranked[(n - 1) % len(ranked)])
    if opts.customers_per_region:
        for i, (region, _) in enumerate(regions):
            host(f"rx{i + 1}", "retransmit", rt[region], regions=[region])
    host("xr1", "reformation", ranked[0])
    for i, (region, members) in enumerate(regions):
        far = _distances(adj, rt[region], set(members))
        order = sorted(members, key=lambda s: (-far.get(s, 0.0), s))
        for j in range(opts.customers_per_region):
            extra = {"retransmit": f"rx{i + 1}"} if j % 2 == 0 else {"grade": "best_effort"}
            host(f"c{i + 1}n{j + 1}", "customer", order[j % len(order)], regions=[region], **extra)
    return {**topology, "hosts": hosts}


def _distances(adj: dict[str, list[tuple[str, float]]], root: str, allowed: set[str]) -> dict[str, float]:
    """Delay from ``root`` to every switch of ``allowed``, over links inside it (Dijkstra)."""
    import heapq

    dist = {root: 0.0}
    heap = [(0.0, root)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist.get(u, math.inf):
            continue
        for v, w in adj[u]:
            if v in allowed and d + w < dist.get(v, math.inf):
                dist[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return dist


def import_graph(path: Path, opts: ImportOptions, name: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """(topology dict with roles placed, notes): the whole of `rmptwin topo import`."""
    from rmptwin.model import Topology

    for what, v in (("--sources", opts.sources), ("--primaries", opts.primaries)):
        if v < 1:
            raise UserError(f"{what} must be at least 1, got {v}")
    if opts.customers_per_region < 0 or opts.customers_per_region > 9:
        raise UserError(f"--customers-per-region must be in 0..9, got {opts.customers_per_region}")
    if not 0.0 <= opts.loss < 1.0 or opts.route_factor < 1.0 or opts.overhead_ms < 0:
        raise UserError("--loss must be in [0, 1), --route-factor at least 1, --overhead-ms at least 0")
    g = read_graph(path)
    name = name or re.sub(r"[^a-z0-9-]", "", path.stem.lower()) or "imported"
    topology, notes = to_topology(path, g, opts, name)
    if len(topology["regions"]) > 9:
        raise UserError(f"{path}: --region-by {opts.region_by} gives {len(topology['regions'])} regions; at most 9 "
                        "(host names are at most 10 characters): choose a coarser attribute")
    topology = place_roles(topology, ImportOptions(**{**opts.__dict__,
                                                      "primaries": max(opts.primaries, len(topology["regions"]))}))
    try:
        Topology.model_validate(topology)
    except Exception as e:
        raise UserError(f"{path}: imported topology is not valid ({str(e).splitlines()[-1].strip()})") from None
    return topology, notes
