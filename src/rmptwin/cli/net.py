"""`rmptwin env`, `rmptwin net up|trees|selftest|down`, `rmptwin image build`: the emulation
layer's commands, mounted by ``rmptwin.cli.main`` (``net_app`` as ``net``, ``image_app`` as
``image``, ``show_env`` as ``env``)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from rmptwin import api, corebuild
from rmptwin.cli.console import make_console
from rmptwin.emulation import env
from rmptwin.emulation.cleanup import cleanup_all
from rmptwin.emulation.cluster import sweep_servers
from rmptwin.emulation.dilation import dilated_topology
from rmptwin.emulation.emulated_network import DEFAULT_STATE_DIR, EmulatedNetwork
from rmptwin.emulation.image import ensure_image, save_image
from rmptwin.emulation.selftest import selftest
from rmptwin.emulation.server_engines import sweep_server_containers
from rmptwin.emulation.servers import down_local, ensure_client, resolve, up_local
from rmptwin.errors import UserError
from rmptwin.model import Topology, read_yaml

console = make_console()
net_app = typer.Typer(help="the emulated network: Mininet + Open vSwitch + os-ken", no_args_is_help=True)
image_app = typer.Typer(help="the Docker node image", no_args_is_help=True)
servers_app = typer.Typer(help="servers for a network spread over several machines", no_args_is_help=True)
NODES_HELP = "hosts as plain network namespaces (ns, fast) or Docker containers (docker)"
IMPAIR_HELP = "link impairment: auto (netem where the kernel has it, else relay), netem, relay"


def load_any_topology(path: Path) -> Topology:
    """A topology YAML, or an experiment YAML (its topology)."""
    data, _ = read_yaml(path)
    if "topology" in data and isinstance(data["topology"], str):
        return api.load_experiment(path).topology
    return api.load_topology(path)


def _progress_printer() -> Callable[[str], None]:
    return lambda msg: console.print(f"[dim]·[/] {msg}", highlight=False)


def show_env() -> None:
    """Print what this machine offers the emulation and which backends will be used."""
    e = env.detect()
    t = Table(title="rmptwin environment", show_header=True)
    t.add_column("what")
    t.add_column("here")
    t.add_column("used")
    t.add_row("root", "yes" if e.root else "no", "needed for net/image commands")
    t.add_row("netem (sch_netem)", "yes" if e.netem else "no",
              "netem (Mininet TCLink)" if e.netem else "user-space relay (AF_PACKET, per link)")
    t.add_row("Open vSwitch", "installed" if e.ovs_installed else "missing",
              f"{e.datapath} datapath" + ("" if e.ovs_kernel_datapath else " (no openvswitch kernel module)"))
    t.add_row("Mininet", "yes" if e.mininet else "no", "")
    t.add_row("Docker engine", e.docker,
              "docker nodes available" if e.docker != "missing" else "namespace nodes only")
    t.add_row("Java", e.java or "missing", "Spark analysis" if e.java else "no Spark analysis")
    t.add_row("cores", corebuild.ACTIVE.kind, corebuild.ACTIVE.why)
    console.print(t)
    console.print(f"impairment backend: [bold]{e.impair_backend}[/]   switch datapath: [bold]{e.datapath}[/]")


@net_app.command("up")
def up(
    topology: Path = typer.Argument(..., help="topology (or experiment) YAML"),
    cli: bool = typer.Option(False, "--cli", help="drop into the Mininet CLI"),
    nodes: str = typer.Option("ns", help=NODES_HELP),
    impair: str = typer.Option("auto", help=IMPAIR_HELP),
    seed: int = typer.Option(1, help="seed of the links' loss processes"),
    state_dir: Path = typer.Option(None, help="where the running network keeps its state"),
) -> None:
    """Build TOPOLOGY and keep it up until Ctrl-C (or the Mininet CLI exits)."""
    topo = load_any_topology(topology)
    net = EmulatedNetwork(topo, nodes=nodes, impair=impair, seed=seed,
                          state_dir=state_dir or DEFAULT_STATE_DIR, progress=_progress_printer())
    env.require_root("`rmptwin net up`")
    old = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # Ctrl-C stops it even where the parent ignored SIGINT: a shell starts a background job
    # (`make test &`, CI runners) with SIGINT ignored, Python then installs no handler, and
    # `net up` would wait in pause() forever (seen in a CI rehearsal: the test's SIGINT hung it).
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        net.start()
        _print_network(net)
        if cli:
            _mininet_cli(net)
        else:
            console.print("network up. In another shell: `rmptwin net trees`. Ctrl-C stops it.")
            while True:
                signal.pause()
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        net.stop()
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
        console.print("network down, everything removed")


def _mininet_cli(net: EmulatedNetwork) -> None:
    from mininet.cli import CLI  # mininet is optional: only a network's commands need it
    from mininet.log import setLogLevel

    setLogLevel("output")   # the build ran quietly; the CLI prints at this level
    CLI(net.net)


@net_app.command("trees")
def trees(state_dir: Path = typer.Option(None, help="state dir of the running network")) -> None:
    """Show the multicast trees the running controller has installed, per group."""
    sd = state_dir or DEFAULT_STATE_DIR
    path = sd / "controller.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        raise UserError(f"no running network in {sd} (no controller state); start one with `rmptwin net up`") from None
    if not Path(f"/proc/{state.get('pid', 0)}").exists():
        raise UserError(f"the controller of {sd} is not running (stale state); run `rmptwin net down`")
    console.print(f"switches connected: {', '.join(state['switches'])}")
    if not state["groups"]:
        console.print("no group has members (no IGMP joins seen yet)")
        return
    console.print(_trees_table(state["groups"]))


def _trees_table(groups: dict[str, Any]) -> Table:
    t = Table(title="multicast groups and trees (by sender switch)")
    for col in ("group", "address", "scope", "members", "tree from", "edges"):
        t.add_column(col)
    for ip, g in sorted(groups.items(), key=lambda kv: kv[1]["name"]):
        roots = sorted(g["trees"].items()) or [("-", [])]
        for i, (root, edges) in enumerate(roots):
            t.add_row(g["name"] if i == 0 else "", ip if i == 0 else "", (g["region"] or "global") if i == 0 else "",
                      ", ".join(g["members"]) if i == 0 else "", root,
                      " ".join(f"{a}→{b}" for a, b in edges) or "(local delivery)")
    return t


@net_app.command("selftest")
def selftest_cmd(
    topology: Path = typer.Argument(..., help="topology (or experiment) YAML"),
    nodes: str = typer.Option("ns", help=NODES_HELP),
    impair: str = typer.Option("auto", help=IMPAIR_HELP),
    count: int = typer.Option(4000, min=1, help="delay and loss probe datagrams per link"),
    rate: float = typer.Option(2000.0, min=1.0, help="probe datagrams per (virtual) second; on a jittered link "
                                                     "at most one per two jitters"),
    bw_count: int = typer.Option(2000, "--bw-count", min=2, help="bandwidth probe datagrams per rate-limited link"),
    tdf: float = typer.Option(1.0, "--tdf", min=1.0, help="time dilation factor: the network runs its links N times "
                                                          "slower, and every figure is compared in virtual time"),
    json_out: Path = typer.Option(None, "--json", help="also write the checks and wall times to this JSON file"),
    state_dir: Path = typer.Option(None, help="state dir for the test network"),
) -> None:
    """Build TOPOLOGY, measure every impaired link against its configuration, tear down."""
    topo = load_any_topology(topology)
    # On the wall clock the network runs the dilated links; the checks compare with `topo`'s.
    net = EmulatedNetwork(dilated_topology(topo, tdf), nodes=nodes, impair=impair,
                          state_dir=state_dir or DEFAULT_STATE_DIR, progress=_progress_printer())
    env.require_root("`rmptwin net selftest`")
    t0 = time.monotonic()
    with net:
        t1 = time.monotonic()
        checks = selftest(net, count=count, rate=rate, progress=_progress_printer(), bw_count=bw_count, tdf=tdf,
                          configured=topo)
        measure_s = time.monotonic() - t1
        backend = net.impair
    wall_s = time.monotonic() - t0
    t = Table(title=f"link selftest ({backend} backend, TDF {tdf:g}: configured and measured in virtual time)")
    for col in ("link", "quantity", "configured", "measured", "wall clock", "tolerance", "result"):
        t.add_column(col)
    for c in checks:
        fmt: Callable[[float], str] = (lambda v: f"{v * 100:.2f} %") if c.quantity == "loss" else (lambda v: f"{v:.2f}")
        t.add_row(c.link, c.quantity, fmt(c.configured), fmt(c.measured), fmt(c.wall), c.tolerance,
                  "[green]ok[/]" if c.ok else "[red]OUT OF TOLERANCE[/]")
    console.print(t)
    console.print(f"wall time: {wall_s:.1f} s ({measure_s:.1f} s measuring)")
    if json_out is not None:
        json_out.write_text(json.dumps({"tdf": tdf, "backend": backend, "wall_s": round(wall_s, 2),
                                        "measure_wall_s": round(measure_s, 2),
                                        "checks": [dataclasses.asdict(c) for c in checks]}, indent=1))
    if not checks:
        console.print("no impaired links in this topology")
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


@net_app.command("down")
def down(
    all_networks: bool = typer.Option(False, "--all", help="also remove networks whose owner process is "
                                                           "still running (another user's run, a `net up`)"),
    servers: str = typer.Option("", help="also sweep these servers, a,b: every project bridge, interface "
                                         "and container left on them (what a crashed run's records no longer name)"),
) -> None:
    """Remove every switch, link, namespace, container and process a network left behind.

    A network whose owner process is still running is kept (one line each) unless --all."""
    env.require_root("`rmptwin net down`")
    done, kept = cleanup_all(force=all_networks)
    for net in kept:
        console.print(net.kept_line(), highlight=False, soft_wrap=True)
    if servers:
        swept = resolve([n.strip() for n in servers.split(",") if n.strip()])
        done["servers swept"] = sweep_servers(swept, keep=[net.tag for net in kept])
        done["containers on servers"] = sweep_server_containers(swept, [n.state_dir for n in kept if n.state_dir])
    console.print("removed: " + ", ".join(f"{v} {k}" for k, v in done.items()))


@servers_app.command("up")
def servers_up(local: int = typer.Option(..., "--local", help="make N servers on this machine (1-8)"),
               isolated: bool = typer.Option(False, "--isolated", help="each server with an empty /run/rmptwin "
                                             "and /var/tmp of its own: a run directory under /var/tmp then travels "
                                             "to and from the servers over SSH, as with real machines")) -> None:
    """Make N local servers (network namespaces with their own sshd and Open vSwitch) and print
    their names, one a line, for --servers."""
    env.require_root("`rmptwin servers up`")
    for s in up_local(local, isolated):
        print(s.name)


@servers_app.command("key")
def servers_key() -> None:
    """Print the path of the cluster's private SSH key (made on first use): copy it and its .pub
    to each real server and run `scripts/provision.sh --server KEY` there (docs/cluster.md)."""
    env.require_root("`rmptwin servers key`")
    print(ensure_client())


@servers_app.command("down")
def servers_down(local: bool = typer.Option(False, "--local", help="remove the servers `servers up --local` made")) -> None:
    """Remove the local servers: their processes, namespaces, links and the underlay bridge."""
    if not local:
        raise UserError("servers down removes local servers only: say --local "
                        "(what a run left on real servers goes with `rmptwin net down --servers a,b`)")
    env.require_root("`rmptwin servers down`")
    gone = down_local()
    console.print(f"removed {len(gone)} local servers" + (f": {', '.join(gone)}" if gone else ""))


@image_app.command("build")
def image_build(force: bool = typer.Option(False, help="rebuild even when cached")) -> None:
    """Build the node image (Debian bookworm via debootstrap + nodes/Dockerfile); cached by hash."""
    env.require_root("`rmptwin image build`")
    env.ensure_dockerd()
    tag = ensure_image(force=force, progress=_progress_printer())
    console.print(f"node image: [bold]{tag}[/]")


@image_app.command("save")
def image_save(path: Path = typer.Argument(..., help="the archive to write (a `docker save` tar)")) -> None:
    """Save the node image (built first if missing) for a machine that cannot build it: `rmptwin run`
    there loads it from /var/lib/rmptwin/node-images.tar (or $RMPTWIN_NODE_IMAGES)."""
    env.require_root("`rmptwin image save`")
    env.ensure_dockerd()
    if not path.parent.is_dir():
        raise UserError(f"{path.parent} is not a directory: give a path in an existing one")
    tag = save_image(path, progress=_progress_printer())
    console.print(f"saved {tag} to [bold]{path}[/] ({path.stat().st_size / 1e6:.0f} MB)")


def _print_network(net: EmulatedNetwork) -> None:
    assert net.env is not None   # a started network has detected its machine
    t = Table(title=f"{net.topo.name}: {net.nodes_mode} hosts, {net.impair} links, {net.env.datapath} datapath")
    for col in ("host", "ip", "switch", "role"):
        t.add_column(col)
    for h in net.topo.hosts:
        t.add_row(h.name, net.host(h.name).ip, h.switch, h.role)
    console.print(t)
    console.print(f"state: {net.state_dir}  controller log: {net.state_dir / 'controller.log'}  pid {os.getpid()}")
