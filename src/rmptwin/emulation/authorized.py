"""Who may send to which RMP multicast group: the network's half of seed section 6.

"We can eliminate illegal transmitters by configuring routers to only multicast the signal
from a particular source on a particular port." The controller installs a multicast tree
only for a sender this map authorizes for a group; any other host's frames to the group
are dropped at its edge switch by a counted flow rule (``emulation.flows``).

The map follows the topology's roles alone, per stripe k of the workload:

- ``rmp/k`` (the global stripe group): the sources publishing on k (S_P: ticker sources,
  unified orders' portals, trading-floor participants, which enter orders), and the ring
  machinery that multicasts on it: primaries (acks, tokens, retransmissions), secondaries
  (secondary tokens, NACKs) serving k, and every reformation server (invitations, new rings);
- ``region/r/k`` (a regional remulticast group): the R_T (primaries and secondaries) that
  remulticast k into region r, and the retransmit servers R_x of region r (graded repairs
  go to the region by multicast).

Customers, attackers and every other role are authorized for no RMP group. Groups outside
this map (the venues' groups) are not restricted. An emulated run restricts senders only
when its experiment has ``security.enabled``.
"""

from __future__ import annotations

from collections.abc import Callable

from rmptwin.core.groups import region_group, rmp_group
from rmptwin.core.striping import serves_stripe
from rmptwin.model import Topology

SOURCE_ROLES = ("source", "portal", "participant")
GLOBAL_SENDER_ROLES = ("primary", "secondary", "reformation")
REGION_SENDER_ROLES = ("primary", "secondary")


def authorized_senders(topology: Topology, stripes: int,
                       core_of: Callable[[int], int] | None = None) -> dict[str, frozenset[str]]:
    """Group name -> the hosts allowed to multicast to it, for stripes 0 .. ``stripes`` - 1.
    ``core_of`` maps an edge stripe (seed 4.4, numbered after the core ones) to its core
    stripe: its regional group is sent to by the R_T of that core stripe."""
    out: dict[str, frozenset[str]] = {}
    for k in range(stripes):
        core = core_of(k) if core_of is not None else k
        out[rmp_group(k)] = frozenset(
            h.name for h in topology.hosts
            if (h.role in SOURCE_ROLES or h.role in GLOBAL_SENDER_ROLES) and serves_stripe(getattr(h, "stripes", None), k))
        for r in topology.regions:
            out[region_group(r, k)] = frozenset(
                h.name for h in topology.hosts
                if r in getattr(h, "regions", ()) and (
                    h.role == "retransmit"
                    or (h.role in REGION_SENDER_ROLES and serves_stripe(getattr(h, "stripes", None), core))))
    return out
