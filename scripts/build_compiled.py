"""Compile the cores and the simulator's hot modules with mypyc into build/compiled/.

    python scripts/build_compiled.py            # build if missing or stale; one line either way
    python scripts/build_compiled.py --check    # only say whether the build is fresh (exit 1 if not)
    python scripts/build_compiled.py --force    # build even if fresh

The sources are compiled as they are (src/ is never written to). The output is the
extension modules alone, laid out like the package (build/compiled/rmptwin/rmp/wire.*.so),
their shared library, and build.json naming each compiled module with its source's hash;
``rmptwin.corebuild`` loads them from there at startup when every hash still matches. A
new build is made in build/compiled.new and moved into place when complete, so a failed
or interrupted build never leaves half of one behind. Without a C compiler, the Python
headers or mypyc it builds nothing and says so in one line: the interpreted cores run.
Compiler output goes to build/compiled.log.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from rmptwin.corebuild import BUILD_DIR, COMPILED, MANIFEST, check, source_hash  # noqa: E402

SRC = REPO / "src"
GROUP = "rmptwin_cores"      # the shared library: rmptwin_cores__mypyc.*.so
# What is compiled: every module of the core packages (not their __init__: a package stays
# a plain package) and the simulator's scheduler, network and driver loop.
PACKAGES = ("core", "rmp", "venue", "taxonomy", "apps")
SIM_MODULES = ("scheduler", "network", "simulate")
# Left interpreted, and why (the compiled modules import them like any Python module).
NOT_COMPILED = {
    "taxonomy/codec.py": "its frame dataclasses carry ClassVar constants (TYPE, FORMAT), which mypyc "
                         "2.4 turns into dataclass fields",
    "venue/stores.py": "runtime/durable_stores.py subclasses its memory stores, and an interpreted class "
                       "cannot inherit from a compiled one (they are not on a hot path)",
}
LOG = REPO / "build" / "compiled.log"


def modules() -> list[Path]:
    found = [p for pkg in PACKAGES for p in sorted((SRC / "rmptwin" / pkg).rglob("*.py"))
             if p.name != "__init__.py" and str(p.relative_to(SRC / "rmptwin")) not in NOT_COMPILED]
    return found + [SRC / "rmptwin" / "sim" / f"{m}.py" for m in SIM_MODULES]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts)


def missing_tools() -> str | None:
    """Why this machine cannot compile (None: it can)."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc})"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        return f"no Python headers ({include}/Python.h; Debian: python3-dev)"
    try:
        import mypyc.build  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        return f"no {e.name} (the dev packages of requirements.lock)"
    return None


def build(out: Path) -> None:
    """Compile into ``out`` (a fresh directory) and write its manifest; raises on failure."""
    paths = modules()
    tmp = REPO / "build" / "compiled.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    code = f"""
import sys
from setuptools import setup
from mypyc.build import mypycify
paths = {[str(p.relative_to(REPO)) for p in paths]!r}
setup(name="rmptwin-cores", ext_modules=mypycify(paths, opt_level="3", group_name={GROUP!r},
                                                  target_dir={str(tmp / "c")!r}),
      script_args=["build_ext", "--build-lib", {str(out)!r}, "--build-temp", {str(tmp / "o")!r}, "-j", "2"])
"""
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "w") as log:
        r = subprocess.run([sys.executable, "-c", code], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError(f"mypyc or the C compiler failed (exit {r.returncode}; see {LOG.relative_to(REPO)})")
    import mypy.version

    manifest = {
        "abi": importlib.machinery.EXTENSION_SUFFIXES[0],
        "mypy": mypy.version.__version__,
        "python": sys.version.split()[0],
        "shared_library": f"{GROUP}__mypyc",
        "sources": {module_name(p): source_hash(p) for p in paths},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether the build is fresh (exit 1 if not)")
    ap.add_argument("--force", action="store_true", help="build even if the build is fresh")
    args = ap.parse_args()
    current, _ = check(BUILD_DIR)
    wanted = {module_name(p) for p in modules()}
    fresh = current.kind == COMPILED and set(current.modules) == wanted
    if args.check:
        print(f"compiled cores: {'up to date' if fresh else current.why}")
        return 0 if fresh else 1
    if fresh and not args.force:
        print(f"compiled cores: up to date ({len(wanted)} modules)")
        return 0
    why_not = missing_tools()
    if why_not:
        print(f"compiled cores: {why_not}: the interpreted cores run")
        return 0
    new = BUILD_DIR.with_name(BUILD_DIR.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    t0 = time.monotonic()
    try:
        build(new)
    except (RuntimeError, OSError) as e:
        shutil.rmtree(new, ignore_errors=True)
        print(f"compiled cores: not built, {e}: the interpreted cores run")
        return 1
    old = BUILD_DIR.with_name(BUILD_DIR.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if BUILD_DIR.exists():
        BUILD_DIR.rename(old)
    new.rename(BUILD_DIR)
    shutil.rmtree(old, ignore_errors=True)
    print(f"compiled cores: built {len(wanted)} modules with mypyc in {time.monotonic() - t0:.0f} s ({BUILD_DIR.relative_to(REPO)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
