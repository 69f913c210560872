"""Multicast trees over a topology: pure functions shared by the simulator, the
os-ken controller and the analysis (MINC needs the same tree the packets took).

A tree is a shortest-path tree (by link delay, ties broken by hop count then name) rooted
at the sender's switch, pruned to the switches that lead to a member, and, for a scoped
group, confined to the region's switches.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from rmptwin.model import HostSpec, LinkParams, Topology


def adjacency(topo: Topology, allowed: set[str] | None = None) -> dict[str, dict[str, float]]:
    """switch -> {neighbour: delay_ms}, optionally restricted to ``allowed`` switches."""
    adj: dict[str, dict[str, float]] = {s: {} for s in topo.switches if allowed is None or s in allowed}
    for link in topo.links:
        if link.a in adj and link.b in adj:
            adj[link.a][link.b] = link.delay_ms
            adj[link.b][link.a] = link.delay_ms
    return adj


def shortest_path_parents(adj: dict[str, dict[str, float]], root: str) -> dict[str, str | None]:
    """Dijkstra from ``root``; returns each reachable switch's parent (root -> None)."""
    parent: dict[str, str | None] = {root: None}
    best = {root: (0.0, 0, root)}
    heap = [(0.0, 0, root, root)]
    done: set[str] = set()
    while heap:
        d, hops, _, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, w in sorted(adj[u].items()):
            cand = (d + w, hops + 1, u)
            if v not in best or cand < best[v]:
                best[v] = cand
                parent[v] = u
                heapq.heappush(heap, (d + w, hops + 1, v, v))
    return parent


@dataclass(frozen=True)
class Tree:
    """A rooted tree of switches: ``children[s]`` are the switches s forwards to."""

    root: str
    children: dict[str, tuple[str, ...]]

    def edges(self) -> list[tuple[str, str]]:
        return [(p, c) for p, cs in sorted(self.children.items()) for c in cs]

    def below(self, switch: str) -> set[str]:
        """``switch`` and every switch under it."""
        out, todo = set(), [switch]
        while todo:
            s = todo.pop()
            out.add(s)
            todo.extend(self.children.get(s, ()))
        return out

    def path_to(self, switch: str) -> list[str]:
        parent = {c: p for p, cs in self.children.items() for c in cs}
        path = [switch]
        while path[-1] != self.root:
            path.append(parent[path[-1]])
        return path[::-1]


def multicast_tree(
    topo: Topology, root: str, members: set[str], region: str | None = None
) -> Tree:
    """Shortest-path tree from switch ``root`` to the switches in ``members``.

    With ``region``, only that region's switches may carry the group; members outside
    the region, or a root outside it, are not reached (a scoped group never leaks).
    """
    allowed = set(topo.regions[region]) if region is not None else None
    if allowed is not None and root not in allowed:
        return Tree(root=root, children={})
    parent = shortest_path_parents(adjacency(topo, allowed), root)
    keep: set[str] = set()
    for m in members:
        if m not in parent:
            continue
        s: str | None = m
        while s is not None and s not in keep:
            keep.add(s)
            s = parent[s]
    children: dict[str, list[str]] = {}
    for s in sorted(keep):
        p = parent[s]
        if p is not None:
            children.setdefault(p, []).append(s)
    return Tree(root=root, children={p: tuple(cs) for p, cs in children.items()})


def unicast_path(topo: Topology, a: str, b: str) -> list[str]:
    """Switches on the shortest path from switch ``a`` to switch ``b``."""
    parent = shortest_path_parents(adjacency(topo), a)
    path = [b]
    while path[-1] != a:
        path.append(parent[path[-1]])  # type: ignore[arg-type]  # only the root a maps to None, and the loop stops there
    return path[::-1]


def switch_path_links(topo: Topology, a: str, b: str) -> list[LinkParams]:
    """Each link on the shortest path from switch ``a`` to switch ``b``."""
    path = unicast_path(topo, a, b)
    return [topo.link(u, v) for u, v in zip(path, path[1:])]


def path_links(topo: Topology, a: HostSpec, b: HostSpec) -> list[LinkParams]:
    """Every link a packet from host ``a`` to host ``b`` crosses: both access links and the
    switch path between them."""
    return [a.link, b.link, *switch_path_links(topo, a.switch, b.switch)]


def links_delay_ms(links: list[LinkParams]) -> float:
    """The largest one-way delay over ``links``: each at its delay plus its jitter."""
    return sum(p.delay_ms + p.jitter_ms for p in links)


def worst_delays_from(topo: Topology, switch: str) -> dict[str, float]:
    """The largest one-way delay (each link at its delay plus its jitter) from ``switch`` to
    every switch it reaches, along the paths ``switch_path_links`` takes: one Dijkstra for all."""
    parent = shortest_path_parents(adjacency(topo), switch)
    out = {switch: 0.0}
    for v in parent:
        path = [v]   # v, its parent, ... up to a switch whose delay is known (the root at worst)
        while path[-1] not in out:
            path.append(parent[path[-1]])  # type: ignore[arg-type]  # the root is in out: the walk stops there
        for k in range(len(path) - 2, -1, -1):   # down again, each from its parent
            link = topo.link(path[k + 1], path[k])
            out[path[k]] = out[path[k + 1]] + link.delay_ms + link.jitter_ms
    return out


def worst_delay_ms(topo: Topology, a: HostSpec, b: HostSpec) -> float:
    """The largest one-way delay from host ``a`` to host ``b`` over ``path_links``."""
    return links_delay_ms(path_links(topo, a, b))
