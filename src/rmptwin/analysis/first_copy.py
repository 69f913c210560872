"""When a copy of a message is its first: the one rule MINC (``minc``) and the twin verdict
(``twin_verdict``) share. No Spark here: `rmptwin compare` imports it without starting one."""

from __future__ import annotations

from typing import Any

from rmptwin.model import Protocol
from rmptwin.model.queries import timing_from_protocol


def first_copy_slack_ms(protocol: dict[str, Any] | None) -> float:
    """How long after its send a source's first copy may still be the first: until the source
    can re-send it, tau_t + tau_r after the send on a time-driven ring, tau_r on an
    event-driven one (rmp.source Source._wait(first=True)). A copy seen or dropped later may
    be a re-send (a re-send also crosses the path again, so it is later still).

    MINC counts a copy as the first if it comes before the earliest a re-send could arrive
    (this plus the path delay without jitter, less 1 ms). Not dN/2, which it used to allow: an emulated node on a loaded machine logs first copies
    tens to hundreds of ms after the path delay (its process was not scheduled), and a window
    that short counted them as repairs, i.e. as losses on the node's access link (MINC errors
    of 10-30 points on the emulated quickstart, where the relays lost 1-3 %)."""
    try:
        t = timing_from_protocol(Protocol.model_validate(protocol or {}))
    except ValueError:
        t = timing_from_protocol(Protocol())
    return ((t.tau_t + t.tau_r) if t.time_driven else t.tau_r) / 1e6
