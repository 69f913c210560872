"""The simulated network: switches and links of a spec ``Topology``, hosts on access links.

Multicast follows ``tree.multicast_tree`` from the sender's switch to the switches of the
group's members (scoped groups stay inside their region), so a packet dropped on a link
is missed by the whole subtree below it: loss is correlated exactly as on a real tree.
Unicast follows ``tree.unicast_path``. Routing is static (computed from the topology);
a link that is down drops what is routed over it.

Each link direction is a ``linkmodel.LinkDirection``, the model the emulation's relay
uses too: propagation delay, uniform jitter that never reorders, serialization at its
bandwidth behind a drop-tail queue of ``LinkParams.queue_limit()`` packets, and its own
loss process. Its draws are keyed by the run seed, the direction's name and the packet's
identity (``packetkey.packet_key``), so the same seed drops the same first copies here
and in the emulation, and adding a link never changes another link's draws.

Ground truth: one drop-log row per packet lost on a link, and per link direction and
frame type the packets offered and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from heapq import heappush
from typing import Any

import pyarrow as pa

from rmptwin.core.groups import group_region
from rmptwin.core.linkmodel import REASONS, WIRE_HEADER_BYTES, LinkConfig, LinkDirection, stream_seed
from rmptwin.core.packetkey import PacketKey, packet_key
from rmptwin.core.sansio import Dest, Group, Unicast
from rmptwin.model import Bernoulli, GilbertElliott, LinkParams, Topology
from rmptwin.model.tree import multicast_tree, unicast_path
from rmptwin.records.frame_names import describe
from rmptwin.records.tables import DROP_SCHEMA, LINK_COUNT_SCHEMA
from rmptwin.sim.scheduler import Scheduler

DeliverFn = Callable[[list[int], bytes, str, int], None]  # (host indices, data, sender name, t_ns)
TapFn = Callable[[int, int, bytes, Dest], None]          # (t_ns, sender index, data, destination)
ArrivalTapFn = Callable[[int, int, bytes, str, list[int]], None]  # (t_ns, sender index, data, group or "", hosts)
# A packet in flight: (data, sender index, describe(data), group or "", bytes on the wire,
# host index that must not receive it (the multicast sender, else -1), packet_key(data)).
Packet = tuple[bytes, int, tuple[str, str, int, int], str, int, int, PacketKey]
# A route hop: (switch, ((LinkDir, child hop), ...), (_HostBatch, ...), ((LinkDir, host), ...)).
# Typed loosely: the type would be recursive.
Hop = tuple[Any, ...]


class _HostBatch:
    """Hosts on one switch behind access links that only delay, all by ``delay_ns``.

    Their per-link packet counts are kept once for the batch and flushed into each link
    when the batch is retired (or the tables are written).
    """

    __slots__ = ("delay_ns", "hosts", "members", "links", "counts", "_links_by_host")

    def __init__(self, delay_ns: int, hosts: list[int], links: list[LinkDir]) -> None:
        self.delay_ns = delay_ns
        self.hosts = tuple(hosts)
        self.members = frozenset(hosts)
        self.links = links
        self._links_by_host = dict(zip(hosts, links))
        self.counts: dict[str, int] = {}

    def uncount(self, host: int, frame: str) -> None:
        """The sender is in the batch: its own access link did not carry this packet."""
        ld = self._links_by_host[host]
        c = ld.counts.get(frame)
        if c is None:
            c = ld.counts[frame] = [0, 0]
        c[0] -= 1

    def flush(self) -> None:
        for frame, n in self.counts.items():
            for ld in self.links:
                c = ld.counts.get(frame)
                if c is None:
                    c = ld.counts[frame] = [0, 0]
                c[0] += n
        self.counts.clear()


class LinkDir:
    """One direction of a link: its link model (shared with the relay) and packet counts."""

    __slots__ = ("link", "frm", "to", "model", "delay_ns", "counts", "simple", "chaos")

    def __init__(self, link: str, frm: str, to: str, params: LinkParams, seed: int) -> None:
        self.link, self.frm, self.to = link, frm, to
        self.model = LinkDirection(LinkConfig.from_spec(params), stream_seed(seed, link, frm, to))
        self.delay_ns = self.model.config.delay_ns
        self.counts: dict[str, list[int]] = {}  # frame -> [packets, dropped]
        self._refresh()

    @property
    def up(self) -> bool:
        return self.model.up

    def set_loss(self, model: Bernoulli | GilbertElliott) -> None:
        self.model.set_loss(model)
        self._refresh()

    def set_up(self, up: bool) -> None:
        self.model.set_up(up)
        self._refresh()

    def set_chaos(self, duplicate: float, reorder: float, reorder_ns: int) -> None:
        self.model.set_chaos(duplicate, reorder, reorder_ns)
        self._refresh()

    def _refresh(self) -> None:
        # The fan-out fast path handles a link that only delays: no draws, no serialization.
        # (Its queue limit, counting packets in flight, cannot fill at a host's rates: at
        # least 1000 packets within one access link's delay.)
        m = self.model
        self.simple = m.up and not m.draws and not m.config.bandwidth_mbps
        self.chaos = bool(m.config.duplicate or m.config.reorder)   # duplicates: the link model's ``duplicate_at``


class SimNetwork:
    """Carries datagrams between host indices; ``deliver`` is called at arrival time."""

    def __init__(self, topo: Topology, sched: Scheduler, seed: int, deliver: DeliverFn) -> None:
        self.topo = topo
        self.sched = sched
        self.deliver = deliver
        self.host_names = [h.name for h in topo.hosts]
        self.host_index = {n: i for i, n in enumerate(self.host_names)}
        self.host_switch = [h.switch for h in topo.hosts]
        self.links: dict[str, tuple[LinkDir, LinkDir]] = {}
        self.sw_link: dict[tuple[str, str], LinkDir] = {}
        for lk in topo.links:
            ab = LinkDir(lk.name, lk.a, lk.b, lk, seed)
            ba = LinkDir(lk.name, lk.b, lk.a, lk, seed)
            self.sw_link[(lk.a, lk.b)], self.sw_link[(lk.b, lk.a)] = ab, ba
            self.links[lk.name] = (ab, ba)
        self.host_up: list[LinkDir] = []
        self.host_down: list[LinkDir] = []
        for h in topo.hosts:
            name = f"{h.name}-{h.switch}"
            up = LinkDir(name, h.name, h.switch, h.link, seed)
            down = LinkDir(name, h.switch, h.name, h.link, seed)
            self.host_up.append(up)
            self.host_down.append(down)
            self.links[name] = (up, down)
        self.members: dict[str, set[int]] = {}
        self.joined: list[frozenset[str]] = [frozenset()] * len(topo.hosts)
        self._mroutes: dict[str, dict[str, Hop | None]] = {}
        self._uroutes: dict[tuple[str, int], Hop] = {}
        self._batches: dict[str, list[_HostBatch]] = {}  # route cache key -> its batches' counters
        self._retired: list[_HostBatch] = []             # batches of routes no longer cached
        self.drops: list[tuple[Any, ...]] = []   # rows of DROP_SCHEMA
        self.deliveries = 0
        # Sees every datagram a host sends, before the network carries it (``sim.pcap``).
        self.tap: TapFn | None = None
        # Sees every datagram the network hands to hosts, at its arrival (``sim.pcap``); the
        # ``deliver`` callback cannot serve: a host's capture names the group it came to.
        self.arrival_tap: ArrivalTapFn | None = None

    # ------------------------------------------------------------------ membership and faults

    def set_groups(self, host: int, groups: frozenset[str]) -> None:
        old = self.joined[host]
        if groups == old:
            return
        for g in old - groups:
            self.members[g].discard(host)
            self._forget(g)
        for g in groups - old:
            self.members.setdefault(g, set()).add(host)
            self._forget(g)
        self.joined[host] = frozenset(groups)

    def _forget(self, group: str) -> None:
        self._mroutes.pop(group, None)
        # Packets in flight still hold the old route: its batches keep counting until the end.
        self._retired.extend(self._batches.pop(group, ()))

    def _forget_all(self) -> None:
        # Link state changed: the fast path's choice of links may no longer hold.
        for batches in self._batches.values():
            self._retired.extend(batches)
        self._batches.clear()
        self._mroutes.clear()
        self._uroutes.clear()

    def _dirs(self, link: str) -> tuple[LinkDir, LinkDir]:
        if link in self.links:
            return self.links[link]
        a, _, b = link.partition("-")
        return self.links[f"{b}-{a}"]

    def set_link_up(self, link: str, up: bool) -> None:
        for d in self._dirs(link):
            d.set_up(up)
        self._forget_all()

    def set_loss(self, link: str, model: Bernoulli | GilbertElliott) -> None:
        for d in self._dirs(link):
            d.set_loss(model)
        self._forget_all()

    def set_chaos(self, link: str, duplicate: float = 0.0, reorder: float = 0.0, reorder_ns: int = 0) -> None:
        """Both directions of ``link`` duplicate and reorder frames (zeros: stop)."""
        for d in self._dirs(link):
            d.set_chaos(duplicate, reorder, reorder_ns)
        self._forget_all()

    # ------------------------------------------------------------------ routes
    # A route is a hop: (switch, ((LinkDir, child hop), ...), (_HostBatch, ...), ((LinkDir, host), ...)).
    # Batches are the member hosts of that switch whose access link only delays, grouped
    # by delay: their link model is skipped. The other hosts cross their own link one by one.
    # Either way, the hosts a packet reaches at one time share one scheduler entry.
    # A packet is (data, sender index, describe(data), group or "", bytes on the wire,
    # host index that must not receive it: the multicast sender, else -1, packet_key(data)).

    def _mroute(self, group: str, root: str) -> Hop | None:
        per_root = self._mroutes.setdefault(group, {})
        if root in per_root:
            return per_root[root]
        region = group_region(group)
        by_switch: dict[str, list[int]] = {}
        for h in sorted(self.members.get(group, ())):
            by_switch.setdefault(self.host_switch[h], []).append(h)
        route = None
        # A scoped group reaches nobody from outside its region (or if the region is unknown).
        if region is None or root in self.topo.regions.get(region, ()):
            tree = multicast_tree(self.topo, root, set(by_switch), region)
            route = self._compile(group, root, tree.children, by_switch)
        per_root[root] = route
        return route

    def _compile(self, key: str, switch: str, children: Mapping[str, Sequence[str]],
                 by_switch: Mapping[str, list[int]]) -> Hop:
        kids = tuple((self.sw_link[(switch, c)], self._compile(key, c, children, by_switch))
                     for c in children.get(switch, ()))
        by_delay: dict[int, list[int]] = {}
        slow: list[tuple[LinkDir, int]] = []
        for h in by_switch.get(switch, ()):
            ld = self.host_down[h]
            if ld.simple:
                by_delay.setdefault(ld.delay_ns, []).append(h)
            else:
                slow.append((ld, h))
        batches = tuple(_HostBatch(d, hs, [self.host_down[h] for h in hs]) for d, hs in sorted(by_delay.items()))
        self._batches.setdefault(key, []).extend(batches)
        return (switch, kids, batches, tuple(slow))

    def _uroute(self, src_switch: str, dst: int) -> Hop:
        key = (src_switch, dst)
        route = self._uroutes.get(key)
        if route is None:
            path = unicast_path(self.topo, src_switch, self.host_switch[dst])
            route = self._compile("", path[-1], {}, {path[-1]: [dst]})
            for prev, nxt in zip(reversed(path[:-1]), reversed(path[1:])):
                route = (prev, ((self.sw_link[(prev, nxt)], route),), (), ())
            self._uroutes[key] = route
        return route

    # ------------------------------------------------------------------ sending

    def send(self, t: int, sender: int, data: bytes, dest: Group | Unicast) -> None:
        if self.tap is not None:
            self.tap(t, sender, data, dest)
        pkt: Packet
        if isinstance(dest, Group):
            group = dest.name
            if not self.members.get(group):
                return
            route = self._mroute(group, self.host_switch[sender])
            if route is None:
                return
            pkt = (data, sender, describe(data), group, len(data) + WIRE_HEADER_BYTES, sender, packet_key(data))
        else:
            dst = self.host_index.get(dest.node)
            desc = describe(data)
            if dst is None:
                self.drops.append((t, "", self.host_names[sender], dest.node, *desc, "", "unknown_host", -1))
                return
            pkt = (data, sender, desc, "", len(data) + WIRE_HEADER_BYTES, -1, packet_key(data))
            if dst == sender:
                s = self.sched
                s.seq = seq = s.seq + 1
                heappush(s.heap, (t, seq, self._arrive, pkt, [dst]))
                return
            route = self._uroute(self.host_switch[sender], dst)
        up = self.host_up[sender]
        arr = self._cross(up, t, pkt)
        if arr >= 0:
            s = self.sched
            s.seq = seq = s.seq + 1
            heappush(s.heap, (arr, seq, self._at_switch, pkt, route))
            if up.chaos and up.model.duplicate_at >= 0:
                s.seq = seq = s.seq + 1
                heappush(s.heap, (up.model.duplicate_at, seq, self._at_switch, pkt, route))

    def _drop(self, ld: LinkDir, t: int, pkt: Packet, reason: str, c: list[int]) -> int:
        c[1] += 1
        frame, src, src_seq, gseq = pkt[2]
        self.drops.append((t, ld.link, ld.frm, ld.to, frame, src, src_seq, gseq, pkt[3], reason, ld.model.last_copy))
        return -1

    def _cross(self, ld: LinkDir, t: int, pkt: Packet) -> int:
        """Offer ``pkt`` to link direction ``ld`` at ``t``; its arrival time at the far end, or -1."""
        c = ld.counts.get(pkt[2][0])
        if c is None:
            c = ld.counts[pkt[2][0]] = [0, 0]
        c[0] += 1
        arr = ld.model.offer(t, pkt[4], pkt[6])
        if arr < 0:
            return self._drop(ld, t, pkt, REASONS[-arr - 1], c)
        return arr

    def _at_switch(self, t: int, pkt: Packet, hop: Hop) -> None:  # noqa: C901 - a frame's whole switch hop inlined: the simulator's hot loop
        s = self.sched
        heap = s.heap
        frame = pkt[2][0]
        if hop[1]:
            at_switch, size, key = self._at_switch, pkt[4], pkt[6]
            for ld, child in hop[1]:
                # _cross, inlined: once per link hop
                c = ld.counts.get(frame)
                if c is None:
                    c = ld.counts[frame] = [0, 0]
                c[0] += 1
                arr = ld.model.offer(t, size, key)
                if arr >= 0:
                    s.seq = seq = s.seq + 1
                    heappush(heap, (arr, seq, at_switch, pkt, child))
                    if ld.chaos and ld.model.duplicate_at >= 0:
                        s.seq = seq = s.seq + 1
                        heappush(heap, (ld.model.duplicate_at, seq, at_switch, pkt, child))
                else:
                    self._drop(ld, t, pkt, REASONS[-arr - 1], c)
        if not (hop[2] or hop[3]):
            return
        # The hosts reached at one time go out as one heap entry, in the order they were
        # reached: nothing else can be scheduled between them (this loop pushes nothing else
        # and what they schedule comes later), so deliveries happen in the same order as
        # with one entry per host.
        at: dict[int, list[int]] = {}
        sender = pkt[5]  # a multicast sender does not hear itself
        for b in hop[2]:
            hosts = b.hosts
            if sender in b.members:
                hosts = tuple(h for h in hosts if h != sender)
                if not hosts:
                    continue
                b.uncount(sender, frame)
            b.counts[frame] = b.counts.get(frame, 0) + 1
            arr = t + b.delay_ns
            if arr in at:
                at[arr].extend(hosts)
            else:
                at[arr] = list(hosts)
        if hop[3]:
            size, key = pkt[4], pkt[6]
            for ld, h in hop[3]:
                if h == sender:
                    continue
                # _cross, inlined: once per host behind a link that loses, jitters or serializes
                c = ld.counts.get(frame)
                if c is None:
                    c = ld.counts[frame] = [0, 0]
                c[0] += 1
                arr = ld.model.offer(t, size, key)
                if arr < 0:
                    self._drop(ld, t, pkt, REASONS[-arr - 1], c)
                    continue
                if arr in at:
                    at[arr].append(h)
                else:
                    at[arr] = [h]
                if ld.chaos and ld.model.duplicate_at >= 0:
                    s.seq = seq = s.seq + 1
                    heappush(heap, (ld.model.duplicate_at, seq, self._arrive, pkt, [h]))
        arrive = self._arrive
        for arr, hosts in at.items():
            s.seq = seq = s.seq + 1
            heappush(heap, (arr, seq, arrive, pkt, hosts))

    def _arrive(self, t: int, pkt: Packet, hosts: list[int]) -> None:
        self.deliveries += len(hosts)
        if self.arrival_tap is not None:
            self.arrival_tap(t, pkt[1], pkt[0], pkt[3], hosts)
        self.deliver(hosts, pkt[0], self.host_names[pkt[1]], t)

    def flush_counts(self) -> None:
        for batches in self._batches.values():
            for b in batches:
                b.flush()
        for b in self._retired:
            b.flush()

    # ------------------------------------------------------------------ ground truth

    def drop_table(self) -> pa.Table:
        cols: list[Any] = list(zip(*self.drops)) if self.drops else [[] for _ in DROP_SCHEMA]
        return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(cols, DROP_SCHEMA)],
                                    schema=DROP_SCHEMA)

    def count_table(self) -> pa.Table:
        self.flush_counts()
        rows: list[tuple[str, str, str, str, int, int]] = []
        for name in sorted(self.links):
            for ld in self.links[name]:
                for frame in sorted(ld.counts):
                    p, d = ld.counts[frame]
                    rows.append((name, ld.frm, ld.to, frame, p, d))
        cols: list[Any] = list(zip(*rows)) if rows else [[] for _ in LINK_COUNT_SCHEMA]
        return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(cols, LINK_COUNT_SCHEMA)],
                                    schema=LINK_COUNT_SCHEMA)
