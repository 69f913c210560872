"""`EmulatedNetwork`: a spec ``Topology`` as a live Mininet network.

Mininet builds the topology from ``topo.RmpTopo`` (switches, hosts, links, and a relay
node per impaired link on the relay backend) with Open vSwitch switches (kernel datapath
where the module exists, else userspace) and hosts as plain namespaces or Docker
containers. Around that build this module runs what stock Mininet does not: the rmptwin
controller (os-ken, multicast trees from IGMP), the relay processes or netem qdiscs of the
impaired links, host settings, and the bookkeeping that lets cleanup undo it all.

Names on the machine carry the project's marks so cleanup can find them after a crash,
and a per-network tag k so several networks can be up at once: switches ``r<k>s<N>``,
relay namespaces ``r<k>l<N>`` with interfaces ``r<k>l<N>a``/``b``, containers labelled
``rmptwin.net``; ``state_dir/net.json`` lists what was made.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rmptwin.core.groups import host_ip
from rmptwin.emulation import cluster, server_files
from rmptwin.emulation import env as envmod
from rmptwin.emulation.cleanup import claim_tag, cleanup_state_dir, register_state_dir
from rmptwin.emulation.emuhost import EmuHost, configure_host
from rmptwin.emulation.flows import DEFAULT_METER_PPS, QUERY_REQUEST, Wiring, authorized_by_ip, known_group_names
from rmptwin.emulation.image import ensure_image
from rmptwin.emulation.impair import NetemLink, RelayLink, impair_for_traces
from rmptwin.emulation.network_links import LinkControl
from rmptwin.emulation.placement import Placement, place
from rmptwin.emulation.server_engines import EngineTunnels
from rmptwin.emulation.servers import Server, ServerClock, measure_clock
from rmptwin.errors import UserError
from rmptwin.model import Topology, load_topology
from rmptwin.node.local_ports import free_local_ports

if TYPE_CHECKING:   # topo subclasses Mininet's classes; mininet is imported only to build
    from mininet.net import Mininet  # Mininet is untyped: Any to mypy

    from rmptwin.emulation.topo import ImpairedLink, RmpTopo

REPO = Path(__file__).resolve().parents[3]
CONTROLLER_LAUNCH = REPO / "controllers" / "launch.py"
DEFAULT_STATE_DIR = Path("/run/rmptwin/net")


def link_aliases(topo: Topology) -> dict[str, str]:
    """Other spellings of link names: ``b-a`` for the switch link ``a-b``, ``switch-host``
    for a host's access link ``host-switch``."""
    aliases = {f"{lk.b}-{lk.a}": lk.name for lk in topo.links}
    aliases.update({f"{h.switch}-{h.name}": f"{h.name}-{h.switch}" for h in topo.hosts})
    return aliases


class EmulatedNetwork(LinkControl):
    def __init__(
        self,
        topology: Topology | str | Path,
        nodes: str = "ns",
        impair: str = "auto",
        seed: int = 1,
        state_dir: str | Path | None = None,
        *,
        igmp_version: int | dict[str, int] | None = None,
        meter_pps: int = DEFAULT_METER_PPS,
        authorized: dict[str, frozenset[str]] | None = None,
        cpus: float | None = None,
        memory_mb: int | None = None,
        mounts: list[tuple[str, str, str]] | None = None,
        progress: Callable[[str], None] | None = None,
        access_in_nodes: frozenset[str] = frozenset(),
        servers: Sequence[Server] = (),
        placement: str = "regions",
    ) -> None:
        self.topo = topology if isinstance(topology, Topology) else load_topology(topology)
        if nodes not in ("ns", "docker"):
            raise UserError(f"unknown node mode {nodes!r}; choose ns or docker")
        if impair not in ("auto", *envmod.IMPAIR_BACKENDS):
            raise UserError(f"unknown impairment backend {impair!r}; choose auto, {', '.join(envmod.IMPAIR_BACKENDS)}")
        # Several servers (emulation.cluster): hosts (namespaces, or containers in each server's
        # engine) and relays start over SSH; the relay's impairment crosses a tunnel, netem's cannot.
        self.servers = list(servers)
        self.engines: EngineTunnels | None = None   # each server's Docker engine, for Docker hosts there
        if nodes == "docker" and any(s.isolated for s in self.servers):
            raise UserError("Docker hosts on isolated local servers would mount this machine's files, not the "
                            "server's (they share this machine's Docker engine): use local servers without "
                            "--isolated, or real servers")
        if self.servers and impair == "netem":
            raise UserError("netem cannot impair a link that crosses servers: use --impair relay with --servers")
        self.placement_how = placement
        self.placement: Placement | None = None
        self.clocks: dict[str, ServerClock] = {}
        self.nodes_mode = nodes
        self.impair_requested = impair
        self.seed = seed
        self.state_dir = Path(state_dir) if state_dir else DEFAULT_STATE_DIR
        self.igmp_version = igmp_version
        self.meter_pps = meter_pps
        # group name -> the hosts the controller builds trees for (emulation.authorized); None: all
        self.authorized = authorized
        self.cpus, self.memory_mb, self.mounts = cpus, memory_mb, mounts or []
        self.progress = progress or (lambda msg: None)
        # Hosts asked to shape their own delay-only access link (node.hostlink); once built,
        # ``access_in_nodes`` is the set that got no relay for it (empty unless impair is relay).
        self.access_requested = frozenset(access_in_nodes)
        self.access_in_nodes: frozenset[str] = frozenset()
        self.net: Mininet | None = None
        self.env: envmod.MachineEnv | None = None
        self.impair: str | None = None
        self.links: dict[str, RelayLink | NetemLink] = {}
        self._aliases = link_aliases(self.topo)
        self.hosts: dict[str, EmuHost] = {}
        self.controller_proc: subprocess.Popen[bytes] | None = None
        self.containers: list[str] = []
        self.server_containers: dict[str, list[str]] = {}   # server -> the containers in its engine
        self.t0_ns = time.time_ns()
        self._stopped = False
        self.tag: int | None = None
        self.sw_name: dict[str, str] = {}
        self.mininet_topo: RmpTopo | None = None   # once the tag that names its nodes is claimed

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> EmulatedNetwork:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.stop()
        except UserError as e:
            if exc_type is None:
                raise
            # Do not hide the error that ended the run behind a teardown problem.
            self.progress(f"warning: {e}")

    def _record(self, **fields: Any) -> None:
        path = self.state_dir / "net.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(fields)
        path.write_text(json.dumps(data, indent=1))

    def start(self) -> None:
        envmod.require_root()
        self.env = envmod.detect()
        if not self.env.mininet:
            raise UserError("Mininet is not importable; run `make provision` (apt package mininet)")
        self.impair = envmod.choose_impair(impair_for_traces(self.impair_requested, self.topo), self.env)
        if self.servers:
            self.impair = "relay"   # netem's qdiscs sit on veths, and a link between servers is a tunnel
            self.placement = place(self.topo, [s.name for s in self.servers], self.placement_how)
            for line in self.placement.lines(self.topo):
                self.progress(line)
            # Each node is told the run's start in its own server's clock (emulate: GO, WAKE).
            self.clocks = {s.name: measure_clock(s) for s in self.servers}
        if self.nodes_mode == "docker":
            envmod.ensure_dockerd()   # before touching anything: a missing engine is one clear line
        envmod.ensure_ovs()
        # Before the tag is claimed: a stale net.json may name the very tag claim_tag hands out
        # next, and clearing it afterwards would delete the tag file just claimed.
        self._clear_stale_state_dir()
        self.tag = claim_tag()
        self.mininet_topo = self._mininet_topo()
        self.sw_name = self.mininet_topo.switch_names
        self._record_state_dir()
        if self.nodes_mode == "docker":
            self.image = ensure_image(progress=self.progress)
        if self.placement is not None:
            self._place()
        self.progress(f"building {self.topo.name}: {len(self.topo.switches)} switches, "
                      f"{len(self.topo.hosts)} hosts ({self.nodes_mode}), impairment {self.impair}, "
                      f"datapath {self.env.datapath}")
        self._build()
        assert self.net is not None   # _build made it
        self._start_controller()
        self.progress("starting switches")
        self.net.start()
        self._configure_hosts()
        # The simulator has no ARP. Resolve every host statically, so that a lost ARP frame on an
        # impaired link cannot silence a unicast flow for a second (the kernel drops what waits).
        self.net.staticArp()
        for link in self.links.values():
            if isinstance(link, RelayLink):
                link.start()
            else:
                # After net.start(), never before: OVSSwitch.batchStartup reconfigures every
                # TCLink from its TCLink parameters once the ports are added, which wiped the
                # Gilbert-Elliott loss and queue limits netem alone can express (a bursty link
                # configured at 13.6 % lost nothing in the VM).
                link.apply()
        for link in self.links.values():
            if isinstance(link, RelayLink):
                link.wait_ready()
        self._record(relay_pids=[lk.proc.pid for lk in self.links.values()
                                 if isinstance(lk, RelayLink) and lk.proc])
        self._wait_controller()
        self.progress("network up")

    def _clear_stale_state_dir(self) -> None:
        """Refuse a state directory whose owner still runs; undo what a dead owner left in it."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        register_state_dir(self.state_dir)
        net_json = self.state_dir / "net.json"
        if net_json.exists():
            try:
                owner = json.loads(net_json.read_text()).get("owner_pid")
            except ValueError:
                owner = None
            if owner and owner != os.getpid() and Path(f"/proc/{owner}").exists():
                raise UserError(f"a network is already up in {self.state_dir} (pid {owner}); "
                                f"run `rmptwin net down` first")
            cleanup_state_dir(self.state_dir)

    def _record_state_dir(self) -> None:
        assert self.mininet_topo is not None   # start() made it first
        (self.state_dir / "links").mkdir(parents=True, exist_ok=True)
        for f in (self.state_dir / "links").iterdir():
            f.unlink()
        self._record(owner_pid=os.getpid(), topology=self.topo.name, nodes=self.nodes_mode,
                     switches=sorted(self.sw_name.values()), hosts=[h.name for h in self.topo.hosts],
                     impair=self.impair, containers=[], started_ns=self.t0_ns, tag=self.tag,
                     link_nodes=self.mininet_topo.relay_nodes)

    def _place(self) -> None:
        """Each node's server into the topology; Docker hosts get their server's engine, reached
        over SSH (``server_engines``), which must answer and hold the node image."""
        assert self.mininet_topo is not None and self.placement is not None
        host_cls = None
        if self.nodes_mode == "docker":
            self.engines = EngineTunnels(self.servers, self.state_dir / "engines")
            try:
                self.engines.open(self.image)
            finally:   # cleanup after a crash stops them: they are SSH clients here
                self._record(engine_tunnel_pids=self.engines.pids)
            host_cls = partial(cluster.RemoteDockerHost, engines=dict(self.engines.base_url), **self._docker_options())
        cluster.place_nodes(self.mininet_topo, self.placement, host_cls)
        self._record(servers={s.name: {"ip": s.ip, "pids": [], "bridges": []} for s in self.servers},
                     placement=self.placement.to_json())

    def _mininet_topo(self) -> RmpTopo:
        from rmptwin.emulation.topo import RmpTopo  # subclasses Mininet's Topo: mininet is imported only to build

        topo = RmpTopo(self.topo, impair=self.impair, tag=self.tag, access_in_nodes=self.access_requested)
        self.access_in_nodes = topo.access_in_nodes
        return topo

    def _build(self) -> None:
        """Mininet builds ``RmpTopo``; then the impaired links get their handles and the
        controller its wiring."""
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch, RemoteController

        self.port = free_local_ports(1, "controller")[0]
        setLogLevel("error")  # Mininet warns about the controller we start just after
        topo = self.mininet_topo
        assert topo is not None and self.env is not None   # start() made both first
        if self.servers:
            self.net = cluster.mininet_cluster(topo, self.servers, self.env.datapath)
        else:
            switch_cls = partial(OVSSwitch, datapath=self.env.datapath, protocols="OpenFlow13", failMode="secure")
            self.net = Mininet(topo=topo, switch=switch_cls, host=self._host_class(), controller=None, build=False,
                               autoSetMacs=False, autoStaticArp=False, waitConnected=False)
        self.net.addController(RemoteController("c0", ip=self.controller_ip, port=self.port))
        self.progress("building")
        with cluster.hangup_default():   # every node's shell (and SSH client) is started here
            self.net.build()
        self.links = {name: self._impaired_link(lk) for name, lk in topo.impaired.items()}
        if self.servers:
            self._record(servers=cluster.server_records(self.net, self.servers, self.topo, topo),
                         ssh_pids=cluster.ssh_client_pids(self.net))
        else:
            self._record(host_pids=[self.net.get(h.name).pid for h in self.topo.hosts],
                         link_node_pids=[self.net.get(n).pid for n in topo.relay_nodes])
        # The shells Mininet keeps here for the controller node and local switches: after a crash
        # nothing else names them (a switch's bridge goes with net down, its shell did not).
        self._record(shell_pids=[n.pid for n in (*self.net.controllers, *self.net.switches)
                                 if not cluster.is_remote(n) and n.pid])
        self.wiring = Wiring(self.topo, {s: i + 1 for i, s in enumerate(self.topo.switches)}, topo.switch_ports,
                             topo.host_ports, known_group_names(self.topo), self.meter_pps,
                             None if self.authorized is None else authorized_by_ip(self.authorized))
        (self.state_dir / "wiring.json").write_text(json.dumps(self.wiring.to_json(), indent=1))

    def _host_class(self) -> Any:   # Mininet's Host class, or DockerHost with its options bound
        if self.nodes_mode != "docker":
            from mininet.node import Host

            return Host
        from rmptwin.emulation.dockerhost import DockerHost

        return partial(DockerHost, **self._docker_options())

    def _docker_options(self) -> dict[str, Any]:
        """What every Docker host is made with, here or on a server."""
        return {"image": self.image, "cpus": self.cpus, "memory_mb": self.memory_mb, "mounts": self.mounts,
                "on_container": self._on_container, "state_dir": str(self.state_dir.resolve()),
                "remove_on_terminate": False}

    def _impaired_link(self, lk: ImpairedLink) -> RelayLink | NetemLink:
        """The handle that changes a built link's impairment: its relay, or its TCLink's qdiscs."""
        assert self.net is not None   # built
        if lk.relay is not None:
            return RelayLink(lk.name, lk.a, lk.b, self.net.get(lk.relay), f"{lk.relay}a", f"{lk.relay}b", lk.params,
                             self.state_dir / "links", self.seed, self.t0_ns)
        return NetemLink(lk.name, lk.a, lk.b, self.net.get(lk.switch).intfs[lk.port].link, lk.params)

    def _on_container(self, name: str, engine: str | None = None) -> None:
        """Record a container before it starts; one in a server's engine also under that server,
        for a cleanup after a crash, which reaches that engine anew."""
        self.containers.append(name)
        fields: dict[str, Any] = {"containers": self.containers}
        if engine is not None and self.engines is not None:
            server = next(s for s, url in self.engines.base_url.items() if url == engine)
            self.server_containers.setdefault(server, []).append(name)
            fields["server_containers"] = self.server_containers
        self._record(**fields)

    def _start_controller(self) -> None:
        self.progress("starting controller")
        (self.state_dir / "controller.json").unlink(missing_ok=True)
        log = open(self.state_dir / "controller.log", "ab")
        src = str(REPO / "src")
        env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.controller_proc = subprocess.Popen(
            [sys.executable, str(CONTROLLER_LAUNCH), "--port", str(self.port), "--listen-host", self.controller_ip,
             "--wiring", str(self.state_dir / "wiring.json"), "--state-dir", str(self.state_dir)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        self._record(controller_pid=self.controller_proc.pid, controller_port=self.port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.controller_proc.poll() is not None:
                raise UserError(f"the controller exited at start; see {self.state_dir / 'controller.log'}")
            with socket.socket() as s:
                if s.connect_ex((self.controller_ip, self.port)) == 0:
                    return
            time.sleep(0.1)
        raise UserError(f"the controller did not listen within 30 s; see {self.state_dir / 'controller.log'}")

    @property
    def controller_ip(self) -> str:
        """Where the controller listens: loopback, or this machine's underlay address when the
        switches run on servers."""
        return cluster.controller_ip(self.servers) if self.servers else "127.0.0.1"

    def controller_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads((self.state_dir / "controller.json").read_text())
            return state
        except (OSError, ValueError):
            return {}

    def request_igmp_query(self) -> None:
        """Ask the controller, the network's IGMP querier, for a general query on every host
        port: each host answers with every group it holds, so a membership whose reports were
        lost comes back (the controller polls for this file, ``controllers/rmptwin_controller.py``)."""
        (self.state_dir / QUERY_REQUEST).touch()

    def _wait_controller(self, timeout: float = 60.0) -> None:
        assert self.controller_proc is not None   # started first
        want = sorted(self.topo.switches)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.controller_state().get("switches") == want:
                # Flow mods are sent; a barrier per switch went with them. Give the
                # userspace datapath a moment to apply them before traffic starts.
                time.sleep(0.3)
                return
            if self.controller_proc.poll() is not None:
                raise UserError(f"the controller died; see {self.state_dir / 'controller.log'}")
            time.sleep(0.1)
        got = self.controller_state().get("switches", [])
        raise UserError(f"switches not connected to the controller after {timeout:.0f} s "
                        f"({len(got)}/{len(want)}); see {self.state_dir / 'controller.log'}")

    def _configure_hosts(self) -> None:
        assert self.net is not None   # built
        for i, h in enumerate(self.topo.hosts):
            node = self.net.get(h.name)
            intf = node.defaultIntf().name
            version = self.igmp_version.get(h.name) if isinstance(self.igmp_version, dict) else self.igmp_version
            configure_host(node, h.name, intf, version)
            clock = self.clocks.get(getattr(node, "server", ""))
            self.hosts[h.name] = EmuHost(node, host_ip(i), intf, clock.correction_ns if clock else 0)
        # Switch-side veths: the userspace datapath reads them with AF_PACKET too.
        for s in self.sw_name.values():
            sw = self.net.get(s)
            names = [i.name for i in sw.intfList() if i.name != "lo"]
            if names:
                sw.cmd("; ".join(f"ethtool -K {n} tx off >/dev/null 2>&1" for n in names))

    # ------------------------------------------------------------------ use

    def host(self, name: str) -> EmuHost:
        try:
            return self.hosts[name]
        except KeyError:
            raise UserError(f"no host {name!r} in topology {self.topo.name}") from None

    def containers_by_host(self) -> dict[str, str]:
        """host name -> its container's name (Docker hosts; namespace hosts have none)."""
        if self.nodes_mode != "docker" or self.net is None:
            return {}
        return {h.name: self.net.get(h.name).container for h in self.topo.hosts}

    def cross_server_datagrams(self) -> dict[str, Any]:
        """Frames that crossed servers, per tunnel and in all (none on one machine)."""
        if not self.servers or self.net is None:
            return {}
        tunnels = cluster.tunnel_counts(self.net)
        return {"frames": sum(sum(ends.values()) for ends in tunnels.values()), "tunnels": tunnels}

    def collect(self, run_dirs: Sequence[Path]) -> None:
        """Flush every relay, then copy back what servers with files of their own wrote there
        (``server_files``): ``run_dirs`` (the nodes' logs, the captures) and the relays' logs in
        links/. ``drops`` and ``link_counts`` then read them here, as on one machine."""
        apart = server_files.apart(self.servers)
        if not apart:   # one machine, or servers sharing its files: the logs are here already
            return
        for lk in self.links.values():
            lk.flush()
        for s in apart:
            server_files.pull(s, [*run_dirs, self.state_dir / "links"])

    # ------------------------------------------------------------------ teardown

    def stop(self) -> None:
        """Tear everything down; safe to call twice and after a failed start."""
        if self._stopped:
            return
        self._stopped = True
        errors = []
        for lk in self.links.values():
            try:
                lk.flush()
                lk.signal_stop()
            except Exception as e:
                errors.append(e)
        for lk in self.links.values():
            try:
                lk.stop()
            except Exception as e:
                errors.append(e)
        if self.net is not None:
            try:
                self.net.stop()
            except Exception as e:
                errors.append(e)
        if self.controller_proc is not None and self.controller_proc.poll() is None:
            self.controller_proc.terminate()
            try:
                self.controller_proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.controller_proc.kill()
        if self.state_dir.exists() and (self.state_dir / "net.json").exists():
            cleanup_state_dir(self.state_dir, own_pid=os.getpid())   # the containers through the engines' tunnels
        if self.engines is not None:
            self.engines.close()
        for server in server_files.apart(self.servers):   # the relays' logs there, copied back by collect
            server_files.remove(server, [self.state_dir])
        if errors:
            raise UserError(f"teardown of {self.topo.name} was incomplete ({errors[0]}); run `rmptwin net down`")
