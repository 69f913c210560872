"""`rmptwin image build`: the node image, built with the Docker engine here and cached.

Two layers, each tagged with a hash of its definition so an unchanged definition is
never rebuilt:
- ``rmptwin-base:<hash>``: Debian bookworm minbase from ``debootstrap`` (the Debian
  mirror is reachable where no image registry is) with ``nodes/base-packages.txt``,
  packed with ``tar`` and imported into the engine (the SDK's ``docker import``);
- ``rmptwin-node:<hash>``: ``nodes/Dockerfile`` on that base (the SDK's ``docker build``,
  the engine's classic builder, no network).

The engine is reached through the Docker SDK (``engine``); ``debootstrap`` and ``tar`` are
the only command lines left, and neither is the engine's.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmptwin.emulation import docker_engine as engine
from rmptwin.errors import UserError

REPO = Path(__file__).resolve().parents[3]
NODES = REPO / "nodes"
SUITE = "bookworm"
MIRROR = os.environ.get("RMPTWIN_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BUILD_LOG = Path("/var/log/rmptwin-image-build.log")
# Where a machine that may not reach a Debian mirror finds the images saved elsewhere
# (`rmptwin image save`; the Vagrant box made here carries one, scripts/vm/build-box.sh).
SAVED_IMAGES = Path(os.environ.get("RMPTWIN_NODE_IMAGES", "/var/lib/rmptwin/node-images.tar"))


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


CONTEXT_MTIME = 0   # every file of the build context: a layer's digest holds its files' times


def node_tag() -> str:
    files = sorted(p for p in NODES.iterdir() if p.is_file())
    return f"rmptwin-node:{_hash(base_tag().encode(), f'mtime {CONTEXT_MTIME}'.encode(), *(p.name.encode() + p.read_bytes() for p in files))}"


def build_context(into: Path) -> Path:
    """A copy of nodes/ whose files all have one time: COPY keeps a file's mtime, so the node's
    files read the same in images built from any checkout (the directories COPY writes into
    still take the build's time, so builds that miss the cache differ in the top digest)."""
    ctx = into / "nodes"
    shutil.copytree(NODES, ctx)
    for p in [ctx, *ctx.rglob("*")]:
        os.utime(p, (CONTEXT_MTIME, CONTEXT_MTIME), follow_symlinks=False)
    return ctx


def image_exists(tag: str) -> bool:
    return engine.image_exists(tag)


def image_id(tag: str | None) -> str | None:
    """The built image's content id: the tag hashes the image's definition, but debootstrap
    fetches whatever the mirror has at build time, so two builds of one tag can differ."""
    return engine.image_id(tag)


def _run_logged(cmd: list[str], what: str, **kw: Any) -> None:
    with open(BUILD_LOG, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        raise UserError(f"{what} failed (exit {r.returncode}); see {BUILD_LOG}")


def save_image(tar: Path, progress: Callable[[str], None] | None = None) -> str:
    """The node image (its base's layers with it), built if missing, saved to ``tar`` for
    ``ensure_image`` on another machine (at ``SAVED_IMAGES`` there)."""
    tag = ensure_image(progress=progress)
    engine.save_image(tag, tar)
    return tag


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
        tarball = Path(tmp) / "rootfs.tar"
        _run_logged(["tar", "-C", str(root), "-cf", str(tarball), "."], "packing the node base image")
        with open(BUILD_LOG, "ab") as log:
            log.write(f"\n(engine) import {tarball} as {tag}\n".encode())
        engine.import_image(tarball, tag)
    return tag


def ensure_image(force: bool = False, progress: Callable[[str], None] | None = None) -> str:
    """The node image's tag, building what is missing (or everything with ``force``)."""
    progress = progress or (lambda msg: None)
    engine.client()   # no engine: one line saying so, before anything is built
    tag = node_tag()
    if not force and image_exists(tag):
        return tag
    if not force and SAVED_IMAGES.is_file():
        progress(f"loading the node image from {SAVED_IMAGES}")
        engine.load_images(SAVED_IMAGES)
        if image_exists(tag):
            return tag
        progress(f"{SAVED_IMAGES} holds another definition's image; building {tag}")
    if force:
        engine.remove_images([tag, base_tag()])
    base = build_base(progress)
    progress(f"building {tag} from {NODES / 'Dockerfile'}")
    # No network: the Dockerfile only copies files; the engine has no bridge anyway.
    with open(BUILD_LOG, "ab") as log:
        log.write(f"\n(engine) build {NODES} -t {tag} --build-arg BASE={base} --network none\n".encode())
        try:
            with tempfile.TemporaryDirectory(prefix="rmptwin-context-") as tmp:
                engine.build_image(build_context(Path(tmp)), tag, {"BASE": base}, log)
        except UserError as e:
            raise UserError(f"{e}; see {BUILD_LOG}") from None
    return tag
