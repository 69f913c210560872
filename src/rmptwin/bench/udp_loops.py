"""The programs ``bench_datapath`` starts inside its container: a paced sender, a counting
sink, and the UDP loops under test (stdlib asyncio, uvloop, the node driver).

    python -m rmptwin.bench.udp_loops send HOST PORT --rate R --seconds S --size B [--bind IP]
    python -m rmptwin.bench.udp_loops sink IP PORT
    python -m rmptwin.bench.udp_loops loop {asyncio,uvloop,driver} IN_IP IN_PORT OUT_IP OUT_PORT
        [--event-loop {asyncio,uvloop}] [--access-delay-us N]   (the driver's options)
    python -m rmptwin.bench.udp_loops fan IP SOCKETS OUT_IP OUT_PORT   (uvloop; ``bench_crowd``)

The sender and the sink print one JSON line when they end (the sink on SIGTERM); a loop prints
nothing: what it received and sent is read from the kernel's socket counters by the caller, the
same way for the C floor (socat), which reports nothing either. Each program imports as
little as it can: what it loads at start-up is not measured, but a smaller process starts
faster in a container limited to one CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rmptwin.node import event_loop
from rmptwin.node.udp_buffers import set_buffers  # the node driver's buffers

if TYPE_CHECKING:
    from rmptwin.core.events import Event

PACE_SLEEP_S = 0.0005     # the sender wakes every ~0.5 ms and sends what is due (bursts of ~10)


def paced_count(elapsed_s: float, rate: float, total: int) -> int:
    """How many datagrams are due ``elapsed_s`` into a send at ``rate``/s (never above ``total``):
    pacing by the elapsed time, so a late wake-up is caught up and no error accumulates."""
    return min(total, int(elapsed_s * rate) + 1)


def send(host: str, port: int, rate: float, seconds: float, size: int, bind: str | None) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    set_buffers(s)
    if bind:
        s.bind((bind, 0))
    s.connect((host, port))   # a connected socket: the cheapest send Python has, so the sender stays light
    payload = bytes(size)     # zeros: not an RMP or MoldUDP64 frame, the node driver sends it to RMP_PORT
    total = int(rate * seconds)
    sent = errors = bursts = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    while sent < total:
        due = paced_count(time.perf_counter() - t0, rate, total)
        bursts += due > sent
        while sent < due:
            try:
                s.send(payload)
            except OSError:   # ECONNREFUSED from an ICMP of an earlier datagram: the loop is not bound
                errors += 1
            sent += 1
        time.sleep(PACE_SLEEP_S)
    span = time.perf_counter() - t0
    return {"sent": sent - errors, "errors": errors, "seconds": span, "cpu_s": time.process_time() - cpu0,
            "bursts": bursts}


def sink(ip: str, port: int) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # The node driver's wildcard sockets use SO_REUSEADDR on the same port; the sink's more
    # specific address then wins the datagrams sent to it.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_buffers(s)
    s.bind((ip, port))
    n = 0

    def stop(*_: object) -> None:
        raise SystemExit

    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            s.recv(65535)
            n += 1
    except SystemExit:
        pass
    return {"received": n}


class Forward(asyncio.DatagramProtocol):
    """The whole loop under test: every datagram received is sent on, nothing else."""

    def __init__(self, out: tuple[str, int]) -> None:
        self.out = out
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        assert self.transport is not None   # set before any datagram
        self.transport.sendto(data, self.out)


async def _fan(ip: str, sockets: int, out: tuple[str, int]) -> None:
    """``sockets`` forwarding loops in one process: each socket bound to a port of the
    kernel's choosing (printed as one JSON list first), every datagram sent on to ``out``."""
    loop = asyncio.get_running_loop()
    ports = []
    for _ in range(sockets):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        set_buffers(sock)
        sock.bind((ip, 0))
        ports.append(sock.getsockname()[1])
        await loop.create_datagram_endpoint(lambda: Forward(out), sock=sock)
    print(json.dumps(ports), flush=True)
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()


async def _forward(inp: tuple[str, int], out: tuple[str, int]) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    set_buffers(sock)
    sock.bind(inp)
    await loop.create_datagram_endpoint(lambda: Forward(out), sock=sock)
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()


class EchoCore:
    """A trivial sans-IO core for the node driver: each datagram is sent on to the host
    ``sink``; no timer, no group, no event. What remains is the driver's own receive path
    (source lookup, clocks, the core calls, the send path)."""

    def __init__(self) -> None:
        self.out: list[tuple[bytes, Any]] = []
        from rmptwin.core.sansio import Unicast
        self.dest = Unicast("sink")

    def receive_datagram(self, data: bytes, src: str, now: int) -> None:
        self.out.append((data, self.dest))

    def datagrams_to_send(self, now: int) -> Sequence[tuple[bytes, Any]]:
        out, self.out = self.out, []
        return out

    def get_timer(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        """Nothing is ever due."""

    def next_event(self) -> Event | None:
        return None

    def groups(self) -> frozenset[str]:
        return frozenset()


async def _driver(hosts: dict[str, str], log_path: str, access_delay_us: float) -> None:
    from rmptwin.node.driver import NodeDriver
    from rmptwin.node.eventlog import EventWriter
    from rmptwin.node.hostlink import HostLink

    log = EventWriter(log_path)
    # An access link that only delays, as the relay backend leaves to a node (node.hostlink):
    # every datagram waits in its down line, and what the core sends in its up line.
    access = None
    if access_delay_us > 0:
        from rmptwin.model import LinkParams
        access = HostLink("loop", "s1", LinkParams(delay_ms=access_delay_us / 1e3), seed=1)
    driver = NodeDriver(EchoCore(), "loop", "bench", hosts, time.time_ns(), log, access=access)
    driver.open()
    loop = asyncio.get_running_loop()
    driver.start(loop)
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    try:
        await done.wait()
    finally:
        driver.close()
        log.close()


def driver_hosts(in_ip: str, out_ip: str, sender_ip: str) -> dict[str, str]:
    """The driver's host table: it drops datagrams from unknown addresses and from itself, so
    the sender needs an address of its own (loopback answers all of 127/8)."""
    return {"loop": in_ip, "tx": sender_ip, "sink": out_ip}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmptwin.bench.udp_loops")
    sub = ap.add_subparsers(dest="role", required=True)
    p = sub.add_parser("send")
    p.add_argument("host"), p.add_argument("port", type=int)
    p.add_argument("--rate", type=float, required=True), p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--size", type=int, default=100), p.add_argument("--bind")
    p = sub.add_parser("sink")
    p.add_argument("ip"), p.add_argument("port", type=int)
    p = sub.add_parser("loop")
    p.add_argument("kind", choices=("asyncio", "uvloop", "driver"))
    p.add_argument("in_ip"), p.add_argument("in_port", type=int)
    p.add_argument("out_ip"), p.add_argument("out_port", type=int)
    p.add_argument("--sender-ip", default="127.0.0.2"), p.add_argument("--log", default="/dev/null")
    p.add_argument("--event-loop", choices=event_loop.EVENT_LOOPS, default="asyncio")
    p.add_argument("--access-delay-us", type=float, default=0.0)
    p = sub.add_parser("fan")
    p.add_argument("ip"), p.add_argument("sockets", type=int)
    p.add_argument("out_ip"), p.add_argument("out_port", type=int)
    a = ap.parse_args(argv)
    if a.role == "send":
        print(json.dumps(send(a.host, a.port, a.rate, a.seconds, a.size, a.bind)), flush=True)
    elif a.role == "sink":
        print(json.dumps(sink(a.ip, a.port)), flush=True)
    elif a.role == "fan":
        event_loop.install("uvloop")   # the nodes' loop
        asyncio.run(_fan(a.ip, a.sockets, (a.out_ip, a.out_port)))
    elif a.kind == "driver":
        event_loop.install(a.event_loop)   # the node's own choice (node.main), the same way
        # The driver binds its well-known ports itself; in_port and out_port are the caller's to know.
        asyncio.run(_driver(driver_hosts(a.in_ip, a.out_ip, a.sender_ip), a.log, a.access_delay_us))
    else:
        event_loop.install("uvloop" if a.kind == "uvloop" else "asyncio")
        asyncio.run(_forward((a.in_ip, a.in_port), (a.out_ip, a.out_port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
