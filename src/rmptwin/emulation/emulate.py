"""`rmptwin run`: an experiment on the emulated network, every role its own process.

Brings the network up (``EmulatedNetwork``: Mininet + OVS + the controller, Docker or
namespace hosts; or the flat bridge network), starts ``rmptwin.node.main`` in every
host, waits until all have bound their sockets and joined their groups, starts the packet
captures, releases everyone at the same instant t0, applies the fault schedule while a
progress bar runs, lets the run drain past its duration until every message is
acknowledged, released and delivered (``node.drain``; a loaded machine falls behind
the schedule), then stops the nodes, collects and merges their logs and tears everything
down. ``emulate`` returns the tables (events, drops, link counts), what the manifest
records of the emulation and the runtime's figures; it writes no run-directory file and
computes no summary (``rmptwin.runner.pipeline`` does both). The nodes write their config,
logs and captures where the ``RunDir`` says.

Node control (``GO``, ``STOP``, what a node prints back): ``emulation.nodeproc``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from rmptwin import corebuild
from rmptwin.core import nemesis
from rmptwin.core.groups import group_ip
from rmptwin.core.host import RELEASE_ROLES, TimeDilation
from rmptwin.core.nemesis import FaultInterpreter, Step
from rmptwin.emulation import server_files
from rmptwin.emulation.authorized import authorized_senders
from rmptwin.emulation.containerstats import ContainerStatsSampler
from rmptwin.emulation.dilation import dilated_topology, rewrite_pcap_times
from rmptwin.emulation.droplog import read_access_reports, rebased
from rmptwin.emulation.edge_drops import log_edge_drops
from rmptwin.emulation.emulated_faults import EmulatedFaults
from rmptwin.emulation.flatnet import FlatNetwork
from rmptwin.emulation.hostload import LoadSampler, overload_verdict, run_lateness
from rmptwin.emulation.joins import wait_for_joins
from rmptwin.emulation.nodeproc import READY_TIMEOUT_S, NodeProc, Spares, read_output, wait_for_line
from rmptwin.emulation.run_facts import check_arguments, default_capture, emulation_facts
from rmptwin.emulation.servers import resolve as resolve_servers
from rmptwin.errors import UserError
from rmptwin.factories.keys import key_path, load_keys
from rmptwin.model import LoadedExperiment
from rmptwin.model.queries import edge_plan, stripe_count
from rmptwin.node import event_loop as event_loops
from rmptwin.node.drain import DRAIN_MAX_S, owed_stripes, quiescent
from rmptwin.node.eventlog import EventWriter, merge_logs
from rmptwin.node.node_config import NodeConfig
from rmptwin.node.priority import ReleasePriority
from rmptwin.records.tables import DROP_SCHEMA
from rmptwin.rundir.run import NODE_FILES, RunDir

if TYPE_CHECKING:
    from rmptwin.emulation.emulated_network import EmulatedNetwork  # imported when a switched network is built

REPO = Path(__file__).resolve().parents[3]
SETTLE_S = 1.0           # after the controller saw every join: its flow mods land before t0
TREES_TIMEOUT_S = 60.0
QUERY_AFTER_S = 2.0      # no join for this long (times the dilation) while some are missing: ask the hosts
CAPTURE_PORTS = "udp"    # everything UDP: RMP, remulticast and re-requests
# Per Docker host. A node is one busy Python thread: one CPU never throttles it, yet a
# runaway node cannot take both CPUs from the release path; 512 MB is ~10x a node's use.
HALT_WAIT_S = 2.0   # for every node's HALTED before any is stopped
NODE_CPUS = 1.0
NODE_MEMORY_MB = 512



@dataclass
class EmulationResult:
    """What an emulated run produced, for ``runner.pipeline`` to write and summarize."""

    events: pa.Table
    drops: pa.Table
    link_counts: pa.Table
    manifest: dict[str, Any]      # the manifest's emulation keys: nodes, impair, capture, faults applied, t0, pcaps
    environment: dict[str, Any]   # emulation_facts: node mode, impairment backend, datapath, image
    stats: dict[str, Any]         # summary.json's "runtime": wall time, drain, torn log lines, node counters


class EmulatedRun(EmulatedFaults):
    """One emulated run; ``execute()`` does everything and returns the tables. Its faults
    reach the nodes and links through ``EmulatedFaults`` (core.nemesis's FaultTarget)."""

    def __init__(self, loaded: LoadedExperiment, seed: int, run_dir: RunDir, nodes: str = "docker",
                 impair: str = "auto", capture: list[str] | None = None,
                 progress: Callable[[float, str], None] | None = None, settle_s: float = SETTLE_S,
                 cpus: float | None = NODE_CPUS, memory_mb: int | None = NODE_MEMORY_MB,
                 event_loop: str = event_loops.DEFAULT, servers: tuple[str, ...] = (),
                 placement: str = "regions") -> None:
        self.event_loop = event_loop   # checked by run_facts.check_arguments
        self.server_names, self.placement = servers, placement
        self.loaded = loaded
        self.exp = loaded.experiment
        self.dilation = TimeDilation(loaded.time_dilation)   # the nodes dilate their own clocks
        self.seed = seed
        self.run = RunDir(run_dir.path.resolve())
        self.nodes_mode = nodes
        self.impair = impair
        self.capture = capture if capture is not None else default_capture(loaded)
        self.progress = progress or (lambda frac, msg: None)
        self.settle_s = settle_s
        self.cpus, self.memory_mb = cpus, memory_mb
        self.priority = ReleasePriority(sum(1 for h in loaded.topology.hosts if h.role in RELEASE_ROLES))
        self.boosted: dict[str, str] = {}  # release-path node -> what the runner got for it
        self.load = LoadSampler()
        self.container_stats: ContainerStatsSampler | None = None   # Docker hosts only, once they run
        self.procs: dict[str, NodeProc] = {}
        self.spares = Spares(None, {})   # replaced in _start_nodes
        self.captures: list[subprocess.Popen[bytes]] = []
        self.t0: int | None = None
        self.net: EmulatedNetwork | FlatNetwork | None = None
        self.faults_applied: list[dict[str, Any]] = []
        self.faults = FaultInterpreter(loaded.topology, self)   # calls the FaultTarget methods below
        self.paused: dict[str, int] = {}      # node -> when it was stopped (SIGSTOP)
        self.runner_log: EventWriter | None = None   # the runner's own events (faults), from t0 on
        self.hosts: dict[str, str] = {}   # host name -> IP, once the network is up
        self.missing_joins: list[str] = []
        self.igmp_queries = 0     # general queries the runner asked the controller for (_wait_trees)
        self.drain_s = 0.0
        self.outstanding = ""
        self.torn_lines = 0
        self.cross_server: dict[str, Any] = {}
        self.collected = False   # the files of servers that have their own (server_files) are here

    # ------------------------------------------------------------------ network

    def _network(self) -> EmulatedNetwork | FlatNetwork:
        if self.nodes_mode == "flat":
            bad = [f for f in self.exp.faults if f.action in ("link_down", "link_up", "loss", "partition", "flap",
                                                              "dup_reorder")]
            if bad:
                raise UserError(f"fault '{bad[0].action}' needs link impairment; run with --nodes ns or docker")
            return FlatNetwork(self.loaded.topology, tag=str(os.getpid() % 100000))
        from rmptwin.emulation.emulated_network import EmulatedNetwork  # Mininet: loaded only for a switched network

        if any(f.action == "dup_reorder" for f in self.exp.faults):
            # duplicates and reordering come from the shared link model: only the relay runs it
            if self.impair == "netem":
                raise UserError("fault 'dup_reorder' needs the relay; run with --impair relay (or auto)")
            self.impair = "relay"

        mounts = [(str(REPO), str(REPO), "ro"), (str(self.run.path), str(self.run.path), "rw")]
        if self.exp.security.enabled:   # the key file, read-only, at the path NodeConfig.keys_file names
            keys = str(key_path(self.loaded))
            mounts.append((keys, keys, "ro"))
        # A state directory of our own: a network some other tool left up elsewhere is not ours to claim.
        state = Path("/run/rmptwin") / f"run-{os.getpid()}"
        # The network runs on the wall clock: its links dilated, so that in virtual time they are the configured ones.
        return EmulatedNetwork(dilated_topology(self.loaded.topology, self.dilation.factor), nodes=self.nodes_mode, impair=self.impair, seed=self.seed,
                               state_dir=state, mounts=mounts, progress=lambda msg: self.progress(0.0, msg),
                               cpus=self.cpus, memory_mb=self.memory_mb, access_in_nodes=self._access_in_nodes(),
                               authorized=self._authorized() if self.exp.security.enabled else None,
                               servers=resolve_servers(list(self.server_names)) if self.server_names else (),
                               placement=self.placement)

    def _authorized(self) -> dict[str, frozenset[str]]:
        """Seed 6: only secure runs restrict senders; edge stripes (seed 4.4) are sent to by the
        R_T of their core stripe."""
        plan = edge_plan(self.loaded)
        return authorized_senders(self.loaded.topology, stripe_count(self.loaded),
                                  plan.core_of if plan is not None else None)

    def _access_in_nodes(self) -> frozenset[str]:
        """The hosts whose node may shape its own access link (the network keeps a relay for
        those that lose or jitter): all but those a link fault changes mid-run, which only a
        relay can take."""
        changed = {f.link for f in self.exp.faults if f.link}
        return frozenset(h.name for h in self.loaded.topology.hosts
                         if not {f"{h.name}-{h.switch}", f"{h.switch}-{h.name}"} & changed)

    # ------------------------------------------------------------------ nodes

    def _node_config(self, t0_ns: int | None = None) -> NodeConfig:
        """What every node starts from (a recovering one with t0 given)."""
        return NodeConfig.for_run(self.loaded, self.seed, self.hosts, self.run.nodes_dir, NODE_FILES, t0_ns=t0_ns,
                                  state_dir=self.run.venue_state_dir,
                                  access_in_node=getattr(self.net, "access_in_nodes", frozenset()),
                                  event_loop=self.event_loop)

    def _start_node(self, name: str, config: Path, incarnation: int, spare: bool = False) -> NodeProc:
        assert self.net is not None   # up
        host = self.net.host(name)
        err = open(self.run.node_stderr_path(name, incarnation), "wb")
        env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED": "1",
               "HOME": "/tmp", **corebuild.child_env()}   # the nodes run the cores this process runs
        cmd = [sys.executable, "-m", "rmptwin.node.main", str(config), name, "--incarnation", str(incarnation)]
        cmd += ["--spare"] if spare else []
        proc = host.popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd="/")
        err.close()
        np = NodeProc(name, self.loaded.topology.host(name).role, incarnation, proc)
        if host.remote:
            pass   # its server's scheduler: proc is the SSH client here
        elif np.role in RELEASE_ROLES:
            self.boosted[name] = self.priority.boost(proc.pid)  # popen's pid is the node's own (mnexec execs it)
        elif np.role == "source":
            self.boosted[name] = self.priority.favour(proc.pid)  # keeps the ticker's schedule under load
        threading.Thread(target=read_output, args=(np,), daemon=True).start()
        return np

    def _start_captures(self) -> None:
        assert self.net is not None   # up
        for name in self.capture:
            host = self.net.host(name)
            p = host.popen(["tcpdump", "-i", host.intf, "-U", "-n", "-w", str(self.run.pcap_path(name)), CAPTURE_PORTS],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.captures.append(p)
        time.sleep(0.5 if self.captures else 0)  # tcpdump opens its socket before t0

    def _stop_captures(self) -> None:
        for p in self.captures:
            if p.poll() is None:
                p.terminate()
        for p in self.captures:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._collect()   # servers' captures and logs, now complete, here
        if self.captures and self.t0 is not None:   # the kernel stamped them on the wall clock
            for path in self.run.pcap_files():
                rewrite_pcap_times(path, self.t0, self.dilation.factor)

    def _stage(self, config: Path) -> None:
        """The node config (and a secure run's key file) on servers with files of their own."""
        files = [config, *([key_path(self.loaded)] if self.exp.security.enabled else [])]
        for server in server_files.apart(getattr(self.net, "servers", ())):
            server_files.push(server, files, [self.run.nodes_dir, self.run.pcaps_dir, self.run.venue_state_dir])

    def _collect(self) -> None:
        if self.net is not None and not isinstance(self.net, FlatNetwork):   # flat: all on this machine
            self.net.collect([self.run.nodes_dir, self.run.pcaps_dir])
        self.collected = True

    def t0_on(self, node: str) -> int:
        """The run's start in the clock of the server ``node`` runs on (this machine's: t0)."""
        assert self.t0 is not None and self.net is not None   # after GO
        return self.t0 + getattr(self.net.host(node), "clock_offset_ns", 0)

    def true_now(self) -> int:
        """Virtual ns since t0 (the nodes' true run time)."""
        assert self.t0 is not None   # after GO
        return self.dilation.virtual(time.time_ns() - self.t0)

    # ------------------------------------------------------------------ faults

    def _fault(self, step: Step) -> None:
        assert self.t0 is not None   # faults come after t0
        t = self.true_now()
        self.faults.apply(t, step)
        self.faults_applied.append({"t_ns": t, "action": step.action, "node": step.node, "link": step.link})

    # ------------------------------------------------------------------ run

    def execute(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        load_keys(self.loaded)   # security on and no key file: one line, before any network is built
        self.run.make_node_dirs()
        self.net = self._network()
        try:
            self.net.__enter__()
            return self._run()
        finally:
            try:
                self._teardown_nodes()
                if not self.collected:   # a failed run keeps what its servers wrote
                    with contextlib.suppress(UserError):
                        self._collect()
                for server in server_files.apart(getattr(self.net, "servers", ())):
                    server_files.remove(server, [self.run.path])
            finally:
                self.priority.restore()
                self.net.__exit__(None, None, None)
                state = getattr(self.net, "state_dir", None)
                if state is not None and state.name.startswith("run-"):
                    shutil.rmtree(state, ignore_errors=True)  # its drop logs are in links/ now

    def _run(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        assert self.net is not None   # execute() made it
        self._start_nodes()
        self._wait_trees()
        self._start_captures()
        self.t0 = time.time_ns() + int(self.settle_s * 1e9)
        for np in self.procs.values():
            np.send(f"GO {self.t0_on(np.name)}")
        self.runner_log = log = EventWriter(self.run.runner_log_path)
        self.load.start()
        self.container_stats = ContainerStatsSampler(getattr(self.net, "containers_by_host", dict)()).start()
        try:
            try:
                self._apply_schedule()
                self._drain()
            finally:
                self.load.stop()
            self.progress(1.0, "collecting")
            # The nodes first: closing 31 stats streams keeps dockerd busy for a moment, and a node
            # still running then fired its timers up to 0.5 s late (measured at TDF 3, customers).
            self._stop_nodes()
        finally:
            self.container_stats.stop()
        self._stop_captures()
        log_edge_drops(self.net, log, self.true_now())
        log.close()
        events, self.torn_lines = merge_logs(self.run.node_event_logs())
        # The relays count from the network's start; the events (and the nodes' own access links) from t0.
        net_t0 = getattr(self.net, "t0_ns", self.t0)
        frames, access_counts = read_access_reports(self.run.access_link_reports(), self.t0 - net_t0,
                                                    self.dilation.factor)
        drops = rebased(self.net.drops(frames), net_t0, self.t0, self.dilation.factor)
        counts = self.net.link_counts(access_counts)
        self.cross_server = getattr(self.net, "cross_server_datagrams", dict)()   # before the tunnels go
        return events, drops, counts

    def _start_nodes(self) -> None:
        """Every node started from one config, and each READY (bound, joined)."""
        topo = self.loaded.topology
        assert self.net is not None   # up
        self.hosts = {h.name: self.net.host(h.name).ip for h in topo.hosts}
        path = self._node_config().write(self.run.node_config_path())
        self._stage(path)
        self._static_neighbours()
        self.progress(0.0, f"starting {len(topo.hosts)} nodes")
        for h in topo.hosts:
            self.procs[h.name] = self._start_node(h.name, path, 0)
        recovers = cast("Counter[str]",   # a recover step names its node
                        Counter(f.node for f in nemesis.steps(self.exp.faults) if f.action == "recover"))
        self.spares = Spares(lambda name, inc: self._start_node(name, path, inc, spare=True), recovers)
        spares = [np for name in recovers if (np := self.spares.prepare(name, 1)) is not None]
        deadline = time.monotonic() + READY_TIMEOUT_S
        for i, np in enumerate(self.procs.values()):
            wait_for_line(np, "READY", deadline, self.run.node_stderr_path(np.name, 0))
            self.spares.hold(np.name, np.groups)   # a crash withdraws no membership (node.main)
            self.progress(0.0, f"nodes ready {i + 1}/{len(self.procs)}")
        for np in spares:   # imported before t0, not in the middle of the run
            wait_for_line(np, "SPARE", deadline, self.run.node_stderr_path(np.name, np.incarnation))

    def _apply_schedule(self) -> None:
        """From t0 to the end of the duration: each fault at its time, the progress meanwhile."""
        assert self.t0 is not None   # set before the schedule starts
        duration = self.loaded.duration_s
        faults = sorted(nemesis.steps(self.exp.faults), key=lambda f: f.at_ns)
        wall = self.dilation.wall   # virtual ns since t0 -> wall ns since t0
        end_ns = self.t0 + wall(round(duration * 1e9))
        while True:
            now = time.time_ns()
            if faults and now >= self.t0 + wall(faults[0].at_ns):
                self._fault(faults.pop(0))
                continue
            if now >= end_ns:
                break
            self.progress(max(0.0, self.true_now() / 1e9) / duration, "running")
            nxt = min([end_ns] + [self.t0 + wall(f.at_ns) for f in faults[:1]])
            time.sleep(min(0.1, max(0.0, (nxt - now) / 1e9)))

    def _stop_nodes(self) -> None:
        """HALT to every live node (each stops timing its timers; ``nodeproc``), then STOP, and
        time for them to flush their logs."""
        live = [np for np in self.procs.values() if np.proc.poll() is None]
        for np in live:
            np.send("HALT")
        halt_by = time.monotonic() + HALT_WAIT_S
        while time.monotonic() < halt_by and not all(np.halted or np.proc.poll() is not None for np in live):
            time.sleep(0.01)
        for np in live:
            if np.proc.poll() is None:
                np.send("STOP")
        limit = time.monotonic() + 30
        for np in self.procs.values():
            try:
                np.proc.wait(timeout=max(0.1, limit - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass

    def _drain(self) -> None:
        """Past the duration: wait until the live nodes' progress is quiescent, or the cap."""
        owes = owed_stripes(self.loaded)
        end_ns = round(self.loaded.duration_s * 1e9)
        start = time.monotonic()
        while True:
            running = {n: np for n, np in self.procs.items() if np.proc.poll() is None}
            # Only statuses written after the end count: an older one may predate a last send. A
            # node reports only from the end on (node.main), so one that has not yet is not done
            # either (counting it out let a cut-short line3 end with 6 messages in repair, in CI).
            stale = next((n for n, np in running.items()
                          if np.status is None or np.status.get("t_ns", 0) < end_ns), None)
            live = {n: np.status for n, np in running.items() if np.status is not None}
            done, self.outstanding = (False, f"{stale} has not reported since the end") if stale else \
                quiescent(live, owes)
            self.drain_s = time.monotonic() - start
            if done or self.drain_s > DRAIN_MAX_S * self.dilation.factor:
                return
            self.progress(1.0, f"draining {self.drain_s:.0f} s: {self.outstanding}")
            time.sleep(0.25)

    def _static_neighbours(self) -> None:
        """Permanent ARP entries for every other host. Linux resolves a lost ARP request only
        after a second, and meanwhile holds the unicast behind it: on a lossy access link a
        NACK or a MoldUDP64 re-request would wait for ARP instead of the protocol's timers."""
        assert self.net is not None   # up
        macs = {}
        for name in self.hosts:
            node = getattr(self.net.host(name), "node", None)
            if node is None or not hasattr(node, "MAC"):
                return  # the flat network: no loss, ARP is harmless
            macs[name] = node.MAC()
        for name, ip in self.hosts.items():
            host = self.net.host(name)
            cmds = [f"ip neigh replace {other_ip} lladdr {macs[other]} dev {host.intf} nud permanent"
                    for other, other_ip in self.hosts.items() if other != name and macs[other]]
            host.cmd("; ".join(cmds))

    def _wait_trees(self, timeout_s: float = TREES_TIMEOUT_S) -> None:
        """Until the controller has seen every node's IGMP join (its trees then include them);
        lost reports are asked for again (``joins.wait_for_joins``)."""
        state_of = getattr(self.net, "controller_state", None)
        ask_hosts = getattr(self.net, "request_igmp_query", None)
        if state_of is None or ask_hosts is None:
            return
        want = {(group_ip(g), np.name) for np in self.procs.values() for g in np.groups}
        found = wait_for_joins(state_of, ask_hosts, want, timeout_s=timeout_s,
                               query_after_s=QUERY_AFTER_S * self.dilation.factor,
                               on_progress=lambda n, of: self.progress(0.0, f"multicast trees: {n}/{of} joins"))
        self.igmp_queries += found.queries
        self.missing_joins = sorted(f"{n}:{ip}" for ip, n in found.missing)

    def _teardown_nodes(self) -> None:
        self.spares.close()
        for np in self.procs.values():
            if np.proc.poll() is None:
                np.send("STOP")
        for np in self.procs.values():
            try:
                np.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                np.proc.kill()
                np.proc.wait()
        self._stop_captures()


def emulate(loaded: LoadedExperiment, seed: int, run_dir: RunDir, nodes: str = "docker", impair: str = "auto",
            capture: list[str] | None = None, progress: Callable[[float, str], None] | None = None,
            cpus: float | None = NODE_CPUS, memory_mb: int | None = NODE_MEMORY_MB,
            event_loop: str = event_loops.DEFAULT, servers: tuple[str, ...] = (),
            placement: str = "regions") -> EmulationResult:
    """Run ``loaded`` on the emulated network; the nodes leave their logs and captures in ``run_dir``.
    ``cpus`` and ``memory_mb`` limit each Docker host (None: unlimited); ``event_loop`` is the
    nodes' asyncio loop (``node.event_loop``)."""
    check_arguments(loaded, nodes, capture, event_loop)
    wall = time.monotonic()
    r = EmulatedRun(loaded, seed, run_dir, nodes=nodes, impair=impair, capture=capture, progress=progress,
            cpus=cpus, memory_mb=memory_mb, event_loop=event_loop, servers=servers, placement=placement)
    events, drops, counts = r.execute()
    # `rmptwin rerun` passes nodes, the impairment actually used, capture and limits back here.
    limits = {"cpus": cpus, "memory_mb": memory_mb} if nodes == "docker" else None
    manifest = {"nodes": nodes, "impair": getattr(r.net, "impair", impair), "impair_requested": impair,
                "capture": list(r.capture), "limits": limits, "faults_applied": r.faults_applied,
                "t0_unix_ns": r.t0, "pcaps": [p.name for p in r.run.pcap_files()],
                "time_dilation": r.dilation.factor, "event_loop": event_loop,
                # delay-only access links shaped by their host's node, not a relay (node.hostlink)
                "access_links_in_nodes": sorted(getattr(r.net, "access_in_nodes", ()))}
    if servers:
        placed = getattr(r.net, "placement", None)
        manifest.update(servers=list(servers), placement=placed.to_json() if placed else None,
                        server_clocks={n: c.to_json() for n, c in getattr(r.net, "clocks", {}).items()})
        on_servers: dict[str, list[str]] = getattr(r.net, "server_containers", {})
        if on_servers:   # Docker hosts: the containers each server's engine (over SSH) ran
            manifest["server_containers"] = {n: sorted(c) for n, c in on_servers.items()}
    stats = {"wall_s": round(time.monotonic() - wall, 1), "nodes": nodes, "time_dilation": r.dilation.factor,
             "drain_s": round(r.drain_s, 2), "outstanding": r.outstanding or None,
             "torn_log_lines": r.torn_lines, "missing_joins": r.missing_joins, "igmp_queries": r.igmp_queries,
             "node_counters": {n: np.done for n, np in r.procs.items()},
             "limits": limits,
             "release_priority": r.boosted,
             **({"cross_server": r.cross_server} if servers else {}),
             **overload_verdict(r.load.samples, run_lateness(events), cpu_use=r.load.busy_cpus())}
    if r.container_stats is not None and r.container_stats.containers:
        stats["container_stats"] = r.container_stats.figures()   # per Docker host: CPU and memory over the run
    return EmulationResult(events, drops if drops is not None else DROP_SCHEMA.empty_table(), counts,
                           manifest, emulation_facts(nodes, r.net), stats)
