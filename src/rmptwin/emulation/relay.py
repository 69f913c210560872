"""User-space link impairment: one process per link relays frames between two veths.

Used where the kernel has no sch_netem. The process lives in the link's own network
namespace holding two interfaces, ``a`` (towards the link's a end) and ``b``. Per
direction it keeps a FIFO of (release time, frame): frames leave in arrival order, so
jitter never reorders (as ``LinkParams`` promises), and a FIFO is a heap whose keys are
already sorted. What happens to each frame (loss, queue limit, serialization, delay,
jitter) is decided by ``rmptwin.core.linkmodel.LinkDirection``, the simulator's own link model,
seeded with the same direction name (``stream_seed(seed, link, from, to)``) and keyed by
the frame's identity, so a seed drops the same first copies here as in the simulator.

Every dropped frame is logged (time, direction, reason, first bytes) to a binary file
that ``droplog`` turns into ``events.DROP_SCHEMA`` rows. A unix stream socket takes
one JSON command per connection: ``set`` (loss/delay/jitter/bandwidth/up, either
direction), ``stats``, ``flush``.

With ``fixed_delay_ns`` in its configuration the relay forwards with that constant delay
and no link model (``FixedDelay``): the floor the benchmark holds the relay's CPU per frame to.

Run: ``python -m rmptwin.emulation.relay CONFIG.json`` (inside the link namespace).
"""

from __future__ import annotations

import bisect
import collections
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

from rmptwin.core.linkmodel import LinkConfig, LinkDirection, stream_seed
from rmptwin.core.packetkey import UNKEYED, PacketKey, frame_key
from rmptwin.model import LinkParams

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
CAPTURE = 200                      # bytes of each dropped frame kept for naming it
DROP_RECORD = struct.Struct("<qBBHi")  # t_ns, direction (0 a->b, 1 b->a), reason, caplen, copy index
REASONS = ("loss", "queue", "down")   # the drop log's reason codes (linkmodel.REASONS' order)
LOSS, QUEUE, DOWN = 0, 1, 2
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
# When the relay is awake, a frame due within its direction's slack leaves at once instead of
# after one more sleep. Each sleep-and-wake costs the relay ~25-30 us of CPU on a busy 2-CPU
# machine and wakes it 0.1-0.35 ms late anyway: the frames of a 0.1-0.2 ms access link (most
# of a run's frames) cost two wake-ups each for a delay the wake-up itself exceeds (40 -> 20 us
# of relay CPU per frame at 1,000 frames/s), and on a long link a release close to an arrival
# shares its wake-up. The price: a frame may leave up to the slack before the link model's
# time: 0.2 ms, or 2 % of the link's delay up to 1 ms (the wake-up is often later than that).
RELEASE_SLACK_NS = 200_000
SLACK_FRACTION = 50          # slack = delay / 50 where that is more than RELEASE_SLACK_NS ...
MAX_SLACK_NS = 1_000_000     # ... but never more than 1 ms
_TIMESPEC = struct.Struct("@qq")


def _big_buffers(s: socket.socket, size: int) -> None:
    # SO_*BUFFORCE (root) ignores net.core.[rw]mem_max (~200 KB), which would otherwise cap
    # the buffer at a few hundred frames: a busy machine's scheduling gaps overflow that.
    for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF),
                         (getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF)):
        try:
            s.setsockopt(socket.SOL_SOCKET, force, size)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, plain, size)


def release_slack_ns(params: LinkParams) -> int:
    """How early a frame of this link may leave to save the relay a wake-up (see SLACK_FRACTION)."""
    return max(RELEASE_SLACK_NS, min(MAX_SLACK_NS, round(params.delay_ms * 1e6) // SLACK_FRACTION))


class FixedDelay:
    """A stand-in for the link model that only delays: every frame leaves ``delay_ns`` after it
    arrived; none is lost, queued, jittered or reordered, and no frame's identity is computed.

    The benchmark's floor for the relay (``bench.emulated_floors``): the same process, sockets
    and delay line with the model's decisions taken out, so the relay's CPU per frame can be set
    beside what forwarding alone costs. It has the surface of ``LinkDirection`` that ``Direction``
    and ``Relay`` use; of a new configuration it takes only the delay, and it refuses to go down,
    duplicate or reorder (each would be a decision it exists to leave out)."""

    draws = False          # Direction.admit then spares every frame its identity
    last_copy = -1
    duplicate_at = -1
    up = True

    def __init__(self, delay_ns: int) -> None:
        if delay_ns < 0:
            raise ValueError(f"fixed delay must be >= 0 ns, got {delay_ns}")
        self.delay_ns = int(delay_ns)
        self.trace_origin_ns = 0   # set by Relay as for the model; nothing here replays a trace

    def offer(self, now_ns: int, size: int, key: PacketKey = UNKEYED) -> int:
        return now_ns + self.delay_ns

    def reconfigure(self, config: LinkConfig) -> None:
        self.delay_ns = config.delay_ns

    def set_up(self, up: bool) -> None:
        if not up:
            raise ValueError("a fixed-delay relay does not go down (it forwards only, as a floor)")

    def set_chaos(self, duplicate: float = 0.0, reorder: float = 0.0, reorder_ns: int = 0) -> None:
        if duplicate or reorder:
            raise ValueError("a fixed-delay relay neither duplicates nor reorders (it forwards only, as a floor)")


class Direction:
    """One way across the link (``frm`` to ``to``): its link model, delay line and counters.
    With ``fixed_delay_ns`` the model is a ``FixedDelay`` of that many ns instead."""

    def __init__(self, name: str, params: LinkParams, seed: int, link: str, frm: str, to: str,
                 fixed_delay_ns: int | None = None) -> None:
        self.name = name
        self.params = params
        self.model: LinkDirection | FixedDelay = (
            LinkDirection(LinkConfig.from_spec(params), stream_seed(seed, link, frm, to)) if fixed_delay_ns is None
            else FixedDelay(fixed_delay_ns))
        self.line: collections.deque[tuple[int, bytes]] = collections.deque()
        self.slack_ns = release_slack_ns(params)
        self.packets = 0
        self.dropped = [0, 0, 0]

    @property
    def up(self) -> bool:
        return self.model.up

    @up.setter
    def up(self, up: bool) -> None:
        self.model.set_up(up)

    def apply(self, params: LinkParams) -> None:
        """New parameters from now on; frames already queued leave as decided."""
        self.params = params
        self.slack_ns = release_slack_ns(params)
        self.model.reconfigure(LinkConfig.from_spec(params))

    def admit(self, frame: bytes, now: int) -> int:
        """Queue ``frame`` for release; returns -1 when queued, else the drop reason."""
        self.packets += 1
        model = self.model
        # A link that only delays takes no draws: spare it the frame's identity (~0.5 us).
        release = model.offer(now, len(frame), frame_key(frame) if model.draws else UNKEYED)
        if release < 0:
            return -release - 1
        line = self.line
        if line and release < line[-1][0]:   # a reordered frame was held back: keep the line in time order
            bisect.insort(line, (release, frame), key=lambda e: e[0])
        else:
            line.append((release, frame))
        if model.duplicate_at >= 0:           # the dup_reorder nemesis: the frame goes out twice
            bisect.insort(line, (model.duplicate_at, frame), key=lambda e: e[0])
        return -1


def _error_line(e: Exception) -> bytes:
    return json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}).encode() + b"\n"


class Relay:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.link = cfg["link"]
        params = LinkParams.model_validate(cfg["params"])
        seed = int(cfg.get("seed", 1))
        a, b = cfg["a_node"], cfg["b_node"]   # the simulator's names for the link's ends
        fixed = cfg.get("fixed_delay_ns")       # set only by the benchmark's floor (FixedDelay)
        fixed = None if fixed is None else int(fixed)
        self.dirs = (Direction("ab", params, seed, self.link, a, b, fixed),
                     Direction("ba", params, seed, self.link, b, a, fixed))
        self.socks = (self._packet_socket(cfg["a_intf"]), self._packet_socket(cfg["b_intf"]))
        # Wall time of the run's t=0, and the monotonic clock's offset from wall time.
        self.t0 = int(cfg.get("t0_ns", time.time_ns()))
        self.wall_offset = time.time_ns() - time.monotonic_ns()
        for direction in self.dirs:   # interval loss traces run on run time: t0 on the monotonic clock
            direction.model.trace_origin_ns = self.t0 - self.wall_offset
        os.makedirs(os.path.dirname(cfg["droplog"]), exist_ok=True)   # on a server: made here
        self.droplog = open(cfg["droplog"], "ab", buffering=1 << 16)
        self.counts_path = cfg["counts"]
        # Controlled through a unix socket, or (on a server, ``main`` given "-") its stdin and stdout.
        self.ctrl: socket.socket | None = None
        self.stdin_buf = b""
        if cfg.get("control"):
            self.ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                os.unlink(cfg["control"])
            except FileNotFoundError:
                pass
            self.ctrl.bind(cfg["control"])
            self.ctrl.listen(8)
        self.running = True

    @staticmethod
    def _packet_socket(ifname: str) -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        # Without this the relay would read back every frame it sends (Linux >= 4.20).
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        # Kernel arrival stamps: a frame's delay runs from when it reached the link, not
        # from when a busy machine got round to reading it.
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        _big_buffers(s, 4 << 20)
        s.bind((ifname, ETH_P_ALL))
        return s

    def _log_drop(self, now_mono: int, d: int, reason: int, frame: bytes, copy: int = -1) -> None:
        cap = frame[:CAPTURE]
        self.droplog.write(DROP_RECORD.pack(now_mono + self.wall_offset - self.t0, d, reason, len(cap), copy))
        self.droplog.write(cap)
        self.dirs[d].dropped[reason] += 1

    def _drain(self, d: int) -> None:
        sock, direction = self.socks[d], self.dirs[d]
        recvmsg = sock.recvmsg
        now = time.monotonic_ns()
        earliest = now - 1_000_000_000  # a kernel stamp older than this is bogus, not lag
        offset = self.wall_offset
        unpack = _TIMESPEC.unpack_from
        for _ in range(256):  # bounded so one busy direction cannot starve the other
            try:
                frame, anc, _, _ = recvmsg(65535, 64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            arrived = now
            if anc:
                sec, nsec = unpack(anc[0][2])
                arrived = min(now, max(earliest, sec * 1_000_000_000 + nsec - offset))
            reason = direction.admit(frame, arrived)
            if reason >= 0:
                # when it reached the link, however late we read it; with the link model's copy index
                self._log_drop(arrived, d, reason, frame, direction.model.last_copy)

    def _release(self, now: int) -> int | None:
        """Send every frame that is due, or due within its direction's slack (awake anyway:
        that saves it a wake-up of its own); return the earliest pending release time. The
        relay never wakes early for the slack: it only ever spares a wake-up, never adds one."""
        nxt = None
        for d, direction in enumerate(self.dirs):
            line = direction.line
            out = self.socks[1 - d]
            due = now + direction.slack_ns
            while line and line[0][0] <= due:
                frame = line.popleft()[1]
                try:
                    out.send(frame)
                except OSError:  # interface went away or buffer full: a queue drop
                    self._log_drop(now, d, QUEUE, frame)
            if line and (nxt is None or line[0][0] < nxt):
                nxt = line[0][0]
        return nxt

    def _control(self) -> None:
        assert self.ctrl is not None   # watched only when made
        conn, _ = self.ctrl.accept()
        with conn:
            conn.settimeout(2.0)
            data = b""
            try:
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError as e:
                answer = _error_line(e)
            else:
                answer = self._answer(data)
            try:
                conn.sendall(answer)
            except OSError:
                pass

    def _answer(self, line: bytes) -> bytes:
        """The reply line to one command line, on either channel; a bad line or a failed
        command gets an error reply, never an exception."""
        try:
            return json.dumps(self.command(json.loads(line or b"{}"))).encode() + b"\n"
        except Exception as e:
            return _error_line(e)

    def _stdin_control(self) -> None:
        """Commands on stdin, one JSON line each, each answered by one line on stdout. The end
        of stdin (the runner, or its SSH session, went away) stops the relay."""
        data = os.read(0, 65536)
        if not data:
            self.running = False
            return
        self.stdin_buf += data
        self._answer_lines()

    def _answer_lines(self) -> None:
        while b"\n" in self.stdin_buf:
            line, self.stdin_buf = self.stdin_buf.split(b"\n", 1)
            os.write(1, self._answer(line))

    def command(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "set":
            which = {"ab": (0,), "ba": (1,), "both": (0, 1)}[msg.get("dir", "both")]
            for i in which:
                direction = self.dirs[i]
                changes: dict[str, Any] = {k: msg[k] for k in ("delay_ms", "jitter_ms", "loss", "bandwidth_mbps",
                                               "queue_packets") if k in msg}
                if changes:
                    merged = {**direction.params.model_dump(), **changes}
                    direction.apply(LinkParams.model_validate(merged))
                if "up" in msg:
                    direction.up = bool(msg["up"])
                if "duplicate" in msg or "reorder" in msg:
                    direction.model.set_chaos(float(msg.get("duplicate", 0.0)), float(msg.get("reorder", 0.0)),
                                              int(msg.get("reorder_ns", 0)))
            return {"ok": True}
        if op == "flush":
            self.flush()
            return {"ok": True}
        if op == "stats":
            return {"ok": True, "stats": self.stats()}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def stats(self) -> dict[str, dict[str, Any]]:
        return {
            d.name: {"packets": d.packets, **{r: d.dropped[i] for i, r in enumerate(REASONS)},
                     "queued": len(d.line), "params": d.params.model_dump(mode="json"), "up": d.up,
                     # the params above are not applied by a fixed-delay relay: say so beside them
                     **({"fixed_delay_ns": d.model.delay_ns} if isinstance(d.model, FixedDelay) else {})}
            for d in self.dirs
        }

    def flush(self) -> None:
        self.droplog.flush()
        tmp = self.counts_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"link": self.link, "a": self.cfg["a_node"], "b": self.cfg["b_node"],
                       "directions": self.stats()}, f)
        os.replace(tmp, self.counts_path)

    def run(self) -> None:
        # select, not epoll: its timeout has microsecond resolution (epoll rounds up to
        # whole milliseconds, which would add up to 1 ms to every configured delay).
        socks = list(self.socks)
        index = {s: i for i, s in enumerate(socks)}
        watch: list[Any] = socks + ([self.ctrl] if self.ctrl is not None else [0])
        last_flush = time.monotonic_ns()
        nxt = None
        self._answer_lines()   # commands sent with the config, before select sees any
        while self.running:
            now = time.monotonic_ns()
            timeout = 0.2 if nxt is None else min(0.2, max(0.0, (nxt - now) / 1e9))
            readable, _, _ = select.select(watch, [], [], timeout)
            for s in readable:
                if s is self.ctrl:
                    self._control()
                elif s == 0:
                    self._stdin_control()
                else:
                    self._drain(index[s])
            now = time.monotonic_ns()
            nxt = self._release(now)
            if now - last_flush > 500_000_000:
                self.flush()
                last_flush = now
        self.flush()
        self.droplog.close()


def boost_priority(pid: int = 0) -> str:
    """Real-time round-robin at the lowest RT priority, else nice -10.

    On a busy machine a relay (or the userspace switch) woken late adds its wake-up
    latency to every frame; measured here under load ~10 on 2 cores, a 20 ms link showed
    21-22.5 ms medians at nice 0 and 20.3-20.9 ms with SCHED_RR. Priority 1 of RR still
    yields to the kernel's RT throttling (5 % of each second is left to everything else).
    """
    try:
        os.sched_setscheduler(pid, os.SCHED_RR, os.sched_param(1))
        return "rr"
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -10)
        return "nice"
    except OSError:
        return "none"


def main(argv: list[str]) -> int:
    """``relay CONFIG.json``: controlled on the config's unix socket, ready when its ``ready``
    file exists. ``relay - NAME``: on a server, the config the first line of stdin, commands
    the next lines, "READY" the first line of stdout (NAME only tells its processes apart)."""
    rest = b""
    if argv[1] == "-":
        first = b""
        while b"\n" not in first and (chunk := os.read(0, 65536)):
            first += chunk
        line, _, rest = first.partition(b"\n")   # a command sent early stays for the loop
        cfg = {**json.loads(line), "control": None, "ready": None}
    else:
        with open(argv[1]) as f:
            cfg = json.load(f)
    relay = Relay(cfg)
    relay.stdin_buf = rest
    boost_priority()

    def stop(*_: object) -> None:
        relay.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if cfg["ready"]:
        with open(cfg["ready"], "w") as f:
            f.write(str(os.getpid()))
    else:
        os.write(1, f"READY {os.getpid()}\n".encode())
    relay.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
