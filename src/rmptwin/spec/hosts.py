"""Host roles: one model per role, told apart by its ``role`` field.

A new role is a model here, a member of ``HostSpec`` and a name in ``ROLES``.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ._base import _Model
from .links import LinkParams

Grade = Literal["guaranteed", "best_effort"]


class _Host(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,9}$", description="short: it names Mininet interfaces")
    switch: str
    link: LinkParams = Field(default_factory=LinkParams, description="access link to its switch")


class SourceHost(_Host):
    role: Literal["source"]
    stripes: list[int] | None = Field(None, description="stripes it publishes on; None: all")


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
    retransmit: str | None = Field(None, description="R_x it re-requests from (guaranteed grade)")
    stripes: list[int] | None = Field(None, description="stripes it joins; None: all")


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


HostSpec = Annotated[
    Union[
        SourceHost, PrimaryHost, SecondaryHost, RetransmitHost, ReformationHost, CustomerHost,
        GatewayHost, VenueHost, SequencerHost, HistoryHost, ClientHost,
    ],
    Field(discriminator="role"),
]

ROLES = (
    "source", "primary", "secondary", "retransmit", "reformation", "customer",
    "gateway", "venue", "sequencer", "history", "client",
)
