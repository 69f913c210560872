"""The layers of docs/architecture.md hold: every import in src/rmptwin goes down, never up.

Each package (or root module) of ``rmptwin`` sits in one layer; a module may import its own
layer and the layers below it, nothing above. The graph is read from the source (every
``import`` and ``from ... import``, also those inside functions), so a lazy import cannot
hide an upward arrow. A second check: no two packages import each other (a circle between
rooms), even within one layer.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import rmptwin

SRC = Path(rmptwin.__file__).resolve().parent

# bottom first; one line a layer (see docs/architecture.md, "Layers")
LAYERS: list[tuple[str, ...]] = [
    ("errors",),                                  # the one exception users see
    ("core",),                                    # what every core shares: events, sansio, groups, stripes, timing, link model
    ("rmp", "venue", "taxonomy"),                 # the protocol cores
    ("apps",),                                    # cores built on RMP: unified orders, the trading floor
    ("model",),                                   # the experiment model: what a user writes, loading, bounds, --set
    ("factories",),                               # the model -> each core's frozen config -> the core; key files
    ("records",),                                 # what drivers record: tables, frame names, timer lateness
    ("sim", "node"),                              # the two drivers of the same cores: the simulator, the node runtime
    ("rundir",),                                  # the run and sweep directories' one owner, provenance
    ("emulation",),                               # Mininet + OVS + controller + nodes; the emulated experiment runner
    ("analysis", "checkers", "planning"),         # summary.json, the Spark jobs, the history checkers: read run directories
                                                  # only; planning: a run's CPU demand and its time dilation factor
    ("runner",),                                  # an experiment on a backend, reruns
    ("sweeps", "claims", "studies", "topotools", "chaos"),  # many runs; generated inputs; fault campaigns
    ("api",),                                     # the Python API: what the command line does, as functions
    ("cli",),                                     # the command line and what it prints
    ("bench",),                                   # benchmarks
]
# the package's face; provisioning's own lock check (stdlib only); which build of the cores
# runs, chosen by the package's face before any core is imported (stdlib only)
NOT_IN_A_LAYER = {"__init__", "lockcheck", "corebuild"}

LAYER_OF = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def room_of(module: str) -> str | None:
    """The first component under rmptwin ("rmptwin.model.queries" -> "model"); None outside the package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "rmptwin" and len(parts) > 1 else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every rmptwin import in a file, relative ones resolved."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from rmptwin import model` imports the room model, not the package's face
            found += [(node.lineno, f"{target}.{a.name}" if target == "rmptwin" else target) for a in node.names]
    return [(line, m) for line, m in found if m.split(".")[0] == "rmptwin"]


def graph() -> dict[str, list[tuple[str, int, str]]]:
    """room -> (file, line, imported module) of each import into another room."""
    return _graph(SRC)


@functools.cache
def _graph(src: Path) -> dict[str, list[tuple[str, int, str]]]:
    arrows = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        room = room_of(module_name(path))
        for line, target in imports_of(path):
            other = room_of(target)
            if room and other and other != room:
                arrows[room].append((str(path.relative_to(src)), line, target))
    return arrows


def test_every_room_is_in_a_layer():
    rooms = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py")}
    assert rooms - NOT_IN_A_LAYER == set(LAYER_OF), "place each package of src/rmptwin in LAYERS (and the docs)"


def test_no_import_goes_up_a_layer():
    upward = [f"{file}:{line}: {room} imports {target}, a layer above it"
              for room, arrows in graph().items() if room in LAYER_OF
              for file, line, target in arrows
              if room_of(target) in LAYER_OF and LAYER_OF[room_of(target)] > LAYER_OF[room]]
    assert upward == [], "imports that go up a layer:\n" + "\n".join(upward)


def test_no_two_rooms_import_each_other():
    arrows = graph()
    edges = {(room, room_of(t)) for room, items in arrows.items() for _, _, t in items}
    circles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert circles == [], "rooms that import each other:\n" + "\n".join(circles)


def test_nothing_imports_the_command_line_or_the_benchmarks():
    """The top two layers are entry points: what they hold is for a person, never for a library."""
    bad = [f"{f}:{line}: {t}" for room, items in graph().items() if room not in ("cli", "bench")
           for f, line, t in items if room_of(t) in ("cli", "bench")]
    assert bad == []


@pytest.mark.parametrize("source, expected", [
    ("from rmptwin.cli.main import app\n", "cli"),
    ("def f():\n    from rmptwin.analysis import summary\n", "analysis"),
    ("from ..analysis.summary import summarize\n", "analysis"),
])
def test_the_check_sees_an_upward_import(tmp_path, monkeypatch, source, expected):
    """The check can fail: an upward import written as a plain, a lazy or a relative import is seen."""
    fake = tmp_path / "rmptwin"
    (fake / "model").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "model" / "__init__.py").write_text("")
    (fake / "model" / "upward.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    arrows = graph()
    assert [room_of(t) for _, _, t in arrows["model"]] == [expected]
    assert LAYER_OF[expected] > LAYER_OF["model"]
