"""`rmptwin image build`: the node image, built with the Docker engine here and cached.

Two layers, each tagged with a hash of its definition so an unchanged definition is
never rebuilt:
- ``rmptwin-base:<hash>``: Debian bookworm minbase from ``debootstrap`` (the Debian
  mirror is reachable where no image registry is) with ``nodes/base-packages.txt``,
  brought in with ``docker import``;
- ``rmptwin-node:<hash>``: ``nodes/Dockerfile`` on that base.

Why not python:3.11-slim: the containers run the repository's own venv, bind-mounted
read-only, whose interpreter is Debian's /usr/bin/python3 3.11; bookworm's python3 is
that interpreter, so the pinned dependencies work unchanged and nothing is fetched
from a registry. The same recipe works in the Vagrant VM.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from rmptwin.errors import UserError

REPO = Path(__file__).resolve().parents[3]
NODES = REPO / "nodes"
SUITE = "bookworm"
MIRROR = os.environ.get("RMPTWIN_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BUILD_LOG = Path("/var/log/rmptwin-image-build.log")


def _packages() -> list[str]:
    lines = (NODES / "base-packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _hash(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_tag() -> str:
    return f"rmptwin-base:{_hash(SUITE.encode(), ' '.join(_packages()).encode())}"


def node_tag() -> str:
    files = sorted(p for p in NODES.iterdir() if p.is_file())
    return f"rmptwin-node:{_hash(base_tag().encode(), *(p.name.encode() + p.read_bytes() for p in files))}"


def image_exists(tag: str) -> bool:
    r = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True)
    return r.returncode == 0


def _run_logged(cmd: list[str], what: str, **kw) -> None:
    with open(BUILD_LOG, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        raise UserError(f"{what} failed (exit {r.returncode}); see {BUILD_LOG}")


def build_base(progress: Callable[[str], None]) -> str:
    tag = base_tag()
    if image_exists(tag):
        return tag
    if not shutil.which("debootstrap"):
        raise UserError("debootstrap is not installed; run `make provision`")
    progress(f"making the node base image {tag} with debootstrap ({SUITE}, {MIRROR}); this takes a few minutes")
    with tempfile.TemporaryDirectory(prefix="rmptwin-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        _run_logged(["debootstrap", "--variant=minbase", f"--include={','.join(_packages())}", SUITE, str(root),
                     MIRROR], "debootstrap of the node base image")
        # Smaller image: package lists and caches are not needed at run time.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        _run_logged(["docker", "import", "-", tag], "docker import of the node base image", stdin=tar.stdout)
        tar.wait()
    return tag


def ensure_image(force: bool = False, progress: Callable[[str], None] | None = None) -> str:
    """The node image's tag, building what is missing (or everything with ``force``)."""
    progress = progress or (lambda msg: None)
    if not shutil.which("docker"):
        raise UserError("no Docker engine (docker not found); install docker.io or use --nodes ns")
    tag = node_tag()
    if not force and image_exists(tag):
        return tag
    if force:
        subprocess.run(["docker", "rmi", "-f", tag, base_tag()], capture_output=True)
    base = build_base(progress)
    progress(f"building {tag} from {NODES / 'Dockerfile'}")
    # --network none: the Dockerfile only copies files; the engine has no bridge anyway.
    _run_logged(["docker", "build", "--network", "none", "--build-arg", f"BASE={base}", "-t", tag, str(NODES)],
                "docker build of the node image", env={**os.environ, "DOCKER_BUILDKIT": "0"})
    return tag
