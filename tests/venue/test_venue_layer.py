"""``rmptwin.venue`` holds only pure cores (docs/architecture.md, "The rule each layer keeps"): every module in it,
not only the listed cores, imports nothing of the drivers, stores on disk, etcd or analysis,
and the arrows point down: no venue module imports the experiment model, the factories, the simulator,
the runtime or the analysis."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import rmptwin.venue

VENUE_DIR = Path(rmptwin.venue.__file__).parent

# What a venue module may import from rmptwin besides its own package: the core contract.
ALLOWED_RMPTWIN = {"core", "errors"}
# Stdlib parts that do I/O, wait, or read the environment; libraries of the layers above.
FORBIDDEN = {"socket", "asyncio", "subprocess", "threading", "time", "sqlite3", "os", "http", "urllib", "queue",
             "pyarrow", "pydantic", "yaml", "pandas", "numpy", "pyspark", "matplotlib", "typer", "rich"}
# Loaded by importing the whole package in a fresh interpreter, any of these means a leak.
FORBIDDEN_LOADED = ["pyarrow", "pydantic", "yaml", "pandas", "pyspark", "sqlite3", "asyncio", "subprocess",
                    "rmptwin.model", "rmptwin.factories", "rmptwin.sim", "rmptwin.node", "rmptwin.analysis"]


def venue_modules() -> list[Path]:
    return sorted(VENUE_DIR.glob("*.py"))


def bad_imports(source: str) -> list[str]:
    """Each import in ``source`` that a venue module must not make, as ``line N: name``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.ImportFrom) and node.level == 2:   # from ..x import y: rmptwin.x
            names = [f"rmptwin.{node.module}"] if node.module else [f"rmptwin.{a.name}" for a in node.names]
        else:
            continue   # from . import x / from .x import y: inside rmptwin.venue
        for name in names:
            top, _, rest = name.partition(".")
            if top in FORBIDDEN or (top == "rmptwin" and rest.partition(".")[0] not in ALLOWED_RMPTWIN | {"venue"}):
                out.append(f"line {node.lineno}: {name}")
    return out


def test_every_venue_module_imports_only_pure_parts():
    problems = {p.name: bad_imports(p.read_text()) for p in venue_modules()}
    assert len(problems) >= 9   # orderbook, gateway, venue, history, sequencer, client, wire, stores, __init__
    assert {name: lines for name, lines in problems.items() if lines} == {}


def test_the_check_names_io_and_upward_imports():
    source = ("import sqlite3\nfrom ..model import LoadedExperiment\nfrom ..sim.simulate import Simulation\n"
              "from ..core.sansio import Unicast\nfrom . import wire\nfrom .orderbook import BUY\nimport os\n")
    assert bad_imports(source) == ["line 1: sqlite3", "line 2: rmptwin.model", "line 3: rmptwin.sim.simulate",
                                   "line 7: os"]


def test_the_whole_venue_package_loads_no_heavy_library_or_upper_layer():
    modules = [f"rmptwin.venue.{p.stem}" for p in venue_modules() if p.stem != "__init__"]
    child = ("import importlib, json, sys\n"
             f"for m in {modules!r}: importlib.import_module(m)\n"
             f"print(json.dumps([f for f in {FORBIDDEN_LOADED!r} if f in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
