"""Which build of the cores runs: compiled by mypyc, or the interpreted sources.

``scripts/build_compiled.py`` (``make compiled``; ``make test`` and ``make bench`` run it,
``make run`` does not) compiles the cores and the simulator's hot modules from their
unchanged sources into ``build/compiled/``, never next to the sources: that directory holds
only extension modules (``rmptwin/rmp/wire.*.so``, ...), one shared library of them all,
and ``build.json``, the list of modules with a hash of each one's source and of every other
rmptwin module they import (mypyc inlines those modules' Final constants). ``rmptwin/__init__`` calls ``select()`` once, before any core is imported; it
reads ``RMPTWIN_PURE`` (the one place that does) and, unless it is ``1``, puts a finder at
the head of ``sys.meta_path`` that loads exactly those modules from ``build/compiled``.
Every other module, and every module when the build is absent, stale (any of those hashes
differs) or for another Python, comes from ``src/`` as usual, silently (``ACTIVE.why`` says why), so ``PYTHONPATH=src`` keeps working. It is all or
nothing: compiled modules call each other's classes natively, so one edited source sends
every core back to its interpreted form until the next build.

``ACTIVE`` says which build runs and why (``rmptwin env``, ``rmptwin sim``'s summary, a run's
manifest.json); ``describe()`` is that as one line. ``child_env()`` is what a child process
with an environment of its own (an emulated node) needs to run the same build.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

SRC = Path(__file__).resolve().parents[1]          # src/, which holds the rmptwin package
REPO = SRC.parent
BUILD_DIR = REPO / "build" / "compiled"
MANIFEST = "build.json"
PURE_ENV = "RMPTWIN_PURE"
COMPILED, INTERPRETED = "compiled", "interpreted"
REBUILD = "make compiled"     # what builds it (scripts/build_compiled.py); make test and make bench run it


@dataclass(frozen=True)
class Build:
    kind: str                 # COMPILED or INTERPRETED
    why: str                  # how it was chosen, in words
    modules: tuple[str, ...] = ()   # the compiled modules (empty when interpreted)
    mypy: str = ""            # the mypy (mypyc) version that compiled them

    @property
    def compiled(self) -> bool:
        return self.kind == COMPILED


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_path(module: str, src: Path = SRC) -> Path:
    return src.joinpath(*module.split(".")).with_suffix(".py")


def extension_path(name: str, build_dir: Path = BUILD_DIR) -> Path:
    """Where the build put extension module ``name`` (for this interpreter's ABI)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return build_dir.joinpath(*name.split(".")).with_name(name.rpartition(".")[2] + suffix)


def read_manifest(build_dir: Path = BUILD_DIR) -> dict[str, object] | None:
    try:
        data = json.loads((build_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check(build_dir: Path = BUILD_DIR, src: Path = SRC) -> tuple[Build, dict[str, Path]]:
    """The compiled build in ``build_dir`` if it is usable here, with the path of each
    extension module to load; else the interpreted build saying why not."""
    manifest = read_manifest(build_dir)
    if manifest is None:
        return Build(INTERPRETED, f"no compiled build ({REBUILD} makes it)"), {}
    if manifest.get("abi") != importlib.machinery.EXTENSION_SUFFIXES[0]:
        return Build(INTERPRETED, f"the compiled build is for {manifest.get('abi')}, not this Python "
                                  f"({REBUILD} rebuilds it)"), {}
    sources = manifest.get("sources")
    depends = manifest.get("depends", {})
    shared = manifest.get("shared_library")
    if not isinstance(sources, dict) or not isinstance(depends, dict) or not isinstance(shared, str):
        return Build(INTERPRETED, f"{build_dir / MANIFEST} is not a build manifest"), {}
    built_from = {source_path(m, src): digest for m, digest in sources.items()}
    built_from |= {src / relative: digest for relative, digest in depends.items()}
    for source, digest in sorted(built_from.items()):
        try:
            same = source_hash(source) == digest
        except OSError:
            same = False
        if not same:
            return Build(INTERPRETED, f"{source.relative_to(src.parent)} changed since the compiled build "
                                      f"({REBUILD} rebuilds it)"), {}
    paths = {shared: extension_path(shared, build_dir)}
    paths |= {module: extension_path(module, build_dir) for module in sorted(sources)}
    missing = [p for p in paths.values() if not p.exists()]
    if missing:
        return Build(INTERPRETED, f"the compiled build lacks {missing[0].name} ({REBUILD} rebuilds it)"), {}
    return Build(COMPILED, f"mypyc {manifest.get('mypy', '?')}, {len(sources)} modules from {build_dir}",
                 tuple(sorted(sources)), str(manifest.get("mypy", ""))), paths


class CompiledFinder(MetaPathFinder):
    """Loads the compiled modules (and their shared library) from the build directory."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        so = self.paths.get(fullname)
        return importlib.util.spec_from_file_location(fullname, so) if so is not None else None


ACTIVE = Build(INTERPRETED, "not selected yet")


def select(environ: Mapping[str, str] = os.environ) -> Build:
    """Choose the build once, before any core is imported (``rmptwin/__init__``)."""
    global ACTIVE
    if any(isinstance(f, CompiledFinder) for f in sys.meta_path):
        return ACTIVE
    if environ.get(PURE_ENV, "") == "1":
        ACTIVE = Build(INTERPRETED, f"{PURE_ENV}=1")
        return ACTIVE
    build, paths = check()
    loaded = sorted(m for m in build.modules if m in sys.modules)
    if loaded:   # imported before select(): mixing the two builds would break isinstance
        build, paths = Build(INTERPRETED, f"{loaded[0]} was imported before the build was chosen"), {}
    if paths:
        sys.meta_path.insert(0, CompiledFinder(paths))
    ACTIVE = build
    return ACTIVE


def describe(build: Build | None = None) -> str:
    """One line: which cores run and why, e.g. "compiled (mypyc 2.4.1, 74 modules from ...)"."""
    b = build or ACTIVE
    return f"{b.kind} ({b.why})"


def child_env() -> dict[str, str]:
    """What a child process's environment needs to run the same build as this one."""
    return {} if ACTIVE.compiled else {PURE_ENV: "1"}
