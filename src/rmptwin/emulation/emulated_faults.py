"""The FaultTarget of ``core.nemesis`` for an emulated run: what each fault step does to the
run's node processes and links (``emulate.EmulatedRun`` mixes it in; the interpreter,
``core.nemesis.FaultInterpreter``, decides when and to what). A crash kills the node's
process (on its server too), a recover wakes its spare or starts it anew from a config of
its own, a pause stops the process with its state, link faults go to the network's relay or
netem link, a clock fault to the node itself."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rmptwin.core.events import Event, Kind
from rmptwin.core.host import TimeDilation
from rmptwin.emulation.dilation import dilated_link
from rmptwin.emulation.nodeproc import NodeProc, Spares
from rmptwin.model import LinkParams
from rmptwin.node.eventlog import EventWriter
from rmptwin.rundir.run import RunDir

if TYPE_CHECKING:
    from rmptwin.emulation.emulated_network import EmulatedNetwork
    from rmptwin.emulation.flatnet import FlatNetwork
    from rmptwin.node.node_config import NodeConfig


class EmulatedFaults:
    """The fault steps' effects; the run that mixes this in owns the state below."""

    procs: dict[str, NodeProc]
    spares: Spares
    runner_log: EventWriter | None
    net: EmulatedNetwork | FlatNetwork | None
    dilation: TimeDilation
    paused: dict[str, int]   # node -> when it was stopped (SIGSTOP)
    run: RunDir

    if TYPE_CHECKING:   # the run's own, which a recovery uses
        def t0_on(self, node: str) -> int: ...
        def _node_config(self, t0_ns: int | None = None) -> NodeConfig: ...
        def _stage(self, config: Path) -> None: ...
        def _start_node(self, name: str, config: Path, incarnation: int, spare: bool = False) -> NodeProc: ...

    def _live(self, node: str) -> NodeProc | None:
        np = self.procs.get(node)
        return np if np is not None and np.proc.poll() is None else None

    def crash(self, t: int, node: str) -> None:
        np = self._live(node)
        if np is None:
            return
        np.proc.kill()
        assert self.runner_log is not None   # faults come after t0
        self.runner_log.add(t, node, np.role, Event(Kind.CRASH))

    def recover(self, t: int, node: str) -> None:
        old = self.procs.get(node)
        if old is not None and old.proc.poll() is None:
            try:
                old.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                return  # never crashed: nothing to recover
        inc = (old.incarnation + 1) if old else 1
        np = self.spares.take(node, inc)
        if np is not None:
            np.send(f"WAKE {self.t0_on(node)}")
        else:
            path = self._node_config(t0_ns=self.t0_on(node)).write(self.run.node_config_path(node, inc))
            self._stage(path)
            np = self._start_node(node, path, inc)
        self.procs[node] = np
        self.spares.prepare(node, inc + 1)
        assert self.runner_log is not None   # faults come after t0
        self.runner_log.add(t, node, np.role, Event(Kind.RECOVER, detail={"incarnation": inc}))

    def set_link(self, t: int, link: str, up: bool) -> None:
        assert self.net is not None   # faults come after the network is up
        self.net.set_link(link, up)

    def set_loss(self, t: int, link: str, loss: Any) -> None:
        assert self.net is not None   # faults come after the network is up
        self.net.set_loss(link, dilated_link(LinkParams(loss=loss), self.dilation.factor).loss)

    def set_chaos(self, t: int, link: str, duplicate: float, reorder: float, reorder_ns: int) -> None:
        # _network refuses dup_reorder on the flat network
        cast("EmulatedNetwork", self.net).set_chaos(link, duplicate=duplicate, reorder=reorder,
                                                    reorder_ns=self.dilation.wall(reorder_ns))

    def pause(self, t: int, node: str, member: int | None) -> None:
        self._pause_or_resume(t, node, member, "pause")

    def resume(self, t: int, node: str, member: int | None) -> None:
        self._pause_or_resume(t, node, member, "resume")

    def _pause_or_resume(self, t: int, node: str, member: int | None, a: str) -> None:
        np = self._live(node)
        if np is None:
            return
        assert self.runner_log is not None   # faults come after t0
        if member is not None:   # one etcd member of the sequencer host: the node stops it
            np.send(f"ETCD {a} {member}")
            log_kind = Kind.PAUSE if a == "pause" else Kind.RESUME
            self.runner_log.add(t, node, np.role, Event(log_kind, detail={"member": member}))
        elif a == "pause":   # the process stops with its state; datagrams wait in its socket buffers
            np.proc.send_signal(signal.SIGSTOP)
            self.paused[node] = t
            self.runner_log.add(t, node, np.role, Event(Kind.PAUSE))
        elif node in self.paused:
            np.proc.send_signal(signal.SIGCONT)
            self.runner_log.add(t, node, np.role, Event(Kind.RESUME, detail={"paused_ns": t - self.paused.pop(node)}))

    def clock(self, t: int, node: str, jump_ns: int | None, drift_ppm: float | None) -> None:
        np = self._live(node)
        if np is not None:
            jump = "-" if jump_ns is None else str(jump_ns)
            drift = "-" if drift_ppm is None else repr(float(drift_ppm))
            np.send(f"CLOCK {jump} {drift}")   # the node logs CLOCK itself

