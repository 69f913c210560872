"""What a crowd of processes costs each datagram: the floor of an emulated node, in the set-up
the emulated run gives it.

An emulated run's node is one Python process among many (the quickstart: 31 nodes, the
switch, the relays) on two CPUs, woken for a datagram at a time. Its caches, TLB and branch
predictors are cold at each wake-up: the other processes ran since. ``bench_datapath`` holds a
node to one loop alone in its container, warm; this module measures the same uvloop forwarding
loop (``udp_loops fan``) three ways at one total rate, one datagram per wake-up:

- alone: one process, one socket;
- a crowd: ``CROWD`` processes of one socket each, the rate shared round-robin, as a run's
  nodes share the traffic;
- gathered: one process serving the same ``CROWD`` sockets, the same code path.

The crowd's figure beside the gathered one is what one process per host costs, apart from
anything a node does: the design change "several hosts' cores on one event loop" would buy
(docs/benchmarks.md). CPU per datagram is the loops' CPU (``/proc/<pid>/schedstat``, ns) over
datagrams received + sent (twice the datagrams the sink counts), as ``bench_datapath`` counts
it. Everything runs on this machine's loopback; no root or Docker needed.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmptwin.bench.udp_loops import paced_count
from rmptwin.node.udp_buffers import set_buffers

RUNS = 1            # the module repeats the measurement itself
CROWD = 31          # the quickstart's nodes
RATE = 2_000        # datagrams/s in all: the quickstart's nodes at time dilation 1 hear about that
PACE_S = 0.0002     # the sender's sleep between sends: bursts of one at RATE
SIZE = 100
LO = "127.0.0.1"
READY_TIMEOUT_S = 30.0
SHAPES = ("alone", "crowd", "gathered")


@dataclass(frozen=True)
class Measurement:
    sent: int
    forwarded: int     # counted at the sink
    loops_cpu_s: float

    @property
    def us_per_datagram(self) -> float:
        return 1e6 * self.loops_cpu_s / max(2 * self.forwarded, 1)


def run_ns(pid: int) -> int:
    """Time ``pid``'s threads have run, ns (the first field of /proc/<pid>/schedstat)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def processes(shape: str, crowd: int) -> list[int]:
    """Sockets per forwarding process for ``shape``."""
    return {"alone": [1], "crowd": [1] * crowd, "gathered": [crowd]}[shape]


class _Sink:
    """Counts what the loops forward, on a thread of the benchmark's own process."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        set_buffers(self.sock)
        self.sock.bind((LO, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.count, self._stop = 0, False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop:
            try:
                self.sock.recv(65535)
                self.count += 1
            except TimeoutError:
                continue

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


def measure_one(shape: str, seconds: float, crowd: int = CROWD, rate: int = RATE) -> Measurement:
    sink = _Sink()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports: list[int] = []
        for n in processes(shape, crowd):
            procs.append(subprocess.Popen([sys.executable, "-m", "rmptwin.bench.udp_loops", "fan", LO, str(n), LO,
                                           str(sink.port)], stdout=subprocess.PIPE))
        deadline = time.monotonic() + READY_TIMEOUT_S
        for p in procs:   # each prints its ports once its sockets are bound
            assert p.stdout is not None   # piped above
            line = p.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise RuntimeError(f"a forwarding loop ({shape}) did not start")
            ports += json.loads(line)
        time.sleep(0.5)   # every process in its loop's wait
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.bind((LO, 0))
        payload, total, sent = bytes(SIZE), int(rate * seconds), 0
        cpu0 = sum(run_ns(p.pid) for p in procs)
        t0 = time.perf_counter()
        while sent < total:
            for _ in range(paced_count(time.perf_counter() - t0, rate, total) - sent):
                tx.sendto(payload, (LO, ports[sent % len(ports)]))
                sent += 1
            time.sleep(PACE_S)
        time.sleep(0.3)   # the last datagrams through
        cpu1 = sum(run_ns(p.pid) for p in procs)
        tx.close()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        sink.close()
    return Measurement(sent=sent, forwarded=sink.count, loops_cpu_s=(cpu1 - cpu0) / 1e9)


def measure(quick: bool, crowd: int = CROWD) -> dict[str, list[Measurement]]:
    """Each shape ``reps`` times, the shapes interleaved per repetition."""
    seconds, reps = (2.0, 1) if quick else (4.0, 3)
    got: dict[str, list[Measurement]] = {s: [] for s in SHAPES}
    for _ in range(reps):
        for shape in SHAPES:
            got[shape].append(measure_one(shape, seconds, crowd))
    return got


def build_rows(got: dict[str, list[Measurement]], seconds: float, crowd: int = CROWD) -> list[dict[str, Any]]:
    cond = (f"this machine's loopback, {RATE:,} x {SIZE} B datagrams/s in all for {seconds:g} s, one per "
            f"wake-up (round-robin over the sockets), uvloop; CPU of the loop processes, received + sent")
    us = {s: [m.us_per_datagram for m in got[s]] for s in SHAPES}
    med = {s: statistics.median(v) for s, v in us.items() if v}
    what = {"alone": "one process, one socket",
            "crowd": f"{crowd} processes of one socket each (one process per host, as an emulated run)",
            "gathered": f"one process serving the same {crowd} sockets"}
    rows: list[dict[str, Any]] = []
    for shape in SHAPES:
        if shape not in med:
            continue
        lost = [m.sent - m.forwarded for m in got[shape]]
        row: dict[str, Any] = {"metric": f"CPU per datagram, a uvloop forwarding loop: {what[shape]}",
                               "samples": us[shape], "value": med[shape], "unit": "µs/datagram", "better": "lower",
                               "conditions": cond, "note": f"lost on loopback: {max(lost):,} at most"}
        if shape == "crowd" and "gathered" in med:
            row.update(floor=med["gathered"], floor_what=f"the same {crowd} sockets in one process, same run")
        if shape == "crowd" and "alone" in med:
            row["note"] += f"; {med['crowd'] / med['alone']:.2f} x one loop alone"
        rows.append(row)
    return rows


def emulated_node_us() -> tuple[float, str] | None:
    """This host's emulated quickstart (its Docker calibration's run at the lowest factor):
    every node's CPU over every node's datagrams, and when it was measured; None without one."""
    from rmptwin.bench.bench_datapath import calibrated_at
    from rmptwin.planning import calibration as cal_mod
    from rmptwin.runner.calibrate import identity_for
    from rmptwin.runner.pipeline import EmulationOptions

    cal = cal_mod.cached(identity_for(EmulationOptions(nodes="docker")))
    runs = [s for s in cal.samples if s.switches == 10 and sum(s.nodes.values()) == CROWD] if cal else []
    if not runs:
        return None
    s = min(runs, key=lambda r: r.tdf)
    return (1e6 * sum(s.node_cpu_s.values()) / sum(s.datagrams.values()),
            f"factor {s.tdf:g}, calibrated {calibrated_at(cal)}")


def gathered_rows(loop_us: float, crowd_us: float) -> list[dict[str, Any]]:
    """The quickstart's RMP hosts' own work, one host at a time and interleaved in one process
    (``role_replay``), and the emulated nodes' figure held to the gathered process's floor."""
    from rmptwin.bench.role_replay import replay_gathered, role_costs
    from rmptwin.model import load_experiment

    quickstart = load_experiment(Path(__file__).resolve().parents[3] / "experiments" / "quickstart.yaml")
    costs = role_costs(quickstart)
    apart = 1e6 * sum(c.cpu_s for c in costs.values()) / sum(c.datagrams for c in costs.values())
    gathered = replay_gathered(quickstart)
    cond = "the quickstart's 31 RMP hosts, the simulator's datagrams at their times, real (compiled when built) cores"
    rows: list[dict[str, Any]] = [
        {"metric": "CPU per datagram, the quickstart's hosts' own work replayed: one host at a time", "value": apart,
         "unit": "µs/datagram", "better": "lower", "conditions": cond},
        {"metric": "CPU per datagram, the quickstart's hosts' own work replayed: all interleaved in one process",
         "value": gathered.us_per_datagram, "unit": "µs/datagram", "better": "lower", "conditions": cond,
         "note": f"{gathered.datagrams:,} datagrams, {gathered.cpu_s:.2f} CPU s; {gathered.us_per_datagram / apart:.2f} x "
                 "one host at a time"}]
    emulated = emulated_node_us()
    if emulated is not None:
        us, when = emulated
        floor = loop_us + gathered.us_per_datagram
        rows.append({"metric": "CPU per datagram, the emulated quickstart's nodes (one process per host)", "value": us,
                     "unit": "µs/datagram", "better": "lower", "floor": floor,
                     "floor_what": f"one process for every host: the gathered loop ({loop_us:.1f} µs) + the work "
                                   f"interleaved ({gathered.us_per_datagram:.1f} µs)",
                     "conditions": f"this host's calibration ({when}), Docker hosts, every node's CPU from the "
                                   "release to STOP over datagrams received + sent",
                     "note": f"against one process per host's floor, the crowd's loop ({crowd_us:.1f} µs) + the "
                             f"work: {us / (crowd_us + gathered.us_per_datagram):.1f} x"})
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    got = measure(quick)
    rows = build_rows(got, 2.0 if quick else 4.0)
    med = {s: statistics.median([m.us_per_datagram for m in got[s]]) for s in SHAPES}
    return rows + gathered_rows(med["gathered"], med["crowd"])


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps({k: r.get(k) for k in ("metric", "value", "floor", "note")}))
