"""Trading-floor factories (seed 7.3; ``rmptwin.apps.trading_floor``): ``participant`` hosts,
and ``primary`` hosts when the experiment has a ``floor:`` section (``factories.SECTION_FACTORIES``:
every R_P of the floor's ring is then an arbiter while it holds the token)."""

from __future__ import annotations

import random
from typing import Any

from rmptwin.apps.trading_floor.arbiter import ArbiterCore
from rmptwin.apps.trading_floor.participant import ParticipantCore
from rmptwin.apps.trading_floor.rules import RuleParams
from rmptwin.apps.trading_floor.state import FloorState
from rmptwin.apps.trading_floor.workload import TICK, OrderWorkload, order_schedule
from rmptwin.errors import UserError
from rmptwin.factories import rmp
from rmptwin.model import Floor, LoadedExperiment, ParticipantHost, PrimaryHost
from rmptwin.model.queries import primary_ring, reformation_servers, timing_from_protocol
from rmptwin.rmp.primary import PrimaryCore
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore


def floor_spec(loaded: LoadedExperiment) -> Floor:
    fl = loaded.experiment.floor
    if fl is None:
        raise UserError(f"{loaded.path}: the topology has participant hosts but the experiment has no 'floor:' "
                        "section (add floor: {rule: continuous})")
    if fl.stripe >= loaded.experiment.workload.stripes:
        raise UserError(f"{loaded.path}: floor.stripe {fl.stripe} is not a stripe of the workload "
                        f"(workload.stripes: {loaded.experiment.workload.stripes}); use 0..{loaded.experiment.workload.stripes - 1}")
    if not primary_ring(loaded, fl.stripe):
        raise UserError(f"{loaded.path}: floor: needs primary hosts serving stripe {fl.stripe} (its arbiters)")
    return fl


def floor_state(loaded: LoadedExperiment) -> FloorState:
    fl = floor_spec(loaded)
    params = RuleParams(round_passes=fl.round_passes, dutch_start=fl.dutch_start_ticks * TICK,
                        dutch_step=fl.dutch_step_ticks * TICK)
    return FloorState(fl.rule, params)


def order_workload(loaded: LoadedExperiment) -> OrderWorkload:
    fl = floor_spec(loaded)
    return OrderWorkload(rule=fl.rule, symbols=fl.symbols, rate=fl.order_rate, start_ns=round(fl.start_s * 1e9),
                         duration_ns=round(fl.duration_s * 1e9), spread=fl.spread_ticks,
                         stop_fraction=fl.stop_fraction, market_fraction=fl.market_fraction,
                         sell_fraction=fl.sell_fraction)


def _floor_source(host: PrimaryHost | ParticipantHost, loaded: LoadedExperiment,
                  rng: random.Random, recovering: bool) -> SourceCore:
    stripe = floor_spec(loaded).stripe
    site = primary_ring(loaded, stripe)[0]
    tag = f"{rng.randrange(1 << 16):04x}" if recovering else None
    return SourceCore(host.name, [stripe], timing_from_protocol(loaded.experiment.protocol),
                      reformation_servers(loaded), {stripe: site}, incarnation=tag)


def build_arbiter(host: PrimaryHost, loaded: LoadedExperiment, rng: random.Random, *,
                  recovering: bool = False) -> PrimaryCore | ArbiterCore:
    """A ``primary`` host of an experiment with a ``floor:`` section (``SECTION_FACTORIES``)."""
    primary = rmp.build_primary(host, loaded, rng, recovering=recovering)
    stripe = floor_spec(loaded).stripe
    if stripe not in primary.members:
        return primary          # this R_P is not in the floor's ring
    return ArbiterCore(primary, _floor_source(host, loaded, rng, recovering), stripe, floor_state(loaded))


def build_participant(host: ParticipantHost, loaded: LoadedExperiment, rng: random.Random, *, recovering: bool = False,
                      **kw: Any) -> ParticipantCore:
    fl = floor_spec(loaded)
    ring = primary_ring(loaded, fl.stripe)
    assigned = host.primary or ring[0]
    if assigned not in ring:
        raise UserError(f"{loaded.path}: participant {host.name}: primary {assigned!r} is not a primary of the "
                        f"floor's ring ({', '.join(ring)})")
    receiver = SecondaryCore(host.name, [fl.stripe], timing_from_protocol(loaded.experiment.protocol),
                             reformation_servers(loaded), primary=assigned, primaries={fl.stripe: ring},
                             ring="", ring_members={}, recovering=recovering)
    # the host's RNG carries the run's seed (``rmptwin sim --seed`` too); a restarted participant
    # (another RNG) enters other orders from then on
    orders = order_schedule(order_workload(loaded), host.name, rng.randrange(1 << 62))
    return ParticipantCore(receiver, _floor_source(host, loaded, rng, recovering), fl.stripe, floor_state(loaded),
                           orders, recovering=recovering)
