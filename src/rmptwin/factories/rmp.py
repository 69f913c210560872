"""RMP role factories (see ``rmptwin.factories.FACTORIES``): the spec -> config translation.

Each factory reads one host spec and the loaded experiment, builds the core's small frozen
config (``Timing``, ``CustomerConfig``, ``RetransmitConfig``, plain lists) and the core.
Signature: ``factory(host, loaded, rng, *, recovering=False, adapters=None) -> Core``; RMP
cores take no adapters (they need no stores or clients).

The topology questions those configs answer (the stripes a host serves, a stripe's primary
ring, ...) are ``rmptwin.model.queries``.

Security (``security.enabled``): ``keys_for`` reads the experiment's key file once
(``rmptwin.factories.keys``) and gives each core only what its role is entitled to (seed 6, 7.1).
"""

from __future__ import annotations

import random
from typing import TypeVar, cast

from rmptwin.core.timing import MS
from rmptwin.factories.adapters import Adapters
from rmptwin.model import (
    CustomerHost,
    HostSpec,
    LoadedExperiment,
    PortalHost,
    PrimaryHost,
    ReformationHost,
    RetransmitHost,
    SecondaryHost,
    SourceHost,
)
from rmptwin.model.bounds import stripe_rate
from rmptwin.model.queries import (
    REMULTICAST_ROLES,
    all_stripes,
    customer_stripes,
    edge_plan,
    primary_ring,
    protocol_timing,
    reformation_servers,
    remulticast_hosts,
    remulticasters,
    secondary_ring,
    stripes_of,
)
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.feed_watch import FeedWatchConfig
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.reformation import ReformationCore
from rmptwin.rmp.remulticast import DEFAULT_HEARTBEAT_NS
from rmptwin.rmp.repair import RepairConfig
from rmptwin.rmp.retransmit import RetransmitConfig, RetransmitCore
from rmptwin.rmp.seal import OVERHEAD as SEAL_OVERHEAD
from rmptwin.rmp.seal import KeySet
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore

# A stripe's feed is watched from when its first message is all but sure to be out: this
# many mean inter-arrival times after the workload starts (Poisson: P(none yet) = e^-10).
FIRST_MESSAGE_WAITS = 10

_RT = TypeVar("_RT", PrimaryCore, SecondaryCore)


def _repair_config(host: CustomerHost | RetransmitHost, loaded: LoadedExperiment, stripes: list[int]) -> RepairConfig:
    """Its repair timing; re-requests wait also for the answer to cross its access line."""
    proto = loaded.experiment.protocol
    mbps = host.link.bandwidth_mbps
    sealed = SEAL_OVERHEAD if loaded.experiment.security.enabled else 0
    return RepairConfig(name=host.name, regions=tuple(host.regions), stripes=tuple(stripes),
                        wait_ns=int(proto.dn_ms * 1e6), retry_ns=int(proto.tau_r * 1e6), k_r=proto.k_r,
                        line_bps=mbps * 1e6 if mbps is not None else None,
                        message_bytes=loaded.experiment.workload.message_bytes + sealed)


def customer_config(host: CustomerHost, loaded: LoadedExperiment) -> CustomerConfig:
    stripes = customer_stripes(host, loaded)
    regions = list(host.regions)
    region_of: dict[str, str] = {}
    for h in remulticast_hosts(loaded):
        shared = [r for r in getattr(h, "regions", []) if r in regions]
        if shared:
            region_of[h.name] = shared[0]
    feeds = {k: tuple(remulticasters(loaded, regions, k)) for k in stripes}
    return CustomerConfig(
        repair=_repair_config(host, loaded, stripes), grade=host.grade, retransmit=host.retransmit,
        remulticasters=feeds, region_of=region_of, keys=keys_for(host, loaded),
        feed_watch=feed_watch_config(loaded, feeds))


def feed_watch_config(loaded: LoadedExperiment, feeds: dict[int, tuple[str, ...]]) -> FeedWatchConfig | None:
    """When a customer's stripes count as silent (``rmp.feed_watch``): k R_T heartbeat
    intervals without data or a heartbeat, counted from when the stripe's first message is
    due out of the ring: the workload's start, FIRST_MESSAGE_WAITS inter-arrival times, then
    its ack and release (tau_t + Delta_A) and its way to us (dN). A stripe nothing is
    published on, or that would not see a message within the workload, is not watched."""
    exp = loaded.experiment
    p, wl = exp.protocol, exp.workload
    watch_from: dict[int, int] = {}
    for k, rts in feeds.items():
        rate = stripe_rate(loaded, k)
        wait_s = FIRST_MESSAGE_WAITS / rate if rate > 0 else None
        if rts and wait_s is not None and wait_s < wl.duration_s:
            watch_from[k] = round((wl.start_s + wait_s) * 1e9 + (p.tau_t + p.delta_a + p.dn_ms) * MS)
    if not watch_from:
        return None
    return FeedWatchConfig(stale_ns=p.stale_heartbeats * DEFAULT_HEARTBEAT_NS, retry_ns=round(p.tau_r * MS),
                           watch_from=watch_from, feeds=feeds)


def retransmit_config(host: RetransmitHost, loaded: LoadedExperiment) -> RetransmitConfig:
    plan = edge_plan(loaded)
    stripes = all_stripes(loaded) if plan is None else plan.ids()   # edge stripes: its history is theirs
    return RetransmitConfig(repair=_repair_config(host, loaded, stripes),
                            upstream={k: tuple(remulticasters(loaded, host.regions, k)) for k in stripes},
                            keys=keys_for(host, loaded), requester_region=requester_regions(host, loaded))


def keys_for(host: HostSpec, loaded: LoadedExperiment) -> KeySet | None:
    """The keys ``host`` is entitled to; None when the experiment's security is off.

    source: its own key and the control key. R_P / R_S: every source key (they verify and,
    at release, decrypt), the remulticast and retransmit keys of their regions, the control
    key. Reformation server: the control key. R_x: its regions' remulticast and retransmit
    keys. Customer: its regions' remulticast keys, and their retransmit keys only when of
    guaranteed grade. Any other role (e.g. an attacker): nothing."""
    from rmptwin.factories.keys import load_keys  # file I/O: only when a run asks for security

    keys = load_keys(loaded)
    if keys is None:
        return None
    regions = list(getattr(host, "regions", []) or [])
    role = host.role
    if role == "source":
        return keys.only(sources=[host.name], control=True)
    if role in REMULTICAST_ROLES:
        return keys.only(sources=list(keys.sources), regions=regions, retransmit=regions, control=True)
    if role == "reformation":
        return keys.only(control=True)
    if role == "retransmit":
        return keys.only(regions=regions, retransmit=regions)
    if role == "customer":
        # the role says host is a CustomerHost: mypy does not narrow through the alias role
        return keys.only(regions=regions, retransmit=regions if cast(CustomerHost, host).grade == "guaranteed" else ())
    return KeySet()


def requester_regions(host: HostSpec, loaded: LoadedExperiment) -> dict[str, str]:
    """Who may re-request from ``host`` (customers and R_x sharing one of its regions) ->
    the first region they share: a secure answer is sealed under that region's retransmit key."""
    mine = list(getattr(host, "regions", []) or [])
    out: dict[str, str] = {}
    for h in loaded.topology.hosts:
        if h.role in ("customer", "retransmit") and h.name != host.name:
            shared = [r for r in h.regions if r in mine]
            if shared:
                out[h.name] = shared[0]
    return out


# ----------------------------------------------------------------------------- factories


def build_source(host: SourceHost | PortalHost, loaded: LoadedExperiment, rng: random.Random, *,
                 recovering: bool = False, adapters: Adapters | None = None) -> SourceCore:
    stripes = stripes_of(host, loaded)
    sites: dict[int, str | None] = {k: next(iter(primary_ring(loaded, k)), None) for k in stripes}
    tag = f"{rng.randrange(1 << 16):04x}" if recovering else None
    return SourceCore(host.name, stripes, protocol_timing(loaded), reformation_servers(loaded), sites, incarnation=tag,
                      keys=keys_for(host, loaded))


def build_primary(host: PrimaryHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                  adapters: Adapters | None = None) -> PrimaryCore:
    stripes = stripes_of(host, loaded)
    rings = {k: primary_ring(loaded, k) for k in stripes}
    sec_rings: dict[tuple[str, int], list[str]] = {}
    for h in loaded.topology.hosts_with_role("secondary"):
        if h.primary != host.name:
            continue
        for k in stripes:
            members = secondary_ring(loaded, h.ring, k)
            if members and members[0] == host.name:
                sec_rings[(h.ring, k)] = members
    core = PrimaryCore(host.name, rings, protocol_timing(loaded), reformation_servers(loaded), regions=list(host.regions),
                       secondary_rings=sec_rings, recovering=recovering, keys=keys_for(host, loaded),
                       requester_region=requester_regions(host, loaded))
    return _with_edges(core, loaded)


def _with_edges(core: _RT, loaded: LoadedExperiment) -> _RT:
    """An R_T remulticasts its core stripes as edge stripes when the experiment has them."""
    plan = edge_plan(loaded)
    if plan is not None:
        core.use_edge_stripes(plan)
    return core


def build_secondary(host: SecondaryHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                    adapters: Adapters | None = None) -> SecondaryCore:
    stripes = stripes_of(host, loaded)
    return _with_edges(SecondaryCore(
        host.name, stripes, protocol_timing(loaded), reformation_servers(loaded), primary=host.primary,
        primaries={k: primary_ring(loaded, k) for k in stripes}, ring=host.ring,
        ring_members={k: secondary_ring(loaded, host.ring, k) for k in stripes}, regions=list(host.regions),
        recovering=recovering, keys=keys_for(host, loaded), requester_region=requester_regions(host, loaded),
    ), loaded)


def build_reformation(host: ReformationHost, loaded: LoadedExperiment, rng: random.Random, *,
                      recovering: bool = False, adapters: Adapters | None = None) -> ReformationCore:
    stripes = all_stripes(loaded)
    rings = {k: primary_ring(loaded, k) for k in stripes}
    return ReformationCore(host.name, rings, rings, protocol_timing(loaded), servers=reformation_servers(loaded),
                           keys=keys_for(host, loaded))


def build_customer(host: CustomerHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                   adapters: Adapters | None = None) -> CustomerCore:
    return CustomerCore(customer_config(host, loaded), rng, recovering=recovering)


def build_retransmit(host: RetransmitHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                     adapters: Adapters | None = None) -> RetransmitCore:
    return RetransmitCore(retransmit_config(host, loaded), rng, recovering=recovering)
