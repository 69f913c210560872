"""Which asyncio event loop a node process runs on: uvloop (libuv, its I/O and timers in C) or
the standard library's.

Measured (``bench_datapath``, one container, 20,000 datagrams/s forwarded): a bare forwarding
loop costs 3.75 µs of CPU per datagram on uvloop, 15.9 µs on the stdlib loop and 6.69 µs in C
(socat); the node driver, which reads every waiting datagram per wake-up, 4.69 against 4.81.
What decides it is timing: on the quickstart at time dilation 3 the nodes' median timer
lateness is 0.08-0.10 ms on uvloop against 0.22-0.31 ms (docs/benchmarks.md, "Levers measured
alone"). uvloop is locked (requirements.lock); a machine without it falls back to the stdlib
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
