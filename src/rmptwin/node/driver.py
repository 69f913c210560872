"""One asyncio driver per role around a sans-IO core (aioquic style), on real UDP sockets.

The driver owns three sockets bound to the well-known ports of ``rmptwin.core.groups``:
RMP_PORT (the stripes' global groups and unicast RMP control), REGION_PORT (MoldUDP64
remulticast and retransmissions to customers), REREQUEST_PORT (MoldUDP64 re-requests).
A core's groups are joined on the socket of their port; what a core sends goes to the
port its bytes belong to (the port rules of ``rmptwin.core.host``).

Time: ``true`` ns since the run's start (CLOCK_REALTIME minus t0, the same clock for every
node on this kernel, divided by the run's time dilation factor: ``core.host.TimeDilation``)
stamps events; the core sees its host's clock (``core.host.NodeClock``, the simulator's too:
offset and drift from ``experiment.clocks``, the clock nemesis). Every wait the loop is given
is that true span times the factor, in wall seconds.

Timers: the core's deadline is mapped to the loop's clock when it is armed (``call_at``, an
absolute time, recomputed from the wall clock at each arming so nothing accumulates). The
selector rounds its timeout up to the millisecond and a loaded machine wakes a process late,
so a release deadline (a receiver releasing at ack ts + Delta_A: what fairness is made of) is
armed ``EARLY_WAKE_NS`` early and finished by sleeping until ``SPIN_WALL_S`` before it and spinning the rest.
On uvloop (``node.event_loop``) a timer may also fire early by itself: libuv keeps timers in
whole milliseconds from a loop time cached at the top of each iteration (measured: half of 300
timers early, by up to 1.35 ms); it is finished the same way. No timer is handed to the core
before its deadline. Every fire's lateness (the wall time
``handle_timer`` runs minus the deadline) goes into ``lateness`` (``rmptwin.records.timer_lateness``).

Access link: given a ``HostLink`` (``node.hostlink``: a lossless access link the relay
backend leaves to the node), every datagram sent waits in its ``up`` line and every datagram
received in its ``down`` line until the link model lets it go; one loop timer serves both.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from rmptwin.core.events import Event, Kind
from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT, RMP_PORT, group_ip
from rmptwin.core.host import RELEASE_ROLES, NodeClock, TimeDilation, port_for_datagram, port_for_group
from rmptwin.core.sansio import Core, Dest, Group, Unicast
from rmptwin.model import Clock
from rmptwin.node.drain import NodeProgress
from rmptwin.node.eventlog import EventWriter
from rmptwin.node.hostlink import HostLink
from rmptwin.node.udp_buffers import set_buffers
from rmptwin.records.timer_lateness import LatenessHistogram

if TYPE_CHECKING:
    from rmptwin.factories.ticker_workload import Publish

MAX_READS_PER_WAKEUP = 256
EARLY_WAKE_NS = 2_000_000  # > the selector's 1 ms rounding plus a typical wake-up delay
# The last stretch before a deadline is spun, the rest slept: a wake-up from a sleep comes
# 50-100 us late on an idle machine (the kernel's timer slack and a wake-up). Spinning the whole
# early wake on sched_yield, which gives way only to real-time peers (a release role runs
# SCHED_RR), took 58 ms of a primary's 232 ms of run CPU in the quickstart (cProfile).
SPIN_WALL_S = 200e-6
# Events on disk before the datagrams of the same call go out: a CAS proposal's invocation is
# history (checkers.linearizable) only if it survives a kill -9 of its EV, as a Jepsen client
# records an operation before invoking it. (Measured emulated: a killed EV's last proposals,
# won at etcd, were missing from the history and made it unexplainable.) One flush per proposal.
WRITE_AHEAD = frozenset({Kind.CAS_INVOKE})
# Awake anyway, a datagram due this soon goes now, as a relay releases within its slack: on the
# quickstart's access links (0.2 ms, 100 Mbit/s: 0.21 ms for a 100-byte datagram) every datagram
# goes in the wake-up that read or made it, up to 0.25 ms early, instead of in a wake-up of its
# own, which on a busy machine comes later than that anyway.
ACCESS_SLACK_NS = 250_000


# Linux's IP_MULTICAST_ALL (not in Python 3.11's socket module). Off, a socket bound to a port
# receives only the groups it joined itself, not every group some other socket of the host
# joined: a spare's membership keeper (below) must not feed the running node a group it left.
IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)


class _SourceCore(Core, Protocol):
    """A source's core: the one a driver feeds publications (``rmp.source``)."""

    def publish(self, stripe: int, payload: bytes, now: int) -> object: ...


def _udp_socket(ip: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
    set_buffers(s)
    s.bind(("0.0.0.0", port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 32)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
    s.setblocking(False)
    return s


def _mreq(group: str, ip: str) -> bytes:
    """The ip_mreq of logical group ``group`` on the interface of ``ip``."""
    return struct.pack("4s4s", socket.inet_aton(group_ip(group)), socket.inet_aton(ip))


def membership_keeper(ip: str, groups: list[str]) -> socket.socket:
    """A socket that only holds the host's memberships of ``groups`` (bound to no node port, it
    receives nothing). A crashed machine sends no IGMP leave: its switch port keeps forwarding its
    groups until the membership times out (260 s in IGMPv2), longer than any run. A killed node
    process would leave them at once (the kernel drops a closed socket's joins), so a spare holds
    them from before the crash until its own sockets have joined (``node.main``); the
    restarted node then hears its groups from its first instant, as the venue seed's step (1)
    has it ("EV2 can receive all trade requests after k")."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
    s.bind((ip, 0))
    for name in dict.fromkeys(groups):   # each once: a second join of a group is EADDRINUSE
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, _mreq(name, ip))
    return s


def is_release_deadline(core: Core, deadline: int) -> bool:
    """Whether ``deadline`` is a receiver's release (timer key ``(stripe, "release")``).

    Asks the RMP cores' ``Timers`` table (``rmp.corebase``); a core without one has no
    release deadlines."""
    timers = getattr(core, "timers", None)
    if timers is None:
        return False
    return any(isinstance(key, tuple) and key[-1:] == ("release",) for key in timers.keys_due_at(deadline))


class NodeDriver:
    """Runs one core on this host's sockets until ``stop()``."""

    def __init__(self, core: Core, name: str, role: str, hosts: dict[str, str], t0_ns: int,
                 log: EventWriter, clock: Clock | None = None, guaranteed: bool = False,
                 access: HostLink | None = None, dilation: TimeDilation | None = None) -> None:
        self.core = core
        self.name = name
        self.role = role
        self.hosts = hosts
        self.ip = hosts[name]
        self.ip_names = {ip: n for n, ip in hosts.items()}
        self.t0 = t0_ns
        self.clock = NodeClock.of(clock)
        self.dilation = dilation or TimeDilation()
        self.log = log
        self._unflushed_ahead = False   # an event in WRITE_AHEAD logged since the last flush
        self.progress = NodeProgress(guaranteed)
        self.socks: dict[int, socket.socket] = {}
        self.joined: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_local: int | None = None
        self._armed_local = 0   # the local time the current deadline was armed at
        self._timer_precise = False
        self.lateness = LatenessHistogram()
        self.timing = True   # False once the runner says HALT: fires after the run are not timed
        self.loop: asyncio.AbstractEventLoop | None = None
        self.sent = 0
        self.received = 0
        self.send_errors = 0
        self.unknown_src = 0
        self.access = access
        self._access_timer: asyncio.TimerHandle | None = None
        self._access_at: int | None = None
        self._delivering = False   # inside _deliver_access: the access link's timer is armed once it ends

    # ------------------------------------------------------------------ sockets

    def open(self) -> None:
        """Bind the ports and join the core's initial groups (before the run starts, so
        IGMP joins reach the controller before any data flows)."""
        for port in (RMP_PORT, REGION_PORT, REREQUEST_PORT):
            self.socks[port] = _udp_socket(self.ip, port)
        self._sync_groups()

    def _membership(self, name: str, join: bool) -> None:
        opt = socket.IP_ADD_MEMBERSHIP if join else socket.IP_DROP_MEMBERSHIP
        try:
            self.socks[port_for_group(name)].setsockopt(socket.IPPROTO_IP, opt, _mreq(name, self.ip))
        except OSError as e:
            if not (join and e.errno == errno.EADDRINUSE):  # already joined: fine
                raise

    def _sync_groups(self) -> None:
        want = set(self.core.groups())
        if want == self.joined:
            return
        for g in sorted(want - self.joined):
            self._membership(g, True)
        for g in sorted(self.joined - want):
            self._membership(g, False)
        self.joined = want

    def close(self) -> None:
        for handle in (self._timer, self._access_timer):
            if handle is not None:
                handle.cancel()
        for port, s in self.socks.items():
            if self.loop is not None:
                try:
                    self.loop.remove_reader(s.fileno())
                except (ValueError, OSError):
                    pass
            s.close()
        self.socks.clear()

    # ------------------------------------------------------------------ time

    def true_now(self) -> int:
        return self.dilation.virtual(time.time_ns() - self.t0)

    def wall_s(self, true_ns: float) -> float:
        """A span of true (virtual) ns as the wall seconds the loop waits."""
        return self.dilation.wall_s(true_ns)

    # ------------------------------------------------------------------ the loop

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Call at true time ~0 inside the running loop."""
        self.loop = loop
        for port, s in self.socks.items():
            loop.add_reader(s.fileno(), self._readable, s)
        self.after(self.true_now())

    def _readable(self, sock: socket.socket) -> None:
        """Every datagram waiting on ``sock`` (up to MAX_READS_PER_WAKEUP), then one ``after``:
        the core's sends, group changes and timer are collected once per wake-up, not once
        per datagram; each datagram's events keep the time it was read. With an access link,
        a datagram enters its ``down`` line instead and reaches the core in ``_access_due``."""
        core, names, local, me, access = self.core, self.ip_names, self.clock.local, self.name, self.access
        port = sock.getsockname()[1] if access is not None else 0
        t = None
        for _ in range(MAX_READS_PER_WAKEUP):
            try:
                data, (ip, _port) = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break  # e.g. ICMP port unreachable reported on this socket
            src = names.get(ip)
            if src is None or src == me:
                self.unknown_src += src is None
                continue
            t = self.dilation.virtual(time.time_ns() - self.t0)
            if access is not None:
                access.receive(t, data, src, ip, self.ip, port)
                continue
            self.received += 1
            core.receive_datagram(data, src, local(t))
            self._log_events(t)
        if t is not None:
            self._arm_access() if access is not None else self.after(t)

    def _access_due(self) -> None:
        """The access link's timer: its next datagram is due."""
        self._access_timer = self._access_at = None
        self._deliver_access()

    def _deliver_access(self) -> None:
        """Deliver and send what the access link lets go now (or within its slack), collect the
        core's output, and again while that output is itself due within the slack (a datagram
        sent on a 0.2 ms access link is: it goes in this wake-up, not in one of its own, as a
        relay releases a frame due within its slack when it is awake anyway). Then arm the
        link's timer for the next datagram."""
        core, local, access = self.core, self.clock.local, self.access
        assert access is not None   # called only with an access link
        self._delivering = True
        try:
            while True:
                t = self.true_now()
                down, up = access.down.due(t + ACCESS_SLACK_NS), access.up.due(t + ACCESS_SLACK_NS)
                if not (down or up):
                    break
                for _leave, data, src in down:
                    self.received += 1
                    core.receive_datagram(data, src, local(t))
                    self._log_events(t)
                for _leave, data, addr in up:
                    self._sendto(data, addr)
                self.after(t)   # its _arm_access waits for this loop to end
        finally:
            self._delivering = False
        self._arm_access()

    def _arm_access(self) -> None:
        assert self.access is not None and self.loop is not None   # called with an access link, once started
        if self._delivering:
            return
        due = self.access.next_due()
        if due is not None and due <= self.true_now() + ACCESS_SLACK_NS:   # awake anyway: it goes now
            if self._access_timer is not None:
                self._access_timer.cancel()
                self._access_timer = self._access_at = None
            self._deliver_access()
            return
        if due is None or due == self._access_at:
            return
        if self._access_timer is not None:
            self._access_timer.cancel()
        self._access_at = due
        self._access_timer = self.loop.call_at(
            self.loop.time() + self.wall_s(max(0, due - self.true_now())), self._access_due)

    def _log_events(self, t: int) -> None:
        """Log what the core produced, noting an event that must reach the disk before the
        datagrams go out. (Noted, not returned: a wake-up that reads many datagrams logs each
        one's events as it goes, and the send comes once, in ``after``. Measured emulated: the
        proposals an EV made in answer to a DECIDE went out unflushed, and a kill -9 lost them.)"""
        ev = self.core.next_event()
        while ev is not None:
            self.log.add(t, self.name, self.role, ev)
            self.progress.add(ev)
            self._unflushed_ahead = self._unflushed_ahead or ev.kind in WRITE_AHEAD
            ev = self.core.next_event()

    def _fire(self) -> None:
        self._timer = None
        fired, self._timer_local = self._timer_local, None
        assert fired is not None   # armed only for a deadline
        due = self.clock.true(fired)
        t = self.true_now()
        if due - t > 2 * EARLY_WAKE_NS + 1_000_000:  # the wall clock stepped back: wait again
            self._arm(fired)
            return
        while t < due:  # woken early on purpose (or by the timer wheel's rounding): finish precisely
            wall_left = self.wall_s(due - t)
            if wall_left > SPIN_WALL_S:   # sleep (a high-resolution timer) up to the last stretch
                time.sleep(wall_left - SPIN_WALL_S)
            t = self.true_now()
        local = self.clock.local(t)
        # Late from when the timer could first fire: a deadline the core asks for when it has
        # already passed (an answer that came after the time it was wanted) fires at once, and
        # what it missed is the protocol's figure, not this machine's.
        if self.timing:
            self.lateness.add(local - max(fired, self._armed_local), due)
        self.core.handle_timer(local)
        self.after(t, fired)

    def after(self, t: int, fired: int | None = None) -> None:
        """Collect what the core produced after a call at true time ``t``."""
        core = self.core
        self._sync_groups()
        self._log_events(t)
        if self._unflushed_ahead:
            self.log.flush()
            self._unflushed_ahead = False
        for data, dest in core.datagrams_to_send(self.clock.local(t)):
            self._send(data, dest)
        self._log_events(t)
        deadline = core.get_timer()
        if deadline is not None and deadline == fired:
            deadline = None  # re-arming the deadline just handled would spin
        if deadline != self._timer_local:
            self._arm(deadline)
        if self.access is not None and self.loop is not None:
            self._arm_access()

    def change_clock(self, jump_ns: int | None, drift_ppm: float | None) -> None:
        """The runner's CLOCK command: step and/or re-drift this node's clock; the core's
        deadline, in its local time, now falls at another true time."""
        t = self.true_now()
        self.clock.change(t, jump_ns, drift_ppm)
        jump_ms = None if jump_ns is None else jump_ns / 1e6   # the CLOCK event's detail, as the simulator logs it
        self.log.add(t, self.name, self.role, Event(Kind.CLOCK, detail={"jump_ms": jump_ms, "drift_ppm": drift_ppm}))
        self._arm(self._timer_local)

    def _arm(self, deadline: int | None) -> None:
        """(Re)arm the loop's one timer for the core's ``deadline`` (its local clock)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_local = deadline
        if deadline is None or self.loop is None:
            return
        self._armed_local = self.clock.local(self.true_now())
        # Only a receiver has release deadlines; asking a source's thousands of resend timers
        # which one this is would cost O(timers) at every arming.
        self._timer_precise = self.role in RELEASE_ROLES and is_release_deadline(self.core, deadline)
        early_s = EARLY_WAKE_NS / 1e9 if self._timer_precise else 0.0   # wall: the selector's rounding
        wait_s = self.wall_s(self.clock.true(deadline) - self.true_now()) - early_s
        self._timer = self.loop.call_at(self.loop.time() + max(0.0, wait_s), self._fire)

    def _send(self, data: bytes, dest: Dest) -> None:
        addr = self._address(data, dest)
        if addr is None:
            self.send_errors += 1
        elif self.access is not None:
            self.access.send(self.true_now(), data, addr, self.ip)
        else:
            self._sendto(data, addr)

    def _address(self, data: bytes, dest: object) -> tuple[str, int] | None:
        if isinstance(dest, Group):
            return group_ip(dest.name), port_for_group(dest.name)
        if isinstance(dest, Unicast):
            ip = self.hosts.get(dest.node)
            return None if ip is None else (ip, port_for_datagram(data))
        return None

    def _sendto(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            self.socks[addr[1]].sendto(data, addr)
            self.sent += 1
        except (BlockingIOError, InterruptedError):
            self.send_errors += 1  # a full socket buffer drops like a full queue
        except OSError:
            self.send_errors += 1  # unreachable peer (e.g. crashed): UDP loses it

    def schedule_publications(self, pubs: list[Publish], end: Callable[[], None] | None = None) -> None:
        """Feed ``workload.Publish`` items (this source's) to the source core's ``publish`` at their times."""
        it = iter(pubs)
        loop = self.loop

        def fire(p: Publish) -> None:
            t = self.true_now()
            cast(_SourceCore, self.core).publish(p.stripe, p.payload, self.clock.local(t))
            self.after(t)
            nxt(t)

        def nxt(t: int) -> None:
            # Publish every item already due in this wakeup, then sleep until the next one.
            for p in it:
                if p.t_ns <= t:
                    cast(_SourceCore, self.core).publish(p.stripe, p.payload, self.clock.local(t))
                    continue
                self.after(t)
                assert loop is not None   # scheduled once started
                loop.call_later(self.wall_s(p.t_ns - self.true_now()), fire, p)
                return
            self.after(t)
            if end is not None:
                end()

        nxt(self.true_now())
