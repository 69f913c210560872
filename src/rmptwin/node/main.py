"""One node of an emulated run: ``python -m rmptwin.node.main CONFIG NAME [--incarnation N] [--spare]``.

Started by the runner inside the node's own host (container or namespace). It builds the
host's core through ``rmptwin.factories.build_core`` (the same per-host RNG as the simulator),
binds its sockets and joins its groups, prints ``READY <groups as JSON>``, then waits for ``GO <t0_ns>`` on
stdin (a recovering node is given t0 in the config and starts at once). It logs events to
its ``events`` file (``NodeConfig.node_file``) and prints its progress (``STATUS <json>``, see
``node.drain``) a few times a second until the runner says ``STOP`` once the run is
quiescent (or stdin closes, or the drain cap has passed), then prints ``DONE <counters>``
and exits. SIGTERM ends it early with the log flushed.

A ``--spare`` is the next incarnation of a node the fault schedule recovers, started ahead by
the runner: it imports everything and parses its config, prints ``SPARE``, and opens nothing
(no state, no node socket: a crashed node hears nothing) until ``WAKE <t0_ns>``; then it starts as
a recovering node given t0. (Measured: started at its recover fault, a restarted EV spent 2.5 s
importing on the loaded 2-CPU machine, past the 3.5 s run's end, and never synced.) Before
WAKE the runner sends it ``HOLD <groups as JSON>``, the groups of the incarnation it follows:
it joins them on a socket that receives nothing (``driver.membership_keeper``, answering
``HELD <n>``), so the crash withdraws no membership, as a machine's crash sends no IGMP leave.
(Measured: without it the restarted EV's joins went through the controller again and it heard
no multicast for its first 10-50 ms; the emulated sync took 29.7 ms against 0.3 simulated.)

A receiver (R_P, R_S) releases at ack ts + Delta_A: fairness is how close its release timers
fire, so it asks for real-time round-robin scheduling (else nice -10); the runner tries the
same from outside. At the end every node logs one ``TIMER_LATENESS`` event (its timers'
lateness histogram and the scheduling it ran with) and puts the figures in ``DONE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from rmptwin.core.events import Event, Kind
from rmptwin.core.host import RELEASE_ROLES, TimeDilation
from rmptwin.core.sansio import Core
from rmptwin.errors import UserError
from rmptwin.factories import build_core
from rmptwin.factories.ticker_workload import schedule
from rmptwin.model import HostSpec, LoadedExperiment
from rmptwin.node import event_loop
from rmptwin.node.drain import DRAIN_MAX_S, STATUS_EVERY_S
from rmptwin.node.driver import NodeDriver, membership_keeper
from rmptwin.node.eventlog import EventWriter
from rmptwin.node.hostlink import HostLink
from rmptwin.node.node_config import NodeConfig
from rmptwin.node.priority import RT_PRIORITY
from rmptwin.node.venue_adapters import NodeAdapters, node_adapters

FLUSH_EVERY_S = 0.2
T = TypeVar("T")


def _say(msg: str) -> None:
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


@dataclass
class Node:
    """This host's core and what runs it: its venue adapters, its event log, its driver."""

    loaded: LoadedExperiment
    host: HostSpec
    core: Core
    adapters: NodeAdapters
    log: EventWriter
    driver: NodeDriver


def _open_node(cfg: NodeConfig, name: str, incarnation: int, loaded: LoadedExperiment | None = None) -> Node:
    loaded = loaded or cfg.loaded()
    host = loaded.topology.host(name)
    recovering = incarnation > 0
    tag = f"recover{incarnation}" if recovering else "start"
    rng = random.Random(f"{cfg.seed}:host:{name}:{tag}")
    adapters = node_adapters(host, loaded, Path(cfg.state_dir or cfg.log_dir))   # venue stores, etcd: this node's own
    core = build_core(host, loaded, rng, recovering=recovering, adapters=adapters)
    log = EventWriter(cfg.node_file("events", name, incarnation))
    access = HostLink(name, host.switch, host.link, cfg.seed) if name in (cfg.access_in_node or ()) else None
    driver = NodeDriver(core, name, host.role, cfg.hosts, cfg.t0_ns or 0, log, loaded.experiment.clocks.get(name),
                        guaranteed=host.role == "customer" and host.grade == "guaranteed", access=access,
                        dilation=TimeDilation(loaded.time_dilation))
    driver.open()
    return Node(loaded, host, core, adapters, log, driver)


def _settle(fut: asyncio.Future[T], value: T) -> None:
    if not fut.done():
        fut.set_result(value)


def clock_command(cmd: list[str]) -> tuple[int | None, float | None] | None:
    """``CLOCK <jump_ns> <drift_ppm>`` ("-" for neither): the clock nemesis; None if malformed."""
    if len(cmd) != 3 or cmd[0] != "CLOCK":
        return None
    try:
        jump_ns = None if cmd[1] == "-" else int(cmd[1])
        drift_ppm = None if cmd[2] == "-" else float(cmd[2])
    except ValueError:
        return None
    return jump_ns, drift_ppm


def etcd_command(cmd: list[str]) -> tuple[str, int] | None:
    """``ETCD pause|resume <member>``: one etcd member of a sequencer host; None if malformed."""
    if len(cmd) != 3 or cmd[0] != "ETCD" or cmd[1] not in ("pause", "resume") or not cmd[2].isdigit():
        return None
    return cmd[1], int(cmd[2])


def _halt(driver: NodeDriver) -> None:
    """``HALT``: the run is over; stop timing this node's timers (the others are about to exit)."""
    driver.timing = False
    _say("HALTED")


def _listen_to_runner(loop: asyncio.AbstractEventLoop, go: asyncio.Future[int | None], stop: asyncio.Future[str],
                      driver: NodeDriver | None = None, adapters: NodeAdapters | None = None) -> None:
    """The runner's line protocol on stdin (see emulation.nodeproc), read by a thread of its own."""
    def read() -> None:
        for line in sys.stdin:
            cmd = line.split()
            if cmd[:1] == ["GO"] and len(cmd) == 2 and cmd[1].isdigit():
                loop.call_soon_threadsafe(_settle, go, int(cmd[1]))
            elif cmd == ["STOP"]:
                loop.call_soon_threadsafe(_settle, stop, "stop")
            elif cmd == ["HALT"] and driver is not None:
                loop.call_soon_threadsafe(_halt, driver)
            elif driver is not None and (change := clock_command(cmd)) is not None:
                loop.call_soon_threadsafe(driver.change_clock, *change)
            elif adapters is not None and (member := etcd_command(cmd)) is not None:
                cluster = getattr(adapters, "cluster", None)
                if cluster is not None:   # a thread of its own: signals, no loop state
                    (cluster.pause if member[0] == "pause" else cluster.resume)(member[1])
        loop.call_soon_threadsafe(_settle, go, None)
        loop.call_soon_threadsafe(_settle, stop, "eof")

    threading.Thread(target=read, daemon=True).start()


def _every(loop: asyncio.AbstractEventLoop, seconds: float, stop: asyncio.Future[str],
           fn: Callable[[], object]) -> None:
    """Call ``fn`` now and every ``seconds`` until ``stop`` is done."""
    def tick() -> None:
        if not stop.done():
            fn()
            loop.call_later(seconds, tick)
    tick()


def _report_status(driver: NodeDriver) -> None:
    st = {**driver.progress.status(), "t_ns": driver.true_now()}
    _say("STATUS " + json.dumps(st, separators=(",", ":")))


def boost_priority() -> str:
    """Real-time round-robin (``priority.RT_PRIORITY``), else nice -10; what was granted."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(RT_PRIORITY))
    except (OSError, AttributeError):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -10)
        except OSError:
            pass
    return scheduling()


def scheduling() -> str:
    """This process's scheduling now: "rr:1", "fifo:2", or "nice:-10" (the runner may have changed it)."""
    try:
        policy = os.sched_getscheduler(0)
        if policy in (os.SCHED_RR, os.SCHED_FIFO):
            prio = os.sched_getparam(0).sched_priority
            return f"{'rr' if policy == os.SCHED_RR else 'fifo'}:{prio}"
        return f"nice:{os.getpriority(os.PRIO_PROCESS, 0)}"
    except (OSError, AttributeError):
        return "unknown"


def _log_lateness(node: Node, asked: str) -> dict[str, Any]:
    """The TIMER_LATENESS event (histogram + scheduling) and the figures for DONE."""
    d = node.driver
    sched = {"asked": asked, "got": scheduling()}
    node.log.add(d.true_now(), node.host.name, node.host.role,
                 Event(Kind.TIMER_LATENESS, detail={**d.lateness.to_detail(), "sched": sched}))
    return {"timer_lateness_ms": d.lateness.summary_ms(), "sched": sched}


def _counters(node: Node, reason: str, timing: dict[str, Any], run_cpu_s: float) -> dict[str, Any]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    d = node.driver
    # cpu_s: the process's whole life, start-up (imports, ~0.4 s) included; run_cpu_s: from the
    # release to STOP only, what the run's work cost (planning.calibration fits it)
    return {"reason": reason, "sent": d.sent, "received": d.received, "events": node.log.count,
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "run_cpu_s": round(run_cpu_s, 3),
            "send_errors": d.send_errors, "malformed": getattr(node.core, "malformed", 0), **timing}


async def _run(cfg: NodeConfig, name: str, incarnation: int, loaded: LoadedExperiment | None = None,
               keeper: socket.socket | None = None) -> dict[str, Any]:
    node = _open_node(cfg, name, incarnation, loaded)
    if keeper is not None:
        keeper.close()   # our own sockets have joined: a group we no longer want is left now
    driver = node.driver
    asked = boost_priority() if node.host.role in RELEASE_ROLES else "none"
    loop = asyncio.get_running_loop()
    node.adapters.attach(driver, loop)
    go: asyncio.Future[int | None] = loop.create_future()
    stop: asyncio.Future[str] = loop.create_future()
    _listen_to_runner(loop, go, stop, driver, node.adapters)
    _say("READY " + json.dumps(sorted(driver.joined)))
    t0 = cfg.t0_ns
    if t0 is None:
        t0 = await go
        if t0 is None:
            raise UserError(f"node {name}: stdin closed before 'GO <t0_ns>'")
        driver.t0 = t0
    end_ns = round(node.loaded.duration_s * 1e9)
    # Start at true time 0 exactly (or at once when recovering mid-run).
    await asyncio.sleep(max(0.0, (t0 - time.time_ns()) / 1e9))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _settle, stop, "signal")
    cpu_at_start = time.process_time()
    driver.start(loop)
    if node.host.role == "source":
        now = driver.true_now()
        pubs = [p for p in schedule(node.loaded, cfg.seed) if p.source == name and p.t_ns >= now]
        driver.schedule_publications(pubs)
    _every(loop, FLUSH_EVERY_S, stop, node.log.flush)
    # The runner reads a node's STATUS only once the run is past its end (emulate._drain counts no
    # older one), so a node reports from then on, not four times a second all run long: 31 nodes'
    # JSON lines, each parsed by the runner, for nothing.
    loop.call_later(max(0.0, driver.wall_s(end_ns - driver.true_now())), _every, loop, STATUS_EVERY_S, stop,
                    lambda: _report_status(driver))
    # The runner stops every node once the run is quiescent; this is only the backstop.
    loop.call_later(max(0.0, driver.wall_s(end_ns - driver.true_now() + DRAIN_MAX_S * 1e9)) + 10, _settle, stop, "end")
    reason = await stop
    run_cpu_s = time.process_time() - cpu_at_start
    driver.close()
    node.adapters.close()
    timing = _log_lateness(node, asked)
    node.log.close()
    if driver.access is not None:   # the access link's ground truth, as a relay would leave it
        report = {"counts": driver.access.counts(), "drops": driver.access.dropped_frames}
        cfg.node_file("access_link", name, incarnation).write_text(json.dumps(report))
    return _counters(node, reason, timing, run_cpu_s)


def wake_time(line: str) -> int | None:
    """t0 of ``WAKE <t0_ns>``; None for anything else (EOF: the runner ended without it)."""
    cmd = line.split()
    return int(cmd[1]) if len(cmd) == 2 and cmd[0] == "WAKE" and cmd[1].isdigit() else None


def hold_groups(line: str) -> list[str] | None:
    """The group names of ``HOLD <JSON list>``; None for anything else."""
    if not line.startswith("HOLD "):
        return None
    try:
        groups = json.loads(line[5:])
    except ValueError:
        return None
    return [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else None


def wait_as_spare(ip: str) -> tuple[int | None, socket.socket | None]:
    """A spare's stdin until ``WAKE``: (its t0, or None at EOF; the membership keeper of the
    last ``HOLD``, the groups of the incarnation it follows: ``driver.membership_keeper``)."""
    keeper = None
    for line in sys.stdin:
        groups = hold_groups(line)
        if groups is None:
            return wake_time(line), keeper
        if keeper is not None:
            keeper.close()
        keeper = membership_keeper(ip, groups)
        _say(f"HELD {len(groups)}")
    return None, keeper


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rmptwin.node.main")
    ap.add_argument("config")
    ap.add_argument("name")
    ap.add_argument("--incarnation", type=int, default=0, help="0: first start; n > 0: n-th recovery")
    ap.add_argument("--spare", action="store_true", help="start ahead: wait for WAKE <t0_ns> before opening anything")
    args = ap.parse_args(argv)
    try:
        cfg, loaded = NodeConfig.read(args.config), None
        keeper = None
        if args.spare:
            loaded = cfg.loaded()   # parsed while waiting, not after WAKE
            _say("SPARE")
            t0, keeper = wait_as_spare(cfg.hosts[args.name])
            if t0 is None:
                return 0
            cfg = replace(cfg, t0_ns=t0)
        loop_used = event_loop.install(cfg.event_loop)
        counters = asyncio.run(_run(cfg, args.name, args.incarnation, loaded, keeper))
        counters["event_loop"] = loop_used
    except UserError as e:
        sys.stderr.write(f"rmptwin node {args.name}: {e}\n")
        return 2
    _say("DONE " + json.dumps(counters, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
