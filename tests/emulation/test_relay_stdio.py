"""A relay on a server (``relay - NAME``, as ``impair.RelayLink`` starts one over SSH): its
config on stdin's first line, "READY" on stdout, each command on stdin answered by one line
on stdout, and the end of stdin stops it with its counts written. No file is shared with the
runner but what the relay writes itself (its drop log and counts, under a directory it makes).

The relay runs in a network namespace of its own with two veths, so nothing it forwards
leaves it. Needs root."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rmptwin.model import LinkParams

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def netns():
    name = f"rtrelay{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        ip = ["ip", "-n", name]
        subprocess.run([*ip, "link", "add", "ra", "type", "veth", "peer", "name", "rb"], check=True)
        for dev in ("ra", "rb", "lo"):
            subprocess.run([*ip, "link", "set", dev, "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _line(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bytes:
    assert proc.stdout is not None
    buf = b""
    while not buf.endswith(b"\n"):
        assert select.select([proc.stdout], [], [], timeout)[0], f"no line within {timeout} s (got {buf!r}); stderr: " + (
            os.read(proc.stderr.fileno(), 4000).decode() if proc.poll() is not None and proc.stderr else "")
        ch = os.read(proc.stdout.fileno(), 1)
        assert ch, f"stdout ended (got {buf!r})"
        buf += ch
    return buf.rstrip(b"\n")


def _ask(proc: subprocess.Popen[bytes], msg: dict) -> dict:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()
    return json.loads(_line(proc))


def test_a_relay_on_stdin_and_stdout_answers_each_command_and_stops_at_the_end_of_stdin(netns, tmp_path):
    links = tmp_path / "state" / "links"   # not there yet: a server's relay makes it
    cfg = {"link": "s1-s2", "a_node": "s1", "b_node": "s2", "a_intf": "ra", "b_intf": "rb",
           "params": LinkParams(delay_ms=5, loss=0.01).model_dump(mode="json"), "seed": 3,
           "droplog": str(links / "s1-s2.drops"), "counts": str(links / "s1-s2.counts.json")}
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "rmptwin.emulation.relay", "-",
                             "s1-s2.relay"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        # the config and a command at once: the command waits in the relay's buffer, not lost
        proc.stdin.write(json.dumps(cfg).encode() + b"\n" + json.dumps({"op": "stats"}).encode() + b"\n")
        proc.stdin.flush()
        assert _line(proc).startswith(b"READY ")
        first = json.loads(_line(proc))
        assert first["ok"] and first["stats"]["ab"]["params"]["delay_ms"] == 5
        assert _ask(proc, {"op": "set", "dir": "ab", "delay_ms": 40, "loss": 0.2}) == {"ok": True}
        stats = _ask(proc, {"op": "stats"})["stats"]
        assert stats["ab"]["params"]["delay_ms"] == 40 and stats["ba"]["params"]["delay_ms"] == 5
        assert _ask(proc, {"op": "set", "dir": "both", "up": False}) == {"ok": True}
        assert _ask(proc, {"op": "stats"})["stats"]["ba"]["up"] is False
        bad = _ask(proc, {"op": "reboot"})
        assert not bad["ok"] and "unknown op" in bad["error"]
        assert _ask(proc, {"op": "flush"}) == {"ok": True}
        assert json.loads((links / "s1-s2.counts.json").read_text())["link"] == "s1-s2"
        proc.stdin.close()   # the runner (its SSH session) went away
        assert proc.wait(timeout=5) == 0, proc.stderr.read() if proc.stderr else ""
        assert (links / "s1-s2.drops").exists()
        assert not list(links.glob("*.sock")) and not list(links.glob("*.ready"))   # no file for control
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
