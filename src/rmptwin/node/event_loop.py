"""Which asyncio event loop a node process runs on: uvloop (libuv, its I/O and timers in C) or
the standard library's.

Measured in one container (``bench_datapath``, 20,000 datagrams/s forwarded): a bare forwarding
loop costs 3.5 µs of CPU per datagram on uvloop, 16.6 µs on the stdlib loop and 6.4 µs in C
(socat). uvloop is locked (requirements.lock); a machine without it falls back to the stdlib
loop, and the node says which one it ran (``DONE``'s ``event_loop``).
"""

from __future__ import annotations

import asyncio
import importlib.util

EVENT_LOOPS = ("uvloop", "asyncio")
DEFAULT = "uvloop"


def install(name: str) -> str:
    """Make ``name`` the loop the next ``asyncio.run`` creates; return the one it will be
    (``asyncio`` when uvloop is asked for and not installed)."""
    if name not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {name!r}; choose {' or '.join(EVENT_LOOPS)}")
    if name == "uvloop" and importlib.util.find_spec("uvloop") is not None:
        import uvloop  # locked, but optional at run time: the fallback below
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        return "uvloop"
    asyncio.set_event_loop_policy(None)   # the stdlib's default policy
    return "asyncio"
