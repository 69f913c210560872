"""`RmpTopo`: a spec topology as a Mininet ``Topo``, for ``EmulatedNetwork`` and stock ``mn``.

``build`` reads a topology (a spec ``Topology`` or a YAML path) and adds its switches, its
hosts (addresses ``host_ip(i)``, MACs ``host_mac(i)``) and its links, each switch port
numbered as the controller's ``Wiring`` expects: switch-switch links first, then hosts. How
an impaired link is made depends on the backend:

- ``netem``: a ``TCLink`` carrying the link's delay, jitter, Bernoulli loss, bandwidth and
  queue (``EmulatedNetwork`` then rewrites each end's qdisc with the exact configuration,
  Gilbert-Elliott loss included: ``impair.NetemLink``);
- ``relay``: a ``RelayNode`` of its own between the two ends, ``r<k>l<N>``, joined to end a
  by its interface ``r<k>l<N>a`` and to end b by ``r<k>l<N>b``; ``EmulatedNetwork`` runs
  the relay process in it (``impair.RelayLink``);
- ``none``: a plain veth pair.

From stock Mininet, as root, from the clone (Mininet's ``topos`` convention, below)::

    mn --custom src/rmptwin/emulation/topo.py --topo rmptwin,topologies/line3.yaml \\
       --switch ovsbr,datapath=user --controller none --test pingall

``--topo rmptwin,FILE,impair=netem`` (or ``none``) chooses the links; the default, ``auto``,
is netem where the kernel has sch_netem, else unimpaired links. The relays need the
processes ``rmptwin net up`` runs, so stock mn cannot use them. Without the openvswitch
kernel module OVS needs ``datapath=user``. With no controller the switches must forward
on their own: ``ovsbr`` is OVS as a learning bridge (loop-free topologies only; an
OpenFlow ``ovs`` switch in secure mode would wait for a controller for ever). Drop
``--test pingall`` for the Mininet CLI. ``rmptwin net up TOPOLOGY --cli`` gives the same
network with the project's controller, impairment and Docker hosts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _put_rmptwin_on_path() -> None:
    """``mn --custom`` runs this file's text with the system Python, outside the venv: put
    the clone's ``src`` and its venv's packages (the locked pydantic and PyYAML) first."""
    here = Path(sys._getframe(1).f_code.co_filename).resolve()
    repo = here.parents[3]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    sys.path[:0] = [str(repo / "src"), str(repo / ".venv" / "lib" / version / "site-packages")]


if not __package__:   # executed by `mn --custom`, not imported as rmptwin.emulation.topo
    _put_rmptwin_on_path()

from mininet.link import TCLink
from mininet.log import info
from mininet.node import Switch
from mininet.topo import Topo

from rmptwin.core.groups import host_ip, host_mac
from rmptwin.emulation.env import has_netem
from rmptwin.emulation.flows import HostPort
from rmptwin.emulation.impair import delay_only, disable_tx_offload, is_impaired, traced_links
from rmptwin.errors import UserError
from rmptwin.model import Bernoulli, HostSpec, LinkParams, LinkSpec, Topology, load_topology

TOPO_IMPAIR = ("none", "netem", "relay")


def link_params(link: LinkSpec) -> LinkParams:
    """The impairment part of a topology link (LinkSpec minus its ends)."""
    return LinkParams.model_validate(link.model_dump(exclude={"a", "b"}))


def tc_params(p: LinkParams) -> dict[str, Any]:
    """Mininet ``TCLink`` options for a link: what TCLink can express of it."""
    d: dict[str, Any] = {"max_queue_size": p.queue_limit(), "use_htb": True}
    if p.delay_ms or p.jitter_ms:
        d["delay"] = f"{p.delay_ms + p.jitter_ms / 2}ms"
        if p.jitter_ms:
            d["jitter"] = f"{p.jitter_ms / 2}ms"
    if isinstance(p.loss, Bernoulli) and p.loss.p:
        d["loss"] = p.loss.p * 100
    if p.bandwidth_mbps:
        d["bw"] = p.bandwidth_mbps
    return d


class RelayNode(Switch):   # type: ignore[misc]  # Mininet is untyped: its Switch is Any
    """An impaired link's relay as a node: a network namespace between the link's two veths,
    in which ``relay.py`` forwards frames. A two-port forwarder rather than an OpenFlow switch
    (as Mininet's LinuxBridge is a Switch): Mininet starts and stops it with the switches,
    and pingall, which pings hosts, leaves it out."""

    controlIntf = None   # Switch sets one only outside a namespace; defaultIntf() reads it

    def __init__(self, name: str, **params: Any) -> None:
        params["inNamespace"] = True
        super().__init__(name, **params)

    def start(self, controllers: list[Any]) -> None:
        # Frames relayed through AF_PACKET keep a veth's partial checksum unless tx
        # offload is off on the relay's own interfaces too.
        for intf in self.intfNames():
            self.cmd(f"ip link set {intf} up")
            disable_tx_offload(self, intf)

    def dpctl(self, *args: object) -> str:
        return f"{self.name}: an impairment relay, no flow table\n"


@dataclass(frozen=True)
class ImpairedLink:
    """An impaired link of the topology and where its impairment sits once built: in a relay
    node, or in the TCLink behind ``switch``'s ``port``."""

    name: str
    a: str
    b: str
    params: LinkParams
    switch: str          # Mininet name of the switch at one end
    port: int            # that switch's port on this link
    relay: str | None = None


class RmpTopo(Topo):   # type: ignore[misc]  # Mininet is untyped: its Topo is Any
    """A spec topology as Mininet nodes and links. ``tag`` k names switches ``r<k>s<N>`` and
    relays ``r<k>l<N>``, the marks ``rmptwin net down`` finds; without it, switches keep the
    topology's names. After ``build``: ``switch_names``, ``switch_ports`` (switch -> neighbour
    switch -> port), ``host_ports`` and ``impaired`` (link name -> ImpairedLink)."""

    def build(self, topology: Topology | str | Path, impair: str = "none", tag: int | None = None,
              access_in_nodes: frozenset[str] = frozenset()) -> None:
        if impair not in TOPO_IMPAIR:
            raise UserError(f"unknown impairment {impair!r} for a topology; choose {', '.join(TOPO_IMPAIR)}")
        self.topology = topology if isinstance(topology, Topology) else load_topology(topology)
        self.impair = impair
        self.tag = tag
        self.switch_names = {s: (f"r{tag}s{i + 1}" if tag is not None else s)
                             for i, s in enumerate(self.topology.switches)}
        self.switch_ports: dict[str, dict[str, int]] = {s: {} for s in self.topology.switches}
        self.host_ports: dict[str, HostPort] = {}
        self.impaired: dict[str, ImpairedLink] = {}
        self.relay_nodes: list[str] = []
        # Hosts whose delay-only access link their own node shapes (relay backend only): a plain veth here.
        self.access_in_nodes = frozenset(h.name for h in self.topology.hosts if impair == "relay"
                                         and h.name in access_in_nodes and delay_only(h.link))
        for i, s in enumerate(self.topology.switches):
            self.addSwitch(self.switch_names[s], dpid=f"{i + 1:016x}")
        for i, h in enumerate(self.topology.hosts):
            self.addHost(h.name, ip=f"{host_ip(i)}/8", mac=host_mac(i))
        for link in self.topology.links:
            self._add_switch_link(link)
        for i, h in enumerate(self.topology.hosts):
            self._add_host_link(i, h)

    def _next_port(self, switch: str) -> int:
        return len(self.ports.get(self.switch_names[switch], {})) + 1

    def _add_switch_link(self, link: LinkSpec) -> None:
        sa, sb = self.switch_names[link.a], self.switch_names[link.b]
        pa, pb = self._next_port(link.a), self._next_port(link.b)
        params = link_params(link)
        if self.impair == "relay":
            relay = self._add_relay(sa, pa, sb, pb)
            self.impaired[link.name] = ImpairedLink(link.name, link.a, link.b, params, sa, pa, relay)
        elif self.impair == "netem":
            # Every switch-switch link can be changed mid-run (faults), so each gets netem.
            self.addLink(sa, sb, port1=pa, port2=pb, cls=TCLink, **tc_params(params))
            self.impaired[link.name] = ImpairedLink(link.name, link.a, link.b, params, sa, pa)
        else:
            self.addLink(sa, sb, port1=pa, port2=pb)
        self.switch_ports[link.a][link.b] = pa
        self.switch_ports[link.b][link.a] = pb

    def _add_host_link(self, index: int, host: HostSpec) -> None:
        sw, port = self.switch_names[host.switch], self._next_port(host.switch)
        name = f"{host.name}-{host.switch}"
        if host.name in self.access_in_nodes:
            self.addLink(sw, host.name, port1=port)
        elif is_impaired(host.link) and self.impair == "relay":
            # Host first, so that the host's own shell makes its veth and keeps eth0.
            relay = self._add_relay(host.name, None, sw, port)
            self.impaired[name] = ImpairedLink(name, host.name, host.switch, host.link, sw, port, relay)
        elif is_impaired(host.link) and self.impair == "netem":
            self.addLink(host.name, sw, port2=port, cls=TCLink, **tc_params(host.link))
            self.impaired[name] = ImpairedLink(name, host.name, host.switch, host.link, sw, port)
        else:
            self.addLink(sw, host.name, port1=port)
        self.host_ports[host.name] = HostPort(host.name, host.switch, port, host_ip(index))

    def _add_relay(self, node_a: str, port_a: int | None, node_b: str, port_b: int) -> str:
        """node_a -- [relay] -- node_b. The end that is not the relay comes first in each
        link, so its namespace (the root one for a switch) creates the veth pair."""
        n = len(self.relay_nodes) + 1
        relay = f"r{self.tag}l{n}" if self.tag is not None else f"l{n}"
        self.relay_nodes.append(relay)
        self.addSwitch(relay, cls=RelayNode)
        self.addLink(node_a, relay, port1=port_a, intfName2=f"{relay}a")
        self.addLink(node_b, relay, port1=port_b, intfName2=f"{relay}b")
        return relay


def stock_topo(topology: str, impair: str = "auto") -> RmpTopo:
    """``--topo rmptwin,FILE[,impair=auto|netem|none]`` in stock ``mn``."""
    if impair == "relay":
        raise UserError("the relay backend needs the relay processes `rmptwin net up` runs; "
                        "from stock mn use impair=netem or impair=none")
    traced = traced_links(load_topology(topology))
    if traced:   # netem cannot replay a trace, and "none" would drop it silently
        raise UserError(f"link {traced[0]}: a loss trace needs the relay processes `rmptwin net up` runs; "
                        "stock mn cannot replay it")
    if impair == "auto":
        impair = "netem" if has_netem() else "none"
        if impair == "none":
            info("*** rmptwin: this kernel has no sch_netem: links are not impaired "
                 "(`rmptwin net up` impairs them with its user-space relays)\n")
    return RmpTopo(topology, impair=impair)


topos = {"rmptwin": stock_topo}
