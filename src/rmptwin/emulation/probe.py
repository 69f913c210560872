"""Measurement traffic for the emulated network (selftest, tests, benchmarks).

Runs inside a host's namespace:

    python -m rmptwin.emulation.probe send --dst IP --port P --count N --rate PPS [--size B]
    python -m rmptwin.emulation.probe recv --port P [--group G --intf I] [--raw] --duration S

Each datagram is a MoldUDP64-shaped header (session ``PROBE``, sequence number, count 1)
followed by the send time, so the relays' drop log names dropped probes by sequence
number (``gseq``) like any MoldUDP64 packet. All namespaces share the kernel clock, so
one-way delay is receive time minus send time. ``recv --raw`` counts what reaches the
interface (AF_PACKET) rather than what a socket accepts: after an IGMP leave the
kernel discards the group's frames, but the question is whether the network still
sends them. The receiver prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time
from typing import Any

HEADER = struct.Struct("!10sQHq")   # MoldUDP64 session, seq, count; then send time ns
SESSION = b"PROBE     "
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def send(dst: str, port: int, count: int, rate: float, size: int, intf_ip: str | None,
         start_seq: int = 0) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if intf_ip:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(intf_ip))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 16)
    pad = b"\0" * max(0, size - HEADER.size)
    interval = 1e9 / rate if rate > 0 else 0
    start = time.monotonic_ns()
    errors = 0
    for i in range(count):
        due = start + int(i * interval)
        now = time.monotonic_ns()
        if due - now > 200_000:
            time.sleep((due - now) / 1e9)
        try:
            s.sendto(HEADER.pack(SESSION, start_seq + i, 1, time.time_ns()) + pad, (dst, port))
        except OSError:
            errors += 1
    elapsed = (time.monotonic_ns() - start) / 1e9
    return {"sent": count, "errors": errors, "elapsed_s": elapsed}


def _udp_frame(frame: bytes, port: int, group: str | None) -> bytes | None:
    """(payload) of an IPv4/UDP frame to ``port`` (and ``group``), else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    if group is not None and socket.inet_ntoa(frame[30:34]) != group:
        return None
    if struct.unpack_from("!H", frame, 14 + ihl + 2)[0] != port:
        return None
    return frame[14 + ihl + 8:]


def _membership(group: str, intf_ip: str | None) -> bytes:
    return socket.inet_aton(group) + socket.inet_aton(intf_ip or "0.0.0.0")


def _open_sockets(port: int, group: str | None, intf: str | None, intf_ip: str | None, raw: bool,
                  join: bool) -> tuple[socket.socket, socket.socket | None]:
    """(the socket to read, the group member socket or None)."""
    member = None
    if group and join:
        member = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        member.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        member.bind(("", port))
        member.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, _membership(group, intf_ip))
    if raw:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        sock.bind((intf, 0))
    elif member is not None:
        sock = member
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("", port))
    try:   # beyond net.core.rmem_max (root only): scheduling gaps must not overflow it
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 16 << 20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    # Kernel receive timestamps: the receiver's own scheduling delay is not the network's.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.05)
    return sock, member


def _kernel_time(ancillary: list[tuple[int, int, bytes]], default_ns: int) -> int:
    sec: int
    nsec: int
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
            sec, nsec = struct.unpack_from("@qq", value)
            return sec * 1_000_000_000 + nsec
    return default_ns


def _stop_requested(stdin_fd: int | None) -> tuple[bool, bool]:
    """(stop asked for, stdin still open): a "stop" line on stdin ends the receiver."""
    if stdin_fd is None or not select.select([stdin_fd], [], [], 0)[0]:
        return False, stdin_fd is not None
    line = sys.stdin.readline()
    return line.strip() == "stop", bool(line)   # EOF: the caller gave no pipe, stop watching


def recv(port: int, group: str | None, intf: str | None, intf_ip: str | None, raw: bool, duration: float,
         idle: float, leave_after: float | None, join: bool = True, stop_on_stdin: bool = False) -> dict[str, Any]:
    """Count probe datagrams until ``duration`` s have passed, ``idle`` s went by with nothing
    to read, or (``stop_on_stdin``) a "stop" line arrives; on "stop" what is queued is read first.

    Idle time is this process's own, since its last read: a receiver behind a slow CPU (a VM's
    emulated one) reads a backlog whose kernel arrival times are long past, and must not take
    that for silence (it did, and left seconds of datagrams unread)."""
    sock, member = _open_sockets(port, group, intf, intf_ip, raw, join)
    seqs: list[int] = []
    delays: list[int] = []
    arrivals: list[int] = []
    t_start = time.monotonic()
    left_at = None
    last = None            # kernel arrival time of the last datagram (reported)
    last_read = None       # this process's time of its last read of one (idle)
    nbytes = 0
    stdin_fd = sys.stdin.fileno() if stop_on_stdin else None
    draining = False
    print(json.dumps({"ready": True}), flush=True)
    data: bytes | None
    while True:
        now = time.monotonic()
        if now - t_start > duration:
            break
        if last_read is not None and now - last_read > idle and left_at is None and leave_after is None:
            break
        if not draining and stdin_fd is not None:
            stop, still_open = _stop_requested(stdin_fd)
            stdin_fd = stdin_fd if still_open else None
            if stop:
                draining = True
                sock.settimeout(0)
        # leave_after counts from the first datagram, not from the start: the leave is then
        # measured against a tree that exists, however long the join took (seconds under a
        # VM's emulated CPU, where a count from the start left before the first datagram).
        if leave_after is not None and left_at is None and arrivals and (time.time_ns() - arrivals[0]) / 1e9 >= leave_after:
            assert member is not None and group is not None   # leave_after: a joined group's receiver
            member.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, _membership(group, intf_ip))
            left_at = time.time_ns()
        try:
            data, anc, _, _ = sock.recvmsg(65535, 64)
        except (TimeoutError, BlockingIOError):
            if draining:
                break      # everything queued before the stop is read
            continue
        t = _kernel_time(anc, time.time_ns())
        if raw:
            data = _udp_frame(data, port, group)
            if data is None:
                continue
        if len(data) < HEADER.size or data[:10] != SESSION:
            continue
        _, seq, _, sent = HEADER.unpack_from(data)
        seqs.append(seq)
        delays.append(t - sent)
        arrivals.append(t)
        nbytes += len(data)
        last = t
        last_read = time.monotonic()
    return {"received": len(seqs), "seqs": seqs, "delays_ns": delays, "bytes": nbytes,
            "first_ns": arrivals[0] if arrivals else None, "last_ns": last, "left_ns": left_at,
            "arrivals_ns": arrivals}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rmptwin.emulation.probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=9000)
    s.add_argument("--count", type=int, default=1000)
    s.add_argument("--rate", type=float, default=1000.0)
    s.add_argument("--size", type=int, default=64)
    s.add_argument("--intf-ip")
    s.add_argument("--start-seq", type=int, default=0)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=9000)
    r.add_argument("--group")
    r.add_argument("--intf")
    r.add_argument("--intf-ip")
    r.add_argument("--raw", action="store_true")
    r.add_argument("--no-join", action="store_true", help="watch the interface for the group without joining")
    r.add_argument("--duration", type=float, default=10.0)
    r.add_argument("--idle", type=float, default=1.0, help="stop this long after the last packet")
    r.add_argument("--leave-after", type=float, help="leave the group this many seconds after the first datagram")
    r.add_argument("--stop-on-stdin", action="store_true",
                   help='end when a "stop" line arrives on stdin, after reading what is queued')
    r.add_argument("--out")
    a = ap.parse_args(argv)
    if a.cmd == "send":
        result = send(a.dst, a.port, a.count, a.rate, a.size, a.intf_ip, a.start_seq)
    else:
        result = recv(a.port, a.group, a.intf, a.intf_ip, a.raw or a.no_join, a.duration, a.idle, a.leave_after,
                      join=not a.no_join, stop_on_stdin=a.stop_on_stdin)
    text = json.dumps(result)
    if getattr(a, "out", None):
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
