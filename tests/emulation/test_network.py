"""Must-show behaviour of the emulated network, on real Mininet + OVS + os-ken, for both
host kinds (namespaces and Docker containers).

Expected values come from the topology file (net4.yaml), never from the network's own
bookkeeping. Which probes were lost is known from their sequence numbers on either
impairment backend; it is checked against the link's own record: its packet counters
(relay counts or the netem qdisc's) everywhere, and the relay's per-packet drop log where
the relay runs (netem keeps none). Where loss is configured, the lost set must be
non-empty, so no check compares two empty sets.
"""

from __future__ import annotations

import pytest
from emukit import DOCKER_CPUS, DOCKER_MEMORY_MB, METER_PPS, NET4, link_count  # tests/emulation is on sys.path

from rmptwin.core.groups import group_ip, region_group, rmp_group
from rmptwin.emulation.losscheck import misses_explained, relay_count
from rmptwin.emulation.measure import run_probe
from rmptwin.model import load_topology

pytestmark = [pytest.mark.root, pytest.mark.emulation]
TOPO = load_topology(NET4)
LOSSY = TOPO.link("s1", "s2")
SLOW = TOPO.link("s1", "s3")


def _dropped(net, link: str, lo: int, hi: int) -> set[int] | None:
    """Probe sequence numbers in the relay's drop log for ``link``; None under netem (no log)."""
    if net.impair != "relay":
        return None
    t = net.drops().to_pylist()
    return {r["gseq"] for r in t if r["link"] == link and r["frame"] == "MOLD" and lo <= r["gseq"] < hi}


def test_loss_and_delay_match_the_configuration(net):
    h1, h2 = net.host("h1"), net.host("h2")
    base = 1_000_000
    before = link_count(net, LOSSY.name, "s1")
    r = run_probe(h1, [h2], h2.ip, count=5000, rate=2500, port=9001, start_seq=base)["h2"]
    crossed = link_count(net, LOSSY.name, "s1") - before
    assert r.sent >= 4000
    assert abs(r.loss - LOSSY.loss.p) <= 0.015, r.summary()
    assert abs(r.median_delay_ms - LOSSY.delay_ms) <= 2.0, r.summary()
    # Every datagram the receiver missed was dropped by the lossy link, and only those:
    # by the link's counters on both backends, packet by packet in the relay's log.
    logged = _dropped(net, LOSSY.name, base, base + r.sent)
    assert misses_explained(r.missing, r.sent, crossed, logged) == [], r.summary()


def test_bandwidth_matches_the_configuration(net):
    h1, h4 = net.host("h1"), net.host("h4")
    size = 1400
    # 1.5x the link's rate: the link, not the sender, sets the pace.
    rate = SLOW.bandwidth_mbps * 1e6 * 1.5 / (size * 8)
    r = run_probe(h1, [h4], h4.ip, count=2000, rate=rate, size=size, port=9002)["h4"]
    frame = size + 8 + 20 + 14   # the link carries Ethernet frames
    expected = SLOW.bandwidth_mbps * size / frame
    assert r.received == r.sent
    assert abs(r.throughput_mbps - expected) <= 0.10 * expected, r.summary()


def test_tree_link_loss_is_shared_by_exactly_the_receivers_below_it(net):
    h1 = net.host("h1")
    below = [net.host("h2"), net.host("h3")]          # behind s1-s2
    elsewhere = [net.host("h4"), net.host("h5")]      # behind s1-s3
    g = group_ip(rmp_group(5))
    base = 2_000_000
    before = link_count(net, LOSSY.name, "s1")
    res = run_probe(h1, below + elsewhere, g, group=g, count=2000, rate=METER_PPS / 2, settle=1.5, net=net,
                    port=9005, start_seq=base)
    crossed = link_count(net, LOSSY.name, "s1") - before
    sent = res["h2"].sent
    lost = res["h2"].missing
    # 5 % is configured: a run that lost (almost) nothing would make the rest vacuous.
    assert len(lost) >= 0.02 * sent, res["h2"].summary()
    for h in below:
        assert res[h.name].missing == lost, h.name
    for h in elsewhere:
        assert res[h.name].received == sent, h.name
    # One copy crossed s1-s2 for both receivers below it: its drops are their shared losses.
    assert misses_explained(lost, sent, crossed, _dropped(net, LOSSY.name, base, base + sent)) == []


def test_multicast_reaches_exactly_the_joined_receivers(net):
    h1 = net.host("h1")
    joined = [net.host("h2"), net.host("h5")]          # IGMP v2 and v3
    others = [net.host("h3"), net.host("h4"), net.host("h6")]
    g = group_ip(rmp_group(6))
    res = run_probe(h1, joined, g, group=g, raw=True, count=600, rate=300, settle=1.5, net=net, port=9006,
                    watchers=others)
    sent = res["h2"].sent
    assert res["h5"].received == sent, res["h5"].summary()            # lossless path
    assert res["h2"].received >= 0.9 * sent, res["h2"].summary()      # behind the 5 % link
    for h in others:
        assert res[h.name].received == 0, h.name


def test_igmp_leave_prunes_within_one_second(net):
    h1 = net.host("h1")
    v2, v3 = net.host("h4"), net.host("h5")             # force_igmp_version 2 and 3
    stay = net.host("h6")
    g = group_ip(rmp_group(7))
    leave = {v2.name: 1.0, v3.name: 1.5}                # seconds after each one's first datagram
    res = run_probe(h1, [v2, v3, stay], g, group=g, raw=True, count=1800, rate=300, settle=1.5, net=net,
                    port=9007, leave_after=leave)
    for h in (v2, v3):
        r = res[h.name]
        assert r.left_ns is not None
        before = [t for t in r.arrivals_ns if t <= r.left_ns]
        after = [t for t in r.arrivals_ns if t > r.left_ns]
        assert before, h.name
        assert not after or max(after) - r.left_ns <= 1e9, (h.name, (max(after) - r.left_ns) / 1e9)
    # The sender kept going well past the leaves: the member that stayed saw it all.
    assert res[stay.name].received == res[stay.name].sent


def test_regional_group_stays_in_its_region(net):
    east = [net.host(n) for n in ("h2", "h3", "h6")]
    west = [net.host(n) for n in ("h4", "h5")]
    g = group_ip(region_group("east", 0))
    res = run_probe(net.host("h1"), east + west, g, group=g, raw=True, count=400, rate=200, settle=1.5,
                    net=net, port=9008)
    for h in east:
        assert res[h.name].received >= 0.9 * res[h.name].sent, h.name
    for h in west:
        assert res[h.name].received == 0, h.name
    # A sender outside the region reaches nobody, members included.
    res = run_probe(west[0], east + west[1:], g, group=g, raw=True, count=200, rate=200, settle=1.5, net=net,
                    port=9009)
    assert all(r.received == 0 for r in res.values())


def test_loss_delay_and_link_state_change_mid_run(net):
    h1, h2 = net.host("h1"), net.host("h2")
    try:
        net.set_loss(LOSSY.name, 0.2)
        r = run_probe(h1, [h2], h2.ip, count=3000, rate=3000, port=9010)["h2"]
        assert abs(r.loss - 0.2) <= 0.03, r.summary()
        net.set_loss(LOSSY.name, 0.0)
        net.set_delay(LOSSY.name, 5.0)
        r = run_probe(h1, [h2], h2.ip, count=1000, rate=2000, port=9011)["h2"]
        assert r.received == r.sent
        assert abs(r.median_delay_ms - 5.0) <= 2.0, r.summary()
        net.set_link(LOSSY.name, False)
        r = run_probe(h1, [h2], h2.ip, count=200, rate=1000, port=9012, start_seq=3_000_000)["h2"]
        assert r.sent == 200 and r.missing == set(range(3_000_000, 3_000_200)), r.summary()
        if net.impair == "relay":
            # netem's down link is an interface that is down: no qdisc sees those packets.
            down = {d["gseq"] for d in net.drops().to_pylist() if d["reason"] == "down" and d["gseq"] >= 3_000_000}
            assert down == r.missing
    finally:
        net.set_link(LOSSY.name, True)
        net.set_delay(LOSSY.name, LOSSY.delay_ms)
        net.set_loss(LOSSY.name, LOSSY.loss)


def test_one_host_cannot_flood_a_group(net):
    g = group_ip(rmp_group(9))
    r = run_probe(net.host("h1"), [net.host("h4")], g, group=g, count=6000, rate=3000, settle=1.5, net=net,
                  port=9013)["h4"]
    span_s = (r.last_ns - r.first_ns) / 1e9
    # The meter passes METER_PPS plus its burst (a tenth of a second's worth).
    assert r.received <= METER_PPS * span_s * 1.2 + METER_PPS / 10 + 50, r.summary()
    assert r.received >= METER_PPS * span_s * 0.8, r.summary()


def test_ground_truth_can_be_collected_from_the_state_dir(net):
    from rmptwin.emulation.droplog import collect

    h1, h2 = net.host("h1"), net.host("h2")
    before = link_count(net, LOSSY.name, "s1")
    r = run_probe(h1, [h2], h2.ip, count=1000, rate=2000, port=9014)["h2"]
    crossed = link_count(net, LOSSY.name, "s1") - before
    assert r.missing, r.summary()      # 5 % of 1000: something to find in the ground truth
    live = net.drops()              # flushes the relays' logs
    net.link_counts()
    drops, counts = collect(net.state_dir)
    if net.impair == "relay":
        assert drops.num_rows == live.num_rows > 0
        lossy = relay_count(counts, LOSSY.name, "s1")
        assert lossy.entered >= r.sent and lossy.dropped >= len(r.missing)
    else:
        # netem keeps no per-packet record, so there is nothing to collect; what the link
        # lost is accounted for by its qdisc's counters instead.
        assert drops.num_rows == 0 and counts.num_rows == 0
        assert misses_explained(r.missing, r.sent, crossed) == [], r.summary()


def test_docker_host_processes_run_under_the_containers_limits(net):
    if net.nodes_mode != "docker":
        pytest.skip("namespace hosts have no container")
    from rmptwin.emulation.cgroups import Limits, process_cgroup

    h = net.host("h1")
    p = h.popen(["sleep", "5"])
    try:
        # v1: the memory and cpu hierarchies' paths; v2: the one unified path.
        mine, container = process_cgroup(p.pid), process_cgroup(h.node.container_pid)
        assert (mine.memory, mine.cpu) == (container.memory, container.cpu), (mine, container)
        assert container.memory not in ("", "/") and container.cpu not in ("", "/"), container
        # The limits docker was given, read back from memory.max / cpu.max (v2) or
        # memory.limit_in_bytes / cpu.cfs_quota_us (v1).
        assert mine.limits == Limits(DOCKER_MEMORY_MB << 20, DOCKER_CPUS), mine
        assert "bookworm" in h.cmd("cat /etc/os-release")      # the container's filesystem
    finally:
        p.kill()


def test_net_trees_shows_the_running_controllers_trees(net):
    import subprocess
    import sys
    import time

    from rmptwin.emulation.measure import PROBE

    g = region_group("east", 1)
    h2 = net.host("h2")
    # The receiver stays joined until killed; 30 s bound the wait for its join to show (one
    # `rmptwin net trees` takes seconds on a VM's emulated CPU).
    p = h2.popen(PROBE + ["recv", "--group", group_ip(g), "--intf-ip", h2.ip, "--port", "9015", "--duration", "60",
                          "--idle", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "net", "trees", "--state-dir", str(net.state_dir)],
                               capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
            if g in r.stdout:
                break
            time.sleep(0.3)
        assert r.returncode == 0, r.stderr
        row = next(line for line in r.stdout.splitlines() if g in line)
        # h2 on s2 joined; from s1 (east) the tree is s1->s2; the scope is the region.
        assert "h2" in row and "east" in row
        assert "s1→s2" in r.stdout
    finally:
        p.kill()


def _members(net, g: str) -> set[str]:
    return set(net.controller_state().get("groups", {}).get(g, {}).get("members", ()))


def _joined_within(net, g: str, host: str, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if host in _members(net, g):
            return True
        time.sleep(0.2)
    return False


def _hold_membership(h, g: str, port: int):
    """A probe receiver on ``h`` that joins ``g`` and stays joined until killed."""
    import subprocess

    from rmptwin.emulation.measure import PROBE

    p = h.popen(PROBE + ["recv", "--group", g, "--intf-ip", h.ip, "--port", str(port), "--duration", "60",
                         "--idle", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    return p


def test_a_join_lost_while_its_switch_was_away_comes_back_when_the_switch_reconnects(net):
    """The controller queries a switch's hosts when the switch connects: reports sent while
    its controller connection was down (an overloaded machine misses echo replies) are
    answered again instead of being lost for the run."""
    import time

    s2 = net.sw_name["s2"]                     # the OVS bridge's name
    sw = net.net.get(s2)
    target = sw.cmd(f"ovs-vsctl get-controller {s2}").split()
    assert target, "s2 has no controller"
    # h3 runs IGMPv3: both reports of a join go within a second. (A v2 host repeats its report
    # up to 10 s later, which would bring the join back without any query.)
    g, h3 = group_ip(rmp_group(11)), net.host("h3")
    sw.cmd(f"ovs-vsctl del-controller {s2}")
    p = None
    try:
        p = _hold_membership(h3, g, 9016)
        time.sleep(2.5)                       # a v3 join's two reports, both dropped in fail-secure
        assert "h3" not in _members(net, g), "the reports reached the controller: nothing was lost"
    finally:
        sw.cmd(f"ovs-vsctl set-controller {s2} " + " ".join(target))
    try:
        assert _joined_within(net, g, "h3", 30), "the join did not come back after s2 reconnected"
    finally:
        p.kill()


def test_a_join_whose_reports_were_lost_comes_back_when_the_runner_asks_for_a_query(net):
    import shutil
    import time

    if shutil.which("iptables") is None:
        pytest.skip("needs iptables to drop a host's IGMP reports")
    g, h5 = group_ip(rmp_group(12)), net.host("h5")    # IGMPv3, as above
    drop = "iptables -w {} OUTPUT -p igmp -j DROP"
    if "error" in h5.cmd(drop.format("-A") + " 2>&1 || echo error"):
        pytest.skip("iptables cannot filter in this host's namespace")
    p = None
    try:
        p = _hold_membership(h5, g, 9017)
        time.sleep(2.5)
    finally:
        h5.cmd(drop.format("-D"))
    try:
        # Lost, and nothing repeats it on its own: the kernel reports a join twice, then only
        # when asked.
        assert not _joined_within(net, g, "h5", 3), "the reports reached the controller: nothing was lost"
        net.request_igmp_query()
        assert _joined_within(net, g, "h5", 15), "the join did not come back after the query"
    finally:
        p.kill()
