"""One process of the multi-process venue benchmark (``runtime.venue_procs``): its cores behind
unix datagram sockets, and the loop that drives them.

Every core has its own ``AF_UNIX``/``SOCK_DGRAM`` socket, ``<dir>/<name>.sock``; a datagram's
source is the name of the socket it came from. Unix datagrams on one machine are not lost
(a full receiver makes the sender wait), so the benchmark measures the venue, not loopback
UDP drops; a sender never blocks either: what the receiver cannot take yet waits in a
backlog, retried on every turn of the loop (two busy processes cannot deadlock on each
other). A datagram to a dead process (its socket gone or unbound) is dropped, like UDP.

An EV asks etcd synchronously, as the seed's EV calls XCF: the PROPOSE it emits for the
host ``seq`` becomes one etcd transaction for the whole batch (``EtcdCas.propose``) and the
answer is handed straight back, so the next batch is proposed as soon as the answer is in.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from collections import deque
from pathlib import Path

from ..sansio import Group, Unicast
from .etcd_client import EtcdCas, serve_propose

RCVBUF = 4 << 20
_LEN = struct.Struct("!I")


class Transport:
    """The sockets of one process's cores; ``groups`` names each multicast group's members.

    What a core sends in one turn of the loop goes out as ONE datagram per destination (the
    frames length-prefixed), and a frame for a core of the same process never leaves it:
    the kernel queues few datagrams per unix socket (``net.unix.max_dgram_qlen``, 10 here),
    and a syscall per frame would cost more than the venue's work on the frame."""

    def __init__(self, sock_dir: str | Path, names: list[str], groups: dict[str, list[str]]) -> None:
        self.dir = Path(sock_dir)
        self.groups = groups
        self.socks: dict[str, socket.socket] = {}
        for name in names:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = self.path(name)
            Path(path).unlink(missing_ok=True)   # a crashed predecessor's socket file
            s.bind(path)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)
            s.setblocking(False)
            self.socks[name] = s
        self._by_fd = {s.fileno(): n for n, s in self.socks.items()}
        self._local: list[tuple[str, bytes, str]] = []            # (core, frame, source) in this process
        self._outbox: dict[tuple[str, str], list[bytes]] = {}     # (source, destination) -> frames this turn
        self.backlog: dict[tuple[str, str], deque[bytes]] = {}    # datagrams the receiver could not take yet
        self.dropped = self.datagrams = self.frames = self.rx = 0

    def path(self, name: str) -> str:
        return str(self.dir / f"{name}.sock")

    def send(self, src: str, out) -> None:
        for data, dest in out:
            names = self.groups.get(dest.name, ()) if isinstance(dest, Group) else (dest.node,)
            for name in names:
                if name in self.socks:
                    self._local.append((name, data, src))
                else:
                    self._outbox.setdefault((src, name), []).append(data)

    def flush(self) -> None:
        """Send this turn's frames (one datagram per destination, at most ~60 kB each) and the backlog."""
        for pair, frames in self._outbox.items():
            q = self.backlog.setdefault(pair, deque())
            chunk, size = [], 0
            for fr in frames:
                if size + len(fr) > 60_000 and chunk:
                    q.append(b"".join(chunk))
                    chunk, size = [], 0
                chunk.append(_LEN.pack(len(fr)) + fr)
                size += len(fr) + _LEN.size
            q.append(b"".join(chunk))
            self.frames += len(frames)
        self._outbox.clear()
        for (src, name), q in self.backlog.items():
            while q:
                try:
                    self.socks[src].sendto(q[0], self.path(name))
                except BlockingIOError:
                    break   # that receiver is behind: try again next turn
                except (ConnectionRefusedError, FileNotFoundError):
                    self.dropped += 1   # that process is down: the datagram is lost, as on a network
                self.datagrams += 1
                q.popleft()

    @property
    def waiting(self) -> bool:
        return any(self.backlog.values())

    def receive(self, timeout_s: float) -> list[tuple[str, bytes, str]]:
        """(core name, frame, source name) for everything waiting, after at most ``timeout_s``."""
        got, self._local = self._local, []
        if got:
            timeout_s = 0.0
        ready, _, _ = select.select(list(self.socks.values()), [], [], max(0.0, timeout_s))
        for s in ready:
            name = self._by_fd[s.fileno()]
            for _ in range(4096):
                try:
                    data, addr = s.recvfrom(1 << 17)
                except BlockingIOError:
                    break
                src = os.path.basename(addr or "?").removesuffix(".sock")
                self.rx += 1
                off = 0
                while off + _LEN.size <= len(data):
                    (n,) = _LEN.unpack_from(data, off)
                    got.append((name, data[off + _LEN.size: off + _LEN.size + n], src))
                    off += _LEN.size + n
        return got

    def close(self) -> None:
        for name, s in self.socks.items():
            s.close()
            Path(self.path(name)).unlink(missing_ok=True)


class EtcdStats:
    """Where an EV's time goes on the sequencer: transactions, positions each, time waiting."""

    def __init__(self) -> None:
        self.txns = self.positions = 0
        self.wait_s = 0.0
        self.sizes: list[int] = []

    def record(self, positions: int, seconds: float) -> None:
        """One transaction of ``positions`` positions that took ``seconds``."""
        self.wait_s += seconds
        self.txns += 1
        self.positions += positions
        if len(self.sizes) < 200_000:
            self.sizes.append(positions)

    def as_dict(self) -> dict:
        s = sorted(self.sizes) or [0]
        return {"txns": self.txns, "positions_proposed": self.positions, "wait_s": round(self.wait_s, 4),
                "batch_mean": round(self.positions / max(1, self.txns), 2), "batch_p50": s[len(s) // 2],
                "batch_max": s[-1], "txn_ms_mean": round(1e3 * self.wait_s / max(1, self.txns), 3)}


def propose_via_etcd(cas: EtcdCas, data: bytes, stats: EtcdStats) -> bytes | None:
    """One PROPOSE datagram -> one etcd transaction -> the DECIDE datagram, timed into ``stats``."""
    return serve_propose(cas, data, stats.record)


def pump(net: Transport, cores: dict, on_event, cas: EtcdCas | None = None,
         etcd: EtcdStats | None = None, max_wait_s: float = 0.02) -> None:
    """One turn: receive what waits (up to the nearest timer), fire due timers, send, report events."""
    now = time.monotonic_ns()
    timers = [t for t in (c.get_timer() for c in cores.values()) if t is not None]
    wait = max_wait_s if not timers else min(max_wait_s, max(0.0, (min(timers) - now) / 1e9))
    if net.waiting:
        wait = min(wait, 0.0002)
    for name, data, src in net.receive(wait):
        cores[name].receive_datagram(data, src, time.monotonic_ns())
    for name, core in cores.items():
        for _ in range(10_000):   # everything due now (an EV executes one request per timer)
            t = core.get_timer()
            now = time.monotonic_ns()
            if t is None or t > now:
                break
            core.handle_timer(now)
        out = core.datagrams_to_send(time.monotonic_ns())
        while out:   # an answer from etcd may well produce the next proposal at once
            rest = []
            for data, dest in out:
                if cas is not None and dest == Unicast("seq"):
                    answer = propose_via_etcd(cas, data, etcd)
                    if answer is not None:
                        core.receive_datagram(answer, "seq", time.monotonic_ns())
                else:
                    rest.append((data, dest))
            net.send(name, rest)
            out = core.datagrams_to_send(time.monotonic_ns()) if cas is not None else []
        while (e := core.next_event()) is not None:
            on_event(name, e)
    net.flush()
