"""Unified-orders role factories (trader, portal, exchange; see ``rmptwin.factories.FACTORIES``).

They translate the topology and the experiment's ``orders`` section into the small frozen
configs of ``rmptwin.apps.unified_orders``, and raise one ``UserError`` line for what does not
fit together (a trader without a portal when entry is rmp, an exchange in no region, ...).

The two traders of a pair must draw one decision schedule, and a factory is handed only its
own host's RNG: the schedule is drawn from the experiment's ``seed`` field (``plan``), so
``--seed`` on the command line varies the network's randomness but not the decisions.
"""

from __future__ import annotations

import random

from rmptwin.apps.unified_orders.admission import Account, Admission, AdmissionConfig, account_token
from rmptwin.apps.unified_orders.broker import BrokerCore
from rmptwin.apps.unified_orders.exchange import ExchangeCore
from rmptwin.apps.unified_orders.plan import paired_plan, random_plan
from rmptwin.apps.unified_orders.portal import OrderEntry, PortalCore
from rmptwin.apps.unified_orders.trader import TraderConfig, TraderCore
from rmptwin.core.striping import symbol_stripe
from rmptwin.errors import UserError
from rmptwin.factories.rmp import build_source
from rmptwin.model import BrokerHost, ExchangeHost, HostSpec, LoadedExperiment, Orders, PortalHost, TraderHost
from rmptwin.model.queries import remulticasters, stripes_of
from rmptwin.rmp.customer import CustomerConfig
from rmptwin.rmp.repair import RepairConfig

PRICE_UNIT = 10_000   # prices travel as price x 10,000


def orders_of(loaded: LoadedExperiment, host: HostSpec) -> Orders:
    orders = loaded.experiment.orders
    if orders is None:
        raise UserError(f"host {host.name}: a {host.role} needs the experiment's orders section")
    return orders


def stripe_of_symbols(loaded: LoadedExperiment) -> dict[str, int]:
    stripes = loaded.experiment.workload.stripes
    assert loaded.experiment.orders is not None
    return {sym: symbol_stripe(i, stripes) for i, sym in enumerate(loaded.experiment.orders.symbols)}


def _hosts_named(loaded: LoadedExperiment, roles: tuple[str, ...], name: str | None, who: HostSpec) -> None:
    host = next((h for h in loaded.topology.hosts if h.name == name), None)
    if host is None or host.role not in roles:
        raise UserError(f"{who.role} {who.name}: {name!r} names no {' or '.join(roles)} host of topology "
                        f"{loaded.topology.name}")


def _account(holder: TraderHost | BrokerHost) -> str:
    return getattr(holder, "account", None) or holder.name


def admission_config(loaded: LoadedExperiment,
                     holders: list[TraderHost | BrokerHost], symbols: list[str]) -> AdmissionConfig:
    """The accounts of ``holders`` (traders, several may share one; brokers: one account each,
    used by every trader behind the broker) and what each holds."""
    orders = loaded.experiment.orders
    assert orders is not None
    accounts: dict[str, Account] = {}
    for h in holders:
        name = _account(h)
        prev = accounts.get(name)
        users = (prev.traders if prev else frozenset()) | _users(h, loaded)
        accounts[name] = Account(users, round(h.funds * PRICE_UNIT), {s: h.holdings for s in symbols})
    return AdmissionConfig(orders.portal_secret, accounts, frozenset(symbols), orders.rate_limit_per_s, orders.burst)


def _users(holder: TraderHost | BrokerHost, loaded: LoadedExperiment) -> frozenset[str]:
    """Who trades on ``holder``'s account: a trader itself; every trader behind a broker."""
    if holder.role != "broker":
        return frozenset({holder.name})
    return frozenset(t.name for t in loaded.topology.hosts_with_role("trader") if t.portal == holder.name)


# ----------------------------------------------------------------------------- factories


def build_trader(host: TraderHost, loaded: LoadedExperiment,
                 rng: random.Random, *, recovering: bool = False) -> TraderCore:
    orders = orders_of(loaded, host)
    if host.exchange is not None:
        _hosts_named(loaded, ("exchange",), host.exchange, host)
    if orders.entry == "rmp":
        if host.portal is None:
            raise UserError(f"trader {host.name}: orders.entry is rmp, so it needs portal (its S_P or S_S)")
        _hosts_named(loaded, ("portal", "broker"), host.portal, host)
        entry = (host.portal,)
    else:
        entry = (host.exchange,) if host.exchange else tuple(h.name for h in loaded.topology.hosts_with_role("exchange"))
    start, end = round(orders.start_s * 1e9), round(orders.end_s * 1e9)
    price = round(orders.price * PRICE_UNIT)
    if host.pair is not None:
        plan = paired_plan(loaded.experiment.seed, host.pair, orders.decisions, start,
                           round(orders.interval_ms * 1e6), orders.symbols[0], price, orders.qty)
    else:
        plan = random_plan(loaded.experiment.seed, host.name, host.rate_per_s, start, end, orders.symbols,
                           price, orders.qty)
    if recovering:
        plan = []   # a restarted trader has missed its moment
    token = host.token if host.token is not None else account_token(orders.portal_secret, _account(host))
    return TraderCore(TraderConfig(host.name, entry, host.exchange or "", _account(host), token,
                                   host.pair or "", tuple(plan)))


def build_portal(host: PortalHost, loaded: LoadedExperiment,
                 rng: random.Random, *, recovering: bool = False) -> PortalCore:
    orders_of(loaded, host)
    stripes = set(stripes_of(host, loaded))
    stripe_of = {s: k for s, k in stripe_of_symbols(loaded).items() if k in stripes}
    holders = [h for h in loaded.topology.hosts if h.role in ("trader", "broker") and h.portal == host.name]
    admission = Admission(admission_config(loaded, holders, list(stripe_of)))
    source = build_source(host, loaded, rng, recovering=recovering)
    return PortalCore(host.name, source, OrderEntry(admission), stripe_of)


def build_broker(host: BrokerHost, loaded: LoadedExperiment,
                 rng: random.Random, *, recovering: bool = False) -> BrokerCore:
    orders = orders_of(loaded, host)
    _hosts_named(loaded, ("portal",), host.portal, host)
    traders = [t for t in loaded.topology.hosts_with_role("trader") if t.portal == host.name]
    entry = OrderEntry(Admission(admission_config(loaded, traders, list(orders.symbols))))
    return BrokerCore(host.name, entry, host.portal, host.name, account_token(orders.portal_secret, host.name))


def build_exchange(host: ExchangeHost, loaded: LoadedExperiment,
                   rng: random.Random, *, recovering: bool = False) -> ExchangeCore:
    orders = orders_of(loaded, host)
    if orders.entry == "direct":
        traders = [t for t in loaded.topology.hosts_with_role("trader") if t.exchange in (None, host.name)]
        entry = OrderEntry(Admission(admission_config(loaded, traders, list(orders.symbols))))
        return ExchangeCore(host.name, entry=entry)
    if not host.regions:
        raise UserError(f"exchange {host.name}: orders.entry is rmp, so it needs regions (where it hears the ring)")
    return ExchangeCore(host.name, stream_config=exchange_stream_config(host, loaded), rng=rng, recovering=recovering)


def exchange_stream_config(host: ExchangeHost, loaded: LoadedExperiment) -> CustomerConfig:
    """The exchange as a guaranteed-grade customer of every stripe in its regions."""
    proto = loaded.experiment.protocol
    stripes = tuple(range(loaded.experiment.workload.stripes))
    regions = list(host.regions)
    repair = RepairConfig(name=host.name, regions=tuple(regions), stripes=stripes, wait_ns=round(proto.dn_ms * 1e6),
                          retry_ns=round(proto.tau_r * 1e6), k_r=proto.k_r)
    region_of: dict[str, str] = {}
    for h in loaded.topology.hosts:
        shared = [r for r in getattr(h, "regions", []) if r in regions]
        if shared and h.role in ("primary", "secondary"):
            region_of[h.name] = shared[0]
    return CustomerConfig(repair=repair, grade="guaranteed", retransmit=host.retransmit,
                          remulticasters={k: tuple(remulticasters(loaded, regions, k)) for k in stripes},
                          region_of=region_of)
