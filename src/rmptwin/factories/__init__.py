"""Which core plays which role. Drivers (simulator, runtime) build every host through here.

Each entry is "module:function" with the signature
``factory(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core``
and is imported only when a host of that role is built. The roles in ``TAKES_ADAPTERS``
also take ``adapters=``: the I/O their cores are handed, which the driver owns.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass, field

from rmptwin.sansio import Core
from rmptwin.errors import UserError
from rmptwin.spec import LoadedExperiment
from rmptwin.venue.sequencer import CasClient
from rmptwin.venue.stores import MemoryStores, VenueStores

FACTORIES: dict[str, str] = {
    "source": "rmptwin.factories.rmp:build_source",
    "primary": "rmptwin.factories.rmp:build_primary",
    "secondary": "rmptwin.factories.rmp:build_secondary",
    "reformation": "rmptwin.factories.rmp:build_reformation",
    "retransmit": "rmptwin.factories.rmp:build_retransmit",
    "customer": "rmptwin.factories.rmp:build_customer",
    "gateway": "rmptwin.factories.venue:build_gateway",
    "venue": "rmptwin.factories.venue:build_venue",
    "sequencer": "rmptwin.factories.venue:build_sequencer",
    "history": "rmptwin.factories.venue:build_history",
    "client": "rmptwin.factories.venue:build_client",
    "trader": "rmptwin.factories.orders:build_trader",
    "portal": "rmptwin.factories.orders:build_portal",
    "broker": "rmptwin.factories.orders:build_broker",
    "exchange": "rmptwin.factories.orders:build_exchange",
    "attacker": "rmptwin.factories.attacker:build_attacker",
    "taxonomy_member": "rmptwin.factories.taxonomy:build_member",
    "participant": "rmptwin.factories.floor:build_participant",
}

# An application section of the experiment may give a role another core: under
# ``taxonomy:`` a source is a taxonomy sender; under ``floor:`` a primary is an arbiter
# while it holds the token. Section name -> role -> "module:function", as FACTORIES.
SECTION_FACTORIES: dict[str, dict[str, str]] = {
    "taxonomy": {"source": "rmptwin.factories.taxonomy:build_sender"},
    "floor": {"primary": "rmptwin.factories.floor:build_arbiter"},
}

TAKES_ADAPTERS = frozenset({"gateway", "venue", "sequencer", "history", "client"})


@dataclass
class Adapters:
    """The I/O a driver owns and hands to the factories (cores never open a file or a socket).

    ``stores`` keeps each gateway's log and each history recorder's store; it outlives the
    cores, so a recovering host gets back what it had. The simulator keeps them in memory,
    one ``Adapters`` per run; a real node keeps them as files in its state directory
    (``runtime.durable_stores``). ``cas_client`` is the CAS memory of the sequencer host
    when it lives outside the core (etcd, in a real run of a ``sequencer: etcd``
    experiment); None: the in-memory CAS sequencer.
    """

    stores: VenueStores = field(default_factory=MemoryStores)
    cas_client: CasClient | None = None


def build_core(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
               adapters: Adapters | None = None) -> Core:
    """The core of ``host``. Without ``adapters`` a venue host gets fresh in-memory stores,
    which do not survive a recovery: a driver that crashes and recovers hosts passes its own."""
    try:
        target = FACTORIES[host.role]
    except KeyError:
        raise UserError(f"host {host.name}: unknown role {host.role!r}; known: {', '.join(FACTORIES)}") from None
    for section, roles in SECTION_FACTORIES.items():
        if getattr(loaded.experiment, section, None) is not None:
            target = roles.get(host.role, target)
    module, func = target.split(":")
    factory = getattr(importlib.import_module(module), func)
    if host.role in TAKES_ADAPTERS:
        return factory(host, loaded, rng, recovering=recovering, adapters=adapters or Adapters())
    return factory(host, loaded, rng, recovering=recovering)
