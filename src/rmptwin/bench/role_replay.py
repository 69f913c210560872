"""What a role's own work costs per datagram, without the emulated host around it.

Each host of an experiment gets, in one process, exactly the datagrams the simulator delivered
to it, at their simulated times, and its timers fire at their deadlines in between: through a
``NodeDriver`` with the real core (the build that runs: compiled when it is), the real event
log (on disk) and the drain's progress bookkeeping, but no socket, no event loop and no access
link (sends are counted, not made). The CPU of that replay over the datagrams received and
sent is the role's work per datagram; what an emulated node spends beyond it (and beyond a
bare loop's cost per wake-up, ``bench_datapath``) is its host: wake-ups, system calls, the
kernel's path to the switch, the event loop.

The venue roles are not replayed: their cores need their durable stores and the sequencer
an etcd cluster.
"""

from __future__ import annotations

import heapq
import random
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rmptwin.core.groups import host_ip
from rmptwin.factories import build_core
from rmptwin.factories.ticker_workload import schedule
from rmptwin.model import LoadedExperiment
from rmptwin.node.driver import NodeDriver
from rmptwin.node.eventlog import EventWriter
from rmptwin.sim.simulate import Simulation

RMP_ROLES = frozenset({"source", "primary", "secondary", "retransmit", "reformation", "customer"})
Arrival = tuple[int, bytes, str]   # (true ns, datagram, sender's name)


@dataclass(frozen=True)
class RoleCost:
    hosts: int
    datagrams: int    # received + sent, as planning.demand counts a node's
    cpu_s: float

    @property
    def us_per_datagram(self) -> float:
        return self.cpu_s * 1e6 / self.datagrams if self.datagrams else float("nan")


def simulated_arrivals(loaded: LoadedExperiment) -> dict[str, list[Arrival]]:
    """Every datagram the simulator delivered to each host, in order (a sender never hears itself)."""
    sim = Simulation(loaded, None)
    names = list(sim.net.host_names)
    out: dict[str, list[Arrival]] = defaultdict(list)

    def arrived(t: int, sender: int, data: bytes, group: str, hosts: list[int]) -> None:
        for h in hosts:
            if h != sender:
                out[names[h]].append((t, bytes(data), names[sender]))

    sim.net.arrival_tap = arrived
    sim.run()
    return out


class _Replayed(NodeDriver):
    """A driver with no sockets: group changes are noted, datagrams counted instead of sent."""

    def _membership(self, name: str, join: bool) -> None:
        """No socket to join on."""

    def _sendto(self, data: bytes, addr: tuple[str, int]) -> None:
        self.sent += 1


class _HostReplay:
    """One host's replay, a step at a time: the earliest of its core's timer, its next arrival and
    its next publication (a source's, at its time, as node.main schedules them)."""

    def __init__(self, loaded: LoadedExperiment, name: str, arrivals: list[Arrival], log_dir: Path) -> None:
        host = loaded.topology.host(name)
        seed = loaded.experiment.seed
        self.core = core = build_core(host, loaded, random.Random(f"{seed}:host:{name}:start"))   # node.main's seed
        hosts = {n.name: host_ip(i) for i, n in enumerate(loaded.topology.hosts)}
        self.log = EventWriter(log_dir / f"{name}.jsonl")
        self.d = _Replayed(core, name, host.role, hosts, 0, self.log,
                           guaranteed=host.role == "customer" and host.grade == "guaranteed")
        self.end = round(loaded.duration_s * 1e9)   # the run's length, auto resolved (as the simulator's end_ns)
        self.arrivals, self.i, self.j = arrivals, 0, 0
        self.publish = getattr(core, "publish", None)
        self.pubs = [(p.t_ns, p.stripe, p.payload) for p in schedule(loaded, seed) if p.source == name] \
            if self.publish is not None else []
        self.d.after(0)

    def next_t(self) -> int | None:
        """True time of this host's next step; None when it has nothing left."""
        due = self.core.get_timer()
        times = [t for t in (due if due is not None and due <= self.end else None,
                             self.arrivals[self.i][0] if self.i < len(self.arrivals) else None,
                             self.pubs[self.j][0] if self.j < len(self.pubs) else None) if t is not None]
        return min(times) if times else None

    def step(self) -> None:
        core, d = self.core, self.d
        due = core.get_timer()
        t_in = self.arrivals[self.i][0] if self.i < len(self.arrivals) else None
        t_pub = self.pubs[self.j][0] if self.j < len(self.pubs) else None
        if due is not None and due <= self.end and (t_in is None or due <= t_in) and (t_pub is None or due <= t_pub):
            core.handle_timer(due)
            d.after(due, due)
        elif t_pub is not None and self.publish is not None and (t_in is None or t_pub <= t_in):
            t, stripe, payload = self.pubs[self.j]
            self.j += 1
            self.publish(stripe, payload, t)
            d.after(t)
        elif t_in is not None:
            t, data, src = self.arrivals[self.i]
            self.i += 1
            d.received += 1
            core.receive_datagram(data, src, t)
            d._log_events(t)
            d.after(t)

    @property
    def datagrams(self) -> int:
        return self.d.received + self.d.sent


def replay_host(loaded: LoadedExperiment, name: str, arrivals: list[Arrival], log_dir: Path) -> tuple[int, float]:
    """(datagrams received + sent, CPU s) of host ``name`` replaying ``arrivals``."""
    r = _HostReplay(loaded, name, arrivals, log_dir)
    cpu0 = time.process_time()
    while r.next_t() is not None:
        r.step()
    cpu = time.process_time() - cpu0
    r.log.close()
    return r.datagrams, cpu


def replay_gathered(loaded: LoadedExperiment) -> RoleCost:
    """Every RMP host of the experiment replayed in one process, their steps interleaved in true
    time as one event loop serving all of them would take them: the work of a node process that
    gathers hosts (``bench_crowd``), with the real cores, over all its datagrams."""
    arrivals = simulated_arrivals(loaded)
    with tempfile.TemporaryDirectory(prefix="rmptwin-replay-") as tmp:
        hosts = [_HostReplay(loaded, h.name, arrivals.get(h.name, []), Path(tmp))
                 for h in loaded.topology.hosts if h.role in RMP_ROLES]
        cpu0 = time.process_time()
        ready = [(t, k) for k, h in enumerate(hosts) if (t := h.next_t()) is not None]
        heapq.heapify(ready)
        while ready:
            _, k = heapq.heappop(ready)
            hosts[k].step()
            t = hosts[k].next_t()
            if t is not None:
                heapq.heappush(ready, (t, k))
        cpu = time.process_time() - cpu0
        for h in hosts:
            h.log.close()
    return RoleCost(len(hosts), sum(h.datagrams for h in hosts), cpu)


def role_costs(loaded: LoadedExperiment) -> dict[str, RoleCost]:
    """Each RMP role's replayed work per datagram over every host of that role."""
    arrivals = simulated_arrivals(loaded)
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    with tempfile.TemporaryDirectory(prefix="rmptwin-replay-") as tmp:
        for h in loaded.topology.hosts:
            if h.role not in RMP_ROLES:
                continue
            n, cpu = replay_host(loaded, h.name, arrivals.get(h.name, []), Path(tmp))
            s = sums[h.role]
            s[0] += 1
            s[1] += n
            s[2] += cpu
    return {role: RoleCost(int(k), int(n), cpu) for role, (k, n, cpu) in sums.items()}
