"""Several servers (emulation.cluster, Mininet's cluster edition) on servers made here
(`rmptwin servers up --local 3`, removed at the end).

- **The tunnel's cost.** ``bench-link`` (tx - a - [1 ms] - b - rx, namespace hosts, relay
  link) carries a probe of datagrams at a fixed rate, once on this machine (a veth between
  a's relay and b) and once over two servers (a and b on different servers: that hop is an
  SSH Ethernet tunnel), in interleaved pairs. Per datagram: the CPU of the processes that
  forward it (every Open vSwitch daemon, the relay, and on the tunnel both SSH ends), and the
  median one-way delay. The one-machine run is the floor.
- **The same experiment on 1, 2 and 3 servers.** The quickstart as shipped (time dilation as
  its file gives it), on this machine and on 1, 2 and 3 local servers: wall time, the
  receiving roles' timer lateness p99, whether the run flagged the machine overloaded, the
  frames that crossed servers, and the twin verdict against the simulator.

Local servers share this machine's two CPUs and its clock: these rows show what the tunnels
and the placement cost, never that more servers add capacity (docs/cluster.md).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rmptwin.analysis.twin_verdict import PASS, inputs_of, twin_verdict
from rmptwin.bench.bench_emulation import bench_link
from rmptwin.emulation import servers as srv
from rmptwin.emulation.emulated_network import EmulatedNetwork
from rmptwin.emulation.measure import run_probe
from rmptwin.model import Topology, load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

RUNS = 1   # pairs are interleaved inside; the quickstart rows take minutes each
REPO = Path(__file__).resolve().parents[3]
RATE, SECONDS = 1000, 5.0
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


# The processes that forward a datagram: switches, relays, and a tunnel's two SSH ends (its
# client on one server, the sshd session it talks to on the other).
FORWARDERS = ("ovs-vswitchd", "rmptwin.emulation.relay", "Tunnel=Ethernet", "sshd: root@notty")


def _forwarding_cpu_s() -> float:
    """CPU seconds so far of every process whose command line names a forwarder."""
    total = 0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if any(f in cmd for f in FORWARDERS):
                fields = (p / "stat").read_text().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue   # gone meanwhile
    return total * TICK_S


def _probe_once(topo: Topology, servers: list[srv.Server], rate: int, seconds: float) -> tuple[float, float]:
    """(forwarding CPU µs per datagram, median one-way delay ms) of one probe over ``topo``."""
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-cluster-") as tmp:
        with EmulatedNetwork(topo, nodes="ns", impair="relay", state_dir=tmp, servers=servers) as net:
            tx, rx = net.host("tx"), net.host("rx")
            run_probe(tx, [rx], rx.ip, count=200, rate=500, size=100, port=9201)   # warm: ARP, flows, SSH
            before = _forwarding_cpu_s()
            r = run_probe(tx, [rx], rx.ip, count=int(rate * seconds), rate=rate, size=100, port=9202)["rx"]
            busy = _forwarding_cpu_s() - before
    return busy / max(r.received, 1) * 1e6, r.median_delay_ms


def _tunnel_rows(quick: bool) -> list[dict[str, Any]]:
    link = bench_link().model_dump()
    link["links"][0].update(delay_ms=1.0, loss=0.0)
    topo = Topology.model_validate(link)
    pairs = 2 if quick else 3
    here: list[tuple[float, float]] = []
    over: list[tuple[float, float]] = []
    servers = srv.local_servers()[:2]
    for _ in range(pairs):
        here.append(_probe_once(topo, [], RATE, SECONDS))
        over.append(_probe_once(topo, servers, RATE, SECONDS))
    cond = f"bench-link with a 1 ms relay link, {RATE} datagrams/s for {SECONDS:g} s, {pairs} interleaved pairs"
    cpu_here, cpu_over = (statistics.median(c for c, _ in xs) for xs in (here, over))
    d_here, d_over = (statistics.median(d for _, d in xs) for xs in (here, over))
    return [
        {"metric": "forwarding CPU per datagram, link between two servers (SSH tunnel)", "value": cpu_over,
         "unit": "µs", "better": "lower", "floor": cpu_here, "floor_what": "the same link on one machine",
         "conditions": cond, "note": f"tunnel overhead {cpu_over - cpu_here:.0f} µs per datagram (switches, relay "
                                     "and both SSH ends, summed)"},
        {"metric": "median one-way delay, link between two servers (SSH tunnel)", "value": d_over, "unit": "ms",
         "better": "lower", "floor": d_here, "floor_what": "the same link on one machine", "conditions": cond,
         "note": f"the tunnel adds {d_over - d_here:.2f} ms to the 1 ms link"},
    ]


def _scaling_rows(quick: bool) -> list[dict[str, Any]]:
    loaded = load_experiment(REPO / "experiments" / "quickstart.yaml")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rmptwin-bench-cluster-") as tmp:
        sim = run_experiment(loaded, "sim", out=Path(tmp) / "sim")
        a = inputs_of(sim.run_dir)
        counts = (0, 2) if quick else (0, 1, 2, 3)
        for n in counts:
            names = tuple(s.name for s in srv.local_servers()[:n])
            t0 = time.monotonic()
            emu = run_experiment(loaded, "emulation", out=Path(tmp) / f"emu{n}",
                                 options=EmulationOptions(nodes="ns", impair="relay", capture=[], servers=names))
            wall = time.monotonic() - t0
            rt = emu.summary["runtime"]
            rules = twin_verdict(a, inputs_of(emu.run_dir))
            failed = [r.metric for r in rules if r.status not in (PASS, "not deterministic", "not comparable")]
            where = f"{n} local servers" if n else "this machine"
            lateness = (rt.get("load") or {}).get("timer_lateness_p99_ms")
            rows.append({"metric": f"quickstart on {where}: wall time", "value": wall, "unit": "s", "better": "lower",
                         "conditions": f"quickstart as shipped (time dilation {rt.get('time_dilation')}), namespace "
                                       "hosts, relay links, no captures",
                         "note": f"timer lateness p99 {lateness} ms, overloaded {rt.get('overloaded')}, frames across "
                                 f"servers {(rt.get('cross_server') or {}).get('frames', 0)}, twin verdict "
                                 + ("PASS" if not failed else "FAIL: " + ", ".join(failed)),
                         "ok": not failed})
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    if os.geteuid() != 0:
        return [{"metric": "several servers", "value": None, "ok": False, "note": "needs root (Mininet, OVS, sshd)"}]
    already = {s.name for s in srv.local_servers()}
    srv.up_local(3)
    try:
        return _tunnel_rows(quick) + _scaling_rows(quick)
    finally:
        if not already:   # servers a user made before the benchmark stay
            srv.down_local()
