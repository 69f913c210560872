"""Which core plays which role. Drivers (simulator, runtime) build every host through here.

Each entry is "module:function" with the signature
``factory(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core``
and is imported only when a host of that role is built.
"""

from __future__ import annotations

import importlib
import random

from ..sansio import Core
from ..errors import UserError
from ..spec import LoadedExperiment

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
}


def build_core(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core:
    try:
        target = FACTORIES[host.role]
    except KeyError:
        raise UserError(f"host {host.name}: unknown role {host.role!r}; known: {', '.join(FACTORIES)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)(host, loaded, rng, recovering=recovering)
