"""Which build of the cores runs (rmptwin.corebuild): the compiled one only when its manifest
is for this Python and every compiled module's source, and every other module they import,
is the one it was built from; else the interpreted one, saying why, and silently. Checked
on a fake build directory (no compiler needed)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

from rmptwin import corebuild

REPO = Path(__file__).resolve().parents[2]


def fake_build(tmp_path: Path, abi: str | None = None) -> tuple[Path, Path]:
    """A source tree with one module and a build directory claiming to have compiled it."""
    src, build = tmp_path / "src", tmp_path / "build"
    module, imported = src / "pkg" / "mod.py", src / "pkg" / "consts.py"
    module.parent.mkdir(parents=True)
    module.write_text("from pkg.consts import Y\nX = Y\n")
    imported.write_text("Y: Final = 1\n")
    for name in ("pkg.mod", "group__mypyc"):
        so = corebuild.extension_path(name, build)
        so.parent.mkdir(parents=True, exist_ok=True)
        so.write_bytes(b"")
    manifest = {"abi": abi or importlib.machinery.EXTENSION_SUFFIXES[0], "mypy": "9.9", "shared_library": "group__mypyc",
                "sources": {"pkg.mod": corebuild.source_hash(module)},
                "depends": {"pkg/consts.py": corebuild.source_hash(imported)}}
    (build / corebuild.MANIFEST).write_text(json.dumps(manifest))
    return src, build


def test_a_fresh_build_is_used_for_exactly_its_modules(tmp_path):
    src, build = fake_build(tmp_path)
    chosen, paths = corebuild.check(build, src)
    assert chosen.compiled and chosen.modules == ("pkg.mod",) and "mypyc 9.9" in chosen.why
    assert set(paths) == {"pkg.mod", "group__mypyc"}
    assert paths["pkg.mod"] == build / "pkg" / f"mod{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def test_an_edited_source_sends_every_core_back_to_the_interpreter(tmp_path):
    src, build = fake_build(tmp_path)
    (src / "pkg" / "mod.py").write_text("X = 2\n")
    chosen, paths = corebuild.check(build, src)
    assert not chosen.compiled and paths == {}
    assert "pkg/mod.py changed since the compiled build (make compiled rebuilds it)" in chosen.why


def test_an_edited_module_the_compiled_ones_import_makes_the_build_stale_too(tmp_path):
    src, build = fake_build(tmp_path)
    (src / "pkg" / "consts.py").write_text("Y: Final = 2\n")      # mypyc inlined Y = 1
    chosen, paths = corebuild.check(build, src)
    assert not chosen.compiled and paths == {} and "pkg/consts.py changed" in chosen.why
    (src / "pkg" / "consts.py").unlink()
    assert not corebuild.check(build, src)[0].compiled


def test_no_build_another_python_or_a_missing_module_means_interpreted(tmp_path):
    chosen, _ = corebuild.check(tmp_path / "nothing", tmp_path)
    assert not chosen.compiled and "no compiled build" in chosen.why
    src, build = fake_build(tmp_path / "a", abi=".cpython-39-x86_64-linux-gnu.so")
    chosen, _ = corebuild.check(build, src)
    assert not chosen.compiled and "not this Python" in chosen.why
    src, build = fake_build(tmp_path / "b")
    corebuild.extension_path("pkg.mod", build).unlink()
    chosen, _ = corebuild.check(build, src)
    assert not chosen.compiled and "lacks mod" in chosen.why


def test_rmptwin_pure_runs_the_interpreted_cores_and_says_so():
    env = {**os.environ, corebuild.PURE_ENV: "1", "PYTHONPATH": str(REPO / "src")}
    probe = ("import rmptwin, rmptwin.rmp.wire as w; from rmptwin import corebuild; "
             "print(corebuild.describe()); print(w.__file__)")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60, check=True)
    line, where = r.stdout.strip().splitlines()
    assert line == "interpreted (RMPTWIN_PURE=1)"
    assert where.endswith("src/rmptwin/rmp/wire.py")
    assert corebuild.child_env() == ({} if corebuild.ACTIVE.compiled else {corebuild.PURE_ENV: "1"})


def test_choosing_the_build_prints_nothing_whichever_it_is():
    """Whether the build is absent, stale or fresh, importing rmptwin says nothing (rmptwin env,
    a sim's summary and manifest.json say which cores ran)."""
    env = {k: v for k, v in os.environ.items() if k != corebuild.PURE_ENV} | {"PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-c", "import rmptwin.rmp.wire"], env=env, capture_output=True, text=True,
                       timeout=60, check=True)
    assert (r.stdout, r.stderr) == ("", "")
