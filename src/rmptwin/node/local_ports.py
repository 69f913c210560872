"""Loopback ports for the processes a run starts itself (etcd members, the controller), chosen
below the kernel's ephemeral range. A port the kernel chose (bind to 0) is an ephemeral one:
between choosing it and the process binding it, any outgoing connection may take it as its
source port (seen in CI: an etcd member's "listen tcp 127.0.0.1:45663: bind: address already in
use", the port taken by an earlier member's connection to its peers)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from rmptwin.errors import UserError

EPHEMERAL_FLOOR = 20_000   # ports come from here up to the kernel's ephemeral range


def ephemeral_start() -> int:
    """The first port the kernel hands out as a connection's source (this namespace's range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_local_ports(n: int, who: str) -> list[int]:
    """``n`` distinct 127.0.0.1 ports, free now, below the ephemeral range; ``who`` names the
    user in the one-line error when none is left."""
    rng, top, ports = random.SystemRandom(), ephemeral_start(), []
    low = EPHEMERAL_FLOOR if top > EPHEMERAL_FLOOR else 1024   # a range set unusually low leaves the rest
    for _ in range(50 * n):
        port = rng.randrange(low, top)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise UserError(f"{who}: no {n} free 127.0.0.1 ports in {low}-{top - 1}")
