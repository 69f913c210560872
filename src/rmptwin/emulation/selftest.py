"""`rmptwin net selftest`: measure every impaired link of a running network against its
configuration.

For a switch-switch link a-b, a probe namespace is attached to each switch and two
high-priority flows pin the probe traffic to that link alone (a: probe port -> the port
towards b; b: the port from a -> its probe), so the measurement is the link and its two
switches, whatever the trees and shortest paths are. For a host's access link, the probe
sits on the host's switch and the host itself receives.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from rmptwin.emulation.emulated_network import EmuHost, EmulatedNetwork
from rmptwin.emulation.impair import disable_tx_offload, is_impaired
from rmptwin.emulation.measure import ProbeResult, run_probe
from rmptwin.model import LinkParams

COOKIE = "0x7e57"
LOSS_TOL, DELAY_TOL_MS, BW_TOL = 0.015, 2.0, 0.10


@dataclass
class LinkCheck:
    link: str
    quantity: str
    configured: float
    measured: float
    tolerance: str
    ok: bool


def _probe(net: EmulatedNetwork, name: str, switch: str, ip: str, mac: str) -> tuple[EmuHost, int]:
    from mininet.node import Host

    assert net.net is not None   # a running network's
    node = net.net.addHost(name, cls=Host, ip=f"{ip}/8", mac=mac)
    sw = net.net.get(net.sw_name[switch])
    link = net.net.addLink(sw, node)
    port = sw.ports[link.intf1]
    # The switch is running: add the port to OVS with the number Mininet gave it.
    subprocess.run(["ovs-vsctl", "add-port", sw.name, link.intf1.name, "--", "set", "Interface",
                    link.intf1.name, f"ofport_request={port}"], check=True, capture_output=True, text=True)
    sw.cmd(f"ip link set {link.intf1.name} up")
    node.configDefault()    # added after build(): address and MAC are not set yet
    intf = link.intf2.name
    node.cmd(f"sysctl -qw net.ipv6.conf.all.disable_ipv6=1; ethtool -K {intf} tx off >/dev/null 2>&1")
    disable_tx_offload(sw, link.intf1.name)
    return EmuHost(node, ip, intf), port


def _ofctl(net: EmulatedNetwork, switch: str, flow: str) -> None:
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", net.sw_name[switch], f"cookie={COOKIE},{flow}"],
                   check=True, capture_output=True, text=True)


def _checks(name: str, p: LinkParams, measure_once: Callable[[], ProbeResult],
            measure_bw: Callable[[int], ProbeResult]) -> list[LinkCheck]:
    out = []
    r = measure_once()
    loss = p.loss.mean
    out.append(LinkCheck(name, "loss", loss, r.loss, f"±{LOSS_TOL * 100:.1f} pts", abs(r.loss - loss) <= LOSS_TOL))
    delay = p.delay_ms + p.jitter_ms / 2
    out.append(LinkCheck(name, "delay ms (median)", delay, r.median_delay_ms, f"±{DELAY_TOL_MS:.0f} ms",
                         abs(r.median_delay_ms - delay) <= DELAY_TOL_MS))
    if p.bandwidth_mbps:
        size = 1400
        bw = measure_bw(size)
        expected = p.bandwidth_mbps * size / (size + 42)
        out.append(LinkCheck(name, "bandwidth Mbit/s", expected, bw.throughput_mbps, f"±{BW_TOL * 100:.0f} %",
                             abs(bw.throughput_mbps - expected) <= BW_TOL * expected))
    return out


def selftest(net: EmulatedNetwork, count: int = 4000, rate: float = 2000.0,
             progress: Callable[[str], None] | None = None) -> list[LinkCheck]:
    progress = progress or (lambda msg: None)
    results: list[LinkCheck] = []
    n = 0
    for link in net.topo.links:
        if not is_impaired(link):
            continue
        n += 1
        progress(f"measuring {link.name}")
        pa, port_a = _probe(net, f"pa{n}", link.a, f"10.254.{n}.1", f"02:fe:00:00:{n:02x}:01")
        pb, port_b = _probe(net, f"pb{n}", link.b, f"10.254.{n}.2", f"02:fe:00:00:{n:02x}:02")
        pa.node.setARP(pb.ip, f"02:fe:00:00:{n:02x}:02")
        _ofctl(net, link.a, f"priority=1000,in_port={port_a},actions=output:{net.wiring.links[link.a][link.b]}")
        _ofctl(net, link.b, f"priority=1000,ip,nw_dst={pb.ip},in_port={net.wiring.links[link.b][link.a]},"
                            f"actions=output:{port_b}")
        p = LinkParams.model_validate(link.model_dump(exclude={"a", "b"}))
        results += _checks(link.name, p,
                           lambda: run_probe(pa, [pb], pb.ip, count=count, rate=rate, port=9100)[pb.name],
                           lambda size: run_probe(pa, [pb], pb.ip, count=2000, size=size, port=9101,
                                                  # called only for a link with a bandwidth (_checks)
                                                  rate=cast(float, p.bandwidth_mbps) * 1.5e6 / (size * 8))[pb.name])
    for h in net.topo.hosts:
        if not is_impaired(h.link):
            continue
        n += 1
        name = f"{h.name}-{h.switch}"
        progress(f"measuring {name}")
        target = net.host(h.name)
        pa, port_a = _probe(net, f"pa{n}", h.switch, f"10.254.{n}.1", f"02:fe:00:00:{n:02x}:01")
        mac = target.cmd(f"cat /sys/class/net/{target.intf}/address").strip()
        pa.node.setARP(target.ip, mac)
        _ofctl(net, h.switch, f"priority=1000,in_port={port_a},actions=output:{net.wiring.hosts[h.name].port}")
        results += _checks(name, h.link,
                           lambda: run_probe(pa, [target], target.ip, count=count, rate=rate, port=9100)[h.name],
                           lambda size: run_probe(pa, [target], target.ip, count=2000, size=size, port=9101,
                                                  rate=cast(float, h.link.bandwidth_mbps) * 1.5e6 / (size * 8))[h.name])
    return results
