"""The run's files on servers that share nothing with this machine but SSH.

A node or relay started on a server (``emulation.cluster``) reads its config from, and writes
its logs to, the same absolute paths as on one machine: the run directory's ``nodes/`` and
``pcaps/``, and the network's state directory's ``links/``. On a local server those paths are
this machine's files. On a real machine (or a local server made ``--isolated``) they are
not, so the run carries them over SSH, as a tar stream each way:

- ``stage``: before the nodes start, make those directories on every such server and copy
  the node config (and a secure run's key file) there; ``stage_file`` for a recovering
  node's own config, mid-run;
- ``collect``: after the nodes and captures stopped and the relays flushed, copy each
  server's ``nodes/``, ``pcaps/`` and ``links/`` back into the same places here, where the
  runner reads them as it reads a one-machine run's;
- ``clear``: remove the run's directories from those servers (never from one that shares
  this machine's files: there they are the run's own).

Nothing here runs for a server that shares this machine's files (``Server.shares_files``)."""

from __future__ import annotations

import io
import shlex
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from rmptwin.emulation.servers import Server, ssh_base
from rmptwin.errors import UserError

TIMEOUT_S = 120.0


def _said(r: subprocess.CompletedProcess[bytes]) -> str:
    lines = r.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit {r.returncode}"


def push(server: Server, files: Iterable[Path], dirs: Iterable[Path]) -> None:
    """Make ``dirs`` on ``server`` and copy ``files`` to the same absolute paths there (modes
    kept: a key file stays 0600)."""
    if server.shares_files:
        return
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files:
            tar.add(str(f), arcname=str(Path(f).resolve()).lstrip("/"), recursive=False)
    made = " ".join(shlex.quote(str(d)) for d in dirs) or "/"
    r = subprocess.run([*ssh_base(), server.ip, f"mkdir -p {made} && tar -xpf - -C /"], input=buf.getvalue(),
                       capture_output=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        raise UserError(f"server {server.name} ({server.ip}): cannot copy the run's files there: {_said(r)}")


def pull(server: Server, dirs: Sequence[Path]) -> None:
    """Copy whichever of ``dirs`` exist on ``server`` into the same places here, merged with
    what is here (a file there replaces its namesake)."""
    if server.shares_files or not dirs:
        return
    names = " ".join(shlex.quote(str(d).lstrip("/")) for d in dirs)
    script = (f"cd / && set -- && for d in {names}; do [ -e \"$d\" ] && set -- \"$@\" \"$d\"; done; "
              "[ $# -eq 0 ] || tar -cf - \"$@\" || [ $? -eq 1 ]")   # 1: a relay's log grew while read
    r = subprocess.run([*ssh_base(), server.ip, script], capture_output=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        raise UserError(f"server {server.name} ({server.ip}): cannot copy the run's files back: {_said(r)}")
    if not r.stdout:   # none of dirs there
        return
    untar = subprocess.run(["tar", "-xpf", "-", "-C", "/"], input=r.stdout, capture_output=True, timeout=TIMEOUT_S)
    if untar.returncode != 0:
        raise UserError(f"server {server.name}: the run's files came back unreadable: {_said(untar)}")


def remove(server: Server, dirs: Iterable[Path]) -> None:
    """Delete ``dirs`` on ``server`` (best effort: cleanup must not hide the run's own error)."""
    paths = [str(d) for d in dirs if len(Path(d).resolve().parts) > 2]   # never / or a top-level directory
    if server.shares_files or not paths:
        return
    try:
        subprocess.run([*ssh_base(), server.ip, "rm -rf -- " + " ".join(shlex.quote(p) for p in paths)],
                       capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass


def apart(servers: Iterable[Server]) -> list[Server]:
    """The servers whose files are their own."""
    return [s for s in servers if not s.shares_files]
