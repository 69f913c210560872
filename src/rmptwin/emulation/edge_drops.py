"""The edge drops of an emulated run: what the controller's unauthorized-sender rules dropped.

At the end of a run the runner reads every switch's OpenFlow flow statistics and sums the
packet counters of its ``PRIO_UNAUTH_DROP`` rules (``emulation.flows``), then logs one
EDGE_DROPS event per switch (node = the switch, ``detail.packets``). The security summary
(``analysis.security_summary``) adds them up as ``unauthorized_dropped``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmptwin.core.events import Event, Kind
from rmptwin.emulation.flows import PRIO_UNAUTH_DROP

if TYPE_CHECKING:
    from rmptwin.node.eventlog import EventWriter

_N_PACKETS = re.compile(r"\bn_packets=(\d+)")
_PRIORITY = re.compile(r"\bpriority=(\d+)")


def edge_drop_packets(dump_flows: str) -> int:
    """Packets counted by the unauthorized-sender drop rules in ``ovs-ofctl dump-flows`` output."""
    total = 0
    for line in dump_flows.splitlines():
        prio, packets = _PRIORITY.search(line), _N_PACKETS.search(line)
        if prio and packets and int(prio.group(1)) == PRIO_UNAUTH_DROP:
            total += int(packets.group(1))
    return total


def read_edge_drops(bridges: dict[str, str], on: Callable[[str], Any] | None = None) -> dict[str, int]:
    """Logical switch -> its edge-drop packet count, from its OVS bridge (name in ``bridges``).
    ``on(bridge)``: the Mininet switch, where it runs on a server: asked through its own shell
    there (this machine's Open vSwitch does not have it)."""
    out = {}
    for switch, bridge in sorted(bridges.items()):
        node = on(bridge) if on is not None else None
        if node is not None and getattr(node, "isRemote", False):
            text = node.cmd(f"ovs-ofctl -O OpenFlow13 dump-flows {bridge} && echo dump-done")
            if text.rstrip().endswith("dump-done"):
                out[switch] = edge_drop_packets(text)
            continue
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            out[switch] = edge_drop_packets(r.stdout)
    return out


def log_edge_drops(net: object, log: EventWriter, t_ns: int) -> None:
    """One EDGE_DROPS event per switch of ``net`` into the runner's event ``log``, when its
    controller enforced authorized senders (a flat network or ``authorized`` None: nothing)."""
    wiring = getattr(net, "wiring", None)
    bridges = getattr(net, "sw_name", None)
    if wiring is None or wiring.authorized is None or not bridges:
        return
    mininet = getattr(net, "net", None)
    for switch, packets in read_edge_drops(bridges, mininet.get if mininet is not None else None).items():
        log.add(t_ns, switch, "switch", Event(Kind.EDGE_DROPS, detail={"packets": packets}))
