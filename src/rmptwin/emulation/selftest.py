"""`rmptwin net selftest`: measure every impaired link of a running network against its
configuration.

For a switch-switch link a-b, a probe namespace is attached to each switch and two
high-priority flows pin the probe traffic to that link alone (a: probe port -> the port
towards b; b: the port from a -> its probe), so the measurement is the link and its two
switches, whatever the trees and shortest paths are. For a host's access link, the probe
sits on the host's switch and the host itself receives.

At a time dilation factor N (``--tdf``) the network runs ``dilated_topology(topo, N)``: the
probes are paced and measured on the wall clock at N times fewer datagrams per second (the
same traffic in virtual time), and each figure is put in virtual time
(``dilation.virtual_figures``) before it is compared with the configured, undilated link.
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from rmptwin.emulation.dilation import LinkFigures, virtual_figures
from rmptwin.emulation.emuhost import EmuHost
from rmptwin.emulation.emulated_network import EmulatedNetwork
from rmptwin.emulation.impair import disable_tx_offload, is_impaired
from rmptwin.emulation.measure import ProbeResult, run_probe
from rmptwin.model import LinkParams, Topology

COOKIE = "0x7e57"
LOSS_TOL, DELAY_TOL_MS, BW_TOL = 0.015, 2.0, 0.10   # in virtual units at any factor
BW_SIZE = 1400   # the bandwidth probe's payload, bytes


@dataclass
class LinkCheck:
    link: str
    quantity: str
    configured: float
    measured: float     # in virtual time (the wall clock's figure at factor 1)
    tolerance: str
    ok: bool
    wall: float         # as measured on the wall clock, before virtual_figures


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


def delay_probe_rate(p: LinkParams, rate: float) -> float:
    """Delay probes per (virtual) second on link ``p``: ``rate``, but on a jittered link at most
    one per two jitters. The link never reorders, so a probe whose jitter draw would land it
    before its predecessor is held back to it; probes spaced at least a jitter apart are never
    held, and their delays are then the link's own uniform [delay, delay + jitter) (twice the
    jitter: the sender's pacing is not exact)."""
    return min(rate, 1000.0 / (2 * p.jitter_ms)) if p.jitter_ms else rate


def jitter_ms(delays_ms: list[float]) -> float:
    """The jitter of a uniform [d, d + j) delay from its samples: twice their interquartile
    range (robust to the few probes a busy machine delays)."""
    if len(delays_ms) < 4:
        return float("nan")
    q1, _, q3 = statistics.quantiles(delays_ms, n=4)
    return 2 * (q3 - q1)


def _checks(name: str, p: LinkParams, tdf: float, measure_once: Callable[[], ProbeResult],
            measure_bw: Callable[[], ProbeResult]) -> list[LinkCheck]:
    r = measure_once()
    bw = measure_bw() if p.bandwidth_mbps else None
    wall = LinkFigures(loss=r.loss, delay_ms=r.median_delay_ms,
                       jitter_ms=jitter_ms(r.delays_ms) if p.jitter_ms else None,
                       rate_mbps=bw.throughput_mbps if bw is not None else None)
    v = virtual_figures(wall, tdf)
    loss = p.loss.mean
    out = [LinkCheck(name, "loss", loss, v.loss, f"±{LOSS_TOL * 100:.1f} pts", abs(v.loss - loss) <= LOSS_TOL,
                     wall.loss)]
    delay = p.delay_ms + p.jitter_ms / 2
    out.append(LinkCheck(name, "delay ms (median)", delay, v.delay_ms, f"±{DELAY_TOL_MS:.0f} ms",
                         abs(v.delay_ms - delay) <= DELAY_TOL_MS, wall.delay_ms))
    if v.jitter_ms is not None and wall.jitter_ms is not None:
        out.append(LinkCheck(name, "jitter ms (2 x IQR)", p.jitter_ms, v.jitter_ms, f"±{DELAY_TOL_MS:.0f} ms",
                             abs(v.jitter_ms - p.jitter_ms) <= DELAY_TOL_MS, wall.jitter_ms))
    if p.bandwidth_mbps and v.rate_mbps is not None and wall.rate_mbps is not None:
        expected = p.bandwidth_mbps * BW_SIZE / (BW_SIZE + 42)   # the payload's share of each frame
        out.append(LinkCheck(name, "bandwidth Mbit/s", expected, v.rate_mbps, f"±{BW_TOL * 100:.0f} %",
                             abs(v.rate_mbps - expected) <= BW_TOL * expected, wall.rate_mbps))
    return out


def _measure(pa: EmuHost, dst: EmuHost, p: LinkParams, tdf: float, count: int, rate: float,
             bw_count: int) -> tuple[Callable[[], ProbeResult], Callable[[], ProbeResult]]:
    """The delay/loss probe and the bandwidth probe of link ``p`` from ``pa`` to ``dst``, paced
    in virtual time: the wall clock sends ``tdf`` times fewer datagrams per second."""
    def once() -> ProbeResult:
        wall_rate = delay_probe_rate(p, rate) / tdf
        # the receiver ends a second after the last arrival: never between two slow probes
        return run_probe(pa, [dst], dst.ip, count=count, rate=wall_rate, port=9100,
                         idle=max(1.0, 3 / wall_rate))[dst.name]

    def bandwidth() -> ProbeResult:
        # 1.5 x the link's rate: its queue fills, and the arrivals are spaced by its serialization
        pps = (p.bandwidth_mbps or 0.0) * 1.5e6 / (BW_SIZE * 8)
        return run_probe(pa, [dst], dst.ip, count=bw_count, size=BW_SIZE, port=9101, rate=pps / tdf)[dst.name]
    return once, bandwidth


def selftest(net: EmulatedNetwork, count: int = 4000, rate: float = 2000.0,
             progress: Callable[[str], None] | None = None, *, bw_count: int = 2000, tdf: float = 1.0,
             configured: Topology | None = None) -> list[LinkCheck]:
    """Measure every impaired link of ``net``. At ``tdf`` > 1, ``net`` runs the dilated
    ``configured`` topology (``dilated_topology``): its links are found by name, and every
    figure is compared, in virtual time, with ``configured``'s. ``rate``: probes per virtual
    second."""
    progress = progress or (lambda msg: None)
    topo = configured or net.topo
    results: list[LinkCheck] = []
    n = 0
    for link in topo.links:
        if not is_impaired(link):
            continue
        n += 1
        p = LinkParams.model_validate(link.model_dump(exclude={"a", "b"}))
        progress(f"measuring {link.name} ({count} probes at {delay_probe_rate(p, rate) / tdf:g}/s on the wall clock)")
        pa, port_a = _probe(net, f"pa{n}", link.a, f"10.254.{n}.1", f"02:fe:00:00:{n:02x}:01")
        pb, port_b = _probe(net, f"pb{n}", link.b, f"10.254.{n}.2", f"02:fe:00:00:{n:02x}:02")
        pa.node.setARP(pb.ip, f"02:fe:00:00:{n:02x}:02")
        _ofctl(net, link.a, f"priority=1000,in_port={port_a},actions=output:{net.wiring.links[link.a][link.b]}")
        _ofctl(net, link.b, f"priority=1000,ip,nw_dst={pb.ip},in_port={net.wiring.links[link.b][link.a]},"
                            f"actions=output:{port_b}")
        results += _checks(link.name, p, tdf, *_measure(pa, pb, p, tdf, count, rate, bw_count))
    for h in topo.hosts:
        if not is_impaired(h.link):
            continue
        n += 1
        name = f"{h.name}-{h.switch}"
        progress(f"measuring {name} ({count} probes at {delay_probe_rate(h.link, rate) / tdf:g}/s on the wall clock)")
        target = net.host(h.name)
        pa, port_a = _probe(net, f"pa{n}", h.switch, f"10.254.{n}.1", f"02:fe:00:00:{n:02x}:01")
        mac = target.cmd(f"cat /sys/class/net/{target.intf}/address").strip()
        pa.node.setARP(target.ip, mac)
        _ofctl(net, h.switch, f"priority=1000,in_port={port_a},actions=output:{net.wiring.hosts[h.name].port}")
        results += _checks(name, h.link, tdf, *_measure(pa, target, h.link, tdf, count, rate, bw_count))
    return results
