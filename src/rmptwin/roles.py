"""Which core plays which role. Drivers (simulator, runtime) build every host through here.

Each entry is "module:function" with the signature
``factory(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core``
and is imported only when a host of that role is built.
"""

from __future__ import annotations

import importlib
import random

from .core import Core
from .errors import UserError
from .spec import LoadedExperiment

FACTORIES: dict[str, str] = {
    "source": "rmptwin.rmp.roles:build_source",
    "primary": "rmptwin.rmp.roles:build_primary",
    "secondary": "rmptwin.rmp.roles:build_secondary",
    "reformation": "rmptwin.rmp.roles:build_reformation",
    "retransmit": "rmptwin.rmp.roles:build_retransmit",
    "customer": "rmptwin.rmp.roles:build_customer",
    "gateway": "rmptwin.venue.roles:build_gateway",
    "venue": "rmptwin.venue.roles:build_venue",
    "sequencer": "rmptwin.venue.roles:build_sequencer",
    "history": "rmptwin.venue.roles:build_history",
    "client": "rmptwin.venue.roles:build_client",
}


def build_core(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> Core:
    try:
        target = FACTORIES[host.role]
    except KeyError:
        raise UserError(f"host {host.name}: unknown role {host.role!r}; known: {', '.join(FACTORIES)}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)(host, loaded, rng, recovering=recovering)
