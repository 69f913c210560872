"""CPU per frame of the emulated data path's two forwarders, each beside its floor.

- The relay that carries an impaired link (``emulation.relay``): its process's CPU (utime +
  stime from /proc/<pid>/stat) over a probe, divided by the frames it handled (its own
  ``packets`` counters, both directions). Floor: the same relay code restarted in the same
  namespace between the same veths with a fixed delay (``relay.FixedDelay``: no loss draws, no
  link model), over the same probe.
- Open vSwitch (one ovs-vswitchd, user-space datapath): its CPU over the probe divided by the
  frames the network's bridges received (``ovs-ofctl dump-ports``, every port). Figure: with
  the controller's rules. Floor: the same bridges with the controller detached and one static
  in_port -> output rule per direction, over the same probe.

Both figures come from one probe, both floors from a second one: the two floors are of
different processes, each divided by its own frames, so one probe serves both and the shared
machine carries one probe fewer. The floor probe is the last thing done on the network: the
controller does not come back (teardown removes the bridges, ``EmulatedNetwork.stop``).

The module is not named ``bench_*``: ``bench_emulation`` runs it on its own network, and the
bench CLI would otherwise run it as a benchmark of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmptwin.bench.bench_datapath import process_ticks
from rmptwin.emulation.impair import RelayLink
from rmptwin.emulation.measure import run_probe
from rmptwin.errors import UserError

if TYPE_CHECKING:
    from rmptwin.emulation.emulated_network import EmulatedNetwork

RATE = 5_000             # datagrams/s: the relay's goal rate (bench_emulation's link rates)
SIZE = 100               # bytes of payload, as bench_emulation's probes
PORT = 9201              # apart from bench_emulation's link-rate probes
IDLE_S = 0.3             # the receiver's wait after the last datagram: 15 x the link's delay
SETTLE_S = 0.3           # after the floor's set-up, before its probe: flows and relay settled
OVS_PID_FILES = (Path("/var/run/openvswitch/ovs-vswitchd.pid"), Path("/run/openvswitch/ovs-vswitchd.pid"))
OVS_FLOOR_WHAT = "the same bridges with one static rule each, no controller, same run"
# one row of ovs-ofctl dump-ports: "  port  1: rx pkts=12, ..." or '  port  "r1s1-eth1": rx pkts=?, ...'
_PORT_LINE = re.compile(r'^\s*port\s+("(?:[^"\\]|\\.)*"|\S+?):\s+rx pkts=(\d+|\?)', re.MULTILINE)


# ----------------------------------------------------------------------------- pure parts


def relay_metric(delay_ms: float, loss: float) -> str:
    return f"relay CPU per frame ({delay_ms:g} ms, {loss * 100:g} % loss link)"


def relay_floor_what(delay_ms: float) -> str:
    return f"the same relay forwarding with a fixed {delay_ms:g} ms delay, same run"


OVS_METRIC = "Open vSwitch CPU per frame forwarded (user-space datapath)"


@dataclass(frozen=True)
class CpuSample:
    """A process's CPU over a probe and the frames it handled meanwhile."""

    cpu_s: float
    frames: int

    @property
    def us_per_frame(self) -> float | None:
        return self.cpu_s * 1e6 / self.frames if self.frames > 0 else None


def cpu_sample(ticks: tuple[int, int], frames: tuple[int, int], hz: int) -> CpuSample:
    """From (before, after) CPU ticks and (before, after) frame counters."""
    return CpuSample((ticks[1] - ticks[0]) / hz, frames[1] - frames[0])


def relay_frames(stats: dict[str, dict[str, Any]]) -> int:
    """Frames a relay handled, both directions (its ``stats``: direction -> counters)."""
    return sum(int(d["packets"]) for d in stats.values())


def port_rx(dump: str) -> dict[str, int]:
    """``ovs-ofctl dump-ports`` text as {port: rx packets}: numbers, names (quotes kept off) or
    LOCAL; a counter the port does not keep ("?") counts 0."""
    return {m.group(1).strip('"'): 0 if m.group(2) == "?" else int(m.group(2)) for m in _PORT_LINE.finditer(dump)}


def frames_received(dumps: list[str]) -> int:
    """Frames the bridges received, over every port of every bridge's dump (each is work done)."""
    return sum(sum(port_rx(d).values()) for d in dumps)


def static_flows(ports: list[str]) -> list[str]:
    """The floor's flow table: each of a two-port bridge's ports to the other, as the unicast
    path the controller installs for the probe; any other shape floods."""
    data = sorted((p for p in ports if p.isdigit()), key=int)
    if len(data) != 2:
        return ["priority=0,actions=FLOOD"]
    a, b = data
    return [f"priority=0,in_port={a},actions=output:{b}", f"priority=0,in_port={b},actions=output:{a}"]


def parse_pid(text: str) -> int | None:
    """A pid file's or ``pidof``'s first pid."""
    words = text.split()
    return int(words[0]) if words and words[0].isdigit() else None


def cpu_row(metric: str, figure: CpuSample | None, floor: CpuSample | None, floor_what: str, conditions: str,
            note: str) -> dict[str, Any]:
    """A µs/frame row beside its floor (goal: at most twice it), "skipped" without a figure."""
    value = figure.us_per_frame if figure else None
    if value is None:
        return {"metric": metric, "value": "skipped", "ok": None, "conditions": conditions,
                "note": f"no frames counted in the probe; {note}"}
    row: dict[str, Any] = {"metric": metric, "value": value, "unit": "µs/frame", "better": "lower",
                           "conditions": conditions, "note": note}
    base = floor.us_per_frame if floor else None
    if base is not None:
        row.update(floor=base, floor_what=floor_what, goal="<= 2 x floor", goal_max=2 * base)
    return row


def skipped_rows(why: str, delay_ms: float, loss: float, which: tuple[str, ...] = ("relay", "ovs")) -> list[dict[str, Any]]:
    metric = {"relay": relay_metric(delay_ms, loss), "ovs": OVS_METRIC}
    return [{"metric": metric[w], "value": "skipped", "ok": None, "note": why} for w in which]


def conditions(seconds: float, topology: str, backend: str | None, loads: tuple[float, float]) -> str:
    return (f"{RATE:,} pkt/s x {seconds:g} s ({SIZE} B datagrams), topology {topology}, {backend} backend, "
            f"load average {loads[0]:.1f} (figure probe) / {loads[1]:.1f} (floor probe)")


def sample_note(figure: CpuSample, floor: CpuSample | None, hz: int) -> str:
    got = f"figure {figure.frames:,} frames in {figure.cpu_s:.2f} CPU s"
    if floor is not None:
        got += f", floor {floor.frames:,} frames in {floor.cpu_s:.2f} CPU s"
    return got + f" (CPU in ticks of 1/{hz} s)"


# ----------------------------------------------------------------------------- the machine


def _run(argv: list[str]) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise UserError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()[:200]}")
    return r.stdout


def _ofctl(*args: str) -> str:
    # the bridges speak OpenFlow 1.3 only (EmulatedNetwork's OVSSwitch protocols)
    return _run(["ovs-ofctl", "-O", "OpenFlow13", *args])


def ovs_pid() -> int | None:
    """ovs-vswitchd's pid, from its pid file or pidof; None when it is not running."""
    for f in OVS_PID_FILES:
        try:
            pid = parse_pid(f.read_text())
        except OSError:
            continue
        if pid and Path(f"/proc/{pid}/stat").exists():
            return pid
    try:
        r = subprocess.run(["pidof", "ovs-vswitchd"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):   # no pidof: the pid files were the answer
        return None
    return parse_pid(r.stdout)


def _bridge_frames(bridges: list[str]) -> int:
    return frames_received([_ofctl("--no-names", "dump-ports", br) for br in bridges])


def static_bridges(bridges: list[str]) -> None:
    """The OVS floor's set-up: each bridge without its controller (fail mode secure: nothing
    replaces the rules), its tables emptied and given ``static_flows``."""
    for br in bridges:
        ports = list(port_rx(_ofctl("--no-names", "dump-ports", br)))
        _run(["ovs-vsctl", "del-controller", br])
        _run(["ovs-vsctl", "set-fail-mode", br, "secure"])
        _ofctl("del-flows", br)
        for flow in static_flows(ports):
            _ofctl("add-flow", br, flow)


@dataclass(frozen=True)
class Window:
    relay: CpuSample | None
    ovs: CpuSample | None
    sent: int
    received: int
    load: float


def probe_window(net: EmulatedNetwork, relay: RelayLink | None, ovs: int | None, bridges: list[str],
                 sender: str, receiver: str, seconds: float) -> Window:
    """One probe at RATE; the relay's and ovs-vswitchd's CPU and frames across it (counters read
    outside the CPU window, so reading them is not counted)."""
    hz = os.sysconf("SC_CLK_TCK")
    load = os.getloadavg()[0]
    tx, rx = net.host(sender), net.host(receiver)
    pid = relay.proc.pid if relay is not None and relay.proc is not None else None
    r0 = relay_frames(relay.stats()) if relay is not None and pid else 0
    b0 = _bridge_frames(bridges) if ovs else 0
    rt0, ot0 = (process_ticks(pid) if pid else 0), (process_ticks(ovs) if ovs else 0)
    got = run_probe(tx, [rx], rx.ip, count=int(RATE * seconds), rate=RATE, size=SIZE, port=PORT,
                    idle=IDLE_S)[receiver]
    rt1, ot1 = (process_ticks(pid) if pid else 0), (process_ticks(ovs) if ovs else 0)
    r1 = relay_frames(relay.stats()) if relay is not None and pid else 0
    b1 = _bridge_frames(bridges) if ovs else 0
    return Window(cpu_sample((rt0, rt1), (r0, r1), hz) if pid else None,
                  cpu_sample((ot0, ot1), (b0, b1), hz) if ovs else None, got.sent, got.received, load)


# what a measurement on a live network may raise: a command refused, a probe or relay failing
_FAILURES = (UserError, RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError)


def _floor_window(net: EmulatedNetwork, link: str, relay: RelayLink | None, ovs: int | None, bridges: list[str],
                  sender: str, receiver: str, seconds: float) -> tuple[Window | None, str]:
    """The floors' probe, after the relay's restart with a fixed delay and the bridges' static
    rules; or None and why not."""
    try:
        if relay is not None:
            relay = net.restart_relay(link, fixed_delay=True)
        if ovs is not None:
            static_bridges(bridges)
        time.sleep(SETTLE_S)
        floor = probe_window(net, relay, ovs, bridges, sender, receiver, seconds)
    except _FAILURES as e:
        return None, f"floor not measured: {type(e).__name__}: {e}"
    if not floor.received:   # nothing crossed: the static rules or the restarted relay do not forward
        return None, f"floor not measured: its probe delivered none of {floor.sent:,} datagrams"
    return floor, ""


def _bridges_served() -> str:
    try:
        return f"{len(_run(['ovs-vsctl', 'list-br']).split())} bridges"
    except _FAILURES:
        return "? bridges"


def floor_rows(net: EmulatedNetwork, link: str, sender: str, receiver: str, quick: bool,
               topology: str) -> list[dict[str, Any]]:
    """The relay's row and Open vSwitch's, measured on ``net`` (left without its controller:
    call it last); a "skipped" row for what cannot be measured here."""
    seconds = 1.5 if quick else 2.0
    lk = net.links.get(link)
    delay_ms = lk.params.delay_ms if lk is not None else 0.0
    loss = float(getattr(lk.params.loss, "mean", 0.0)) if lk is not None else 0.0
    relay = lk if isinstance(lk, RelayLink) else None
    ovs = ovs_pid()
    skip = {"relay": f"link {link} has no relay process ({net.impair} backend)" if relay is None else "",
            "ovs": "ovs-vswitchd pid not found (no pid file in /var/run/openvswitch, pidof found none)"
                   if ovs is None else ""}
    if relay is None and ovs is None:
        return [r for w, why in skip.items() for r in skipped_rows(why, delay_ms, loss, (w,))]
    bridges = [net.sw_name[s] for s in net.topo.switches]
    try:
        fig = probe_window(net, relay, ovs, bridges, sender, receiver, seconds)
    except _FAILURES as e:
        return skipped_rows(f"the probe failed: {type(e).__name__}: {e}", delay_ms, loss)
    floor, why_no_floor = _floor_window(net, link, relay, ovs, bridges, sender, receiver, seconds)
    hz = os.sysconf("SC_CLK_TCK")
    cond = conditions(seconds, topology, net.impair, (fig.load, floor.load if floor else fig.load))
    delivered = (f"delivered {fig.received:,}/{fig.sent:,} (figure)"
                 + (f", {floor.received:,}/{floor.sent:,} (floor)" if floor else f"; {why_no_floor}"))
    rows = []
    if relay is None:
        rows += skipped_rows(skip["relay"], delay_ms, loss, ("relay",))
    else:
        fl = floor.relay if floor else None
        note = (sample_note(fig.relay, fl, hz) + "; " if fig.relay else "") + delivered
        rows.append(cpu_row(relay_metric(delay_ms, loss), fig.relay, fl, relay_floor_what(delay_ms), cond, note))
    if ovs is None:
        rows += skipped_rows(skip["ovs"], delay_ms, loss, ("ovs",))
    else:
        fl = floor.ovs if floor else None
        note = ((sample_note(fig.ovs, fl, hz) + "; " if fig.ovs else "")
                + f"frames received by every port of the {len(bridges)} bridges; ovs-vswitchd serves "
                f"{_bridges_served()} on this machine, all in its CPU; {delivered}")
        rows.append(cpu_row(OVS_METRIC, fig.ovs, fl, OVS_FLOOR_WHAT, cond, note))
    return rows
