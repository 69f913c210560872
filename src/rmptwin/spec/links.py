"""Link parameters: delay, jitter, loss model, bandwidth and queue."""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from rmptwin.spec._base import _Model


class Bernoulli(_Model):
    """Independent loss with probability ``p`` per packet."""

    model: Literal["bernoulli"] = "bernoulli"
    p: float = Field(0.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        return self.p


class GilbertElliott(_Model):
    """Two-state burst loss: Good->Bad with ``p_gb``, Bad->Good with ``p_bg`` per packet."""

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p_gb: float = Field(ge=0.0, le=1.0)
    p_bg: float = Field(gt=0.0, le=1.0)
    loss_good: float = Field(0.0, ge=0.0, le=1.0)
    loss_bad: float = Field(1.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        """Stationary loss rate."""
        pi_bad = self.p_gb / (self.p_gb + self.p_bg)
        return (1 - pi_bad) * self.loss_good + pi_bad * self.loss_bad


LossModel = Annotated[Union[Bernoulli, GilbertElliott], Field(discriminator="model")]


def _coerce_loss(v):
    """A bare number means Bernoulli loss with that probability."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"model": "bernoulli", "p": v}
    return v


class LinkParams(_Model):
    delay_ms: float = Field(0.0, ge=0.0, description="one-way propagation delay")
    jitter_ms: float = Field(0.0, ge=0.0, description="uniform extra delay in [0, jitter] (no reordering)")
    loss: LossModel = Field(default_factory=Bernoulli)
    bandwidth_mbps: float | None = Field(None, gt=0.0, description="None: unlimited")
    queue_packets: int | None = Field(
        None, ge=1, description="None: sized from delay x bandwidth (at least 1000 packets)"
    )

    _coerce = field_validator("loss", mode="before")(_coerce_loss)

    def queue_limit(self, mtu_bytes: int = 1500) -> int:
        """Queue limit in packets: configured, else bandwidth-delay product with headroom.

        Long fat links must not drop what was never configured, so the default holds
        at least 2 x BDP and never fewer than 1000 packets.
        """
        if self.queue_packets is not None:
            return self.queue_packets
        if self.bandwidth_mbps is None:
            return 1000
        bdp_bytes = self.bandwidth_mbps * 1e6 / 8 * max(self.delay_ms + self.jitter_ms, 1.0) / 1e3
        return max(1000, math.ceil(2 * bdp_bytes / mtu_bytes))


class LinkSpec(LinkParams):
    a: str
    b: str

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"
