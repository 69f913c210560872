"""Protocol timing (seed section 5.1): the token passing time formula and ``Timing``, the
protocol's periods in integer nanoseconds, the frozen config every RMP core computes with.

``model.queries.timing_from_protocol`` builds a ``Timing`` from the experiment spec.
"""

from __future__ import annotations

from dataclasses import dataclass

MS = 1_000_000


def token_passing_time_ms(dn_ms: float, k_r: int, x_ms: float, p_ms: float) -> float:
    """Seed section 5.1: tau_t = (1 + 2 k_r) dN + k_r (X + P)."""
    return (1 + 2 * k_r) * dn_ms + k_r * (x_ms + p_ms)


@dataclass(frozen=True)
class Timing:
    """The experiment's protocol section resolved to integer nanoseconds."""

    time_driven: bool
    dn: int
    tau_t: int
    tau_r: int
    delta_a: int
    null_token: int
    k_r: int
    k_p: int | None
    batch_limit: int
    start_policy: str
    safe: bool = False             # delivery "safe": stable positions only, majority rings
