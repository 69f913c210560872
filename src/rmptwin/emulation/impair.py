"""Link impairment backends: netem (Mininet's TCLink) and the user-space relay.

Both expose the same operations on a built link: change loss, delay, jitter, take it
down or up. ``RelayLink`` runs ``relay.py`` in the link's own namespace between two
veths; ``NetemLink`` rewrites the netem qdisc of both interfaces with ``tc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmptwin.emulation.cluster import is_remote, kill_remote, remote_command
from rmptwin.errors import UserError
from rmptwin.model import Bernoulli, GilbertElliott, LinkParams, Topology, Trace

if TYPE_CHECKING:   # Mininet is untyped: these are Any to mypy
    from mininet.link import Intf, Link
    from mininet.node import Node


def is_impaired(p: LinkParams) -> bool:
    loss_mean = p.loss.mean if hasattr(p.loss, "mean") else 0.0
    return bool(p.delay_ms or p.jitter_ms or loss_mean or p.bandwidth_mbps or p.queue_packets
                or isinstance(p.loss, Trace))


def traced_links(topo: Topology) -> list[str]:
    """Links (switch links and hosts' access links) whose loss is a trace."""
    return ([lk.name for lk in topo.links if isinstance(lk.loss, Trace)]
            + [f"{h.name}-{h.switch}" for h in topo.hosts if isinstance(h.link.loss, Trace)])


def impair_for_traces(requested: str, topo: Topology) -> str:
    """netem cannot replay a loss trace (it only draws): a topology with a traced link gets
    the relay under ``auto``, and one clear error under a forced ``netem``."""
    traced = traced_links(topo)
    if not traced:
        return requested
    if requested == "netem":
        more = f" (and {len(traced) - 1} more)" if len(traced) > 1 else ""
        raise UserError(f"link {traced[0]}{more}: a loss trace cannot be replayed by netem (it only draws losses); "
                        "use --impair relay or auto")
    return "relay" if requested == "auto" else requested


def delay_only(p: LinkParams) -> bool:
    """An impaired link that neither loses nor jitters: its model takes no random draws, so the
    node at its host end can apply it (``node.hostlink``) instead of a relay process."""
    loss_mean = p.loss.mean if hasattr(p.loss, "mean") else 0.0
    return is_impaired(p) and not loss_mean and not p.jitter_ms and not isinstance(p.loss, Trace)


def disable_tx_offload(node: Node, intf: str) -> None:
    # Frames relayed through AF_PACKET keep the partial checksum a veth leaves for
    # offload; without this the receiver silently drops relayed UDP.
    node.cmd(f"ethtool -K {intf} tx off >/dev/null 2>&1")


@dataclass
class RelayLink:
    """A link whose two directions pass through a relay process in namespace ``node``."""

    name: str
    a: str
    b: str
    node: Node            # a namespace of its own
    a_intf: str
    b_intf: str
    params: LinkParams
    dir: Path
    seed: int
    t0_ns: int
    proc: subprocess.Popen[bytes] | None = None
    _remote_cmd: list[str] = field(default_factory=list)   # how it was started on its server, if remote
    _replies: bytes = b""                                   # a remote relay's stdout not yet read
    _lock: threading.Lock = field(default_factory=threading.Lock)   # one command at a time on its stdin
    # Set only for the benchmark's floor: the relay forwards with this constant delay and no
    # link model (relay.FixedDelay); None: the link's model, as every run uses.
    fixed_delay_ns: int | None = None

    @property
    def control_path(self) -> Path:
        return self.dir / f"{self.name}.sock"

    @property
    def drop_path(self) -> Path:
        return self.dir / f"{self.name}.drops"

    @property
    def counts_path(self) -> Path:
        return self.dir / f"{self.name}.counts.json"

    def start(self) -> None:
        ready = self.dir / f"{self.name}.ready"
        ready.unlink(missing_ok=True)
        cfg = {
            "link": self.name, "a_node": self.a, "b_node": self.b,
            "a_intf": self.a_intf, "b_intf": self.b_intf,
            "params": self.params.model_dump(mode="json"), "seed": self.seed, "t0_ns": self.t0_ns,
            "control": str(self.control_path), "droplog": str(self.drop_path),
            "counts": str(self.counts_path), "ready": str(ready),
        }
        if self.fixed_delay_ns is not None:
            cfg["fixed_delay_ns"] = self.fixed_delay_ns
        log = open(self.dir / f"{self.name}.log", "ab")
        src = str(Path(__file__).resolve().parents[2])
        if is_remote(self.node):
            # On a server (emulation.cluster), over SSH with its environment spelled out. Its files
            # may not be ours (server_files), so it takes its config, commands and readiness over
            # the SSH session's stdin and stdout, and the end of stdin stops it.
            self._remote_cmd = [sys.executable, "-m", "rmptwin.emulation.relay", "-", f"{self.name}.relay"]
            words = remote_command(self._remote_cmd, {"PYTHONPATH": src, "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            self.proc = self.node.popen(words, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.PIPE)
            self._write_line(cfg)
            return
        cfg_path = self.dir / f"{self.name}.json"
        cfg_path.write_text(json.dumps(cfg, indent=1))
        cmd = [sys.executable, "-m", "rmptwin.emulation.relay", str(cfg_path)]
        env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            ["mnexec", "-a", str(self.node.pid), *cmd],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )

    def _write_line(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None   # started with stdin piped
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def _read_line(self, timeout: float) -> bytes:
        """The remote relay's next line on stdout; b"" if it ended or said nothing in time."""
        assert self.proc is not None and self.proc.stdout is not None   # started with stdout piped
        fd, deadline = self.proc.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return b""
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._replies += chunk
        line, self._replies = self._replies.split(b"\n", 1)
        return line

    def _relay_exited(self) -> UserError:
        tail = (self.dir / f"{self.name}.log").read_text()[-300:].strip().splitlines()
        return UserError(f"link {self.name}: impairment relay exited: {tail[-1] if tail else '?'}")

    def wait_ready(self, timeout: float = 20.0) -> None:
        if self._remote_cmd:
            if not self._read_line(timeout).startswith(b"READY"):
                if self.proc is not None and self.proc.poll() is not None:
                    raise self._relay_exited()
                raise UserError(f"link {self.name}: impairment relay did not start within {timeout:.0f} s")
            return
        ready = self.dir / f"{self.name}.ready"
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc is not None and self.proc.poll() is not None:
                raise self._relay_exited()
            if time.monotonic() > deadline:
                raise UserError(f"link {self.name}: impairment relay did not start within {timeout:.0f} s")
            time.sleep(0.02)

    def command(self, msg: dict[str, Any]) -> dict[str, Any]:
        reply = self._remote_command(msg) if self._remote_cmd else self._socket_command(msg)
        if not reply.get("ok"):
            raise UserError(f"link {self.name}: {reply.get('error')}")
        return reply

    def _remote_command(self, msg: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                self._write_line(msg)
            except (BrokenPipeError, ValueError):   # ValueError: its stdin is closed (stopping)
                return {"ok": False, "error": "the relay has stopped"}
            line = self._read_line(5.0)
        if not line:
            return {"ok": False, "error": "the relay did not answer within 5 s"}
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _socket_command(self, msg: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5.0)
            s.connect(str(self.control_path))
            s.sendall(json.dumps(msg).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        reply: dict[str, Any] = json.loads(data)
        return reply

    def set(self, **changes: Any) -> None:
        if "loss" in changes and hasattr(changes["loss"], "model_dump"):
            changes["loss"] = changes["loss"].model_dump(mode="json")
        self.command({"op": "set", **changes})

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.command({"op": "stats"})["stats"]
        return stats

    def flush(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.command({"op": "flush"})
            except (OSError, ValueError, UserError):
                pass

    def signal_stop(self) -> None:
        """Ask the relay to stop without waiting (teardown signals all relays, then waits)."""
        if self.proc is not None and self.proc.poll() is None:
            self._terminate()

    def _terminate(self) -> None:
        assert self.proc is not None   # both callers checked it runs
        if is_remote(self.node):   # the relay runs on a server; SIGTERM here would reach only SSH
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None   # piped
                self.proc.stdin.close()   # the end of its stdin stops it, flushed
            kill_remote(self.node, self._remote_cmd, "TERM")
        else:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


def _netem_args(p: LinkParams) -> str:
    parts = []
    if p.delay_ms or p.jitter_ms:
        # LinkParams' jitter is uniform in [0, j] added to the delay without reordering;
        # netem's is +-j around the delay, so centre it.
        parts.append(f"delay {p.delay_ms + p.jitter_ms / 2:.3f}ms")
        if p.jitter_ms:
            parts.append(f"{p.jitter_ms / 2:.3f}ms")
    loss = p.loss
    if isinstance(loss, Trace):
        raise UserError("a loss trace cannot be replayed by netem (it only draws losses); use --impair relay")
    if isinstance(loss, GilbertElliott):
        # netem's gemodel p r 1-h 1-k, in percent.
        parts.append(f"loss gemodel {loss.p_gb * 100:.4f}% {loss.p_bg * 100:.4f}% "
                     f"{loss.loss_bad * 100:.4f}% {loss.loss_good * 100:.4f}%")
    elif isinstance(loss, Bernoulli) and loss.p:
        parts.append(f"loss random {loss.p * 100:.4f}%")
    if p.bandwidth_mbps:
        parts.append(f"rate {p.bandwidth_mbps}mbit")
    parts.append(f"limit {p.queue_limit()}")
    return " ".join(parts)


@dataclass
class NetemLink:
    """A TCLink whose netem qdiscs are rewritten in place (kernels with sch_netem)."""

    name: str
    a: str
    b: str
    link: Link
    params: LinkParams
    up: bool = True

    def _intfs(self) -> tuple[Intf, Intf]:
        return (self.link.intf1, self.link.intf2)

    def set(self, **changes: Any) -> None:
        if "up" in changes:
            self.up = bool(changes.pop("up"))
            for intf in self._intfs():
                intf.ifconfig("up" if self.up else "down")
        if not changes:
            return
        merged = {**self.params.model_dump(), **{k: (v.model_dump() if hasattr(v, "model_dump") else v)
                                                  for k, v in changes.items()}}
        self.params = LinkParams.model_validate(merged)
        self.apply()

    def apply(self) -> None:
        """Install the full configuration as one netem qdisc per end (TCLink cannot express
        Gilbert-Elliott loss or a queue limit without bandwidth)."""
        for intf in self._intfs():
            out = intf.node.cmd(f"tc qdisc replace dev {intf.name} root netem {_netem_args(self.params)} 2>&1")
            if out.strip():
                raise UserError(f"link {self.name}: netem refused the configuration: {out.strip().splitlines()[0]}")

    def stats(self) -> dict[str, Any]:
        return {"params": self.params.model_dump(mode="json"), "up": self.up}

    def flush(self) -> None:
        pass

    def signal_stop(self) -> None:
        pass

    def stop(self) -> None:
        pass
