"""One process of the multi-process venue benchmark (``bench.venue_procs``): its cores behind
unix datagram sockets, and the loop that drives them.

Every core has its own ``AF_UNIX``/``SOCK_DGRAM`` socket, ``<dir>/<name>.sock``; a datagram's
source is the name of the socket it came from. Unix datagrams on one machine are not lost
(a full receiver makes the sender wait), so the benchmark measures the venue, not loopback
UDP drops; a sender never blocks either: what the receiver cannot take yet waits in a
backlog, retried on every turn of the loop (two busy processes cannot deadlock on each
other). A datagram to a dead process (its socket gone or unbound) is dropped, like UDP.

An EV asks etcd from a worker thread (``EtcdProposer``): the PROPOSE it emits for the host
``seq`` becomes one etcd transaction for the whole batch (``EtcdCas.propose``), and the
DECIDE comes back as a datagram on the EV's own socket. So the EV's loop never waits on a
transaction: while one is in flight (the core allows one proposal at a time) it takes in
requests, which form the next batch, executes what is ordered and answers HR
acknowledgements; the next batch goes out as soon as the answer is in, and a lone request
with nothing in flight goes out at once (no batching window).
"""

from __future__ import annotations

import os
import queue
import select
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from rmptwin.core.events import Event
from rmptwin.core.sansio import Core, Dest, Group, Unicast
from rmptwin.errors import UserError
from rmptwin.node.etcd_client import EtcdCas, serve_propose

RCVBUF = 4 << 20
_SEQ = Unicast("seq")
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

    def send(self, src: str, out: Iterable[tuple[bytes, Dest]]) -> None:
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
            chunk: list[bytes]
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
        self.spans: list[tuple[int, int]] = []   # (start, end) monotonic ns of each transaction (stage trace)

    def record(self, positions: int, seconds: float) -> None:
        """One transaction of ``positions`` positions that took ``seconds``, ending now."""
        self.wait_s += seconds
        self.txns += 1
        self.positions += positions
        if len(self.sizes) < 200_000:
            end = time.monotonic_ns()
            self.sizes.append(positions)
            self.spans.append((end - int(seconds * 1e9), end))

    def as_dict(self) -> dict[str, float]:
        s = sorted(self.sizes) or [0]
        return {"txns": self.txns, "positions_proposed": self.positions, "wait_s": round(self.wait_s, 4),
                "batch_mean": round(self.positions / max(1, self.txns), 2), "batch_p50": s[len(s) // 2],
                "batch_max": s[-1], "txn_ms_mean": round(1e3 * self.wait_s / max(1, self.txns), 3)}


class EtcdProposer:
    """One EV's sequencer client: a worker thread runs its etcd transactions, in order, and
    sends each DECIDE to the EV's socket from ``<dir>/seq-<ev>.sock`` (the EV's select wakes)."""

    def __init__(self, cas: EtcdCas, sock_dir: str | Path, ev: str, stats: EtcdStats) -> None:
        self.cas = cas
        self.stats = stats
        self.path = str(Path(sock_dir) / f"seq-{ev}.sock")
        self.dest = str(Path(sock_dir) / f"{ev}.sock")
        Path(self.path).unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self._queue: queue.SimpleQueue[tuple[bytes, bool] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=f"etcd-{ev}", daemon=True)
        self._thread.start()

    def submit(self, propose: bytes, serializable: bool = False) -> None:
        """Queue a PROPOSE; ``serializable``: it is a read, asked as ``EtcdCas.propose`` says."""
        self._queue.put((propose, serializable))

    def warm(self) -> None:
        """Queue ``EtcdCas.warm`` (a standby's, before anything is asked of it)."""
        self._queue.put((b"", True))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            data, serializable = item
            try:
                if not data:   # warm(): no PROPOSE, nothing to answer
                    self.cas.warm()
                    continue
                answer = serve_propose(self.cas, data, self.stats.record, serializable=serializable)
            except UserError as e:   # etcd unreachable for give_up_s: the EV asks again after its retry time
                sys.stderr.write(f"rmptwin: {e}\n")
                continue
            if answer is not None:
                try:
                    self.sock.sendto(_LEN.pack(len(answer)) + answer, self.dest)
                except OSError:
                    pass   # the EV is gone or stopping: nobody to tell (it asks again after a restart)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=self.cas.timeout_s + 1.0)
        self.sock.close()
        Path(self.path).unlink(missing_ok=True)
        self.cas.close()


def pump(net: Transport, cores: dict[str, Core], on_event: Callable[[str, Event], None],
         seq: EtcdProposer | None = None, max_wait_s: float = 0.02,
         tap: Callable[[str, bytes, int], None] | None = None) -> None:
    """One turn: receive what waits (up to the nearest timer), fire due timers, send, report events.
    ``tap(core name, datagram, now)``, when given, sees every datagram before its core does."""
    now = time.monotonic_ns()
    timers = [t for t in (c.get_timer() for c in cores.values()) if t is not None]
    wait = max_wait_s if not timers else min(max_wait_s, max(0.0, (min(timers) - now) / 1e9))
    if net.waiting:
        wait = min(wait, 0.0002)
    for name, data, src in net.receive(wait):
        now = time.monotonic_ns()
        if tap is not None:
            tap(name, data, now)
        cores[name].receive_datagram(data, src, now)
    for name, core in cores.items():
        for _ in range(10_000):   # everything due now (an EV executes one request per timer)
            t = core.get_timer()
            now = time.monotonic_ns()
            if t is None or t > now:
                break
            core.handle_timer(now)
        out = core.datagrams_to_send(time.monotonic_ns())
        if seq is not None:
            for data, dest in out:
                if dest == _SEQ:
                    seq.submit(data)
            out = [(d, dest) for d, dest in out if dest != _SEQ]
        net.send(name, out)
        while (e := core.next_event()) is not None:
            on_event(name, e)
    net.flush()
