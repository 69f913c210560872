"""Drive every host's core over the simulated network, in simulated time.

``simulate(loaded, seed)`` builds each host's core through ``rmptwin.factories.build_core``
(per-host RNG from the run seed and the host name), delivers datagrams when they arrive,
fires timers, feeds the workload to sources (a source core's ``publish``) and applies the fault
schedule. After every call into a core it drains ``datagrams_to_send`` and
``next_event`` and re-reads ``groups()`` and ``get_timer()``. Events are logged at TRUE
simulated time; each core sees its own clock (``experiment.clocks``: offset and drift),
and its timer deadlines are converted back to true time.

It returns tables (events, link drops, link counts) and counters; it writes no file, computes
no summary and prints nothing (``rmptwin.runner.pipeline`` and the CLI do).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from rmptwin import factories
from rmptwin.core import nemesis
from rmptwin.core.events import Event, Kind
from rmptwin.core.host import NodeClock
from rmptwin.core.nemesis import FaultInterpreter, Step
from rmptwin.core.sansio import Core, Dest
from rmptwin.errors import UserError
from rmptwin.factories.adapters import Adapters
from rmptwin.factories.ticker_workload import Publish, schedule
from rmptwin.model import Clock, LoadedExperiment
from rmptwin.model.hosts import HostSpec
from rmptwin.records.tables import EVENT_SCHEMA, encoded_details
from rmptwin.sim.network import SimNetwork
from rmptwin.sim.scheduler import Scheduler, gc_paused

BuildFn = Callable[..., Core]  # (host, loaded, rng, *, recovering=False) -> Core


@dataclass
class SimResult:
    events: pa.Table
    drops: pa.Table
    link_counts: pa.Table
    stats: dict[str, Any] = field(default_factory=dict)  # wall time and counters (wall time is not deterministic)


def _event_drain(core: Core) -> Callable[[], tuple[Event, ...]] | None:
    """The core's ``take_events`` (every queued event at once: one call per delivery, not one per
    event) when the class that defines its ``next_event`` defines that too; else None, and
    the driver calls ``next_event`` until None."""
    for cls in type(core).__mro__:
        if "next_event" in cls.__dict__:
            return getattr(core, "take_events") if "take_events" in cls.__dict__ else None
    return None


def _drain(next_event: Callable[[], Event | None], first: Event) -> tuple[Event, ...]:
    """``first`` and what ``next_event`` gives until None."""
    out = [first]
    ev = next_event()
    while ev is not None:
        out.append(ev)
        ev = next_event()
    return tuple(out)


class _Node:
    __slots__ = ("idx", "host", "name", "role", "core", "crashed", "timer_local", "timer_gen",
                 "groups", "clock", "recoveries", "recv", "get_groups", "to_send", "take_events",
                 "next_event", "get_timer", "paused", "backlog")

    core: Core   # from attach() on; the bound methods below are its own
    recv: Callable[[bytes, str, int], None]
    get_groups: Callable[[], frozenset[str]]
    to_send: Callable[[int], Sequence[tuple[bytes, Dest]]]
    next_event: Callable[[], Event | None]
    get_timer: Callable[[], int | None]
    take_events: Callable[[], tuple[Event, ...]] | None

    def __init__(self, idx: int, host: HostSpec, clock: Clock | None) -> None:
        self.idx, self.host, self.name, self.role = idx, host, host.name, host.role
        self.crashed = False
        self.timer_local: int | None = None
        self.timer_gen = 0
        self.groups: frozenset[str] = frozenset()
        self.clock = NodeClock.of(clock)   # its local() and true() map its core's time
        self.recoveries = 0
        self.paused: int | None = None      # true time the node was paused (a frozen core), or None
        self.backlog: list[tuple[Any, ...]] = []   # what reached it meanwhile: ("d", data, src) / ("p", publish)

    def attach(self, core: Core) -> None:
        # Bound methods looked up once: the delivery loop calls them for every packet.
        self.core = core
        self.recv, self.get_groups = core.receive_datagram, core.groups
        self.to_send, self.next_event, self.get_timer = core.datagrams_to_send, core.next_event, core.get_timer
        self.take_events = _event_drain(core)


class Simulation:
    def __init__(self, loaded: LoadedExperiment, seed: int | None = None, build: BuildFn | None = None) -> None:
        self.loaded = loaded
        self.exp = loaded.experiment
        self.seed = self.exp.seed if seed is None else seed
        self.adapters = Adapters()   # this run's venue stores, kept per host across crash and recovery
        self.build = build or partial(factories.build_core, adapters=self.adapters)
        self.sched = Scheduler()
        self.net = SimNetwork(loaded.topology, self.sched, self.seed, self._deliver)
        # (true time, node, the events its core gave then): tabled at the end. One entry per
        # call into a core, not per event: a customer logs a whole packet's messages at once.
        self._log: list[tuple[int, _Node, tuple[Event, ...]]] = []
        self.nodes = [_Node(i, h, self.exp.clocks.get(h.name)) for i, h in enumerate(loaded.topology.hosts)]
        self.by_name = {n.name: n for n in self.nodes}
        self.end_ns = round(loaded.duration_s * 1e9)
        self._workload: list[Publish] = []
        self.faults = FaultInterpreter(loaded.topology, self)   # calls the FaultTarget methods below

    # ------------------------------------------------------------------ core plumbing

    def _make_core(self, node: _Node, recovering: bool) -> Core:
        tag = f"recover{node.recoveries}" if recovering else "start"
        rng = random.Random(f"{self.seed}:host:{node.name}:{tag}")
        try:
            return self.build(node.host, self.loaded, rng, recovering=recovering)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith("rmptwin"):
                raise UserError(f"host {node.name}: no core for role {node.role!r} yet ({e.name} is missing)") from None
            raise

    def _after(self, node: _Node, t: int, fired: int | None = None) -> None:
        """Collect what a core produced after being called at true time ``t``."""
        core = node.core
        g = core.groups()
        if g is not node.groups:
            node.groups = g
            self.net.set_groups(node.idx, g)
        out = core.datagrams_to_send(node.clock.local(t))
        if out:
            send = self.net.send
            for data, dest in out:
                send(t, node.idx, data, dest)
        self._log_events(node, t)
        deadline = core.get_timer()
        if deadline is not None and deadline == fired:
            deadline = None  # a core that re-arms the deadline it just handled would spin forever
        if deadline != node.timer_local:
            node.timer_local = deadline
            node.timer_gen += 1
            if deadline is not None:
                self.sched.at(max(node.clock.true(deadline), t), self._fire, node, node.timer_gen)

    def _log_events(self, node: _Node, t: int) -> None:
        """Every event ``node``'s core queued, logged at true time ``t``."""
        if node.take_events is not None:
            events = node.take_events()
        else:
            ev = node.next_event()
            events = _drain(node.next_event, ev) if ev is not None else ()
        if events:
            self._log.append((t, node, events))

    def _fire(self, t: int, node: _Node, gen: int) -> None:
        if node.crashed or gen != node.timer_gen:
            return
        if node.paused is not None:
            return   # a frozen core's timer fires when it resumes (the deadline stays set)
        fired, node.timer_local = node.timer_local, None
        node.core.handle_timer(node.clock.local(t))
        self._after(node, t, fired)

    def _deliver(self, hosts: list[int], data: bytes, src: str, t: int) -> None:
        # The fan-out hot path: _after inlined, one local clock reading per host.
        nodes, log = self.nodes, self._log
        for h in hosts:
            node = nodes[h]
            if node.crashed:
                continue
            if node.paused is not None:   # a stopped process: the datagram waits in its socket buffer
                node.backlog.append(("d", data, src))
                continue
            c = node.clock
            now = t + c.off_ns + round(t * c.k) if c.k else t + c.off_ns
            node.recv(data, src, now)
            g = node.get_groups()
            if g is not node.groups:
                if g != node.groups:
                    self.net.set_groups(h, g)
                node.groups = g
            out = node.to_send(now)
            if out:
                send = self.net.send
                for d, dest in out:
                    send(t, h, d, dest)
            take = node.take_events
            if take is not None:
                events = take()
                if events:
                    log.append((t, node, events))
            else:
                ev = node.next_event()   # a core without take_events: most often nothing
                if ev is not None:
                    log.append((t, node, _drain(node.next_event, ev)))
            deadline = node.get_timer()
            if deadline != node.timer_local:
                node.timer_local = deadline
                node.timer_gen += 1
                if deadline is not None:
                    self.sched.at(max(node.clock.true(deadline), t), self._fire, node, node.timer_gen)

    # ------------------------------------------------------------------ workload and faults

    def _publish(self, t: int, i: int, _unused: None) -> None:
        p = self._workload[i]
        if i + 1 < len(self._workload):
            self.sched.at(self._workload[i + 1].t_ns, self._publish, i + 1)
        node = self.by_name[p.source]
        if node.crashed:
            return
        if node.paused is not None:
            node.backlog.append(("p", p))
            return
        publish = getattr(node.core, "publish", None)
        if publish is None:
            raise UserError(f"host {node.name}: its {node.role} core cannot publish (no publish method)")
        publish(p.stripe, p.payload, node.clock.local(t))
        self._after(node, t)

    def _fault(self, t: int, step: Step, _unused: None) -> None:
        self.faults.apply(t, step)

    # ------------------------------------------------------------------ the FaultTarget of core.nemesis

    def crash(self, t: int, node: str) -> None:
        n = self.by_name[node]
        if n.crashed:
            return
        n.crashed = True
        n.paused, n.backlog = None, []   # a paused process killed: its socket buffer goes too
        n.timer_gen += 1
        n.timer_local = None
        n.groups = frozenset()
        self.net.set_groups(n.idx, n.groups)
        self._log.append((t, n, (Event(Kind.CRASH),)))
        self._promote_standby(t, n)

    def recover(self, t: int, node: str) -> None:
        n = self.by_name[node]
        if not n.crashed:
            return
        n.recoveries += 1
        n.attach(self._make_core(n, recovering=True))
        n.crashed = False
        self._log.append((t, n, (Event(Kind.RECOVER),)))
        self._after(n, t)

    def set_link(self, t: int, link: str, up: bool) -> None:
        self.net.set_link_up(link, up)

    def set_loss(self, t: int, link: str, loss: Any) -> None:
        self.net.set_loss(link, loss)

    def set_chaos(self, t: int, link: str, duplicate: float, reorder: float, reorder_ns: int) -> None:
        self.net.set_chaos(link, duplicate, reorder, reorder_ns)

    def pause(self, t: int, node: str, member: int | None) -> None:
        n = self.by_name[node]
        if member is not None:
            # one etcd member of three: the simulator's sequencer is the in-memory CAS, whose
            # answers a majority of members gives unchanged; logged, nothing stops
            self._log.append((t, n, (Event(Kind.PAUSE, detail={"member": member}),)))
            return
        if n.crashed or n.paused is not None:
            return
        n.paused = t
        self._log.append((t, n, (Event(Kind.PAUSE),)))

    def resume(self, t: int, node: str, member: int | None) -> None:
        n = self.by_name[node]
        if member is not None:
            self._log.append((t, n, (Event(Kind.RESUME, detail={"member": member}),)))
            return
        self._resume(t, n)

    def clock(self, t: int, node: str, jump_ns: int | None, drift_ppm: float | None) -> None:
        n = self.by_name[node]
        n.clock.change(t, jump_ns, drift_ppm)
        jump_ms = None if jump_ns is None else jump_ns / 1e6
        self._log.append((t, n, (Event(Kind.CLOCK, detail={"jump_ms": jump_ms, "drift_ppm": drift_ppm}),)))
        if not n.crashed and n.timer_local is not None:   # its deadline, in true time, moved
            n.timer_gen += 1
            self.sched.at(max(n.clock.true(n.timer_local), t), self._fire, n, n.timer_gen)

    def _promote_standby(self, t: int, crashed: _Node) -> None:
        """The supervisor of a ``venue.standby`` experiment: an EV's crash promotes the standby EV
        (the topology's last venue host) at once, as a process supervisor sees its child exit.
        A standby crashed, frozen or already promoted is not promoted (again)."""
        v = self.exp.venue
        if v is None or not v.standby or crashed.role != "venue":
            return
        standby = [n for n in self.nodes if n.role == "venue"][-1]
        promote = getattr(standby.core, "promote", None)
        if standby is crashed or standby.crashed or standby.paused is not None or promote is None \
                or not getattr(standby.core, "standby", False):
            return
        promote(standby.clock.local(t))
        self._after(standby, t)

    def _resume(self, t: int, node: _Node) -> None:
        if node.paused is None:
            return
        paused, node.paused = node.paused, None
        backlog, node.backlog = node.backlog, []
        self._log.append((t, node, (Event(Kind.RESUME, detail={"paused_ns": t - paused}),)))
        if node.crashed:
            return
        now = node.clock.local(t)
        for item in backlog:   # what waited in its socket buffer, in arrival order, then its late timer
            if item[0] == "d":
                node.recv(item[1], item[2], now)
            else:
                p = item[1]
                getattr(node.core, "publish")(p.stripe, p.payload, now)   # only a source is given publications
        self._after(node, t)
        if node.timer_local is not None and node.clock.true(node.timer_local) <= t:
            node.timer_gen += 1   # a deadline that passed while frozen: it fires now, once
            self.sched.at(t, self._fire, node, node.timer_gen)

    # ------------------------------------------------------------------ run

    def start(self) -> None:
        for node in self.nodes:
            node.attach(self._make_core(node, recovering=False))
        # Everyone joins before anyone sends, so nothing sent at t=0 misses a member.
        for node in self.nodes:
            node.groups = node.core.groups()
            self.net.set_groups(node.idx, node.groups)
        for node in self.nodes:
            self._after(node, 0)
        for step in nemesis.steps(self.exp.faults):
            self.sched.at(step.at_ns, self._fault, step)
        self._workload = schedule(self.loaded, self.seed)
        if self._workload:
            self.sched.at(self._workload[0].t_ns, self._publish, 0)

    @property
    def logged_events(self) -> int:
        """Events logged so far (rows of the event table)."""
        return sum(len(entry[2]) for entry in self._log)

    def event_table(self) -> pa.Table:
        if not self._log:
            return EVENT_SCHEMA.empty_table()
        with gc_paused():
            return self._event_table()

    def _event_table(self) -> pa.Table:
        # Many rows share one event (customers hearing the same message, ``rmp.customer``) and
        # every row names one of few nodes: each column is built once per distinct event or
        # node and spread over the rows by index (Arrow's take), not read row by row.
        times, nodes, batches = zip(*self._log)
        sizes = np.fromiter(map(len, batches), np.int64, len(batches))
        events = list(chain.from_iterable(batches))
        ids = list(map(id, events))            # the log keeps every event alive: ids are identities
        distinct = dict(zip(ids, events))      # first appearance order, one entry per event
        slot = {i: k for k, i in enumerate(distinct)}
        ev_ix = pa.array(np.fromiter(map(slot.__getitem__, ids), np.int64, len(ids)))
        node_ix = pa.array(np.repeat(np.fromiter((n.idx for n in nodes), np.int64, len(nodes)), sizes))
        uniq = list(distinct.values())
        texts, typed = encoded_details(ev.detail for ev in uniq)
        per_event = [
            pa.array([ev.kind for ev in uniq], pa.string()),
            pa.array([ev.src for ev in uniq], pa.string()),
            pa.array([ev.src_seq for ev in uniq], pa.int64()),
            pa.array([ev.gseq for ev in uniq], pa.int64()),
            pa.array([ev.bytes for ev in uniq], pa.int64()),
            pa.array(texts, pa.string()),
            *typed,
        ]
        cols = [
            pa.array(np.repeat(np.array(times, np.int64), sizes)),
            pa.array([n.name for n in self.nodes], pa.string()).take(node_ix),
            pa.array([n.role for n in self.nodes], pa.string()).take(node_ix),
            *(col.take(ev_ix) for col in per_event),
        ]
        return pa.Table.from_arrays(cols, schema=EVENT_SCHEMA)

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Simulate to the end of the duration; ``progress`` gets the simulated time (ns) now and then."""
        wall = time.perf_counter()
        self.start()
        self.sched.run_until(self.end_ns, tick=progress)
        wall = time.perf_counter() - wall
        events = self.event_table()
        stats = {
            "wall_s": wall,
            "scheduler_events": self.sched.processed,
            "deliveries": self.net.deliveries,
            "logged_events": self.logged_events,
            "publications": len(self._workload),
        }
        return SimResult(events, self.net.drop_table(), self.net.count_table(), stats)


def simulate(loaded: LoadedExperiment, seed: int | None = None, progress: Callable[[int], None] | None = None,
             build: BuildFn | None = None) -> SimResult:
    """Run ``loaded`` in the simulator; ``build`` replaces ``factories.build_core`` (tests, benchmarks)."""
    return Simulation(loaded, seed, build).run(progress)
