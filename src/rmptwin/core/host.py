"""What a host is to both drivers: its clock, the ports its datagrams use, its release roles.

The simulator (``rmptwin.sim.simulate``) and the node runtime (``rmptwin.node.driver``) run
the same cores; this module is what they must also agree on about the machine a core runs on,
so that a simulated and an emulated run of one experiment differ only where the network does.

- ``NodeClock``: true run time (ns since the run's start, the same for every host) to the
  host's own clock and back, with the offset and drift of ``experiment.clocks`` and the
  clock nemesis' jumps and re-drifts. A core only ever sees its host's clock; events are
  stamped in true time.
- The port rules: which of the three well-known ports (``rmptwin.core.groups``) a group or a
  unicast datagram uses. The emulated nodes bind them; the simulator's pcap writes them.
- ``RELEASE_ROLES``: the roles whose cores release at ack ts + Delta_A, whose timer lateness
  makes the fairness spread (the emulation gives their processes priority).
- ``TimeDilation``: virtual time. At a time dilation factor N one second of true run time
  lasts N seconds of the wall clock, for every node, link, workload and fault of an emulated
  run, so each process gets N times the CPU per run second (Gupta et al., NSDI 2006, in user
  space: the cores are sans-IO and read no clock). The simulator's time is virtual already.

Pure: no clock is read here; a driver passes true time in.
"""

from __future__ import annotations

import math
from typing import Protocol

from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, RMP_PORT
from rmptwin.core.packetkey import RMP_MAGIC, is_mold_request
from rmptwin.core.striping import SESSION_PREFIX

RELEASE_ROLES = ("primary", "secondary")

_RMP_FIRST = bytes([RMP_MAGIC])
_MOLD_SESSION = SESSION_PREFIX.encode()   # every MoldUDP64 session this project names


class ClockSpec(Protocol):
    """What ``experiment.clocks`` gives for one host (read, never imported: a layer above)."""

    offset_ms: float
    drift_ppm: float


class NodeClock:
    """A host's clock: ``local(t) = t + off_ns + round(t * k)`` for true run time ``t`` (ns),
    ``k`` the drift as a fraction (ppm / 1e6).

    ``off_ns`` and ``k`` are plain attributes: the simulator's delivery loop reads them
    inline, once per datagram per host."""

    __slots__ = ("off_ns", "k")

    def __init__(self, offset_ns: int = 0, drift_ppm: float = 0.0) -> None:
        self.off_ns = offset_ns
        self.k = drift_ppm * 1e-6

    @classmethod
    def of(cls, spec: ClockSpec | None) -> NodeClock:
        """The clock ``experiment.clocks`` gives a host (None: a perfect one)."""
        if spec is None:
            return cls()
        return cls(round(spec.offset_ms * 1e6), spec.drift_ppm)

    def local(self, t: int) -> int:
        """The clock's reading at true time ``t``."""
        if self.k:
            return t + self.off_ns + round(t * self.k)
        return t + self.off_ns

    def true(self, local: int) -> int:
        """The earliest true time at which the clock reads ``local`` or later: a timer armed
        for ``local`` never fires before its host's clock reaches it."""
        if not self.k:
            return local - self.off_ns
        t = math.ceil((local - self.off_ns) / (1.0 + self.k))
        while self.local(t) < local:
            t += 1
        while self.local(t - 1) >= local:
            t -= 1
        return t

    def change(self, t: int, jump_ns: int | None = None, drift_ppm: float | None = None) -> None:
        """The clock nemesis at true time ``t``: a new drift that goes on from the reading the
        clock has at ``t`` (no step), then a step of ``jump_ns``."""
        if drift_ppm is not None:
            k = drift_ppm * 1e-6
            self.off_ns += round(t * self.k) - round(t * k)
            self.k = k
        if jump_ns is not None:
            self.off_ns += jump_ns


class TimeDilation:
    """True run time (virtual ns) from the wall clock's ns since the run's start, and back, at
    a time dilation factor ``factor`` >= 1 (1: no dilation, the identity).

    ``virtual`` rounds down and ``wall`` up, so a timer armed for virtual time ``v`` and woken
    at ``wall(v)`` reads ``virtual(wall(v)) >= v``: never early."""

    __slots__ = ("factor",)

    def __init__(self, factor: float = 1.0) -> None:
        if not factor >= 1.0:
            raise ValueError(f"time dilation factor {factor}: must be at least 1")
        self.factor = float(factor)

    def virtual(self, wall_ns: int) -> int:
        """Virtual ns at ``wall_ns`` wall ns since the run's start."""
        if self.factor == 1.0:
            return wall_ns
        return math.floor(wall_ns / self.factor)

    def wall(self, virtual_ns: int) -> int:
        """The wall ns since the run's start at which virtual time reaches ``virtual_ns``."""
        if self.factor == 1.0:
            return virtual_ns
        return math.ceil(virtual_ns * self.factor)

    def wall_s(self, virtual_ns: float) -> float:
        """A virtual span in ns as wall seconds (what an event loop's ``call_later`` takes)."""
        return virtual_ns * self.factor / 1e9


def port_for_group(name: str) -> int:
    """The port a group's datagrams go to: a region's remulticast group is MoldUDP64."""
    return REGION_PORT if name.startswith("region/") else RMP_PORT


def port_for_datagram(data: bytes) -> int:
    """The port a unicast datagram goes to, from its first bytes: RMP frames start with the
    magic byte, a MoldUDP64 re-request is a bare 20-byte header, other MoldUDP64 packets
    (retransmissions) carry an ``RMPT`` session; anything else is RMP control."""
    if data[:1] == _RMP_FIRST:
        return RMP_PORT
    if is_mold_request(data):
        return REREQUEST_PORT
    if data[:4] == _MOLD_SESSION:
        return REGION_PORT
    return RMP_PORT
