"""The controller's policy, checked by forwarding packets through the flows it computes.

``forward`` is an independent little OpenFlow 1.3 interpreter (priority match, ALL
groups that skip the in-port, output to ports) over the wiring; a claim like "multicast
reaches exactly the joined receivers" is checked by walking real packets through every
switch, not by inspecting the policy's own bookkeeping.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.core.groups import group_ip, host_ip, region_group, rmp_group
from rmptwin.emulation.flows import (
    ETH_ARP,
    ETH_IP,
    HostPort,
    Policy,
    SwitchState,
    Wiring,
    diff,
    igmp_changes,
    igmp_general_query,
    known_group_names,
)
from rmptwin.model import Topology

TOPO = Topology.model_validate({
    "name": "ring5",
    "switches": ["s1", "s2", "s3", "s4", "s5"],
    "regions": {"east": ["s1", "s2", "s3"], "west": ["s4", "s5"], "mid": ["s2", "s3", "s4"]},
    "links": [
        {"a": "s1", "b": "s2", "delay_ms": 5}, {"a": "s2", "b": "s3", "delay_ms": 5},
        {"a": "s3", "b": "s4", "delay_ms": 5}, {"a": "s1", "b": "s5", "delay_ms": 1},
        {"a": "s5", "b": "s4", "delay_ms": 1},
    ],
    "hosts": [
        {"name": "h1", "switch": "s1", "role": "source"},
        {"name": "h2", "switch": "s2", "role": "primary"},
        {"name": "h3", "switch": "s3", "role": "primary"},
        {"name": "h4", "switch": "s4", "role": "primary"},
        {"name": "h5", "switch": "s5", "role": "primary"},
        {"name": "h6", "switch": "s3", "role": "primary"},
    ],
})


def make_wiring(topo: Topology = TOPO) -> Wiring:
    """Ports numbered the way EmulatedNetwork numbers them: links first, then hosts."""
    ports = {s: {} for s in topo.switches}
    nxt = {s: 1 for s in topo.switches}
    for lk in topo.links:
        ports[lk.a][lk.b] = nxt[lk.a]
        nxt[lk.a] += 1
        ports[lk.b][lk.a] = nxt[lk.b]
        nxt[lk.b] += 1
    hosts = {}
    for i, h in enumerate(topo.hosts):
        hosts[h.name] = HostPort(h.name, h.switch, nxt[h.switch], host_ip(i))
        nxt[h.switch] += 1
    return Wiring(topo, {s: i + 1 for i, s in enumerate(topo.switches)}, ports, hosts, known_group_names(topo))


def _matches(f, pkt: dict) -> bool:
    for k, v in f.match:
        if k == "ipv4_dst" and isinstance(v, tuple):
            net = ipaddress.ip_network(f"{v[0]}/{v[1]}")
            if "ipv4_dst" not in pkt or ipaddress.ip_address(pkt["ipv4_dst"]) not in net:
                return False
        elif pkt.get(k) != v:
            return False
    return True


def forward(w: Wiring, states: dict[str, SwitchState], sender: str, pkt: dict) -> tuple[list[str], list[tuple]]:
    """Hosts a packet from ``sender`` reaches, and every (switch, out port) it crossed."""
    peer = {}
    for s, nb in w.links.items():
        for n, p in nb.items():
            peer[(s, p)] = ("switch", n, w.links[n][s])
    for h in w.hosts.values():
        peer[(h.switch, h.port)] = ("host", h.name, None)
    reached, crossed = [], []
    src = w.hosts[sender]
    todo = [(src.switch, src.port)]
    hops = 0
    while todo:
        hops += 1
        assert hops < 1000, "forwarding loop"
        sw, in_port = todo.pop()
        p = {**pkt, "in_port": in_port}
        best = max((f for f in states[sw].flows.values() if _matches(f, p)), key=lambda f: f.priority)
        out = []
        for a in best.actions:
            if a[0] == "output":
                out.append(a[1])
            elif a[0] == "group":
                out.extend(q for q in states[sw].groups[a[1]].ports if q != in_port)
            elif a[0] == "controller":
                crossed.append((sw, "controller"))
        for q in out:
            crossed.append((sw, q))
            kind, name, their_port = peer[(sw, q)]
            if kind == "host":
                reached.append(name)
            else:
                todo.append((name, their_port))
    return reached, crossed


def states_of(policy: Policy) -> dict[str, SwitchState]:
    return {s: policy.switch_state(s) for s in policy.topo.switches}


def mcast(w: Wiring, sender: str, group: str) -> dict:
    return {"eth_type": ETH_IP, "ipv4_src": w.hosts[sender].ip, "ipv4_dst": group_ip(group), "ip_proto": 17}


def test_multicast_reaches_exactly_the_joined_hosts_once():
    w = make_wiring()
    pol = Policy(w)
    g = rmp_group(0)
    for h in ("h3", "h4", "h6"):
        pol.set_member(group_ip(g), h, True)
    states = states_of(pol)
    for sender in w.hosts:
        reached, _ = forward(w, states, sender, mcast(w, sender, g))
        assert sorted(reached) == sorted({"h3", "h4", "h6"} - {sender})


def test_tree_follows_the_shortest_path_by_delay():
    w = make_wiring()
    pol = Policy(w)
    pol.set_member(group_ip(rmp_group(0)), "h4", True)
    _, crossed = forward(w, states_of(pol), "h1", mcast(w, "h1", rmp_group(0)))
    # s1 -> s5 -> s4 (2 ms) beats s1 -> s2 -> s3 -> s4 (15 ms).
    assert (("s1", w.links["s1"]["s5"]) in crossed) and (("s5", w.links["s5"]["s4"]) in crossed)
    assert ("s1", w.links["s1"]["s2"]) not in crossed


def test_leave_prunes_the_branch():
    w = make_wiring()
    pol = Policy(w)
    ip = group_ip(rmp_group(1))
    pol.set_member(ip, "h2", True)
    pol.set_member(ip, "h4", True)
    before = states_of(pol)
    assert pol.set_member(ip, "h4", False)
    after = states_of(pol)
    reached, crossed = forward(w, after, "h1", mcast(w, "h1", rmp_group(1)))
    assert reached == ["h2"]
    assert not any(sw in ("s4", "s5") for sw, _ in crossed)
    d = diff(before["s5"], after["s5"])
    assert d.delete_flows and d.delete_groups and not d.add_flows


def test_regional_group_never_leaves_its_region():
    w = make_wiring()
    pol = Policy(w)
    g = region_group("east", 0)
    for h in w.hosts:
        pol.set_member(group_ip(g), h, True)
    states = states_of(pol)
    east = set(TOPO.regions["east"])
    for sender in w.hosts:
        reached, crossed = forward(w, states, sender, mcast(w, sender, g))
        if w.hosts[sender].switch in east:
            assert sorted(reached) == sorted(h for h, hp in w.hosts.items() if hp.switch in east and h != sender)
        else:
            assert reached == []
        assert all(sw in east for sw, _ in crossed)


def test_overlapping_regions_each_reach_their_own_members():
    w = make_wiring()
    pol = Policy(w)
    for r in ("east", "mid"):
        for h in ("h3", "h4", "h5"):
            pol.set_member(group_ip(region_group(r, 0)), h, True)
    states = states_of(pol)
    reached_east, _ = forward(w, states, "h2", mcast(w, "h2", region_group("east", 0)))
    reached_mid, _ = forward(w, states, "h2", mcast(w, "h2", region_group("mid", 0)))
    assert sorted(reached_east) == ["h3"]             # s4, s5 are not east
    assert sorted(reached_mid) == ["h3", "h4"]        # h5's s5 is not mid


def test_unicast_reaches_the_destination_only():
    w = make_wiring()
    states = states_of(Policy(w))
    for a in w.hosts:
        for b in w.hosts:
            if a != b:
                reached, _ = forward(w, states, a, {"eth_type": ETH_IP, "ipv4_src": w.hosts[a].ip,
                                                    "ipv4_dst": w.hosts[b].ip, "ip_proto": 17})
                assert reached == [b]


def test_arp_floods_to_every_other_host_exactly_once():
    w = make_wiring()
    states = states_of(Policy(w))
    for a in w.hosts:
        reached, _ = forward(w, states, a, {"eth_type": ETH_ARP})
        assert sorted(reached) == sorted(set(w.hosts) - {a})


def test_unjoined_multicast_and_igmp():
    w = make_wiring()
    states = states_of(Policy(w))
    reached, _ = forward(w, states, "h1", mcast(w, "h1", rmp_group(3)))
    assert reached == []
    _, crossed = forward(w, states, "h2", {"eth_type": ETH_IP, "ip_proto": 2, "ipv4_dst": "224.0.0.22"})
    assert crossed == [("s2", "controller")]


def test_senders_traffic_is_metered_at_its_own_switch_only():
    w = make_wiring()
    pol = Policy(w)
    ip = group_ip(rmp_group(0))
    pol.set_member(ip, "h4", True)
    states = states_of(pol)
    tree_flows = {s: [f for f in st_.flows.values() if dict(f.match).get("ipv4_src") == w.hosts["h1"].ip
                      and dict(f.match).get("ipv4_dst") == ip] for s, st_ in states.items()}
    assert [f.meter for f in tree_flows["s1"]] == [pol._meter_of["h1"]]
    assert all(f.meter is None for s in ("s5", "s4") for f in tree_flows[s])
    assert states["s1"].meters[pol._meter_of["h1"]].rate_pps == w.meter_pps


# ----------------------------------------------------------------------------- IGMP


def _frame(igmp: bytes, dst: str = "224.0.0.22") -> bytes:
    eth = b"\x01\x00\x5e\x00\x00\x16" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x46, 0, 24 + len(igmp), 0, 0, 1, 2, 0,
                     socket.inet_aton("10.0.0.1"), socket.inet_aton(dst)) + b"\x94\x04\x00\x00"
    return eth + ip + igmp


def _v2(kind: int, group: str) -> bytes:
    return struct.pack("!BBH4s", kind, 0, 0, socket.inet_aton(group))


def _v3(records: list[tuple[int, str, list[str]]]) -> bytes:
    body = b""
    for rtype, g, srcs in records:
        body += struct.pack("!BBH4s", rtype, 0, len(srcs), socket.inet_aton(g))
        body += b"".join(socket.inet_aton(s) for s in srcs)
    return struct.pack("!BBHHH", 0x22, 0, 0, 0, len(records)) + body


def test_igmp_v2_join_and_leave():
    assert igmp_changes(_frame(_v2(0x16, "239.1.2.3"), "239.1.2.3")) == [("239.1.2.3", True)]
    assert igmp_changes(_frame(_v2(0x17, "239.1.2.3"), "224.0.0.2")) == [("239.1.2.3", False)]
    assert igmp_changes(_frame(_v2(0x11, "0.0.0.0"), "224.0.0.1")) == []   # a query changes nothing


def test_igmp_v3_records():
    frame = _frame(_v3([(4, "239.0.0.5", []), (3, "239.0.0.6", []), (2, "224.0.0.251", []),
                        (1, "239.0.0.7", ["10.0.0.9"])]))
    assert igmp_changes(frame) == [("239.0.0.5", True), ("239.0.0.6", False), ("239.0.0.7", True)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_igmp_parser_never_raises_on_garbage(payload):
    for frame in (payload, _frame(payload), _frame(b"\x22\x00\x00\x00\x00\x00" + payload)):
        for g, joined in igmp_changes(frame):
            assert 224 <= int(g.split(".")[0]) <= 239 and isinstance(joined, bool)


def test_policy_ignores_igmp_from_switch_ports():
    w = make_wiring()
    pol = Policy(w)
    assert pol.igmp("s1", w.links["s1"]["s2"], _frame(_v2(0x16, "239.1.1.1"), "239.1.1.1")) == []
    assert pol.igmp("s1", w.hosts["h1"].port, _frame(_v2(0x16, "239.1.1.1"), "239.1.1.1")) == ["239.1.1.1"]
    assert pol.members["239.1.1.1"] == {"h1"}


@pytest.mark.parametrize("n", [1, 3])
def test_diff_of_identical_states_is_empty(n):
    w = make_wiring()
    pol = Policy(w)
    for h in list(w.hosts)[:n]:
        pol.set_member(group_ip(rmp_group(0)), h, True)
    for s in TOPO.switches:
        assert diff(pol.switch_state(s), pol.switch_state(s)).empty()


def test_igmp_v2_report_to_a_group_with_a_tree_still_reaches_the_controller():
    # A v2 report is addressed to the group itself; with a tree from this host installed
    # it must not ride the tree to the members instead of joining the host.
    w = make_wiring()
    pol = Policy(w)
    ip = group_ip(rmp_group(0))
    pol.set_member(ip, "h3", True)
    pkt = {"eth_type": ETH_IP, "ip_proto": 2, "ipv4_src": w.hosts["h2"].ip, "ipv4_dst": ip}
    reached, crossed = forward(w, states_of(pol), "h2", pkt)
    assert reached == [] and crossed == [("s2", "controller")]


GROUPS = [rmp_group(0), rmp_group(1), region_group("east", 0), region_group("mid", 0)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(GROUPS), st.sampled_from([h.name for h in TOPO.hosts]), st.booleans()),
                max_size=25))
def test_any_join_leave_sequence_reaches_exactly_the_current_members(changes):
    """The policy's caches never serve a stale tree: after any sequence of joins and leaves,
    a packet from every sender reaches exactly the group's members (within its region)."""
    w = make_wiring()
    pol = Policy(w)
    members: dict[str, set[str]] = {g: set() for g in GROUPS}
    for g, h, joined in changes:
        pol.set_member(group_ip(g), h, joined)
        (members[g].add if joined else members[g].discard)(h)
        states = states_of(pol)     # recomputed after every change, as the controller does
    if not changes:
        return
    for g in GROUPS:
        region = g.split("/")[1] if g.startswith("region/") else None
        allowed = set(TOPO.regions[region]) if region else set(TOPO.switches)
        for sender in w.hosts:
            reached, _ = forward(w, states, sender, mcast(w, sender, g))
            expected = set() if w.hosts[sender].switch not in allowed else \
                {m for m in members[g] if m != sender and w.hosts[m].switch in allowed}
            assert sorted(reached) == sorted(expected), (g, sender)


def test_the_querier_sends_a_well_formed_igmpv3_general_query():
    import socket as _socket
    import struct as _struct

    def folded(b: bytes) -> int:
        t = sum(_struct.unpack(f"!{len(b) // 2}H", b))
        while t >> 16:
            t = (t & 0xFFFF) + (t >> 16)
        return t

    f = igmp_general_query()
    assert f[:6] == bytes.fromhex("01005e000001") and _struct.unpack_from("!H", f, 12)[0] == ETH_IP
    ihl = (f[14] & 0x0F) * 4
    ip, igmp = f[14:14 + ihl], f[14 + ihl:]
    assert ihl == 24 and ip[8] == 1 and ip[9] == 2                  # TTL 1, IGMP, Router Alert option
    assert _socket.inet_ntoa(ip[16:20]) == "224.0.0.1" and folded(ip) == 0xFFFF
    assert len(igmp) == 12 and igmp[0] == 0x11 and igmp[4:8] == bytes(4)   # v3 length, general
    assert folded(igmp) == 0xFFFF
    assert igmp_changes(f) == []                                     # a query changes no membership
