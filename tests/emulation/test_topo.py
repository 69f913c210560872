"""`RmpTopo`: the topology YAML as a Mininet Topo, the same graph for `rmptwin net up` and
for stock `mn --custom src/rmptwin/emulation/topo.py --topo rmptwin,FILE`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from emukit import NET4

from rmptwin.errors import UserError
from rmptwin.model import load_topology

topo_mod = pytest.importorskip("rmptwin.emulation.topo", reason="Mininet is not importable")
RmpTopo, RelayNode = topo_mod.RmpTopo, topo_mod.RelayNode
TOPO_PY = topo_mod.__file__
SPEC = load_topology(NET4)


def _links(topo) -> set[frozenset]:
    return {frozenset((a, b)) for a, b in topo.links()}


def test_switches_hosts_and_links_are_the_topologys_with_the_tags_marks():
    topo = RmpTopo(NET4, impair="netem", tag=7)
    assert topo.switches() == sorted(f"r7s{i}" for i in (1, 2, 3, 4))
    assert topo.hosts() == sorted(h.name for h in SPEC.hosts)
    name = topo.switch_names
    expected = {frozenset((name[lk.a], name[lk.b])) for lk in SPEC.links}
    expected |= {frozenset((h.name, name[h.switch])) for h in SPEC.hosts}
    assert _links(topo) == expected
    h1 = topo.nodeInfo("h1")
    assert h1["ip"] == "10.0.0.1/8" and h1["mac"] == "02:00:00:00:00:01"


def test_ports_are_numbered_links_first_then_hosts_and_match_the_graph():
    topo = RmpTopo(NET4, impair="none")
    assert topo.switch_ports == {"s1": {"s2": 1, "s3": 2}, "s2": {"s1": 1}, "s3": {"s1": 1, "s4": 2},
                                 "s4": {"s3": 1}}
    assert [(h, p.switch, p.port) for h, p in topo.host_ports.items()] == [
        ("h1", "s1", 3), ("h6", "s1", 4), ("h2", "s2", 2), ("h3", "s2", 3), ("h4", "s3", 3), ("h5", "s4", 2)]
    for sw, neighbours in topo.switch_ports.items():   # Mininet wires the same ports
        for other, port in neighbours.items():
            assert topo.port(sw, other)[0] == port


def test_relay_backend_puts_a_relay_node_in_every_impaired_link():
    topo = RmpTopo(NET4, impair="relay", tag=2)
    relays = [n for n in topo.switches() if topo.nodeInfo(n).get("cls") is RelayNode]
    assert topo.relay_nodes == ["r2l1", "r2l2", "r2l3"] == sorted(relays)
    for lk in SPEC.links:
        imp = topo.impaired[lk.name]
        a, b = topo.switch_names[lk.a], topo.switch_names[lk.b]
        assert frozenset((a, b)) not in _links(topo)     # only through the relay
        assert {frozenset((a, imp.relay)), frozenset((b, imp.relay))} <= _links(topo)
        legs = {topo.linkInfo(end, imp.relay)["intfName2"]: end for end in (a, b)}
        assert legs == {f"{imp.relay}a": a, f"{imp.relay}b": b}
    assert set(topo.impaired) == {lk.name for lk in SPEC.links}   # net4's hosts have unimpaired links


def test_netem_backend_gives_switch_links_tclink_with_their_parameters():
    topo = RmpTopo(NET4, impair="netem")
    lossy = topo.linkInfo("s1", "s2")
    assert lossy["cls"] is topo_mod.TCLink and lossy["delay"] == "20.0ms" and lossy["loss"] == 5.0
    assert topo.linkInfo("s1", "s3")["bw"] == 10.0
    assert "cls" not in topo.linkInfo("s1", "h1")          # unimpaired access link: a plain veth pair
    assert not any(topo.nodeInfo(n).get("cls") is RelayNode for n in topo.switches())


def test_stock_mn_cannot_use_the_relays_and_says_what_to_use():
    with pytest.raises(UserError, match="impair=netem or impair=none"):
        topo_mod.stock_topo(str(NET4), impair="relay")
    with pytest.raises(UserError, match="choose none, netem, relay"):
        RmpTopo(NET4, impair="tc")


@pytest.mark.root
@pytest.mark.emulation
def test_stock_mn_builds_the_topology_from_the_custom_file_and_every_host_reaches_every_other():
    """The documented command as a user types it in the clone: Mininet's own `mn`, which runs
    the custom file with the system Python, on the emulation tests' network."""
    from rmptwin.emulation import env

    if os.geteuid() != 0 or not shutil.which("mn"):
        pytest.skip("needs root and Mininet's mn")
    env.ensure_ovs()
    repo = Path(TOPO_PY).resolve().parents[3]
    cmd = ["mn", "--custom", "src/rmptwin/emulation/topo.py", "--topo", f"rmptwin,{NET4.relative_to(repo)}",
           "--switch", "ovsbr,datapath=user", "--controller", "none", "--test", "pingall"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=repo, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Caught exception" not in out, out
    hosts = re.search(r"\*\*\* Adding hosts:\n(.*)\n", out).group(1).split()
    switches = re.search(r"\*\*\* Adding switches:\n(.*)\n", out).group(1).split()
    links = re.findall(r"\((\S+), (\S+)\)", re.search(r"\*\*\* Adding links:\n(.*)\n", out).group(1))
    assert sorted(hosts) == sorted(h.name for h in SPEC.hosts)
    assert sorted(switches) == sorted(SPEC.switches)
    assert {frozenset(lk) for lk in links} == ({frozenset((lk.a, lk.b)) for lk in SPEC.links}
                                               | {frozenset((h.name, h.switch)) for h in SPEC.hosts})
    n = len(SPEC.hosts)
    assert f"Results: 0% dropped ({n * (n - 1)}/{n * (n - 1)} received)" in out, out
    left = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()
    assert not set(left) & set(SPEC.switches), f"mn left bridges behind: {left}"


def test_relay_backend_leaves_delay_only_access_links_to_the_hosts_nodes_when_asked():
    spec = load_topology(Path(__file__).parents[2] / "topologies" / "global.yaml")
    lossy = {h.name for h in spec.hosts if h.link.loss.mean > 0 or h.link.jitter_ms}
    asked = frozenset(h.name for h in spec.hosts) - {"cny1"}
    topo = RmpTopo(spec, impair="relay", tag=3, access_in_nodes=asked)
    assert lossy and topo.access_in_nodes == asked - lossy
    relayed_hosts = {name.split("-")[0] for name, imp in topo.impaired.items() if imp.relay and "-" in name
                     and name.split("-")[0] in {h.name for h in spec.hosts}}
    assert relayed_hosts == lossy | {"cny1"}      # lossy links and the host not asked keep their relay
    assert len(topo.relay_nodes) == len(spec.links) + len(relayed_hosts)
    for host in topo.access_in_nodes:             # a plain veth pair between host and switch
        assert frozenset((host, topo.switch_names[next(h.switch for h in spec.hosts if h.name == host)])) \
            in _links(topo)
    assert RmpTopo(spec, impair="netem", access_in_nodes=asked).access_in_nodes == frozenset()
