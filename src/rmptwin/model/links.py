"""Link parameters: delay, jitter, loss model, bandwidth and queue."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from rmptwin.model._base import _Model


class Bernoulli(_Model):
    """Independent loss with probability ``p`` per packet."""

    model: Literal["bernoulli"] = "bernoulli"
    p: float = Field(default=0.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        return self.p


class GilbertElliott(_Model):
    """Two-state burst loss: Good->Bad with ``p_gb``, Bad->Good with ``p_bg`` per packet."""

    model: Literal["gilbert_elliott"] = "gilbert_elliott"
    p_gb: float = Field(ge=0.0, le=1.0)
    p_bg: float = Field(gt=0.0, le=1.0)
    loss_good: float = Field(default=0.0, ge=0.0, le=1.0)
    loss_bad: float = Field(default=1.0, ge=0.0, le=1.0)

    @property
    def mean(self) -> float:
        """Stationary loss rate."""
        pi_bad = self.p_gb / (self.p_gb + self.p_bg)
        return (1 - pi_bad) * self.loss_good + pi_bad * self.loss_bad


class Trace(_Model):
    """A measured loss trace replayed packet by packet (or by time): ``file`` is read by the
    loader (``model.traces``), relative to the YAML that names it, into ``packets`` or
    ``intervals_ms``, so a run's manifest carries the trace itself."""

    model: Literal["trace"] = "trace"
    file: str | None = Field(default=None, description="trace file: one 0/1 per packet (per line or run together), or "
                             "'start_ms end_ms' loss intervals per line (docs/bring-your-own-topology.md)")
    packets: str | None = Field(default=None, pattern=r"^[01]*$", description="the per-packet trace as 0/1 characters "
                                "(filled from file by the loader; may be written inline)")
    intervals_ms: list[tuple[float, float]] | None = Field(
        default=None, description="loss intervals [start, end) in ms of run time (filled from file by the loader)")

    @model_validator(mode="after")
    def _one_trace(self) -> Trace:
        if self.packets is not None and self.intervals_ms is not None:
            raise ValueError("a trace is either packets or intervals_ms, not both")
        if not (self.file or self.packets or self.intervals_ms):
            raise ValueError("a trace needs file (or packets / intervals_ms)")
        return self

    @property
    def mean(self) -> float:
        """Fraction of packets lost (per-packet trace); for intervals, the fraction of time up to
        the last interval's end."""
        if self.packets:
            return self.packets.count("1") / len(self.packets)
        if self.intervals_ms:
            end = max(b for _, b in self.intervals_ms)
            return sum(b - a for a, b in self.intervals_ms) / end if end > 0 else 0.0
        return 0.0


LossModel = Annotated[Bernoulli | GilbertElliott | Trace, Field(discriminator="model")]


def _coerce_loss(v: Any) -> Any:
    """A bare number means Bernoulli loss with that probability."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"model": "bernoulli", "p": v}
    return v


class LinkParams(_Model):
    delay_ms: float = Field(default=0.0, ge=0.0, description="one-way propagation delay")
    jitter_ms: float = Field(default=0.0, ge=0.0, description="uniform extra delay in [0, jitter] (no reordering)")
    loss: LossModel = Field(default_factory=Bernoulli)
    bandwidth_mbps: float | None = Field(default=None, gt=0.0, description="None: unlimited")
    queue_packets: int | None = Field(
        default=None, ge=1, description="None: sized from delay x bandwidth (at least 1000 packets)"
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
