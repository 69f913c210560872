"""Drive ``probe`` senders and receivers inside a running network and summarise them."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmptwin.emulation.joins import Membership, wait_for_joins

if TYPE_CHECKING:
    from mininet.node import Host

PROBE = [sys.executable, "-m", "rmptwin.emulation.probe"]
JOIN_TIMEOUT_S = 60.0
QUERY_AFTER_S = 2.0     # no join for this long while some are missing: the controller queries the hosts


@dataclass
class ProbeResult:
    host: str
    sent: int
    received: int
    seqs: list[int]
    delays_ms: list[float]
    bytes: int
    first_ns: int | None
    last_ns: int | None
    left_ns: int | None
    arrivals_ns: list[int]
    start_seq: int = 0      # the sender numbered its datagrams start_seq .. start_seq + sent - 1

    @property
    def missing(self) -> set[int]:
        """Sequence numbers sent and never received: what the path lost, packet by packet,
        whatever the impairment backend (netem keeps no drop log)."""
        return set(range(self.start_seq, self.start_seq + self.sent)) - set(self.seqs)

    @property
    def loss(self) -> float:
        return 1.0 - self.received / self.sent if self.sent else 0.0

    @property
    def median_delay_ms(self) -> float:
        return statistics.median(self.delays_ms) if self.delays_ms else float("nan")

    @property
    def throughput_mbps(self) -> float:
        """Payload rate between the first and last arrival."""
        if not self.first_ns or not self.last_ns or self.last_ns <= self.first_ns or self.received < 2:
            return 0.0
        per = self.bytes / self.received
        return (self.received - 1) * per * 8 / ((self.last_ns - self.first_ns) / 1e9) / 1e6

    @property
    def longest_gap(self) -> tuple[int, int]:
        """(first seq, length) of the longest run of consecutive missing datagrams: a link's
        random loss leaves short runs, a receiver the tree did not reach yet one long run."""
        best, start, prev = (0, 0), None, None
        for s in sorted(self.missing):
            if prev is None or s != prev + 1:
                start = s
            prev = s
            assert start is not None
            if s - start + 1 > best[1]:
                best = (start, s - start + 1)
        return best

    def summary(self) -> dict[str, Any]:
        gap_start, gap = self.longest_gap
        return {"host": self.host, "sent": self.sent, "received": self.received, "loss": round(self.loss, 4),
                "median_delay_ms": round(self.median_delay_ms, 3), "throughput_mbps": round(self.throughput_mbps, 3),
                "longest_gap": gap, "gap_from_seq": gap_start - self.start_seq}


def _start_receiver(host: Host, port: int, group: str | None, raw: bool, duration: float, idle: float,
                    leave_after: float | None, join: bool = True) -> subprocess.Popen[str]:
    cmd = PROBE + ["recv", "--port", str(port), "--duration", str(duration), "--idle", str(idle),
                   "--stop-on-stdin"]
    if group:
        cmd += ["--group", group, "--intf-ip", host.ip]
    if raw or not join:
        cmd += ["--raw", "--intf", host.intf]
    if not join:
        cmd += ["--no-join"]
    if leave_after is not None:
        cmd += ["--leave-after", str(leave_after)]
    p: subprocess.Popen[str] = host.popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True)
    assert p.stdout is not None and p.stderr is not None   # both piped
    line = p.stdout.readline()
    if not line.strip().startswith("{"):
        p.kill()
        raise RuntimeError(f"probe receiver on {host.name} failed: {line}{p.stderr.read()[-500:]}")
    return p


def _stop(p: subprocess.Popen[str]) -> None:
    """Ask a receiver to read what is queued and report (a dead one is left to communicate)."""
    try:
        assert p.stdin is not None   # piped
        p.stdin.write("stop\n")
        p.stdin.flush()
    except (BrokenPipeError, OSError):
        pass


def run_probe(sender: Host, receivers: list[Host], dst: str, *, count: int, rate: float, size: int = 64,
              port: int = 9000, group: str | None = None, raw: bool = False, idle: float = 1.0, settle: float = 0.0,
              leave_after: dict[str, float] | None = None, duration: float | None = None,
              watchers: list[Host] | None = None, start_seq: int = 0,
              net: Membership | None = None) -> dict[str, ProbeResult]:
    """Start receivers, send ``count`` datagrams at ``rate`` from ``sender`` to ``dst``, collect.

    Receivers join ``group``; ``watchers`` capture it at their interface without joining.
    With ``net`` and a ``group``, the first datagram waits until ``net``'s controller has seen
    every receiver's join, however slow the machine; ``settle`` seconds then pass (time for
    the trees' flow mods to land; without ``net``, for the joins too). ``leave_after``:
    host -> seconds after its first datagram at which it leaves the group.
    """
    leave_after = leave_after or {}
    send_s = count / rate if rate else 1.0
    # A cap only: receivers are stopped ``idle`` s after the sender ends, then read their backlog.
    duration = duration or settle + send_s + idle + 3.0 + (JOIN_TIMEOUT_S if net is not None else 0.0)
    procs: dict[str, subprocess.Popen[str]] = {}
    for r in receivers:
        la = leave_after.get(r.name)
        procs[r.name] = _start_receiver(r, port, group, raw, duration, idle if la is None else duration, la)
    for r in watchers or []:
        procs[r.name] = _start_receiver(r, port, group, True, duration, duration, None, join=False)
    try:
        if net is not None and group is not None and receivers:
            waited = wait_for_joins(net.controller_state, net.request_igmp_query,
                                    {(group, r.name) for r in receivers}, timeout_s=JOIN_TIMEOUT_S,
                                    query_after_s=QUERY_AFTER_S)
            if waited.missing:
                raise RuntimeError(f"the controller saw no join from {sorted(n for _, n in waited.missing)} "
                                   f"to {group} in {JOIN_TIMEOUT_S:.0f} s ({waited.queries} general queries)")
        if settle:
            time.sleep(settle)
        cmd = PROBE + ["send", "--dst", dst, "--port", str(port), "--count", str(count), "--rate", str(rate),
                       "--size", str(size), "--start-seq", str(start_seq)]
        if group:
            cmd += ["--intf-ip", sender.ip]
        sp = sender.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = sp.communicate(timeout=send_s * 3 + 30)
        if sp.returncode != 0:
            raise RuntimeError(f"probe sender on {sender.name} failed: {err[-500:]}")
        sent = json.loads(out.strip().splitlines()[-1])["sent"]
        time.sleep(idle)     # the last datagrams' way through the network
        for p in procs.values():
            _stop(p)
        results = {}
        for name, p in procs.items():
            out, err = p.communicate(timeout=duration + 30)
            lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
            d = json.loads(lines[-1])
            results[name] = ProbeResult(name, sent, d["received"], d["seqs"], [x / 1e6 for x in d["delays_ns"]],
                                        d["bytes"], d["first_ns"], d["last_ns"], d["left_ns"], d["arrivals_ns"],
                                        start_seq)
        return results
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
