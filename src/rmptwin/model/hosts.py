"""Host roles: one model per role, told apart by its ``role`` field.

A new role is a model here, a member of ``HostSpec`` and a name in ``ROLES``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from rmptwin.model._base import _Model
from rmptwin.model.links import LinkParams

Grade = Literal["guaranteed", "best_effort"]


class _Host(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,9}$", description="short: it names Mininet interfaces")
    switch: str
    link: LinkParams = Field(default_factory=LinkParams, description="access link to its switch")


class SourceHost(_Host):
    role: Literal["source"]
    stripes: list[int] | None = Field(default=None, description="stripes it publishes on; None: all")


class PrimaryHost(_Host):
    """R_P: member of the primary token ring of each of its stripes."""

    role: Literal["primary"]
    regions: list[str] = Field(default_factory=list, description="regional groups it remulticasts to")
    stripes: list[int] | None = None


class SecondaryHost(_Host):
    """R_S: hears the same stream, NACKs its assigned R_P, passes a secondary token."""

    role: Literal["secondary"]
    primary: str = Field(description="the R_P it NACKs; that R_P is also in its secondary ring")
    ring: str = Field(description="secondary ring name (R_S of one ring share it)")
    regions: list[str] = Field(default_factory=list)
    stripes: list[int] | None = None


class RetransmitHost(_Host):
    """R_x: caches a regional remulticast and answers customers' re-requests."""

    role: Literal["retransmit"]
    regions: list[str] = Field(min_length=1)


class ReformationHost(_Host):
    role: Literal["reformation"]


class CustomerHost(_Host):
    role: Literal["customer"]
    regions: list[str] = Field(min_length=1, description="regional groups it listens to (overlap allowed)")
    grade: Grade = "guaranteed"
    retransmit: str | None = Field(default=None, description="R_x it re-requests from (guaranteed grade)")
    stripes: list[int] | None = Field(default=None, description="stripes it joins; None: all")


class AttackerHost(_Host):
    """A hostile host (seed 6; ``rmptwin.rmp.attacker``): holds no key and attacks one stripe."""

    role: Literal["attacker"]
    mode: Literal["unauthorized", "replay", "forge", "flood"] = Field(
        description="unauthorized: publish as a source of its own; replay: send captured frames again; "
        "forge: remulticast made-up trades in its region as if it were the R_T; flood: unauthorized at 10 x")
    stripe: int = Field(default=0, ge=0, description="the stripe it attacks")
    region: str | None = Field(
        default=None, description="replay and forge: the region it attacks (its switch must be in it)")
    rate_factor: float | None = Field(
        default=None, gt=0, description="frames per second as a multiple of the stripe's legitimate rate; None: 10 for "
        "flood, 1 otherwise")
    start_s: float | None = Field(default=None, ge=0, description="None: half a second after the workload starts")
    stop_s: float | None = Field(default=None, gt=0, description="None: when the workload stops")

    @model_validator(mode="after")
    def _needs_region(self) -> AttackerHost:
        if self.mode == "forge" and not self.region:
            raise ValueError("a forge attacker needs region (the region whose remulticast it forges)")
        return self


class GatewayHost(_Host):
    role: Literal["gateway"]


class VenueHost(_Host):
    role: Literal["venue"]


class SequencerHost(_Host):
    role: Literal["sequencer"]


class HistoryHost(_Host):
    role: Literal["history"]


class ClientHost(_Host):
    role: Literal["client"]
    gateway: str | None = None


class TraderHost(_Host):
    """A trader S of unified orders (seed 7.2; ``rmptwin.apps.unified_orders``)."""

    role: Literal["trader"]
    portal: str | None = Field(
        default=None, description="its S_P (a portal host) or S_S (a broker host); needed when orders.entry is rmp")
    exchange: str | None = Field(default=None, description="the exchange host its offers are directed to; None: open")
    pair: str | None = Field(default=None, description="traders sharing a pair name decide at the same instants")
    account: str | None = Field(default=None, description="its account at the portal; None: its own name")
    token: str | None = Field(default=None, description="its credential; None: the valid one (set it to test refusals)")
    funds: float = Field(default=1e7, ge=0, description="cash the account may commit to buys")
    holdings: int = Field(default=1_000_000, ge=0, description="shares of each listed symbol the account may sell")
    rate_per_s: float = Field(default=0.0, ge=0, description="unpaired trader: Poisson offers per second")


class PortalHost(_Host):
    """S_P of unified orders: admits traders' offers and publishes them into the ring."""

    role: Literal["portal"]
    stripes: list[int] | None = Field(default=None, description="stripes it publishes on; None: all")


class BrokerHost(_Host):
    """S_S of unified orders: checks its traders' offers, forwards them to its S_P under its own account."""

    role: Literal["broker"]
    portal: str = Field(description="the S_P (a portal host) it forwards to")
    funds: float = Field(default=1e9, ge=0, description="cash its account at the S_P may commit to buys")
    holdings: int = Field(default=100_000_000, ge=0, description="shares of each listed symbol its account may sell")


class ExchangeHost(_Host):
    """An exchange floor of unified orders: executes the offers directed to it (and open ones)."""

    role: Literal["exchange"]
    regions: list[str] = Field(default_factory=list, description="regional groups it hears the ring's sequence in")
    retransmit: str | None = Field(default=None, description="R_x it re-requests from")



class TaxonomyMemberHost(_Host):
    """A member of a sequencer-taxonomy group (``rmptwin.taxonomy``): receives, delivers in total
    order, and sequences when it heads the succession. The experiment's ``taxonomy:`` picks the
    protocol and the first sequencer; ``source`` hosts send."""

    role: Literal["taxonomy_member"]


class ParticipantHost(_Host):
    """A trading-floor participant (seed 7.3): enters orders through its own S_P and receives
    the floor's whole sequence like an R_S; the experiment's ``floor:`` section sets the rule."""

    role: Literal["participant"]
    primary: str | None = Field(default=None, description="the R_P it asks for what it misses; None: the first primary")


HostSpec = Annotated[
    SourceHost | PrimaryHost | SecondaryHost | RetransmitHost | ReformationHost | CustomerHost | GatewayHost | VenueHost | SequencerHost | HistoryHost | ClientHost | AttackerHost | TraderHost | PortalHost | BrokerHost | ExchangeHost | TaxonomyMemberHost | ParticipantHost,
    Field(discriminator="role"),
]

ROLES = (
    "source", "primary", "secondary", "retransmit", "reformation", "customer",
    "gateway", "venue", "sequencer", "history", "client", "attacker",
    "trader", "portal", "broker", "exchange", "taxonomy_member", "participant",
)
