"""Where each switch of a topology runs when the emulated network spans several servers.

A pure function of the topology and the server names, printed before a run and recorded in
its manifest. Hosts run beside their switch (an access link never crosses servers), and so
does a relay (on its first switch's server). What is placed is the switches, with two aims
that pull apart:

- **Balance.** A server's work is about its hosts (each runs a protocol node): a switch
  weighs 1 plus its hosts. No server may carry more than ``SLACK`` times an even share (or
  its heaviest switch, which cannot be split).
- **Few cut links.** Every switch link between servers is an SSH tunnel: a per-datagram cost
  and latency the topology did not ask for. Regions (the remulticast scopes) are placed
  whole where the balance allows, since their traffic stays inside them; then single
  switches move wherever that cuts fewer links without breaking the balance.

Deterministic: the same topology and servers give the same placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rmptwin.errors import UserError
from rmptwin.model import Topology
from rmptwin.model.tree import adjacency

SLACK = 1.25   # a server may carry up to 1.25 x an even share of the work


@dataclass(frozen=True)
class Placement:
    servers: tuple[str, ...]
    switch_server: dict[str, str]          # spec switch name -> server
    cut_links: tuple[str, ...]             # switch links whose ends are on different servers
    how: str = "regions"                   # the placer: one of PLACEMENTS

    def host_server(self, topo: Topology) -> dict[str, str]:
        return {h.name: self.switch_server[h.switch] for h in topo.hosts}

    def load(self, topo: Topology) -> dict[str, int]:
        """Server -> its work (switches plus hosts)."""
        w = _weights(topo)
        out = dict.fromkeys(self.servers, 0)
        for s, server in self.switch_server.items():
            out[server] += w[s]
        return out

    def lines(self, topo: Topology) -> list[str]:
        """What a run prints before it starts: a server a line, then the cut links."""
        hosts = self.host_server(topo)
        out = []
        for server in self.servers:
            sws = [s for s in topo.switches if self.switch_server[s] == server]
            n = sum(1 for h in hosts.values() if h == server)
            out.append(f"{server}: {len(sws)} switches ({', '.join(sws) or '-'}), {n} hosts")
        out.append(f"cut links ({len(self.cut_links)}, SSH tunnels): {', '.join(self.cut_links) or 'none'}")
        return out

    def to_json(self) -> dict[str, object]:
        return {"how": self.how, "servers": list(self.servers), "switch_server": self.switch_server,
                "cut_links": list(self.cut_links)}


def _weights(topo: Topology) -> dict[str, int]:
    w = dict.fromkeys(topo.switches, 1)
    for h in topo.hosts:
        w[h.switch] += 1
    return w


def _cut(topo: Topology, where: dict[str, str]) -> tuple[str, ...]:
    return tuple(lk.name for lk in topo.links if where[lk.a] != where[lk.b])


def _blocks(topo: Topology) -> list[list[str]]:
    """Switches grouped by the first region that lists them (regions overlap); the rest alone."""
    first: dict[str, str] = {}
    for region, members in topo.regions.items():
        for s in members:
            first.setdefault(s, region)
    by_region: dict[str, list[str]] = {}
    alone: list[list[str]] = []
    for s in topo.switches:
        if s in first:
            by_region.setdefault(first[s], []).append(s)
        else:
            alone.append([s])
    return [*by_region.values(), *alone]


PLACEMENTS = ("regions", "bins")


def place(topo: Topology, servers: Sequence[str], how: str = "regions") -> Placement:
    """``regions`` (the default): the best of three starts, each refined: regions whole
    (largest first onto the least loaded server), the switches in breadth-first order cut into
    consecutive runs of about equal work (a tree splits into subtrees), and single switches
    heaviest first (balance alone). A start within the balance beats one that is not, then
    fewer cut links wins, then the lighter busiest server. ``bins``: Mininet's own ``SwitchBinPlacer``, for comparison: the switches in the
    topology's order, in even bins."""
    if how not in PLACEMENTS:
        raise UserError(f"unknown placement {how!r}; choose {' or '.join(PLACEMENTS)}")
    if not servers:
        raise UserError("a placement needs at least one server")
    if len(servers) > len(topo.switches):
        raise UserError(f"{len(servers)} servers for {len(topo.switches)} switches: a placement cannot fit "
                        f"(give at most {len(topo.switches)} servers)")
    servers = list(servers)
    if how == "bins":
        where = _even_bins(topo.switches, servers)
        return Placement(tuple(servers), where, _cut(topo, where), how)
    w = _weights(topo)
    cap = max(SLACK * sum(w.values()) / len(servers), max(w.values()))   # a switch and its hosts stay together
    best: tuple[bool, int, int, dict[str, str]] | None = None
    for start in (_by_regions, _by_breadth, _by_weight):
        where = start(topo, servers, w, cap)
        load = {sv: sum(w[s] for s in where if where[s] == sv) for sv in servers}
        _refine(topo, servers, where, load, w, cap)
        if min(load.values()) == 0:
            continue
        score = (max(load.values()) > cap, len(_cut(topo, where)), max(load.values()), where)
        if best is None or score[:3] < best[:3]:
            best = score
    if best is None:
        raise UserError(f"the topology is too small to spread over {len(servers)} servers "
                        "(some server would get no switch)")
    return Placement(tuple(servers), best[3], _cut(topo, best[3]))


def _even_bins(switches: list[str], servers: list[str]) -> dict[str, str]:
    """Mininet's ``SwitchBinPlacer.bin``: len // n switches a server, the first len % n one
    more, in order."""
    q, r = divmod(len(switches), len(servers))
    tickets = [sv for i, sv in enumerate(servers) for _ in range(q + (i < r))]
    return dict(zip(switches, tickets, strict=True))


def _by_regions(topo: Topology, servers: list[str], w: dict[str, int], cap: float) -> dict[str, str]:
    """Largest block first onto the least loaded server (LPT); a block too big for any
    server's room is split into its switches, which go the same way."""
    load = dict.fromkeys(servers, 0)
    where: dict[str, str] = {}

    def order(blocks: list[list[str]]) -> list[list[str]]:
        return sorted(blocks, key=lambda b: (-sum(w[s] for s in b), topo.switches.index(b[0])))

    pending = order(_blocks(topo))
    while pending:
        block = pending.pop(0)
        weight = sum(w[s] for s in block)
        target = min(servers, key=lambda sv: (load[sv], servers.index(sv)))
        if load[target] + weight > cap and len(block) > 1:
            pending = order([*pending, *([s] for s in block)])
            continue
        for s in block:
            where[s] = target
        load[target] += weight
    return where


def _by_weight(topo: Topology, servers: list[str], w: dict[str, int], cap: float) -> dict[str, str]:
    """Balance first: single switches, heaviest first, onto the least loaded server (LPT)."""
    load = dict.fromkeys(servers, 0)
    where: dict[str, str] = {}
    for s in sorted(topo.switches, key=lambda s: (-w[s], topo.switches.index(s))):
        where[s] = min(servers, key=lambda sv: (load[sv], servers.index(sv)))
        load[where[s]] += w[s]
    return where


def _by_breadth(topo: Topology, servers: list[str], w: dict[str, int], cap: float) -> dict[str, str]:
    """Switches in breadth-first order from the first one, cut into consecutive runs of about
    an even share of the work each."""
    nbrs = adjacency(topo)
    order: list[str] = []
    for root in topo.switches:
        if root in order:
            continue
        queue = [root]
        order.append(root)
        while queue:
            for n in nbrs[queue.pop(0)]:
                if n not in order:
                    order.append(n)
                    queue.append(n)
    share = sum(w.values()) / len(servers)
    where: dict[str, str] = {}
    done, i = 0, 0
    for k, s in enumerate(order):
        left = len(order) - k
        # next server once this one has its share, but leave a switch for every server still to come
        if i < len(servers) - 1 and (done >= share * (i + 1) or left == len(servers) - 1 - i):
            i += 1
        where[s] = servers[i]
        done += w[s]
    return where


def _refine(topo: Topology, servers: list[str], where: dict[str, str], load: dict[str, int],
            w: dict[str, int], cap: float) -> None:
    """Move single switches to the server most of their links lead to, while that cuts fewer
    links and keeps every server within ``cap`` and non-empty."""
    nbrs = adjacency(topo)
    for _ in range(len(topo.switches)):
        moved = False
        for s in topo.switches:
            here = where[s]
            if load[here] == w[s]:
                continue   # the last switch of its server stays
            votes = {sv: sum(1 for n in nbrs[s] if where[n] == sv) for sv in servers}
            best = max(servers, key=lambda sv: (votes[sv], sv == here, -servers.index(sv)))
            if best != here and votes[best] > votes[here] and load[best] + w[s] <= cap:
                where[s] = best
                load[here] -= w[s]
                load[best] += w[s]
                moved = True
        if not moved:
            return
