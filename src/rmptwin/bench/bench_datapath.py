"""The floor under every Python figure: CPU per datagram of a UDP loop that does nothing but
forward, in Python (stdlib asyncio, uvloop), in C (socat) and in the node driver.

One Docker container made as the emulated hosts are (the node image, ``--network none``, the
CPU and memory limits of a run's Docker hosts, the repository bind-mounted read-only) holds
three processes on its loopback: a paced Python sender (100-byte datagrams to 127.0.0.1:9000),
the loop under test (each datagram received is sent on to 127.0.0.1:9001) and a counting sink.
Every process is started from the host with ``nsenter --net`` into the container's network
namespace and moved into its cgroups (``cgroups.join_cgroups``, as ``DockerHost.popen``
does), so the engine's CPU limit applies. Only the network namespace is entered: the host's
binaries run (socat is not in the node image), the same ones for every variant.

The figure: the loop process's CPU (utime + stime from /proc/<pid>/stat, before and after the
traffic) divided by the datagrams it handled, received + sent (a node's datagrams as
``planning.demand`` counts them). Received and sent come from the kernel's per-socket counters
(/proc/<pid>/net/udp of the container: drops at the loop's socket and at the sink's), the same
way for socat, which counts nothing itself. The Python rows carry socat's figure, measured in
the same container in the same run, as their ``floor``.

Needs root and a Docker engine; without them ``run`` reports one row saying so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmptwin.core.groups import RMP_PORT
from rmptwin.errors import UserError

RUNS = 1                 # the module repeats the measurement itself (``samples``)
RATE = 20_000            # datagrams/s asked of the sender
# A node of an emulated run hears a datagram at a time (the quickstart's: 20-60 a second each), so
# every datagram is a wake-up of its own: the loops again at a rate where the sender's bursts are
# one datagram, the floor a role's figure is held to.
LOW_RATE = 1_000
SIZE = 100               # bytes of payload
IN_PORT, OUT_PORT = 9000, 9001
LO = "127.0.0.1"
SENDER_IP, SINK_IP = "127.0.0.2", "127.0.0.3"   # the node driver needs the three hosts apart
READY_TIMEOUT_S = 20.0   # a Python start under a 1-CPU limit on a busy machine
SETTLE_TIMEOUT_S = 5.0
FLOOR_WHAT = "socat (C), same container"
DRIVER = "rmptwin node driver"
DRIVER_UVLOOP = "rmptwin node driver, uvloop"
ACCESS_DELAY_US = 200.0   # the quickstart's access links (topologies/global.yaml: 0.2 ms)
DRIVER_ACCESS = "rmptwin node driver + 0.2 ms access link"
VARIANTS = ("asyncio", "uvloop", "socat", DRIVER, DRIVER_UVLOOP, DRIVER_ACCESS)
DRIVERS = (DRIVER, DRIVER_UVLOOP, DRIVER_ACCESS)
LOW_RATE_VARIANTS = ("asyncio", "uvloop", "socat", DRIVER, DRIVER_UVLOOP)
PYTHON_FLOOR = ("asyncio", "uvloop", "socat")


# ----------------------------------------------------------------------------- pure parts


def cpu_ticks(stat: str) -> int:
    """utime + stime, in clock ticks, of a /proc/<pid>/stat line. The command name (field 2)
    may hold spaces and parentheses, so the fields are counted after its last ')'."""
    rest = stat[stat.rindex(")") + 2:].split()
    return int(rest[11]) + int(rest[12])   # fields 14 and 15; rest[0] is field 3 (state)


def _addr(hexaddr: str) -> tuple[str, int]:
    ip_hex, port_hex = hexaddr.split(":")
    ip = ".".join(str(b) for b in reversed(bytes.fromhex(ip_hex)))   # little-endian on x86 and arm
    return ip, int(port_hex, 16)


def udp_sockets(table: str) -> dict[tuple[str, int], tuple[int, int]]:
    """/proc/net/udp as {(local ip, port): (rx_queue bytes, drops)}."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for line in table.splitlines()[1:]:
        f = line.split()
        if len(f) < 13:
            continue
        out[_addr(f[1])] = (int(f[4].split(":")[1], 16), int(f[-1]))
    return out


@dataclass(frozen=True)
class Measurement:
    """One variant's traffic: what the sender sent, what the loop's and sink's sockets dropped,
    what the sink counted, and the CPU the loop (and the others) used meanwhile."""

    sent: int               # by the sender
    sender_s: float         # the sender's span, first to last datagram
    sender_cpu_s: float
    in_drops: int           # at the loop's receiving socket (its buffer was full)
    out_drops: int          # at the sink's socket
    forwarded: int          # counted by the sink
    loop_cpu_s: float
    sink_cpu_s: float
    bursts: int = 0         # the sender's wake-ups that sent: the loop sees sent / bursts datagrams at once

    @property
    def received(self) -> int:   # loopback loses nothing but at a full socket buffer
        return self.sent - self.in_drops

    @property
    def loop_sent(self) -> int:
        return self.forwarded + self.out_drops

    @property
    def handled(self) -> int:
        return self.received + self.loop_sent

    @property
    def us_per_datagram(self) -> float:
        return self.loop_cpu_s * 1e6 / self.handled if self.handled else float("nan")

    @property
    def forwarded_pct(self) -> float:
        return 100.0 * self.forwarded / self.sent if self.sent else 0.0

    @property
    def sender_rate(self) -> float:
        return self.sent / self.sender_s if self.sender_s else 0.0

    def busy(self) -> float:
        """The container's CPU used by the three processes, in CPUs over the sender's span."""
        return (self.sender_cpu_s + self.loop_cpu_s + self.sink_cpu_s) / self.sender_s if self.sender_s else 0.0


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def build_rows(results: dict[str, list[Measurement] | str], seconds: float, cpus: float | None,
               memory_mb: int | None, rate: int = RATE) -> list[dict[str, Any]]:
    """Three rows per variant (CPU per datagram, forwarded share, sender rate) from its
    measurements, or one "skipped" row when ``results`` holds the reason instead. Rows at
    another rate than ``RATE`` name it."""
    cond = (f"1 container ({cpus or 'unlimited'} CPU, {memory_mb or 'unlimited'} MB), loopback, "
            f"{rate:,} x {SIZE} B datagrams/s for {seconds:g} s")
    at = "" if rate == RATE else f" at {rate:,}/s"
    socat = results.get("socat")
    floor = median([m.us_per_datagram for m in socat]) if isinstance(socat, list) and socat else None
    base = results.get("asyncio")
    base_us = median([m.us_per_datagram for m in base]) if isinstance(base, list) and base else None
    plain = results.get(DRIVER)
    driver_us = median([m.us_per_datagram for m in plain]) if isinstance(plain, list) and plain else None
    rows: list[dict[str, Any]] = []
    for name in VARIANTS:
        got = results.get(name)
        if got is None:
            continue
        if isinstance(got, str):
            rows.append({"metric": f"CPU per datagram handled{at}: {name}", "value": "skipped", "ok": None, "note": got})
            continue
        us = [m.us_per_datagram for m in got]
        mid = min(got, key=lambda m: abs(m.us_per_datagram - median(us)))
        note = (f"{mid.received:,} received + {mid.loop_sent:,} sent, {mid.loop_cpu_s:.3f} CPU s; arriving in "
                f"bursts of {mid.sent / max(mid.bursts, 1):.1f} datagrams on average (a loop that reads all that is "
                f"waiting per wake-up pays one wake-up per burst); "
                f"CPU share over the traffic: loop {mid.loop_cpu_s / mid.sender_s:.0%}, sender "
                f"{mid.sender_cpu_s / mid.sender_s:.0%}, sink {mid.sink_cpu_s / mid.sender_s:.0%} "
                f"(all {mid.busy():.0%} of {cpus or 'unlimited'} CPU)")
        if cpus and mid.busy() > 0.9 * cpus:   # throttled by the engine's quota: waits, batches, noisier figures
            note += "; NEAR THE CONTAINER'S CPU LIMIT"
        if base_us and name not in ("asyncio", "socat"):
            note += f"; {median(us) / base_us:.2f} x asyncio"
        if name in (DRIVER_UVLOOP, DRIVER_ACCESS) and driver_us:   # one lever alone, against the plain driver
            note += f"; {median(us) / driver_us:.2f} x the {DRIVER}"
        row: dict[str, Any] = {"metric": f"CPU per datagram handled{at}: {name}", "samples": us, "value": median(us),
                               "unit": "µs/datagram", "better": "lower", "conditions": cond + ", received + sent",
                               "note": note}
        if name != "socat" and floor:
            row.update(floor=floor, floor_what=FLOOR_WHAT)
        rows.append(row)
        rows.append({"metric": f"forwarded / sent{at}: {name}", "samples": [m.forwarded_pct for m in got],
                     "value": median([m.forwarded_pct for m in got]), "unit": "%", "better": "higher",
                     "goal": ">= 99 %", "goal_min": 99.0, "conditions": cond,
                     "note": f"{mid.forwarded:,} of {mid.sent:,}; dropped at the loop's socket {mid.in_drops:,}, "
                             f"at the sink's {mid.out_drops:,}"
                             + (" (the loop did not keep up)" if mid.forwarded_pct < 99 else "")})
        rows.append({"metric": f"sender rate achieved{at}: {name} run", "samples": [m.sender_rate for m in got],
                     "value": median([m.sender_rate for m in got]), "unit": "datagrams/s",
                     "goal": f">= {0.95 * rate:,.0f}", "goal_min": 0.95 * rate, "conditions": cond,
                     "note": f"Python sender, paced; {mid.sender_cpu_s / mid.sender_s:.0%} of a CPU"})
    return rows


# ----------------------------------------------------------------------------- the container


def environment_problem() -> str | None:
    """Why nothing can be measured here, or None."""
    if os.geteuid() != 0:
        return "needs root (Docker engine, nsenter, cgroups)"
    if not shutil.which("nsenter"):
        return "nsenter not installed (Debian package util-linux)"
    from rmptwin.emulation import env
    if env.docker_state() == "missing":
        return "no Docker engine (Debian package docker.io)"
    return None


@contextmanager
def container() -> Iterator[tuple[int, float | None, int | None]]:
    """A node container with only loopback, as a run's Docker host: (its pid, cpus, memory MB)."""
    from rmptwin.emulation import docker_engine as engine
    from rmptwin.emulation import env
    from rmptwin.emulation.cleanup import CONTAINER_LABEL
    from rmptwin.emulation.dockerhost import CAPABILITIES, REPO
    from rmptwin.emulation.emulate import NODE_CPUS, NODE_MEMORY_MB
    from rmptwin.emulation.image import ensure_image

    env.ensure_dockerd()
    tag = ensure_image()
    name = f"rmptwin-bench-datapath-{uuid.uuid4().hex[:8]}"
    try:
        pid = engine.start_container(name, tag, ["sleep", "infinity"], hostname="datapath",
                                     labels={CONTAINER_LABEL: "1"}, mounts=[(str(REPO), str(REPO), "ro")],
                                     cap_add=list(CAPABILITIES), network="none", cpus=NODE_CPUS,
                                     memory_mb=NODE_MEMORY_MB)
        if not pid:
            raise UserError(f"container {name} is not running")
        _spawn(pid, ["ip", "link", "set", "lo", "up"]).wait(timeout=10)
        yield pid, NODE_CPUS, NODE_MEMORY_MB
    finally:
        engine.remove_containers([name])


def _spawn(cpid: int, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    """``argv`` in the container's network namespace and cgroups (nsenter execs it: same pid)."""
    from rmptwin.emulation.cgroups import join_cgroups
    from rmptwin.emulation.dockerhost import REPO

    kw.setdefault("stdout", subprocess.DEVNULL)
    p = subprocess.Popen(["nsenter", f"--net=/proc/{cpid}/ns/net", "--", *argv], cwd=REPO, **kw)
    join_cgroups(p.pid, cpid)
    return p


def process_ticks(pid: int) -> int:
    """utime + stime of process ``pid`` now, in clock ticks (``cpu_ticks`` of its stat)."""
    return cpu_ticks(Path(f"/proc/{pid}/stat").read_text())


def _sockets(cpid: int) -> dict[tuple[str, int], tuple[int, int]]:
    return udp_sockets(Path(f"/proc/{cpid}/net/udp").read_text())


def _loop_argv(name: str) -> tuple[list[str], tuple[str, int], tuple[str, int]]:
    """The loop's command line, the address its receiving socket is bound to (as
    /proc/net/udp shows it) and the sink's address."""
    py = [sys.executable, "-m", "rmptwin.bench.udp_loops", "loop"]
    if name == "socat":
        # UDP4-RECV: one unconnected socket, recvfrom per datagram, each written out as one datagram.
        buf = "rcvbuf=4194304"
        return (["socat", "-u", f"UDP4-RECV:{IN_PORT},bind={LO},{buf}", f"UDP4-SENDTO:{LO}:{OUT_PORT},sndbuf=4194304"],
                (LO, IN_PORT), (LO, OUT_PORT))
    if name in DRIVERS:
        # Its own well-known port, all addresses; the sink at a host address of its own.
        options = {DRIVER: [], DRIVER_UVLOOP: ["--event-loop", "uvloop"],
                   DRIVER_ACCESS: ["--access-delay-us", f"{ACCESS_DELAY_US:g}"]}[name]
        return (py + ["driver", LO, str(RMP_PORT), SINK_IP, str(RMP_PORT), "--sender-ip", SENDER_IP, *options],
                ("0.0.0.0", RMP_PORT), (SINK_IP, RMP_PORT))
    return py + [name, LO, str(IN_PORT), LO, str(OUT_PORT)], (LO, IN_PORT), (LO, OUT_PORT)


def _stop(p: subprocess.Popen[bytes]) -> bytes:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out or b""


def measure_one(cpid: int, name: str, seconds: float, rate: int = RATE) -> Measurement:
    argv, in_addr, sink_addr = _loop_argv(name)
    hz = os.sysconf("SC_CLK_TCK")
    py = [sys.executable, "-m", "rmptwin.bench.udp_loops"]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryFile() as err:
        try:
            sink = _spawn(cpid, py + ["sink", sink_addr[0], str(sink_addr[1])], stdout=subprocess.PIPE)
            procs.append(sink)
            loop = _spawn(cpid, argv, stderr=err)
            procs.append(loop)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not {in_addr, sink_addr} <= _sockets(cpid).keys():
                if loop.poll() is not None or time.monotonic() > deadline:
                    err.seek(0)
                    why = err.read().decode(errors="replace").strip().splitlines()[-1:] or ["not ready"]
                    raise UserError(f"datapath loop {name} did not start: {why[0]}")
                time.sleep(0.05)
            loop0, sink0 = process_ticks(loop.pid), process_ticks(sink.pid)
            target = (LO, RMP_PORT) if name in DRIVERS else in_addr
            sender = _spawn(cpid, py + ["send", target[0], str(target[1]), "--rate", str(rate), "--seconds",
                                        str(seconds), "--size", str(SIZE), "--bind", SENDER_IP],
                            stdout=subprocess.PIPE)
            procs.append(sender)
            out, _ = sender.communicate(timeout=seconds + 30)
            sent = json.loads(out)
            # Settled: both queues empty twice in a row (the loop and the sink have caught up).
            deadline, empty = time.monotonic() + SETTLE_TIMEOUT_S, 0
            while empty < 2 and time.monotonic() < deadline:
                socks = _sockets(cpid)
                empty = empty + 1 if socks[in_addr][0] == 0 and socks[sink_addr][0] == 0 else 0
                time.sleep(0.02)
            loop1, sink1 = process_ticks(loop.pid), process_ticks(sink.pid)
            socks = _sockets(cpid)
            counted = json.loads(_stop(sink))["received"]
        finally:
            for p in procs:
                if p.poll() is None:
                    _stop(p)
    return Measurement(sent=sent["sent"], sender_s=sent["seconds"], sender_cpu_s=sent["cpu_s"],
                       in_drops=socks[in_addr][1], out_drops=socks[sink_addr][1], forwarded=counted,
                       loop_cpu_s=(loop1 - loop0) / hz, sink_cpu_s=(sink1 - sink0) / hz, bursts=sent["bursts"])


def availability(name: str) -> str | None:
    """Why a variant cannot run here, or None."""
    if name in ("uvloop", DRIVER_UVLOOP) and importlib.util.find_spec("uvloop") is None:
        return "uvloop not installed"
    if name == "socat" and not shutil.which("socat"):
        return "socat not installed (Debian package socat)"
    return None


def measure(names: tuple[str, ...], quick: bool,
            rate: int = RATE) -> tuple[dict[str, list[Measurement] | str], float | None, int | None]:
    """Each variant ``reps`` times in one container at ``rate``, the variants interleaved per
    repetition (a machine getting busier then weighs on all of them alike)."""
    seconds, reps = (2.0, 1) if quick else (4.0, 3)
    results: dict[str, list[Measurement] | str] = {}
    for n in names:
        why = availability(n)
        results[n] = why if why else []
    with container() as (cpid, cpus, memory_mb):
        for _ in range(reps):
            for n in names:
                got = results[n]
                if isinstance(got, list):
                    got.append(measure_one(cpid, n, seconds, rate))
    return results, cpus, memory_mb


def python_floor_us(quick: bool) -> dict[str, float]:
    """µs of CPU per datagram handled by a forwarding loop, measured now: {"asyncio", "uvloop"
    (when installed), "socat" (when installed)}. Raises ``UserError`` where nothing can be
    measured (not root, no Docker, no nsenter)."""
    problem = environment_problem()
    if problem:
        raise UserError(f"the Python floor cannot be measured here: {problem}")
    results, _, _ = measure(PYTHON_FLOOR, quick)
    return {n: median([m.us_per_datagram for m in got]) for n, got in results.items() if isinstance(got, list) and got}


def role_rows(roles: dict[str, float], loop_us: float, work_us: dict[str, float], made: str) -> list[dict[str, Any]]:
    """One row per role of the host's calibration (µs of CPU per datagram handled in an emulated
    run), held to what the same datagram costs bare: one wake-up of the cheapest Python loop
    (``loop_us``, a datagram per wake-up) plus the role's own work, replayed in process
    (``work_us``, ``role_replay``; the loop alone for a role not replayed). Goal: <= 2 x."""
    rows = []
    for role, us in sorted(roles.items()):
        work = work_us.get(role)
        floor = loop_us + (work or 0.0)
        what = (f"a wake-up of the cheapest Python loop, one datagram each ({loop_us:.1f} µs), + the role's own "
                f"work replayed in process ({work:.1f} µs)" if work is not None
                else f"a wake-up of the cheapest Python loop, one datagram each ({loop_us:.1f} µs); the role's "
                     f"own work not replayed (venue roles need their stores and etcd)")
        rows.append({"metric": f"CPU per datagram handled: {role} node (calibration)", "value": us,
                     "unit": "µs/datagram", "better": "lower", "floor": floor, "floor_what": what,
                     "goal": "<= 2 x floor", "goal_max": 2 * floor,
                     "conditions": f"this host's calibration ({made}): Docker hosts, 1 CPU each, the calibration "
                                   f"runs (runner.calibrate.CALIBRATION_RUNS), node CPU over datagrams sent + received"})
    return rows


def calibrated_at(cal: Any) -> str:
    """When this host's cached calibration ``cal`` was made (its file's time, UTC), or "cached"."""
    from rmptwin.planning import calibration as cal_mod

    made = cal_mod.cache_path(cal.identity)
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(made.stat().st_mtime)) if made.exists() else "cached"


def _calibration_rows(low: dict[str, list[Measurement] | str], quick: bool) -> list[dict[str, Any]]:
    """The roles' figures beside their floors: this host's calibration for Docker hosts (made
    now in full mode when none is cached; quick mode only reads a cached one), the loops at
    ``LOW_RATE`` and the quickstart's roles replayed (``role_replay``)."""
    from rmptwin.bench.role_replay import role_costs
    from rmptwin.model import load_experiment
    from rmptwin.planning import calibration as cal_mod
    from rmptwin.runner.calibrate import calibration_for, identity_for
    from rmptwin.runner.pipeline import EmulationOptions

    loops = [median([m.us_per_datagram for m in got]) for name, got in low.items()
             if name in PYTHON_FLOOR and name != "socat" and isinstance(got, list) and got]
    options = EmulationOptions(nodes="docker")
    cal = cal_mod.cached(identity_for(options))
    if cal is None and not quick:
        cal = calibration_for(options)
    if cal is None or not loops:
        return [{"metric": "CPU per datagram handled: node roles (calibration)", "value": "skipped", "ok": None,
                 "note": "no calibration of this host for Docker hosts (rmptwin plan makes one)" if cal is None
                 else "no Python loop measured"}]
    when = calibrated_at(cal)
    quickstart = load_experiment(Path(__file__).resolve().parents[3] / "experiments" / "quickstart.yaml")
    work = {role: c.us_per_datagram for role, c in role_costs(quickstart).items()}
    return role_rows({r: c.cpu_us_per_datagram for r, c in cal.roles.items()}, min(loops), work, when)


def run(quick: bool) -> list[dict[str, Any]]:
    problem = environment_problem()
    if problem:
        return [{"metric": "CPU per datagram handled", "value": "skipped", "ok": None, "note": problem}]
    seconds = 2.0 if quick else 4.0
    results, cpus, memory_mb = measure(VARIANTS, quick)
    low, _, _ = measure(LOW_RATE_VARIANTS, quick, LOW_RATE)
    return (build_rows(results, seconds, cpus, memory_mb) + build_rows(low, seconds, cpus, memory_mb, LOW_RATE)
            + _calibration_rows(low, quick))


if __name__ == "__main__":
    print(json.dumps(python_floor_us("--quick" in sys.argv)))
