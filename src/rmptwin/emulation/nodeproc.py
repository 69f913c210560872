"""A node process the runner started (``emulate.Run``), and the line protocol it speaks.

Node control is a line protocol on the node's stdin (works the same through mnexec and
through a container): ``GO <t0_ns>`` starts it, ``STOP`` ends it cleanly; EOF (the runner
died) stops it too. A crash fault is SIGKILL: the node loses whatever it had not flushed.
The runner also sends ``ETCD pause|resume <member>`` and ``CLOCK <jump_ns> <drift_ppm>``
(nemesis steps), and a spare ``HOLD <groups>`` (it answers ``HELD <n>``) then ``WAKE <t0_ns>``
(``node.main``). ``HALT`` (answered ``HALTED``) comes before STOP: the node stops timing its
timers, so that thirty nodes exiting at once (a CPU burst of interpreters shutting down) is
not counted as lateness of the ones that have not yet been told. On stdout the node prints ``READY <groups>`` once bound and joined,
``STATUS <json>`` as it goes (read for the drain), ``DONE <json>`` (its counters) at the end.
"""

from __future__ import annotations

import json
import queue
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmptwin.errors import UserError

READY_TIMEOUT_S = 180.0  # dozens of Python processes importing on two cores


@dataclass
class NodeProc:
    """One incarnation of a node: its process, the lines it printed, its last STATUS and its DONE."""

    name: str
    role: str
    incarnation: int
    proc: subprocess.Popen[bytes]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    done: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    groups: list[str] = field(default_factory=list)
    halted: bool = False        # said HALTED: no longer timing its timers

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None   # every node is started with stdin=PIPE
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass


def read_output(np: NodeProc) -> None:
    """Read the node's stdout until EOF (a thread of its own): STATUS and DONE kept, lines queued."""
    assert np.proc.stdout is not None   # started with stdout=PIPE
    for raw in iter(np.proc.stdout.readline, b""):
        line = raw.decode(errors="replace").strip()
        if line.startswith("STATUS "):
            try:
                np.status = json.loads(line[7:])
            except ValueError:
                pass
            continue
        if line == "HALTED":
            np.halted = True
            continue
        if line.startswith("DONE "):
            try:
                np.done = json.loads(line[5:])
            except ValueError:
                np.done = {}
        np.lines.put(line)
    np.lines.put("EOF")


def wait_for_line(np: NodeProc, want: str, deadline: float, err_path: Path) -> None:
    """Until the node prints ``want`` (READY: its groups kept); one UserError line if it exits or is late."""
    while True:
        try:
            line = np.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise UserError(f"node {np.name} did not start within {READY_TIMEOUT_S:.0f} s; see {err_path}") from None
        if line == want or line.startswith(want + " "):
            if line.startswith("READY "):
                try:
                    np.groups = json.loads(line[6:])
                except ValueError:
                    np.groups = []
            return
        if line == "EOF":
            tail = err_path.read_text(errors="replace").strip().splitlines()[-1:] if err_path.exists() else []
            raise UserError(f"node {np.name} exited at start ({tail[0] if tail else 'no message'}); see {err_path}")


class Spares:
    """The next incarnation of each node the fault schedule recovers, started ahead
    (``node.main --spare``): at its recover fault a spare needs only ``WAKE <t0>``, not an
    interpreter's start, which took 2.5 s on the loaded 2-CPU machine (a restarted EV missed a
    3.5 s run). At most one spare per node waits at a time; ``start(name, incarnation)``
    starts one process (the runner's ``_start_node``)."""

    def __init__(self, start: Callable[[str, int], NodeProc] | None, recovers: dict[str, int]) -> None:
        self._start = start
        self._left = {name: n for name, n in recovers.items() if n > 0}   # recover faults still to come
        self._waiting: dict[str, NodeProc] = {}
        self._groups: dict[str, list[str]] = {}

    def prepare(self, name: str, incarnation: int) -> NodeProc | None:
        """Start ``name``'s spare for ``incarnation`` if a recover of it is still to come."""
        if self._left.get(name, 0) <= 0 or name in self._waiting:
            return None
        self._left[name] -= 1
        assert self._start is not None   # given whenever a recover is to come
        np = self._waiting[name] = self._start(name, incarnation)
        self._send_hold(name)
        return np

    def hold(self, name: str, groups: list[str]) -> None:
        """The groups ``name``'s first incarnation joined (its READY): each of its spares holds
        them (``node.main``'s HOLD), so a crash of the node withdraws no membership."""
        if name not in self._left:
            return
        self._groups[name] = list(groups)
        self._send_hold(name)

    def _send_hold(self, name: str) -> None:
        """``HOLD <groups>`` to ``name``'s waiting spare, once both are known."""
        if name in self._waiting and name in self._groups:
            self._waiting[name].send("HOLD " + json.dumps(self._groups[name]))

    def take(self, name: str, incarnation: int) -> NodeProc | None:
        """The waiting spare of ``name`` if it is ``incarnation`` and alive (else None: start one)."""
        np = self._waiting.pop(name, None)
        if np is not None and (np.incarnation != incarnation or np.proc.poll() is not None):
            self._end(np)
            return None
        return np

    def close(self) -> None:
        """End every spare still waiting (EOF on its stdin makes it exit)."""
        for np in self._waiting.values():
            self._end(np)
        self._waiting.clear()

    @staticmethod
    def _end(np: NodeProc) -> None:
        assert np.proc.stdin is not None   # started with stdin=PIPE
        try:
            np.proc.stdin.close()
        except OSError:
            pass
        try:
            np.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            np.proc.kill()
            np.proc.wait()
