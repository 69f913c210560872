"""The network half of seed 6: trees only for authorized senders, a counted drop rule for the rest.

Checked by walking packets through the policy's flows with the independent interpreter of
test_flows (``forward``), and by serialising the drop rules with os-ken's real parser.
"""

from __future__ import annotations

import sys
from pathlib import Path

from test_flows import _matches, forward, make_wiring, mcast, states_of  # tests/controllers is on sys.path
from test_shim import RecordingDatapath

from rmptwin.core.groups import group_ip, region_group, rmp_group
from rmptwin.emulation.authorized import authorized_senders
from rmptwin.emulation.flows import PRIO_UNAUTH_DROP, Policy, SwitchState, Wiring, authorized_by_ip, diff
from rmptwin.model import Topology, load_topology

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "controllers"))
from rmptwin_controller import apply_diff

REPO = Path(__file__).resolve().parents[2]


def test_authorized_senders_follow_the_roles():
    topo = load_topology(REPO / "topologies" / "security-attack.yaml")
    auth = authorized_senders(topo, stripes=2)
    ring = {"rp1", "rp2", "rp3", "xr1"}
    assert auth[rmp_group(0)] == auth[rmp_group(1)] == {"src1", "src2"} | ring
    assert auth[region_group("west", 0)] == {"rp1", "rp2", "rx1"}      # its R_T and its R_x
    assert auth[region_group("east", 1)] == {"rp2", "rp3", "rx1"}
    everyone = set().union(*auth.values())
    assert not everyone & {h.name for h in topo.hosts if h.role in ("attacker", "customer")}


def test_the_applications_order_entry_points_may_send_into_the_ring_and_traders_may_not():
    """Portals (unified orders' S_P) and participants (the floor's S_P) publish into the ring
    like ticker sources; traders and brokers reach a portal by unicast only."""
    for name, entry in (("orders-line.yaml", "portal"), ("floor.yaml", "participant")):
        topo = load_topology(REPO / "topologies" / name)
        allowed = authorized_senders(topo, stripes=1)[rmp_group(0)]
        entries = {h.name for h in topo.hosts if h.role == entry}
        assert entries and entries <= allowed, name
        assert not allowed & {h.name for h in topo.hosts if h.role in ("trader", "broker", "exchange")}


def test_a_source_is_authorized_only_on_its_own_stripes():
    topo = Topology.model_validate({
        "name": "t", "switches": ["s1"], "links": [], "regions": {"r": ["s1"]},
        "hosts": [{"name": "a", "switch": "s1", "role": "source", "stripes": [1]},
                  {"name": "p", "switch": "s1", "role": "primary", "regions": ["r"], "stripes": [0]}]})
    auth = authorized_senders(topo, stripes=2)
    assert auth[rmp_group(0)] == {"p"} and auth[rmp_group(1)] == {"a"}
    assert auth[region_group("r", 0)] == {"p"} and auth[region_group("r", 1)] == frozenset()


def _guarded_wiring() -> Wiring:
    """test_flows' ring5 with rmp/0 restricted to h1 (the source) and h2; rmp/1 left open."""
    w = make_wiring()
    return Wiring(w.topology, w.dpids, w.links, w.hosts, w.group_names, w.meter_pps,
                  authorized=authorized_by_ip({rmp_group(0): frozenset({"h1", "h2"})}))


def _best_flow(states, w: Wiring, sender: str, pkt: dict):
    sw, port = w.hosts[sender].switch, w.hosts[sender].port
    return max((f for f in states[sw].flows.values() if _matches(f, {**pkt, "in_port": port})),
               key=lambda f: f.priority)


def test_only_authorized_senders_get_trees_others_hit_their_edge_drop_rule():
    w = _guarded_wiring()
    pol = Policy(w)
    ip = group_ip(rmp_group(0))
    for h in ("h3", "h4", "h5", "h6"):
        pol.set_member(ip, h, True)
    states = states_of(pol)
    for sender in w.hosts:
        reached, crossed = forward(w, states, sender, mcast(w, sender, rmp_group(0)))
        best = _best_flow(states, w, sender, mcast(w, sender, rmp_group(0)))
        if sender in ("h1", "h2"):
            assert sorted(reached) == sorted({"h3", "h4", "h5", "h6"} - {sender})
            assert best.priority > PRIO_UNAUTH_DROP
        else:
            # dropped at its own switch, by the rule whose counter is the edge-drop count
            assert reached == [] and crossed == []
            assert best.priority == PRIO_UNAUTH_DROP and best.actions == ()
    # claiming the source's address does not help: the tree matches the source's own port
    spoofed = {**mcast(w, "h1", rmp_group(0))}
    assert forward(w, states, "h6", spoofed) == ([], [])
    assert _best_flow(states, w, "h6", spoofed).priority == PRIO_UNAUTH_DROP
    # a drop rule for every unauthorized host on its own switch, none for the authorized
    drops = {(s, dict(f.match)["in_port"]) for s in w.topology.switches for f in pol.edge_drop_flows(s)}
    assert drops == {(w.hosts[h].switch, w.hosts[h].port) for h in ("h3", "h4", "h5", "h6")}


def test_groups_without_a_list_stay_open_to_every_sender():
    w = _guarded_wiring()
    pol = Policy(w)
    pol.set_member(group_ip(rmp_group(1)), "h4", True)
    states = states_of(pol)
    for sender in set(w.hosts) - {"h4"}:
        assert forward(w, states, sender, mcast(w, sender, rmp_group(1)))[0] == ["h4"]


def test_the_authorized_list_survives_the_wiring_file_and_the_drop_rules_serialise():
    w = _guarded_wiring()
    back = Wiring.from_json(w.to_json())
    assert back.authorized == w.authorized
    assert Wiring.from_json({**w.to_json(), "authorized": None}).authorized is None
    pol = Policy(back)
    dp = RecordingDatapath()
    new = pol.switch_state("s3")
    apply_diff(dp, diff(SwitchState(), new), SwitchState())
    drops = [m for m in dp.sent if type(m).__name__ == "OFPFlowMod" and m.priority == PRIO_UNAUTH_DROP]
    assert {m.match["in_port"] for m in drops} == {w.hosts["h3"].port, w.hosts["h6"].port}
    assert all(not m.instructions for m in drops)


def test_edge_drops_are_read_from_the_drop_rules_counters_only():
    from rmptwin.emulation.edge_drops import edge_drop_packets

    dump = "\n".join([
        "OFPST_FLOW reply (OF1.3) (xid=0x2):",
        f" cookie=0x0, duration=9.1s, table=0, n_packets=600, n_bytes=70800, priority={PRIO_UNAUTH_DROP},"
        "ip,in_port=5,nw_dst=239.17.3.9 actions=drop",
        f" cookie=0x0, duration=9.1s, table=0, n_packets=3, n_bytes=354, priority={PRIO_UNAUTH_DROP},"
        "ip,in_port=6,nw_dst=239.17.3.9 actions=drop",
        " cookie=0x0, duration=9.1s, table=0, n_packets=4120, n_bytes=1, priority=200,ip,in_port=1,"
        "nw_src=10.0.0.1,nw_dst=239.17.3.9 actions=meter:1,group:1000",
        " cookie=0x0, duration=9.1s, table=0, n_packets=77, n_bytes=1, priority=5,ip,nw_dst=224.0.0.0/4 actions=drop",
    ])
    assert edge_drop_packets(dump) == 603
