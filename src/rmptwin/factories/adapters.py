"""The I/O a driver hands the venue cores it builds (``Adapters``): stores and the CAS client."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmptwin.venue.sequencer import CasClient
from rmptwin.venue.stores import MemoryStores, VenueStores


@dataclass
class Adapters:
    """The I/O a driver owns and hands to the factories (cores never open a file or a socket).

    ``stores`` keeps each gateway's log and each history recorder's store; it outlives the
    cores, so a recovering host gets back what it had. The simulator keeps them in memory,
    one ``Adapters`` per run; a real node keeps them as files in its state directory
    (``node.durable_stores``). ``cas_client`` is the CAS memory of the sequencer host
    when it lives outside the core (etcd, in a real run of a ``sequencer: etcd``
    experiment); None: the in-memory CAS sequencer.
    """

    stores: VenueStores = field(default_factory=MemoryStores)
    cas_client: CasClient | None = None
