"""Which core plays which role. Drivers (simulator, runtime) build every host through here.

Each entry is a factory function with the signature
``factory(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core``.
The roles in ``TAKES_ADAPTERS`` also take ``adapters=``: the I/O their cores are handed, which the driver owns.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rmptwin.core.sansio import Core
from rmptwin.errors import UserError
from rmptwin.factories import attacker_factory as attacker
from rmptwin.factories import floor, orders, rmp
from rmptwin.factories import taxonomy_factory as taxonomy
from rmptwin.factories import venue_factory as venue
from rmptwin.factories.adapters import Adapters
from rmptwin.model import HostSpec, LoadedExperiment

Factory = Callable[..., Core]

FACTORIES: dict[str, Factory] = {
    "source": rmp.build_source,
    "primary": rmp.build_primary,
    "secondary": rmp.build_secondary,
    "reformation": rmp.build_reformation,
    "retransmit": rmp.build_retransmit,
    "customer": rmp.build_customer,
    "gateway": venue.build_gateway,
    "venue": venue.build_venue,
    "sequencer": venue.build_sequencer,
    "history": venue.build_history,
    "client": venue.build_client,
    "trader": orders.build_trader,
    "portal": orders.build_portal,
    "broker": orders.build_broker,
    "exchange": orders.build_exchange,
    "attacker": attacker.build_attacker,
    "taxonomy_member": taxonomy.build_member,
    "participant": floor.build_participant,
}

# An application section of the experiment may give a role another core: under
# ``taxonomy:`` a source is a taxonomy sender; under ``floor:`` a primary is an arbiter
# while it holds the token. Section name -> role -> factory, as FACTORIES.
SECTION_FACTORIES: dict[str, dict[str, Factory]] = {
    "taxonomy": {"source": taxonomy.build_sender},
    "floor": {"primary": floor.build_arbiter},
}

TAKES_ADAPTERS = frozenset({"gateway", "venue", "sequencer", "history", "client"})


def build_core(host: HostSpec, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
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
    if host.role in TAKES_ADAPTERS:
        return target(host, loaded, rng, recovering=recovering, adapters=adapters or Adapters())
    return target(host, loaded, rng, recovering=recovering)
