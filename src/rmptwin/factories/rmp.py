"""RMP role factories (see ``rmptwin.factories.FACTORIES``): the spec -> config translation.

Each factory reads one host spec and the loaded experiment, builds the core's small frozen
config (``Timing``, ``CustomerConfig``, ``RetransmitConfig``, plain lists) and the core.
Signature: ``factory(host, loaded, rng, *, recovering=False, adapters=None) -> Core``; RMP
cores take no adapters (they need no stores or clients).

The topology questions those configs answer (the stripes a host serves, a stripe's primary
ring, ...) are here too, for the drivers and the seed-bound checks.

Security (``security.enabled``): ``keys_for`` reads the experiment's key file once
(``rmptwin.keys``) and gives each core only what its role is entitled to (seed 6, 7.1).
"""

from __future__ import annotations

import random

from rmptwin.spec import LoadedExperiment, Protocol
from rmptwin.rmp import striping
from rmptwin.rmp.customer import CustomerConfig, CustomerCore
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.reformation import ReformationCore
from rmptwin.rmp.repair import RepairConfig
from rmptwin.rmp.retransmit import RetransmitConfig, RetransmitCore
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore
from rmptwin.rmp.seal import KeySet
from rmptwin.rmp.timing import MS, Timing

# the hosts that remulticast a stripe into their regions (R_T)
REMULTICAST_ROLES = ("primary", "secondary")


# ----------------------------------------------------------------------------- spec -> values


def timing_from_protocol(p: Protocol) -> Timing:
    """The experiment's protocol section in integer nanoseconds."""
    return Timing(
        time_driven=p.token_mode == "time_driven",
        dn=round(p.dn_ms * MS), tau_t=round(p.tau_t * MS), tau_r=round(p.tau_r * MS),
        delta_a=round(p.delta_a * MS), null_token=round(p.null_token * MS), k_r=p.k_r, k_p=p.k_p,
        batch_limit=p.batch_limit, start_policy=p.start_policy, safe=p.delivery == "safe",
    )


def _timing(loaded: LoadedExperiment) -> Timing:
    return timing_from_protocol(loaded.experiment.protocol)


def _all_stripes(loaded: LoadedExperiment) -> list[int]:
    return striping.host_stripes(None, loaded.experiment.workload.stripes)


def stripes_of(host, loaded: LoadedExperiment) -> list[int]:
    """The stripes a source, R_P or R_S serves: its own list, else every stripe of the workload."""
    return striping.host_stripes(getattr(host, "stripes", None), loaded.experiment.workload.stripes)


def primary_ring(loaded: LoadedExperiment, stripe: int) -> list[str]:
    """The initial primary token ring of a stripe: its primaries in topology order."""
    return [h.name for h in loaded.topology.hosts_with_role("primary") if stripe in stripes_of(h, loaded)]


def reformation_servers(loaded: LoadedExperiment) -> list[str]:
    return [h.name for h in loaded.topology.hosts_with_role("reformation")]


def secondary_ring(loaded: LoadedExperiment, ring: str, stripe: int) -> list[str]:
    """A secondary ring on a stripe: the R_P of its first R_S, then its R_S in topology order."""
    members = [
        h for h in loaded.topology.hosts_with_role("secondary") if h.ring == ring and stripe in stripes_of(h, loaded)
    ]
    if not members:
        return []
    return [members[0].primary] + [h.name for h in members]


def _remulticast_hosts(loaded: LoadedExperiment) -> list:
    """R_T hosts (primary and secondary) in topology order (indexed by the topology itself)."""
    return loaded.topology.hosts_with_role(*REMULTICAST_ROLES)


def remulticasters(loaded: LoadedExperiment, regions: list[str], stripe: int) -> list[str]:
    """R_T hosts (primary/secondary) remulticasting ``stripe`` into any of ``regions``, in topology order."""
    want = set(regions)
    return [
        h.name for h in _remulticast_hosts(loaded)
        if want & set(h.regions) and striping.serves_stripe(h.stripes, stripe)
    ]


def customer_stripes(host, loaded: LoadedExperiment) -> list[int]:
    """The stripes a customer joins (``striping.customer_stripes`` on its spec and the workload's rate)."""
    w = loaded.experiment.workload
    n_sources = len(w.sources) if w.sources is not None else len(loaded.topology.hosts_with_role("source"))
    return striping.customer_stripes(
        host.stripes, w.stripes, link_mbps=host.link.bandwidth_mbps,
        msgs_per_stripe=w.rate_per_source * n_sources / w.stripes, message_bytes=w.message_bytes,
        regions=len(host.regions))


def _repair_config(host, loaded: LoadedExperiment, stripes: list[int]) -> RepairConfig:
    proto = loaded.experiment.protocol
    return RepairConfig(name=host.name, regions=tuple(host.regions), stripes=tuple(stripes),
                        wait_ns=int(proto.dn_ms * 1e6), retry_ns=int(proto.tau_r * 1e6), k_r=proto.k_r)


def customer_config(host, loaded: LoadedExperiment) -> CustomerConfig:
    stripes = customer_stripes(host, loaded)
    regions = list(host.regions)
    region_of: dict[str, str] = {}
    for h in _remulticast_hosts(loaded):
        shared = [r for r in getattr(h, "regions", []) if r in regions]
        if shared:
            region_of[h.name] = shared[0]
    return CustomerConfig(
        repair=_repair_config(host, loaded, stripes), grade=host.grade, retransmit=host.retransmit,
        remulticasters={k: tuple(remulticasters(loaded, regions, k)) for k in stripes}, region_of=region_of,
        keys=keys_for(host, loaded))


def retransmit_config(host, loaded: LoadedExperiment) -> RetransmitConfig:
    stripes = _all_stripes(loaded)
    return RetransmitConfig(repair=_repair_config(host, loaded, stripes),
                            upstream={k: tuple(remulticasters(loaded, host.regions, k)) for k in stripes},
                            keys=keys_for(host, loaded), requester_region=requester_regions(host, loaded))


def keys_for(host, loaded: LoadedExperiment) -> KeySet | None:
    """The keys ``host`` is entitled to; None when the experiment's security is off.

    source: its own key and the control key. R_P / R_S: every source key (they verify and,
    at release, decrypt), the remulticast and retransmit keys of their regions, the control
    key. Reformation server: the control key. R_x: its regions' remulticast and retransmit
    keys. Customer: its regions' remulticast keys, and their retransmit keys only when of
    guaranteed grade. Any other role (e.g. an attacker): nothing."""
    from rmptwin.keys import load_keys   # file I/O: only when a run asks for security

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
        return keys.only(regions=regions, retransmit=regions if host.grade == "guaranteed" else ())
    return KeySet()


def requester_regions(host, loaded: LoadedExperiment) -> dict[str, str]:
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


def build_source(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                 adapters=None) -> SourceCore:
    stripes = stripes_of(host, loaded)
    sites = {k: (primary_ring(loaded, k) or [None])[0] for k in stripes}
    tag = f"{rng.randrange(1 << 16):04x}" if recovering else None
    return SourceCore(host.name, stripes, _timing(loaded), reformation_servers(loaded), sites, incarnation=tag,
                      keys=keys_for(host, loaded))


def build_primary(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                  adapters=None) -> PrimaryCore:
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
                       secondary_rings=sec_rings, recovering=recovering, keys=keys_for(host, loaded),
                       requester_region=requester_regions(host, loaded))


def build_secondary(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                    adapters=None) -> SecondaryCore:
    stripes = stripes_of(host, loaded)
    return SecondaryCore(
        host.name, stripes, _timing(loaded), reformation_servers(loaded), primary=host.primary,
        primaries={k: primary_ring(loaded, k) for k in stripes}, ring=host.ring,
        ring_members={k: secondary_ring(loaded, host.ring, k) for k in stripes}, regions=list(host.regions),
        recovering=recovering, keys=keys_for(host, loaded), requester_region=requester_regions(host, loaded),
    )


def build_reformation(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                      adapters=None) -> ReformationCore:
    stripes = _all_stripes(loaded)
    rings = {k: primary_ring(loaded, k) for k in stripes}
    return ReformationCore(host.name, rings, rings, _timing(loaded), servers=reformation_servers(loaded),
                           keys=keys_for(host, loaded))


def build_customer(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                   adapters=None) -> CustomerCore:
    return CustomerCore(customer_config(host, loaded), rng, recovering=recovering)


def build_retransmit(host, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                     adapters=None) -> RetransmitCore:
    return RetransmitCore(retransmit_config(host, loaded), rng, recovering=recovering)
