"""Group naming and addressing: logical group names, and names -> IP addresses and ports.

A stripe's global group is ``rmp/<stripe>``; a region's remulticast group is
``region/<region>/<stripe>``.

Hosts get 10.0.0.0/8 addresses inside the project's own namespaces only; multicast
groups get administratively scoped 239.0.0.0/8 addresses derived from their names, so
every driver and the controller agree without a registry.
"""

from __future__ import annotations

import zlib

RMP_PORT = 7400        # the global stripe groups and unicast control
REGION_PORT = 7500     # MoldUDP64 remulticast to customers
REREQUEST_PORT = 7600  # MoldUDP64 re-requests to retransmit servers


def host_ip(index: int) -> str:
    """The index-th host (0-based, in topology order)."""
    n = index + 1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def host_mac(index: int) -> str:
    """The index-th host's MAC: locally administered, 02:00:00 and the same number as its
    ``host_ip`` (the emulated hosts get it; the simulator's captures write it)."""
    n = index + 1
    return f"02:00:00:{(n >> 16) & 255:02x}:{(n >> 8) & 255:02x}:{n & 255:02x}"


def group_ip(name: str) -> str:
    """A stable 239.x.y.z address for a logical group name."""
    h = zlib.crc32(name.encode())
    return f"239.{(h >> 16) & 255}.{(h >> 8) & 255}.{max(1, h & 255)}"


def rmp_group(stripe: int) -> str:
    """The global group of a stripe: data, acks/tokens, invitations."""
    return f"rmp/{stripe}"


def region_group(region: str, stripe: int) -> str:
    """A regional remulticast group (R_T -> customers, R_x), scoped to the region."""
    return f"region/{region}/{stripe}"


def group_region(name: str) -> str | None:
    """The region a group is scoped to, or None for a global group."""
    parts = name.split("/")
    return parts[1] if parts[0] == "region" else None

