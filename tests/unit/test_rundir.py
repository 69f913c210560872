"""The run directory has one owner: rmptwin/rundir/run.py names its files, and no other module
under src/ spells them; RunDir makes, reads and writes them."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pyarrow as pa
import pytest

import rmptwin
from rmptwin.errors import UserError
from rmptwin.records.tables import EventLog
from rmptwin.rundir import run as rundir
from rmptwin.rundir.run import RunDir

SRC = Path(rmptwin.__file__).resolve().parent

# Names only a run directory has: spelled anywhere in code, they are a second owner.
FILE_NAMES = ("manifest.json", "summary.json", "metrics.json", "report.html", "drops.parquet", "counts.parquet",
              "events.parquet")
# Its directories at the head of a relative path: "events/x.parquet", "pcaps/*.pcap", "analysis/"
# (not a unit such as "events/s").
DIR_PATH = re.compile(r"(?<![\w.])(?:events|links|pcaps|analysis|nodes)/(?:$|[*{]|\w[\w-]*\.)")
# Its directories, as a path segment (``run / "events"``).
DIR_NAMES = {rundir.EVENTS, rundir.LINKS, rundir.PCAPS, rundir.ANALYSIS, rundir.NODES}
# Other directories that happen to share a name with one of the run directory's.
NOT_THE_RUN_DIRECTORY = {
    ("emulation/emulated_network.py", "links"),   # the relays' own state directory under /run/rmptwin
    ("emulation/network_links.py", "links"),      # ... whose counts it reads back
    ("emulation/droplog.py", "links"),   # ... read back for the drop log
    ("emulation/image.py", "nodes"),     # the repository's nodes/ (the node image's Dockerfile)
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _help_texts(tree: ast.AST) -> set[int]:
    """String constants inside a ``help=`` argument: what a user reads about the layout."""
    return {id(c) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "help"
            for c in ast.walk(node.value) if isinstance(c, ast.Constant)}


def spellings(path: Path, root: Path = SRC) -> list[str]:
    """Where the module at ``path`` spells a run-directory name in code (docstrings, comments
    and help texts may describe the layout)."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree) | _help_texts(tree)
    rel = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [f"{rel}:{node.lineno}: {name!r}" for name in FILE_NAMES if name in node.value]
            found += [f"{rel}:{node.lineno}: {m.group(0)!r}" for m in DIR_PATH.finditer(node.value)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
                and node.right.value in DIR_NAMES and (rel, node.right.value) not in NOT_THE_RUN_DIRECTORY:
            found.append(f"{rel}:{node.lineno}: / {node.right.value!r}")
    return found


def test_no_module_but_rundir_spells_the_run_directory():
    modules = [p for p in sorted(SRC.rglob("*.py")) if p.relative_to(SRC).as_posix() != "rundir/run.py"]
    assert len(modules) > 50
    found = [hit for p in modules for hit in spellings(p)]
    assert found == [], "ask rmptwin.rundir.run.RunDir for these paths:\n" + "\n".join(found)


def test_the_check_sees_a_spelled_path(tmp_path):
    """The check above can fail: a module that joins a run's paths itself is caught."""
    bad = tmp_path / "_spelled_for_the_test.py"
    bad.write_text('"""doc: manifest.json is fine here."""\n'
                   'def f(run):\n    return run / "events", run / "x" / "summary.json", f"{run}/pcaps/*.pcap"\n'
                   'RATE = "events/s"\n')
    assert sorted(spellings(bad, tmp_path)) == ["_spelled_for_the_test.py:3: 'pcaps/*'",
                                                 "_spelled_for_the_test.py:3: 'summary.json'",
                                                 "_spelled_for_the_test.py:3: / 'events'"]


def test_create_read_and_write_a_run_directory(tmp_path):
    run = RunDir.create("x", out=tmp_path / "run")
    assert run.events_dir.is_dir() and run.links_dir.is_dir()
    run.write_manifest({"experiment": {"name": "x"}}, backend="sim", seed=3)
    manifest = run.read_manifest()
    assert (manifest["backend"], manifest["seed"], manifest["experiment"]) == ("sim", 3, {"name": "x"})
    assert "git_commit" in manifest and "environment" in manifest and manifest["protocol_derived"]["tau_t_ms"] > 0
    events = EventLog().table()
    run.write_events(events)
    assert run.read_events().equals(events) and run.event_count() == 0
    run.write_summary({"b": 1, "a": 2.5})
    assert run.read_summary() == {"a": 2.5, "b": 1}
    assert run.summary_path.read_text() == '{\n  "a": 2.5,\n  "b": 1\n}\n'  # sorted keys: diffable
    with pytest.raises(UserError, match="exists and is not empty"):
        RunDir.create("x", out=run.path)


def test_a_failed_run_leaves_no_empty_directory(tmp_path):
    run = RunDir.create("x", out=tmp_path / "run")
    run.remove_if_empty()
    assert not run.path.exists()
    kept = RunDir.create("x", out=tmp_path / "kept")
    kept.write_link_counts(pa.table({"n": [1]}))
    kept.remove_if_empty()
    assert kept.counts_path.exists() and not kept.events_dir.exists()
    # an emulated run stopped before its nodes wrote: its nodes/ (venue-state/ in it) and pcaps/ go too
    emulated = RunDir.create("x", out=tmp_path / "emulated")
    emulated.make_node_dirs()
    emulated.venue_state_dir.mkdir()
    emulated.remove_if_empty()
    assert not emulated.path.exists()
    # one node wrote a line: that file and its directories stay
    logged = RunDir.create("x", out=tmp_path / "logged")
    logged.make_node_dirs()
    (logged.nodes_dir / "h1.0.jsonl").write_text("{}\n")
    logged.remove_if_empty()
    assert (logged.nodes_dir / "h1.0.jsonl").exists() and not logged.pcaps_dir.exists()


def test_two_runs_in_one_second_get_two_directories(tmp_path, monkeypatch):
    monkeypatch.setattr("time.gmtime", lambda *a: time.struct_time((2026, 11, 30, 2, 23, 0, 0, 334, 0)))
    first = RunDir.create("line3", base=tmp_path)
    first.write_link_counts(pa.table({"n": [1]}))
    second = RunDir.create("line3", base=tmp_path)
    assert (first.path.name, second.path.name) == ("20261130T022300Z", "20261130T022300Z-2")
    assert RunDir.create("line3", base=tmp_path).path.name == "20261130T022300Z-3"


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing", "no such run directory"),
    (lambda d: d, "no manifest.json (is this a run directory?)"),
    (lambda d: RunDir(d).manifest_path.write_text("[1]") and d, "manifest.json: expected a JSON object"),
    (lambda d: RunDir(d).manifest_path.write_text("{}") and d, "manifest.json: no resolved topology"),
])
def test_what_is_wrong_with_a_run_directory_is_one_line(tmp_path, make, expected):
    with pytest.raises(UserError, match=re.escape(expected)):
        RunDir(make(tmp_path)).check()
