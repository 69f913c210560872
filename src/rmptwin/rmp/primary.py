"""R_P: a primary receiver host (seed 2.1, 4): one token-ring member (``token_ring.RingMember``)
per stripe it serves, the secondary rings it anchors (``secondary_ring``), and regional
remulticast (``remulticast``)."""

from __future__ import annotations

from collections.abc import Sequence

from rmptwin.core.timing import Timing
from rmptwin.rmp.receiver_host import ReceiverHost
from rmptwin.rmp.seal import KeySet
from rmptwin.rmp.secondary_ring import SecondaryRing
from rmptwin.rmp.token_ring import RingMember


class PrimaryCore(ReceiverHost):
    """One R_P host: a ring member per stripe, the secondary rings it anchors, remulticast."""

    def __init__(self, name: str, rings: dict[int, list[str]], timing: Timing, reformers: list[str], *,
                 regions: Sequence[str] = (), secondary_rings: dict[tuple[str, int], list[str]] | None = None,
                 recovering: bool = False, heartbeat_ns: int | None = None, keys: KeySet | None = None,
                 requester_region: dict[str, str] | None = None) -> None:
        super().__init__(name, timing, reformers, regions, heartbeat_ns, keys, requester_region)
        self.tm = timing
        self.members: dict[int, RingMember] = {}   # the ring member of each stripe (its receiver)
        for stripe, ring in sorted(rings.items()):
            rm = self.add_remulticaster(stripe)
            member = self.members[stripe] = RingMember(self, stripe, timing, self.reporter, rm, ring, reformers,
                                                       recovering)
            self.receivers[stripe] = member
        self.sec_rings = {
            key: SecondaryRing(self, self.members[key[1]], key[0], ring, timing, self.reporter)
            for key, ring in (secondary_rings or {}).items() if key[1] in self.members
        }
