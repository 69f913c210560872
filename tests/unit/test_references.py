"""What the code and the docs point at exists: every dotted name of the package (``sim.simulate``,
``rmptwin.core.host.NodeClock``, ``RunDir.pcap_path``) in a docstring, a comment, README.md or a
page of docs/ resolves to a module, and a name after the module to something that module defines;
and no comment cites a tracker issue number (an issue is closed and renumbered long before the
code it explains is gone: the why belongs in the comment itself, the history in docs/)."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

import rmptwin

SRC = Path(rmptwin.__file__).resolve().parent
REPO = SRC.parents[1]
ROOMS = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()} - {"__init__"}
FILE_SUFFIXES = {"py", "json", "jsonl", "md", "yaml", "yml", "html", "parquet", "txt", "lua", "toml", "sh", "png",
                 "so", "pcap", "log", "csv", "arrow", "stderr"}
DOTTED = re.compile(r"(?<![\w./-])((?:rmptwin\.)?[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w/(-]|\.\w)")
FACES = {"__init__.py", "api.py"}   # modules whose imports are re-exports for their users
# Dotted names in prose that are not code: an experiment's YAML fields (``venue.rate``), where a
# section shares a word with a package. (summary.json's ``runtime.drain_s`` no longer does: the
# node runtime's package is ``node``.)
YAML_SECTIONS = {"venue"}
TRACKER = re.compile(r"\b(?:issues?|tracker)\s+#?\d+|\(#\d+\)|\bissue\s+\d+", re.IGNORECASE)


def _assigned(node: ast.AST) -> set[str]:
    """Every name and attribute an assignment inside ``node`` binds (``x = ``, ``self.x = ``)."""
    out = set()
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for leaf in (x for t in targets for x in ast.walk(t)):
            if isinstance(leaf, ast.Name):
                out.add(leaf.id)
            elif isinstance(leaf, ast.Attribute):
                out.add(leaf.attr)
    return out


@functools.cache
def _module_names(path: Path) -> dict[str, set[str] | None]:
    """Top-level names of a module; a class maps to its attribute names, anything else to None.
    Names a module imports count only in a package's ``__init__`` (its re-exports)."""
    tree = ast.parse(path.read_text())
    names: dict[str, set[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defs = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            names[node.name] = defs | _assigned(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(dict.fromkeys(_assigned(node)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and path.name in FACES:
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, (ast.If, ast.Try)):   # names defined under a guard
            for n in ast.walk(node):
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                    names.setdefault(n.name, None)
    return names


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` (a room of rmptwin first, ``rmptwin.`` optional) names a module of the
    package and, after it, what that module defines (a class's attributes one level deep)."""
    parts = dotted.split(".")
    if parts[0] == "rmptwin":
        parts = parts[1:]
    path, i = SRC, 0
    while i < len(parts) and (path / parts[i] / "__init__.py").exists():
        path, i = path / parts[i], i + 1
    if i < len(parts) and (path / f"{parts[i]}.py").exists():
        module, i = path / f"{parts[i]}.py", i + 1
    elif i > 0:
        module = path / "__init__.py"
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    names = _module_names(module)
    if rest[0] not in names:
        # a name re-exported by a package's __init__ from one of its modules
        return module.name == "__init__.py" and any(rest[0] in _module_names(p) for p in module.parent.glob("*.py"))
    attrs = names[rest[0]]
    return attrs is None or len(rest) == 1 or rest[1] in attrs


@functools.cache
def _yaml_fields(section: str) -> set[str]:
    """The fields of one section of the experiment YAML (``venue`` -> rate, etcd_api, ...)."""
    from rmptwin.model import Experiment
    ann = Experiment.model_fields[section].annotation
    models = [a for a in getattr(ann, "__args__", (ann,)) if hasattr(a, "model_fields")]
    return {f for m in models for f in m.model_fields}


def _not_code(parts: list[str]) -> bool:
    """A YAML field written like a module (see YAML_SECTIONS)."""
    if len(parts) < 2 or parts[0] not in YAML_SECTIONS:
        return False
    room = SRC / parts[0]
    if (room / f"{parts[1]}.py").exists() or (room / parts[1]).is_dir():
        return False
    return parts[1] in _yaml_fields(parts[0])


def references(text: str) -> list[str]:
    """The dotted names of the package in a text: first part a room of rmptwin (or rmptwin),
    not a file name (``summary.json``), not a field of a YAML (``workload.rate``)."""
    found = []
    for m in DOTTED.finditer(text):
        name = m.group(1).rstrip(".")
        parts = name.split(".")
        first = parts[1] if parts[0] == "rmptwin" and len(parts) > 1 else parts[0]
        if first not in ROOMS or parts[-1] in FILE_SUFFIXES or _not_code(parts):
            continue
        found.append(name)
    return found


def _prose_of_python(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file."""
    source = path.read_text()
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body and isinstance(node.body[0], ast.Expr):
                out.append((node.body[0].lineno, doc))
    return out


def _prose() -> list[tuple[str, str]]:
    """(where, text) of the package's docstrings and comments, README.md and docs/*.md."""
    out = [(f"{p.relative_to(REPO)}:{line}", text) for p in sorted(SRC.rglob("*.py"))
           for line, text in _prose_of_python(p)]
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "labs").rglob("*.md"))]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            out.append((f"{page.relative_to(REPO)}:{n}", line))
    return out


def test_every_dotted_name_in_the_code_and_docs_resolves():
    dangling = sorted({f"{where}: {name}" for where, text in _prose() for name in references(text)
                       if not resolves(name)})
    assert dangling == [], "names that point nowhere:\n" + "\n".join(dangling)


def test_no_comment_cites_a_tracker_number():
    cited = [f"{where}: {m.group(0)}" for where, text in _prose() if where.startswith("src/")
             for m in TRACKER.finditer(text)]
    assert cited == [], "tracker numbers in the code:\n" + "\n".join(cited)


@pytest.mark.parametrize("name, ok", [
    ("sim.simulate", True), ("rmptwin.core.host.NodeClock", True), ("core.host.NodeClock.true", True),
    ("sim.runner", False), ("rmp.striping", False), ("core.host.NodeClock.nope", False),
    ("node.driver.port_for_group", False),
])
def test_the_check_can_fail(name, ok):
    assert resolves(name) is ok
    assert references(f"see ``{name}`` and summary.json, workload.rate_per_source") == [name]
