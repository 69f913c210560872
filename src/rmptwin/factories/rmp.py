"""Role factories (see ``rmptwin.factories.FACTORIES``): build each RMP core from its host spec,
the experiment's protocol and the topology. Signature:
``factory(host, loaded, rng, *, recovering=False) -> Core``."""

from __future__ import annotations

import random

from ..spec import LoadedExperiment
from ..rmp.common import Timing, primary_ring, reformation_servers, secondary_ring, stripes_of
from ..rmp.primary import PrimaryCore
from ..rmp.reformation import ReformationCore
from ..rmp.secondary import SecondaryCore
from ..rmp.source import SourceCore


def _timing(loaded: LoadedExperiment) -> Timing:
    return Timing.from_protocol(loaded.experiment.protocol)


def _all_stripes(loaded: LoadedExperiment) -> list[int]:
    return list(range(loaded.experiment.workload.stripes))


def build_source(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> SourceCore:
    stripes = stripes_of(host, loaded)
    sites = {k: (primary_ring(loaded, k) or [None])[0] for k in stripes}
    tag = f"{rng.randrange(1 << 16):04x}" if recovering else None
    return SourceCore(host.name, stripes, _timing(loaded), reformation_servers(loaded), sites, incarnation=tag)


def build_primary(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> PrimaryCore:
    stripes = stripes_of(host, loaded)
    rings = {k: primary_ring(loaded, k) for k in stripes}
    sec_rings = {}
    for h in loaded.topology.hosts_with_role("secondary"):
        if h.primary != host.name:
            continue
        for k in stripes:
            members = secondary_ring(loaded, h.ring, k)
            if members and members[0] == host.name:
                sec_rings[(h.ring, k)] = members
    return PrimaryCore(host.name, rings, _timing(loaded), reformation_servers(loaded), regions=list(host.regions),
                       secondary_rings=sec_rings, recovering=recovering)


def build_secondary(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False) -> SecondaryCore:
    stripes = stripes_of(host, loaded)
    return SecondaryCore(
        host.name, stripes, _timing(loaded), reformation_servers(loaded), primary=host.primary,
        primaries={k: primary_ring(loaded, k) for k in stripes}, ring=host.ring,
        ring_members={k: secondary_ring(loaded, host.ring, k) for k in stripes}, regions=list(host.regions),
        recovering=recovering,
    )


def build_reformation(host, loaded: LoadedExperiment, rng: random.Random, *,
                      recovering: bool = False) -> ReformationCore:
    stripes = _all_stripes(loaded)
    rings = {k: primary_ring(loaded, k) for k in stripes}
    return ReformationCore(host.name, rings, rings, _timing(loaded), servers=reformation_servers(loaded))


def build_customer(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    from ..rmp.customer import CustomerCore

    return CustomerCore(host, loaded, rng, recovering=recovering)


def build_retransmit(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False):
    from ..rmp.retransmit import RetransmitCore

    return RetransmitCore(host, loaded, rng, recovering=recovering)
