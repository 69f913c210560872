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


def replay_host(loaded: LoadedExperiment, name: str, arrivals: list[Arrival], log_dir: Path) -> tuple[int, float]:
    """(datagrams received + sent, CPU s) of host ``name`` replaying ``arrivals``."""
    host = loaded.topology.host(name)
    seed = loaded.experiment.seed
    core = build_core(host, loaded, random.Random(f"{seed}:host:{name}:start"))   # node.main's seed string
    hosts = {n.name: host_ip(i) for i, n in enumerate(loaded.topology.hosts)}
    log = EventWriter(log_dir / f"{name}.jsonl")
    d = _Replayed(core, name, host.role, hosts, 0, log, guaranteed=host.role == "customer" and host.grade == "guaranteed")
    end = round(loaded.duration_s * 1e9)   # the run's length, auto resolved (as the simulator's end_ns)
    # A source's publications at their times, as node.main schedules them: (t, stripe, payload).
    pubs = [(p.t_ns, p.stripe, p.payload) for p in schedule(loaded, seed) if p.source == name]
    publish = getattr(core, "publish", None)
    cpu0 = time.process_time()
    d.after(0)
    i = j = 0
    while True:
        # the earliest of: the core's timer, the next arrival, the next publication
        due = core.get_timer()
        t_in = arrivals[i][0] if i < len(arrivals) else None
        t_pub = pubs[j][0] if j < len(pubs) and publish is not None else None
        if due is not None and due <= end and (t_in is None or due <= t_in) and (t_pub is None or due <= t_pub):
            core.handle_timer(due)
            d.after(due, due)
        elif publish is not None and t_pub is not None and (t_in is None or t_pub <= t_in):
            t, stripe, payload = pubs[j]
            j += 1
            publish(stripe, payload, t)
            d.after(t)
        elif t_in is not None:
            t, data, src = arrivals[i]
            i += 1
            d.received += 1
            core.receive_datagram(data, src, t)
            d._log_events(t)
            d.after(t)
        else:
            break
    cpu = time.process_time() - cpu0
    log.close()
    return d.received + d.sent, cpu


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
