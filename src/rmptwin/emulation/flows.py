"""The multicast-tree controller's policy as plain functions and data (no os_ken here).

The os-ken app in ``controllers/`` is a thin shim: it feeds switch connections and IGMP
packets to ``Policy`` and turns the ``FlowSpec``/``GroupSpec``/``MeterSpec`` it gets back
into OpenFlow 1.3 messages. Everything that can be wrong about forwarding is here and
unit-tested against a recording datapath.

Forwarding, per switch:
- IGMP from a host port goes to the controller (membership).
- ARP floods along one spanning tree of the topology (an ALL group), so it reaches every
  host without loops.
- IPv4 unicast follows the static shortest path to the destination host's switch.
- Multicast: per (sender, group) a source-rooted shortest-path tree (``rmptwin.model.tree``)
  pruned to the switches of joined hosts, installed as an ALL group whose buckets are the
  tree's child links and the joined hosts' ports; the flow matches the expected in-port so
  a frame arriving off-tree is dropped. A ``region/<r>/<k>`` group only uses region r's
  switches. At the sender's own switch the flow goes through the sender port's meter:
  one host cannot flood a group (seed section 6).
- Authorized senders (``Wiring.authorized``, from ``emulation.authorized``): for a group in
  that map, only its authorized senders get a tree; every other host's frames to the group
  hit a drop rule at the host's own switch (priority ``PRIO_UNAUTH_DROP``), whose OpenFlow
  packet counter is the run's count of unauthorized multicast dropped at the edge.
- Everything else (IPv6, unjoined multicast) is dropped by the table-miss entry.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmptwin.core.groups import group_ip, group_region, region_group, rmp_group
from rmptwin.model import Topology
from rmptwin.model.tree import Tree, adjacency, multicast_tree, shortest_path_parents, unicast_path

ETH_IP, ETH_ARP = 0x0800, 0x0806
IP_PROTO_IGMP = 2
ARP_GROUP_ID = 1
FIRST_TREE_GROUP_ID = 1000
# IGMP above the trees: a v2 report is addressed to the group itself and must reach the
# controller, not the group's members.
PRIO_MISS, PRIO_MCAST_DROP, PRIO_UNICAST, PRIO_ARP, PRIO_TREE, PRIO_IGMP = 0, 5, 10, 50, 200, 300
# Unauthorized senders' multicast, per (host port, group): below the trees, above the rest.
# This priority is used by nothing else, so the edge-drop count is the sum of its flows' packets.
PRIO_UNAUTH_DROP = 150
DEFAULT_METER_PPS = 50_000

Action = tuple[str, int] | tuple[str]                # ("output", port) | ("group", gid) | ("controller",)
Match = tuple[tuple[str, object], ...]               # OFPMatch keyword arguments, sorted
FlowKey = tuple[int, Match]                          # (priority, match): what a switch tells flows apart by


# ----------------------------------------------------------------------------- what to install


@dataclass(frozen=True)
class FlowSpec:
    priority: int
    match: Match
    actions: tuple[Action, ...]
    meter: int | None = None

    @property
    def key(self) -> FlowKey:
        return (self.priority, self.match)


@dataclass(frozen=True)
class GroupSpec:
    group_id: int
    ports: tuple[int, ...]                     # one ALL-group bucket per port


@dataclass(frozen=True)
class MeterSpec:
    meter_id: int
    rate_pps: int
    burst: int


def flow(priority: int, actions: tuple[Action, ...], meter: int | None = None, **match: object) -> FlowSpec:
    return FlowSpec(priority, tuple(sorted(match.items())), actions, meter)


@dataclass
class SwitchState:
    """Everything one switch should hold."""

    flows: dict[FlowKey, FlowSpec] = field(default_factory=dict)
    groups: dict[int, GroupSpec] = field(default_factory=dict)
    meters: dict[int, MeterSpec] = field(default_factory=dict)

    def add_flow(self, f: FlowSpec) -> None:
        self.flows[f.key] = f


@dataclass(frozen=True)
class Diff:
    """Ordered changes turning one SwitchState into another (meters and groups before the
    flows that use them; flows deleted before the groups they used)."""

    add_meters: list[MeterSpec]
    add_groups: list[GroupSpec]
    modify_groups: list[GroupSpec]
    add_flows: list[FlowSpec]          # add or overwrite (OFPFC_ADD replaces an equal match)
    delete_flows: list[FlowSpec]
    delete_groups: list[int]

    def empty(self) -> bool:
        return not any((self.add_meters, self.add_groups, self.modify_groups, self.add_flows,
                        self.delete_flows, self.delete_groups))


def diff(old: SwitchState, new: SwitchState) -> Diff:
    return Diff(
        add_meters=[m for k, m in sorted(new.meters.items()) if old.meters.get(k) != m],
        add_groups=[g for k, g in sorted(new.groups.items()) if k not in old.groups],
        modify_groups=[g for k, g in sorted(new.groups.items()) if k in old.groups and old.groups[k] != g],
        add_flows=[f for k, f in sorted(new.flows.items(), key=lambda kv: repr(kv[0])) if old.flows.get(k) != f],
        delete_flows=[f for k, f in sorted(old.flows.items(), key=lambda kv: repr(kv[0])) if k not in new.flows],
        delete_groups=sorted(k for k in old.groups if k not in new.groups),
    )


# ----------------------------------------------------------------------------- the wiring


@dataclass(frozen=True)
class HostPort:
    name: str
    switch: str
    port: int
    ip: str


@dataclass(frozen=True)
class Wiring:
    """The built network as the controller sees it: which port leads where."""

    topology: Topology
    dpids: dict[str, int]                         # switch -> datapath id
    links: dict[str, dict[str, int]]              # switch -> {neighbour switch: local port}
    hosts: dict[str, HostPort]
    group_names: dict[str, str]                   # group ip -> logical name
    meter_pps: int = DEFAULT_METER_PPS
    # group ip -> the hosts allowed to send to it; groups absent are unrestricted; None: none are
    authorized: dict[str, tuple[str, ...]] | None = None

    @property
    def switch_of_dpid(self) -> dict[int, str]:
        return {d: s for s, d in self.dpids.items()}

    def host_at(self, switch: str, port: int) -> HostPort | None:
        for h in self.hosts.values():
            if h.switch == switch and h.port == port:
                return h
        return None

    def host_ports(self, switch: str) -> list[int]:
        """The ports of ``switch`` that lead to hosts, where the querier asks."""
        return sorted(h.port for h in self.hosts.values() if h.switch == switch)

    def to_json(self) -> dict[str, Any]:
        return {
            "topology": self.topology.model_dump(mode="json"),
            "dpids": self.dpids, "links": self.links,
            "hosts": {n: [h.switch, h.port, h.ip] for n, h in self.hosts.items()},
            "group_names": self.group_names, "meter_pps": self.meter_pps,
            "authorized": None if self.authorized is None else {g: list(h) for g, h in self.authorized.items()},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Wiring:
        return cls(
            topology=Topology.model_validate(d["topology"]),
            dpids={k: int(v) for k, v in d["dpids"].items()},
            links={s: {n: int(p) for n, p in ports.items()} for s, ports in d["links"].items()},
            hosts={n: HostPort(n, v[0], int(v[1]), v[2]) for n, v in d["hosts"].items()},
            group_names=dict(d.get("group_names", {})),
            meter_pps=int(d.get("meter_pps", DEFAULT_METER_PPS)),
            authorized=None if d.get("authorized") is None else
            {g: tuple(h) for g, h in d["authorized"].items()},
        )

    @classmethod
    def load(cls, path: str | Path) -> Wiring:
        return cls.from_json(json.loads(Path(path).read_text()))


def authorized_by_ip(by_name: dict[str, frozenset[str]]) -> dict[str, tuple[str, ...]]:
    """``emulation.authorized.authorized_senders`` keyed by group ip, as ``Wiring.authorized``."""
    return {group_ip(name): tuple(sorted(hosts)) for name, hosts in by_name.items()}


def known_group_names(topo: Topology, stripes: int = 1024) -> dict[str, str]:
    """group ip -> name for every group a run of this topology can use (first ``stripes``: the
    core stripes and, numbered after them, an experiment's edge stripes, seed 4.4)."""
    names = {}
    for k in range(stripes):
        names[group_ip(rmp_group(k))] = rmp_group(k)
        for r in topo.regions:
            names[group_ip(region_group(r, k))] = region_group(r, k)
    return names


# ----------------------------------------------------------------------------- IGMP


def _ip(b: bytes) -> str:
    return socket.inet_ntoa(b)


def is_link_local_group(ip: str) -> bool:
    return ip.startswith("224.0.0.")


def igmp_changes(frame: bytes) -> list[tuple[str, bool]]:
    """Membership changes in an Ethernet frame carrying IGMP: [(group ip, joined)].

    v1/v2 reports join, v2 leaves leave; a v3 record joins when it asks for any source
    (EXCLUDE mode) or names sources, and leaves on INCLUDE with no sources. Anything
    malformed or not IGMP yields [] (a host cannot crash the controller).
    """
    if len(frame) < 14 + 20 + 8 or struct.unpack_from("!H", frame, 12)[0] != ETH_IP:
        return []
    ihl = (frame[14] & 0x0F) * 4
    if frame[14] >> 4 != 4 or ihl < 20 or frame[14 + 9] != IP_PROTO_IGMP:
        return []
    igmp = frame[14 + ihl:]
    if len(igmp) < 8:
        return []
    kind = igmp[0]
    out: list[tuple[str, bool]] = []
    if kind in (0x12, 0x16, 0x17):
        out.append((_ip(igmp[4:8]), kind != 0x17))
    elif kind == 0x22:
        (nrec,) = struct.unpack_from("!H", igmp, 6)
        pos = 8
        for _ in range(nrec):
            if pos + 8 > len(igmp):
                break
            rtype, aux, nsrc = igmp[pos], igmp[pos + 1], struct.unpack_from("!H", igmp, pos + 2)[0]
            group = _ip(igmp[pos + 4: pos + 8])
            pos += 8 + 4 * nsrc + 4 * aux
            if pos > len(igmp):
                break
            if rtype in (2, 4) or (rtype in (1, 3, 5) and nsrc > 0):
                out.append((group, True))
            elif rtype in (1, 3) and nsrc == 0:
                out.append((group, False))
    return [(g, j) for g, j in out if 224 <= int(g.split(".")[0]) <= 239 and not is_link_local_group(g)]


# The controller is the network's IGMP querier, as a multicast router is on a real LAN: the
# only way a host repeats a report it sent once (twice in v3) is a query. A report lost on a
# lossy access link (netem drops IGMP as it drops data) or while a switch's controller
# connection was down (an overloaded machine misses echo replies) would otherwise lose the
# membership for the whole run: on a VM under qemu's emulated CPU, six receivers of the
# quickstart never joined its data groups, and one of them delivered nothing.
QUERY_MAC = "02:00:00:00:00:fe"        # the querier's (locally administered) source MAC
QUERY_MAX_RESP_DS = 10                 # hosts answer within 1 s (tenths of a second)
QUERY_REQUEST = "igmp-query"           # in the state dir: the runner asks the controller for a query


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def igmp_general_query(max_resp_ds: int = QUERY_MAX_RESP_DS) -> bytes:
    """An IGMPv3 general query to 224.0.0.1 as an Ethernet frame (RFC 3376 4.1; source address
    0.0.0.0, as snooping switches send it, RFC 4541 2.1.1). A v3 host answers with its current
    state, one record per group it holds; a host forced to v2 takes it as a v2 query and answers
    with a v2 report per group: both are memberships to ``igmp_changes``."""
    igmp = bytearray(struct.pack("!BBH4sBBH", 0x11, max_resp_ds, 0, bytes(4), 2, 125, 0))
    struct.pack_into("!H", igmp, 2, _checksum(bytes(igmp)))
    # IHL 6: the Router Alert option (RFC 2113), which IGMPv3 messages carry.
    ip = bytearray(struct.pack("!BBHHHBBH4s4s4s", 0x46, 0xC0, 24 + len(igmp), 0, 0, 1, IP_PROTO_IGMP, 0,
                               bytes(4), socket.inet_aton("224.0.0.1"), b"\x94\x04\x00\x00"))
    struct.pack_into("!H", ip, 10, _checksum(bytes(ip)))
    eth = bytes.fromhex("01005e000001") + bytes.fromhex(QUERY_MAC.replace(":", "")) + struct.pack("!H", ETH_IP)
    return eth + bytes(ip) + bytes(igmp)


# ----------------------------------------------------------------------------- the policy


class Policy:
    """Membership in, desired switch state out."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring
        self.topo = wiring.topology
        self.members: dict[str, set[str]] = {}          # group ip -> host names
        self._gids: dict[str, dict[tuple[str, str], int]] = {s: {} for s in self.topo.switches}
        self._parents_cache: dict[tuple[str, str | None], dict[str, str]] = {}
        self._span = shortest_path_parents(adjacency(self.topo), self.topo.switches[0])
        self._meter_of = {h: i + 1 for i, h in enumerate(sorted(wiring.hosts))}
        self._tree_cache: dict[tuple[str, str | None, frozenset[str]], Tree] = {}
        self._parents: dict[int, dict[str, str]] = {}   # id(cached tree) -> child -> parent
        # Per-group membership versions key the caches below, so a join recomputes only
        # its own group's trees, once, for all switches.
        self._gver: dict[str, int] = {}
        self._sender_tree: dict[str, tuple[int, dict[str, Tree | None]]] = {}
        self._ports_cache: dict[str, tuple[int, dict[str, list[tuple[str, int]]]]] = {}
        self._base: dict[str, SwitchState] = {}
        self._authorized = {ip: frozenset(h) for ip, h in (wiring.authorized or {}).items()}

    # membership -------------------------------------------------------------------

    def igmp(self, switch: str, port: int, frame: bytes) -> list[str]:
        """Apply an IGMP frame seen at (switch, port); returns the group ips that changed."""
        host = self.w.host_at(switch, port)
        if host is None:
            return []
        changed = []
        for g, joined in igmp_changes(frame):
            if self.set_member(g, host.name, joined):
                changed.append(g)
        return changed

    def set_member(self, group: str, host: str, joined: bool) -> bool:
        members = self.members.setdefault(group, set())
        if joined == (host in members):
            return False
        (members.add if joined else members.discard)(host)
        self._gver[group] = self._gver.get(group, 0) + 1
        return True

    def group_name(self, ip: str) -> str:
        return self.w.group_names.get(ip, ip)

    def region_of(self, ip: str) -> str | None:
        return group_region(self.group_name(ip))

    # trees --------------------------------------------------------------------------

    def tree(self, sender: str, ip: str) -> Tree | None:
        """The tree ``sender``'s frames to group ``ip`` take, or None when they go nowhere."""
        version = self._gver.get(ip, 0)
        cached = self._sender_tree.get(ip)
        if cached is None or cached[0] != version:
            cached = self._sender_tree[ip] = (version, {})
        trees = cached[1]
        if sender not in trees:
            trees[sender] = self._compute_tree(sender, ip)
        return trees[sender]

    def _member_ports(self, ip: str) -> dict[str, list[tuple[str, int]]]:
        """switch -> [(member, port)] of group ``ip`` now."""
        version = self._gver.get(ip, 0)
        cached = self._ports_cache.get(ip)
        if cached is None or cached[0] != version:
            by_switch: dict[str, list[tuple[str, int]]] = {}
            for m in self.members.get(ip, ()):
                hp = self.w.hosts[m]
                by_switch.setdefault(hp.switch, []).append((m, hp.port))
            cached = self._ports_cache[ip] = (version, by_switch)
        return cached[1]

    def may_send(self, sender: str, ip: str) -> bool:
        """Whether ``sender`` may multicast to group ``ip`` (a group with no authorized list: anyone)."""
        allowed = self._authorized.get(ip)
        return allowed is None or sender in allowed

    def _compute_tree(self, sender: str, ip: str) -> Tree | None:
        if not self.may_send(sender, ip):
            return None
        src = self.w.hosts[sender]
        region = self.region_of(ip)
        if region is not None and (region not in self.topo.regions or src.switch not in self.topo.regions[region]):
            return None
        targets = frozenset(self.w.hosts[m].switch for m in self.members.get(ip, ()) if m != sender)
        if not targets:
            return None
        # Every sender on a switch shares the tree; a join recomputes only the trees whose
        # member switches changed (the key holds them), not every tree of every switch.
        key = (src.switch, region, targets)
        t = self._tree_cache.get(key)
        if t is None:
            t = self._tree_cache[key] = multicast_tree(self.topo, src.switch, set(targets), region)
        return t

    def trees(self) -> dict[str, dict[str, Any]]:
        """For `rmptwin net trees`: per group, members and the tree from each sender switch."""
        out: dict[str, dict[str, Any]] = {}
        for ip in sorted(self.members):
            members = sorted(self.members[ip])
            by_root: dict[str, list[list[str]]] = {}
            for sender in sorted(self.w.hosts):
                t = self.tree(sender, ip)
                if t is not None:
                    by_root.setdefault(t.root, [list(e) for e in t.edges()])
            out[ip] = {"name": self.group_name(ip), "region": self.region_of(ip),
                       "members": members, "trees": by_root}
        return out

    def _gid(self, switch: str, key: tuple[str, str]) -> int:
        gids = self._gids[switch]
        if key not in gids:
            gids[key] = FIRST_TREE_GROUP_ID + len(gids)
        return gids[key]

    # desired state ---------------------------------------------------------------

    def switch_state(self, switch: str) -> SwitchState:
        if switch not in self._base:
            self._base[switch] = self._static_state(switch)
        base = self._base[switch]
        st = SwitchState(dict(base.flows), dict(base.groups), dict(base.meters))
        self._add_trees(switch, st)
        return st

    def _static_state(self, switch: str) -> SwitchState:
        """What does not depend on membership: IGMP, ARP, unicast, meters, drops."""
        st = SwitchState()
        st.add_flow(flow(PRIO_MISS, ()))
        st.add_flow(flow(PRIO_MCAST_DROP, (), eth_type=ETH_IP, ipv4_dst=("224.0.0.0", "240.0.0.0")))
        local_hosts = [h for h in self.w.hosts.values() if h.switch == switch]
        for h in local_hosts:
            st.add_flow(flow(PRIO_IGMP, (("controller",),), in_port=h.port, eth_type=ETH_IP,
                             ip_proto=IP_PROTO_IGMP))
            st.meters[self._meter_of[h.name]] = MeterSpec(self._meter_of[h.name], self.w.meter_pps,
                                                          max(1, self.w.meter_pps // 10))
        # ARP along the spanning tree.
        span_nbrs = [c for c, p in self._span.items() if p == switch] + (
            [parent] if (parent := self._span.get(switch)) else [])
        arp_ports = sorted({h.port for h in local_hosts} | {self.w.links[switch][n] for n in span_nbrs})
        st.groups[ARP_GROUP_ID] = GroupSpec(ARP_GROUP_ID, tuple(arp_ports))
        st.add_flow(flow(PRIO_ARP, (("group", ARP_GROUP_ID),), eth_type=ETH_ARP))
        self._add_edge_drops(local_hosts, st)
        # Unicast by destination address.
        for h in self.w.hosts.values():
            if h.switch == switch:
                port = h.port
            else:
                port = self.w.links[switch][unicast_path(self.topo, switch, h.switch)[1]]
            st.add_flow(flow(PRIO_UNICAST, (("output", port),), eth_type=ETH_IP, ipv4_dst=h.ip))
        return st

    def _add_edge_drops(self, local_hosts: list[HostPort], st: SwitchState) -> None:
        """Drop, at their own switch, what local hosts send to groups they may not send to."""
        for ip in sorted(self._authorized):
            for h in local_hosts:
                if not self.may_send(h.name, ip):
                    st.add_flow(flow(PRIO_UNAUTH_DROP, (), in_port=h.port, eth_type=ETH_IP, ipv4_dst=ip))

    def edge_drop_flows(self, switch: str) -> list[FlowSpec]:
        """The unauthorized-sender drop rules of ``switch`` (their packet counters are the edge drops)."""
        return [f for f in self.switch_state(switch).flows.values() if f.priority == PRIO_UNAUTH_DROP]

    def _add_trees(self, switch: str, st: SwitchState) -> None:
        """The multicast trees through this switch."""
        for ip in sorted(self.members):
            for sender in sorted(self.w.hosts):
                entry = self._tree_entry(switch, sender, ip)
                if entry is None:
                    continue
                in_port, ports = entry
                gid = self._gid(switch, (sender, ip))
                st.groups[gid] = GroupSpec(gid, ports)
                src = self.w.hosts[sender]
                meter = self._meter_of[sender] if src.switch == switch else None
                st.add_flow(flow(PRIO_TREE, (("group", gid),), meter=meter, in_port=in_port, eth_type=ETH_IP,
                                 ipv4_src=src.ip, ipv4_dst=ip))

    def _tree_entry(self, switch: str, sender: str, ip: str) -> tuple[int, tuple[int, ...]] | None:
        t = self.tree(sender, ip)
        if t is None:
            return None
        parent_of = self._parents.get(id(t))
        if parent_of is None:
            parent_of = self._parents[id(t)] = {c: p for p, cs in t.children.items() for c in cs}
        if switch != t.root and switch not in parent_of:
            return None
        ports = [self.w.links[switch][c] for c in t.children.get(switch, ())]
        ports += [port for m, port in self._member_ports(ip).get(switch, ()) if m != sender]
        if not ports:
            return None
        if switch == t.root:
            in_port = self.w.hosts[sender].port
        else:
            in_port = self.w.links[switch][parent_of[switch]]
        return in_port, tuple(sorted(ports))
