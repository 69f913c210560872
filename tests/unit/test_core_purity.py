"""The cores are pure (docs/architecture.md, "The rule each layer keeps"): each core module, imported alone in a
fresh interpreter, loads none of the heavy or I/O libraries, and its source imports no
socket, asyncio, subprocess, threading or time and reads no environment.

Every RMP and taxonomy module, the venue cores, the pure applications and every module of
``rmptwin.core`` (what they build on) are checked.
Each module is imported in its own interpreter (so one module's imports cannot hide
another's); the interpreters run in parallel.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rmptwin

PACKAGE_DIR = Path(rmptwin.__file__).parent

VENUE_CORES = ["orderbook", "gateway", "execution_venue", "evstate", "history", "sequencer", "client", "wire"]
# application packages under rmptwin/apps/ whose every module is a pure core
PURE_APPS = ["unified_orders", "trading_floor"]

# Loaded by a core, any of these means a driver, a store or an analysis library leaked in.
FORBIDDEN_LOADED = ("pyarrow", "pydantic", "yaml", "pandas", "pyspark", "sqlite3", "asyncio", "subprocess",
                    "socket", "threading")
# A core's own source never imports these (some, like threading, are already loaded by the
# interpreter's site hooks, so only the source shows them).
FORBIDDEN_IMPORTS = ("socket", "asyncio", "subprocess", "threading", "time")
ENVIRONMENT_READS = ("environ", "getenv", "environb", "getenvb")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def core_modules() -> list[str]:
    rmp = [_module_name(p) for p in sorted((PACKAGE_DIR / "rmp").glob("*.py"))]
    rmp += [_module_name(p) for p in sorted((PACKAGE_DIR / "taxonomy").glob("*.py"))]   # sequencer taxonomy
    venue = [f"rmptwin.venue.{m}" for m in VENUE_CORES]
    apps = [_module_name(p) for p in sorted((PACKAGE_DIR / "apps").rglob("*.py"))
            if p.relative_to(PACKAGE_DIR / "apps").parts[0] in PURE_APPS]
    shared = [_module_name(p) for p in sorted((PACKAGE_DIR / "core").glob("*.py"))]
    return rmp + venue + apps + shared


def _source_path(module: str) -> Path:
    rel = Path(*module.split(".")[1:])
    package = PACKAGE_DIR / rel / "__init__.py"
    return package if package.exists() else (PACKAGE_DIR / rel).with_suffix(".py")


# Run in the fresh interpreter: a meta-path hook notes, for every forbidden library the
# first time it is asked for, which rmptwin modules were importing at that moment.
CHILD = textwrap.dedent("""
    import importlib, json, sys
    FORBIDDEN = set(sys.argv[2].split(","))
    found = {}

    class Spy:
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in FORBIDDEN and top not in found:
                chain, frame = [], sys._getframe(1)
                while frame is not None:
                    mod = frame.f_globals.get("__name__", "")
                    if mod.startswith("rmptwin") and (not chain or chain[-1] != mod):
                        chain.append(mod)
                    frame = frame.f_back
                found[top] = " -> ".join(reversed(chain))
            return None

    before = set(sys.modules)
    sys.meta_path.insert(0, Spy())
    try:
        importlib.import_module(sys.argv[1])
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(0)
    loaded = {m.partition(".")[0] for m in set(sys.modules) - before}
    print(json.dumps({"loaded": {top: found.get(top, "?") for top in sorted(loaded & FORBIDDEN)}}))
""")


def import_alone(modules: list[str]) -> dict[str, dict]:
    """Import each module in its own fresh interpreter, all at once: module -> child's report."""
    procs = {
        m: subprocess.Popen([sys.executable, "-c", CHILD, m, ",".join(FORBIDDEN_LOADED)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for m in modules
    }
    reports = {}
    for m, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        try:
            reports[m] = json.loads(out.strip().splitlines()[-1])
        except (IndexError, ValueError):
            reports[m] = {"error": f"the interpreter failed: {err.strip()[-500:]}"}
    return reports


def impure_lines(source: str) -> list[str]:
    """What in ``source`` imports a forbidden module or reads the environment, one line each."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            problems += [f"line {node.lineno}: import {a.name}" for a in node.names
                         if a.name.partition(".")[0] in FORBIDDEN_IMPORTS]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.partition(".")[0]
            if top in FORBIDDEN_IMPORTS:
                problems.append(f"line {node.lineno}: from {node.module} import ...")
            elif top == "os" and any(a.name in ENVIRONMENT_READS for a in node.names):
                problems.append(f"line {node.lineno}: from os import {', '.join(a.name for a in node.names)}")
        elif (isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_READS
              and isinstance(node.value, ast.Name) and node.value.id == "os"):
            problems.append(f"line {node.lineno}: os.{node.attr}")
    return sorted(problems, key=lambda p: int(p.split(":")[0].split()[1]))


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return import_alone(core_modules())


def test_the_list_covers_every_rmp_module():
    names = core_modules()
    assert {"rmptwin.rmp.customer", "rmptwin.rmp.token_ring", "rmptwin.core.striping",
            "rmptwin.rmp.repair", "rmptwin.rmp"} <= set(names)


@pytest.mark.parametrize("module", core_modules())
def test_core_imported_alone_loads_no_heavy_or_io_library(module, reports):
    report = reports[module]
    assert "error" not in report, f"{module} does not import alone: {report.get('error')}"
    offending = [f"{lib} (imported by {chain})" for lib, chain in report["loaded"].items()]
    assert not offending, f"{module} loads {'; '.join(offending)}"


@pytest.mark.parametrize("module", core_modules())
def test_core_source_imports_no_io_and_reads_no_environment(module):
    path = _source_path(module)
    assert path.exists(), f"{module}: no source at {path}"
    problems = impure_lines(path.read_text())
    assert not problems, f"{module} ({path.relative_to(PACKAGE_DIR.parent)}): {'; '.join(problems)}"


def test_the_import_check_names_a_module_that_loads_pyarrow_and_who_imported_it():
    report = import_alone(["rmptwin.records.tables"])["rmptwin.records.tables"]
    assert report["loaded"]["pyarrow"].startswith("rmptwin.records.tables")


def test_the_source_check_catches_io_imports_and_environment_reads():
    source = "import time\nfrom socket import socket\nimport os\nx = os.environ['A']\nfrom os import getenv\n"
    assert impure_lines(source) == ["line 1: import time", "line 2: from socket import ...",
                                    "line 4: os.environ", "line 5: from os import getenv"]
