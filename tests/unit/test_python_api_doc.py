"""docs/python-api.md's examples run as written.

Every ```python block of the page runs, statement by statement, from a scratch directory that
holds the clone's experiments/, topologies/ and notebooks/ (symbolic links), so the runs land
in its results/ and never in the clone. A statement that is a bare expression (what a reader
would look at in a notebook) must give something to look at: not None and, where it has a
length, not empty. ``ev[ev.kind == "RELEASE"]`` gave an empty table without any error, which is
why. A block written as a session (``>>>`` lines followed by what they print) must print that.

Skipped, and only these (``NOT_RUN``): ``api.analyze(run)`` and the two lines that read what
it wrote (``run.metrics``, ``run.report_path``). The analysis starts the embedded Spark and
computes every metric: 50-78 s on a 2-CPU machine (measured 2026-11-28 at load 2-7), more than
this test may take; tests/spark/test_api_spark.py analyses a run from Python and reads the same
members. The page's Spark sweep of line3 (6 runs) runs as written (about 15 s with the JVM's
start, hence the ``spark`` mark). Nothing on the page needs root or an emulated run: the
emulated run it compares with is the one shipped in notebooks/data/.
"""

from __future__ import annotations

import ast
import re
import traceback
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "python-api.md"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def session(block: str) -> list[tuple[str, str]]:
    """(statement, what it prints) of each ``>>>`` line of a session block."""
    out: list[tuple[str, str]] = []
    for line in block.splitlines():
        if line.startswith(">>> "):
            out.append((line[4:], ""))
        elif out and line.strip():
            out[-1] = (out[-1][0], (out[-1][1] + "\n" + line).strip())
    return out


def _looked_at(value: object) -> list[object]:
    return list(value) if isinstance(value, tuple) else [value]


NOT_RUN = {
    "report = api.analyze(run)": "Spark's analysis, 50-78 s (module docstring)",
    'run.metrics["headline"]': "written by api.analyze",
    "run.report_path": "written by api.analyze",
}


def _run_script(block: str, namespace: dict, not_run: dict[str, str] | None = None) -> list[str]:
    """Run the block's statements in ``namespace``; the sources of those not run."""
    skipped = []
    for node in ast.parse(block).body:
        source = ast.get_source_segment(block, node)
        assert source is not None
        if source in (not_run or {}):
            skipped.append(source)
            continue
        try:
            if isinstance(node, ast.Expr):
                for value in _looked_at(eval(compile(ast.Expression(node.value), PAGE.name, "eval"), namespace)):
                    assert value is not None, f"{source}: None"
                    if hasattr(value, "__len__"):
                        assert len(value) > 0, f"{source}: empty\n{value!r}"
            else:
                exec(compile(ast.Module([node], type_ignores=[]), PAGE.name, "exec"), namespace)
        except AssertionError:
            raise
        except Exception:
            pytest.fail(f"docs/python-api.md: {source}\n{traceback.format_exc()}")
    return skipped


def _run_session(block: str, namespace: dict) -> None:
    for statement, printed in session(block):
        try:
            result = eval(statement, namespace)
        except Exception as e:
            got = f"{type(e).__module__}.{type(e).__qualname__}: {e}"
        else:
            got = repr(result) if result is not None else ""
        assert got == printed, f"docs/python-api.md: >>> {statement}\nprints {got!r}\nthe page says {printed!r}"


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    for d in ("experiments", "topologies", "notebooks"):
        (tmp_path / d).symlink_to(REPO / d, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.spark
def test_every_python_example_of_the_page_runs_as_written(scratch):
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 2
    namespace: dict = {}
    skipped: list[str] = []
    for block in blocks:
        if block.lstrip().startswith(">>>"):
            _run_session(block, namespace)
        else:
            skipped += _run_script(block, namespace, NOT_RUN)
    assert sorted(skipped) == sorted(NOT_RUN), "NOT_RUN names statements the page no longer has"
    assert (scratch / "results" / "quickstart").is_dir()   # the runs went to the scratch directory


def test_a_bare_expression_that_gives_an_empty_table_fails():
    import pandas as pd

    with pytest.raises(AssertionError, match="empty"):
        _run_script('ev = pd.DataFrame({"kind": ["release"]})\nev[ev.kind == "RELEASE"]\n', {"pd": pd})


def test_sessions_are_read_as_statement_and_output():
    assert session(">>> 1 + 1\n2\n>>> x\nError: a\n  b\n") == [("1 + 1", "2"), ("x", "Error: a\n  b")]
