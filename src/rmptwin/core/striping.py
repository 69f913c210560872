"""Striping (seed 4.4): every "which stripe" rule, as pure functions on plain values.

The ticker is split into ``stripes`` independent streams, each with its own token ring,
global group (``groups.rmp_group``) and regional groups (``groups.region_group``):

- symbol i goes on stripe ``i mod stripes``;
- a source, R_P or R_S serves the stripes it is configured with, else every stripe;
- a customer joins its configured stripes, else as many as its access link carries (a
  56 Kbps modem selects one stripe), from stripe 0;
- each stripe is one MoldUDP64 session, named ``RMPT`` + the stripe number, whose Mold
  sequence number is the stripe's global sequence number.

``factories.rmp`` applies these rules to the experiment spec.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable

SESSION_PREFIX = "RMPT"


def symbol_stripe(symbol_index: int, stripes: int) -> int:
    """The stripe symbol ``symbol_index`` goes on."""
    return symbol_index % stripes


def symbols_on(on: Collection[int], symbols: int, stripes: int) -> list[int]:
    """The symbols (indices below ``symbols``) that go on one of the stripes ``on``."""
    return [i for i in range(symbols) if symbol_stripe(i, stripes) in on]


def host_stripes(own: Iterable[int] | None, stripes: int) -> list[int]:
    """The stripes a source, R_P or R_S serves: its configured ones (None: all ``stripes``)."""
    return sorted(set(own)) if own is not None else list(range(stripes))


def serves_stripe(own: Collection[int] | None, stripe: int) -> bool:
    """Whether a host configured with stripes ``own`` (None: all) serves ``stripe``."""
    return own is None or stripe in own


def customer_stripes(own: Iterable[int] | None, stripes: int, *, link_mbps: float | None,
                     msgs_per_stripe: float, message_bytes: int, regions: int) -> list[int]:
    """The stripes a customer joins: its configured ones if given; else all, unless its
    access link (``link_mbps``, None: unlimited) cannot carry them, in which case as many as
    fit, from stripe 0, and at least one. ``regions`` copies of each stripe arrive (one per
    region it listens to)."""
    if own is not None:
        return sorted(set(own))
    if link_mbps is None:
        return list(range(stripes))
    # 2-byte block header, ~1/8 of a 62-byte UDP/IP/Ethernet + Mold header per message
    # (packets batch messages), and 25 % headroom for bursts.
    bits = msgs_per_stripe * (message_bytes + 2 + 8) * 8 * regions * 1.25
    fit = math.floor(link_mbps * 1e6 / bits) if bits > 0 else stripes
    return list(range(max(1, min(stripes, fit))))


def session_name(stripe: int) -> str:
    """The MoldUDP64 session of a stripe (10 ASCII characters)."""
    return f"{SESSION_PREFIX}{stripe:06d}"


def session_stripe(session: str) -> int | None:
    """The stripe a session name belongs to, or None if it is not one of ours."""
    if len(session) != 10 or not session.startswith(SESSION_PREFIX) or not session[4:].isdigit():
        return None
    return int(session[4:])

