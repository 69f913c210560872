"""Compile the cores and the simulator's hot modules with mypyc into build/compiled/.

    python scripts/build_compiled.py            # build if missing or stale; one line either way
    python scripts/build_compiled.py --check    # only say whether the build is fresh (exit 1 if not)
    python scripts/build_compiled.py --force    # build even if fresh

`make compiled` runs it, and so do `make test` and `make bench`; `make run` does not (the
interpreted cores run where nothing was built). The sources are compiled as they are (src/
is never written to). The output is the extension modules alone, laid out like the package
(build/compiled/rmptwin/rmp/wire.*.so), their shared library, and build.json naming each
compiled module with its source's hash and the hash of every other rmptwin module they
import; ``rmptwin.corebuild`` loads them from there at startup when every hash still matches.
A new build is made in build/compiled.new and moved into place when complete, so a failed
or interrupted build never leaves half of one behind. Without a C compiler, the Python
headers or mypyc it builds nothing and says so in one line: the interpreted cores run.
Compiler output goes to build/compiled.log.

How it is made fast (measured on 2 CPUs, docs/benchmarks.md "Build time of the compiled
cores": 100-126 CPU s instead of 255-320, and gcc no longer on one CPU): one C file per module
(mypyc's multi_file) compiled by as many gcc processes as there are CPUs, gcc -O1 without
debug information, and mypy not analysing third-party packages. Neither -O3 nor one C file
made the cores measurably faster. ``MYPYC_OPT_LEVEL=3`` builds at -O3 all the same.
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from rmptwin.corebuild import BUILD_DIR, COMPILED, MANIFEST, check, read_manifest, source_hash

SRC = REPO / "src"
GROUP = "rmptwin_cores"      # the shared library: rmptwin_cores__mypyc.*.so
# What is compiled: every module of the core packages (not their __init__: a package stays
# a plain package) and the simulator's scheduler, network and driver loop. Compiling only
# core/, rmp/ and sim/ (and what subclasses their classes) costs a third less CPU but loses
# most of the venue and taxonomy experiments' speed-up (measured: 1.62x -> 1.28x, 1.45x -> 1.22x).
PACKAGES = ("core", "rmp", "venue", "taxonomy", "apps")
SIM_MODULES = ("scheduler", "network", "simulate")
# Left interpreted, and why (the compiled modules import them like any Python module).
NOT_COMPILED = {
    "taxonomy/codec.py": "its frame dataclasses carry ClassVar constants (TYPE, FORMAT), which mypyc "
                         "2.4 turns into dataclass fields",
    "venue/stores.py": "node/durable_stores.py subclasses its memory stores, and an interpreted class "
                       "cannot inherit from a compiled one (they are not on a hot path)",
}
LOG = REPO / "build" / "compiled.log"
JOBS = len(os.sched_getaffinity(0))
OPT_LEVEL_ENV = "MYPYC_OPT_LEVEL"


def recipe() -> dict[str, object]:
    """The mypyc options; a build made with others is rebuilt (it still loads meanwhile)."""
    return {"opt_level": os.environ.get(OPT_LEVEL_ENV, "1"), "debug_level": "0", "multi_file": True}


def modules() -> list[Path]:
    found = [p for pkg in PACKAGES for p in sorted((SRC / "rmptwin" / pkg).rglob("*.py"))
             if p.name != "__init__.py" and str(p.relative_to(SRC / "rmptwin")) not in NOT_COMPILED]
    return found + [SRC / "rmptwin" / "sim" / f"{m}.py" for m in SIM_MODULES]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts)


def module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def rmptwin_imports(path: Path) -> set[Path]:
    """The files of the rmptwin modules ``path`` imports (with the packages on the way)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    found: set[Path] = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != "rmptwin":
            continue
        for i in range(1, len(parts) + 1):     # a package's __init__ runs on the way in
            f = module_file(".".join(parts[:i]))
            if f is not None:
                found.add(f)
    return found


def dependencies(compiled: list[Path]) -> list[Path]:
    """The other rmptwin modules the compiled ones import, directly or not: mypyc reads their
    types and inlines their Final constants, so an edit to one makes the build stale too."""
    seen = set(compiled)
    todo = list(compiled)
    while todo:
        for f in rmptwin_imports(todo.pop()) - seen:
            seen.add(f)
            todo.append(f)
    return sorted(seen - set(compiled))


def mypy_config() -> str:
    """The project's mypy settings ([tool.mypy] of pyproject.toml) as an ini file for mypyc,
    following imports into rmptwin only. Third-party packages (pydantic, numpy, pyarrow, ...)
    are not analysed: that was 30 of the 40 s mypyc took, and only rmp/seal.py's C changed
    (its calls into cryptography are untyped now, so returning their result is allowed)."""
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]

    def ini(value: object) -> str:
        return str(value) if not isinstance(value, list) else ",".join(map(str, value))

    replaced = {"files", "overrides", "follow_imports", "warn_return_any", "cache_dir"}
    lines = ["[mypy]", *(f"{k} = {ini(v)}" for k, v in conf.items() if k not in replaced),
             "follow_imports = skip", "warn_return_any = False", "cache_dir = /dev/null",
             "[mypy-rmptwin.*]", "follow_imports = silent"]
    for override in conf.get("overrides", []):
        lines.append(f"[mypy-{ini(override['module'])}]")
        lines += [f"{k} = {ini(v)}" for k, v in override.items() if k != "module"]
    return "\n".join(lines) + "\n"


# Run in a child process (setuptools exits on errors, mypyc and gcc print): mypyc writes the
# C, then setuptools compiles it. distutils compiles an extension's C files one after the
# other; the patch runs them JOBS at a time (the shared library is one extension of 70 files).
SETUP = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
import setuptools
import distutils.ccompiler
import setuptools._distutils.ccompiler
from mypyc.build import mypycify

args = json.loads(sys.argv[1])


def compile_parallel(self, sources, output_dir=None, macros=None, include_dirs=None, debug=False,
                     extra_preargs=None, extra_postargs=None, depends=None):
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        if obj in build:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    with ThreadPoolExecutor(args["jobs"]) as pool:
        list(pool.map(one, objects))
    return objects


for module in {distutils.ccompiler, setuptools._distutils.ccompiler}:
    module.CCompiler.compile = compile_parallel
extensions = mypycify(["--config-file", args["mypy_config"], *args["paths"]], group_name=args["group"],
                      target_dir=args["c_dir"], **args["recipe"])
setuptools.setup(name="rmptwin-cores", ext_modules=extensions,
                 script_args=["build_ext", "--build-lib", args["out"], "--build-temp", args["o_dir"],
                              "-j", str(args["jobs"])])
"""


def build(out: Path) -> None:
    """Compile into ``out`` (a fresh directory) and write its manifest; raises on failure."""
    paths = modules()
    tmp = REPO / "build" / "compiled.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = tmp / "mypy.ini"
    config.write_text(mypy_config())
    args = {"paths": [str(p.relative_to(REPO)) for p in paths], "group": GROUP, "recipe": recipe(),
            "mypy_config": str(config), "c_dir": str(tmp / "c"), "o_dir": str(tmp / "o"), "out": str(out),
            "jobs": JOBS}
    with open(LOG, "w") as log:
        r = subprocess.run([sys.executable, "-c", SETUP, json.dumps(args)], cwd=REPO, stdout=log,
                           stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError(f"mypyc or the C compiler failed (exit {r.returncode}; see {LOG.relative_to(REPO)})")
    import mypy.version

    manifest = {
        "abi": importlib.machinery.EXTENSION_SUFFIXES[0],
        "mypy": mypy.version.__version__,
        "python": sys.version.split()[0],
        "recipe": recipe(),
        "shared_library": f"{GROUP}__mypyc",
        "sources": {module_name(p): source_hash(p) for p in paths},
        "depends": {str(p.relative_to(SRC)): source_hash(p) for p in dependencies(paths)},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


def missing_tools() -> str | None:
    """Why this machine cannot compile (None: it can)."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc})"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        return f"no Python headers ({include}/Python.h; Debian: python3-dev)"
    try:
        import mypyc.build  # noqa: F401 - only whether it imports
        import setuptools  # noqa: F401 - only whether it imports
    except ImportError as e:
        return f"no {e.name} (the dev packages of requirements.lock)"
    return None


def give_back_to_owner(path: Path) -> None:
    """A build made as root in a tree that belongs to someone else is handed to the tree's
    owner (as scripts/provision.sh does with the venv)."""
    owner = REPO.stat()
    if os.geteuid() != 0 or owner.st_uid == 0 or not path.exists():
        return
    for p in (path, *path.rglob("*")):
        os.chown(p, owner.st_uid, owner.st_gid, follow_symlinks=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether the build is fresh (exit 1 if not)")
    ap.add_argument("--force", action="store_true", help="build even if the build is fresh")
    args = ap.parse_args()
    current, _ = check(BUILD_DIR)
    wanted = {module_name(p) for p in modules()}
    if current.kind != COMPILED:
        stale = current.why
    elif set(current.modules) != wanted:
        stale = "the modules to compile changed since the build"
    elif (read_manifest(BUILD_DIR) or {}).get("recipe") != recipe():
        stale = "built with other mypyc options"
    else:
        stale = ""
    if args.check:
        print(f"compiled cores: {stale or 'up to date'}")
        return 1 if stale else 0
    if not stale and not args.force:
        print(f"compiled cores: up to date ({len(wanted)} modules)")
        return 0
    why_not = missing_tools()
    if why_not:
        print(f"compiled cores: {why_not}: the interpreted cores run")
        return 0
    print(f"compiled cores: building {len(wanted)} modules with mypyc on {JOBS} CPUs ({stale or '--force'})",
          flush=True)
    new, old = (BUILD_DIR.with_name(BUILD_DIR.name + suffix) for suffix in (".new", ".old"))
    shutil.rmtree(new, ignore_errors=True)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        build(new)
        shutil.rmtree(old, ignore_errors=True)
        if BUILD_DIR.exists():
            BUILD_DIR.rename(old)
        new.rename(BUILD_DIR)
        shutil.rmtree(old, ignore_errors=True)
    except (RuntimeError, OSError) as e:
        shutil.rmtree(new, ignore_errors=True)
        print(f"compiled cores: not built, {e}: the interpreted cores run")
        return 1
    finally:
        give_back_to_owner(LOG.parent)
    print(f"compiled cores: built in {time.monotonic() - t0:.0f} s ({BUILD_DIR.relative_to(REPO)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
