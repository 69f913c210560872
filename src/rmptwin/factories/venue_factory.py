"""Venue role factories (registered in rmptwin.factories): gateway, venue, sequencer, history, client.

Each turns the experiment's ``venue:`` section and the topology into the core's frozen
config. Stores and the sequencer's outside CAS memory come from the driver's
``Adapters``: a crashed and recovered gateway or HR gets the same store back, as a
restarted process finds its disk.
"""

from __future__ import annotations

import random

from rmptwin.errors import UserError
from rmptwin.factories.adapters import Adapters
from rmptwin.model import (
    ClientHost,
    GatewayHost,
    HistoryHost,
    HostSpec,
    LoadedExperiment,
    SequencerHost,
    VenueHost,
    VenueWorkload,
)
from rmptwin.venue.client import ClientConfig, ClientCore
from rmptwin.venue.execution_venue import VenueConfig, VenueCore
from rmptwin.venue.gateway import GatewayConfig, GatewayCore
from rmptwin.venue.history import HistoryConfig, HistoryCore
from rmptwin.venue.sequencer import CasProxyCore, SequencerConfig, SequencerCore
from rmptwin.venue.standby import StandbyVenueCore


def _venue(loaded: LoadedExperiment) -> VenueWorkload:
    if loaded.experiment.venue is None:
        raise UserError(f"{loaded.path}: the topology has venue hosts but the experiment has no 'venue:' section")
    return loaded.experiment.venue


def _names(loaded: LoadedExperiment, role: str) -> list[str]:
    return [h.name for h in loaded.topology.hosts_with_role(role)]


def build_gateway(host: GatewayHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                  adapters: Adapters) -> GatewayCore:
    v = _venue(loaded)
    config = GatewayConfig(gw_id=_names(loaded, "gateway").index(host.name), venues=tuple(_names(loaded, "venue")),
                           symbols=tuple(v.symbols), tick=v.tick, fsync_ns=int(v.gw_fsync_us * 1000))
    return GatewayCore(config, adapters.stores.gateway_log(host.name, fresh=not recovering), recovering=recovering)


def _venue_config(host: VenueHost, loaded: LoadedExperiment, v: VenueWorkload) -> VenueConfig:
    seqs, hrs = _names(loaded, "sequencer"), _names(loaded, "history")
    if v.sequencer == "none" and len(_names(loaded, "gateway")) > 1:
        raise UserError(f"{loaded.path}: venue.sequencer 'none' is only correct with one gateway "
                        "(two gateways' requests reach the EVs in different orders); use 'cas'")
    if v.sequencer != "none" and not seqs:
        raise UserError(f"{loaded.path}: venue.sequencer is {v.sequencer!r} but the topology has no sequencer host")
    return VenueConfig(ev_id=_names(loaded, "venue").index(host.name), symbols=tuple(v.symbols),
                       gateways=tuple(_names(loaded, "gateway")),
                       sequencer=seqs[0] if (seqs and v.sequencer in ("cas", "etcd")) else None,
                       history=hrs[0] if hrs else None, durable=v.durable_history,
                       checkpoint_every=v.checkpoint_every, lookahead=v.lookahead)


def build_venue(host: VenueHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                adapters: Adapters) -> VenueCore:
    v = _venue(loaded)
    config = _venue_config(host, loaded, v)
    mean_ns = v.ev_service_us * 1000

    def service() -> int:
        return max(1, int(rng.expovariate(1.0 / mean_ns))) if mean_ns > 0 else 0

    # no modelled live cost (a real run measuring its own CPU): no modelled replay cost either
    replay_ns = v.ev_replay_us * 1000 if mean_ns > 0 else 0

    def replay_service() -> int:
        return max(1, int(rng.expovariate(1.0 / replay_ns))) if replay_ns > 0 else 0

    if is_standby(host, loaded):
        return StandbyVenueCore(config, service, recovering=recovering, replay_service=replay_service)
    return VenueCore(config, service, recovering=recovering, replay_service=replay_service)


def is_standby(host: HostSpec, loaded: LoadedExperiment) -> bool:
    """Whether ``host`` is the standby EV: the last venue host of a ``venue.standby`` experiment."""
    v = loaded.experiment.venue
    return v is not None and v.standby and host.role == "venue" and _names(loaded, "venue")[-1] == host.name


def build_sequencer(host: SequencerHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                    adapters: Adapters) -> CasProxyCore | SequencerCore:
    """The in-memory CAS sequencer, or, where the driver has a CAS memory outside (etcd in a
    real run of a ``sequencer: etcd`` experiment), the proxy that asks it."""
    v = _venue(loaded)
    if v.sequencer == "etcd" and adapters.cas_client is not None:
        return CasProxyCore(adapters.cas_client)
    return SequencerCore(SequencerConfig(window=v.window))


def build_history(host: HistoryHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                  adapters: Adapters) -> HistoryCore:
    v = _venue(loaded)
    config = HistoryConfig(commit_ns=int(v.hr_commit_us * 1000) if v.durable_history else 0)
    return HistoryCore(config, adapters.stores.history_store(host.name, fresh=not recovering))


def build_client(host: ClientHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                 adapters: Adapters) -> ClientCore:
    v = _venue(loaded)
    clients, gws = _names(loaded, "client"), _names(loaded, "gateway")
    if not gws:
        raise UserError(f"{loaded.path}: client {host.name} needs a gateway host in the topology")
    idx = clients.index(host.name)
    gateway = host.gateway or gws[idx % len(gws)]
    if gateway not in gws:
        raise UserError(f"{loaded.path}: client {host.name}: gateway {gateway!r} is not a gateway host")
    start = int(v.start_s * 1e9)
    config = ClientConfig(index=idx, gateway=gateway, symbols=tuple(v.symbols), rate=v.rate / len(clients),
                          start_ns=start, stop_ns=start + int(v.duration_s * 1e9), tick=v.tick,
                          malformed_fraction=v.malformed_fraction)
    return ClientCore(config, rng)
