"""Nothing rmptwin prints to a pipe is wrapped: an error is one line whatever the width.

CI has no terminal, and rich wraps at ``COLUMNS`` (or 80) when output is not a terminal.
Each command group's error paths run here as a user would run them, through a real pipe (each
in a process forked from an interpreter that has imported the CLI once: cli_forks.py),
from a working directory whose path alone is longer than the narrow width, with COLUMNS=40
and COLUMNS=300: each error must be exactly one line on stderr, and the same line at both
widths.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_forks import run_cli_cases

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deep_dir(tmp_path_factory) -> Path:
    """A working directory whose path is far wider than 80 columns, holding bad inputs."""
    d = tmp_path_factory.mktemp("w")
    for part in ["a-rather-long-directory-name-for-a-course"] * 4:
        d = d / part
    d.mkdir(parents=True)
    (d / "broken.yaml").write_text("name: [unclosed\n")
    (d / "typo.yaml").write_text("name: t\nswitches: [s1]\nlinks: []\nhosts:\n  h1: {switch: s9, role: source}\n")
    (d / "not-json.json").write_text("{not json")
    (d / "empty-run").mkdir()
    return d


# (argv after the program, what the single line must mention); each exits 2
ERROR_PATHS = [
    (["validate", "missing.yaml"], "missing.yaml"),
    (["validate", "broken.yaml"], "broken.yaml"),
    (["validate", "typo.yaml"], "typo.yaml"),
    (["sim", "broken.yaml"], "broken.yaml"),
    (["run", "missing.yaml"], "missing.yaml"),
    (["analyze", "empty-run"], "empty-run"),
    (["compare", "empty-run", "empty-run"], "empty-run"),
    (["sweep", "missing.yaml", "--set", "x=1"], "missing.yaml"),
    (["venue", "timeline", "empty-run"], "empty-run"),
    (["taxonomy", "measure", "empty-run"], "empty-run"),
    (["rerun", "empty-run"], "empty-run"),
    (["keys", "gen", "missing.yaml"], "missing.yaml"),
    (["topo", "import", "missing.graphml"], "missing.graphml"),
    (["topo", "gen", "--switches", "2", "--seed", "1", "--regions", "5"], "--regions"),
    (["trace", "fit", "missing.txt"], "missing.txt"),
]


def piped_env(columns: int) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(REPO / "src")}
    env.pop("FORCE_COLOR", None)
    return env


def run_piped(argv: list[str], cwd: Path, columns: int) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=piped_env(columns), capture_output=True, text=True, timeout=120)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rmptwin.cli.main", *args]


@pytest.fixture(scope="module")
def piped(deep_dir) -> dict:
    """Each error path at each width, as run_piped runs it; in processes forked from one
    interpreter per width that has imported the CLI (cli_forks.py), not an interpreter each."""
    out = {}
    for columns in (40, 300):
        done = run_cli_cases([argv for argv, _ in ERROR_PATHS], env=piped_env(columns), cwd=deep_dir)
        out.update({(tuple(argv), columns): r for (argv, _), r in zip(ERROR_PATHS, done)})
    return out


def test_a_forked_run_prints_what_a_fresh_interpreter_prints(piped, deep_dir):
    argv = ERROR_PATHS[0][0]
    alone, forked = run_piped(cli(*argv), deep_dir, 40), piped[(tuple(argv), 40)]
    assert (forked.returncode, forked.stdout, forked.stderr) == (alone.returncode, alone.stdout, alone.stderr)


@pytest.mark.parametrize("argv,mentions", ERROR_PATHS, ids=[" ".join(a) for a, _ in ERROR_PATHS])
def test_an_error_is_one_line_at_any_width(piped, argv, mentions):
    lines = {}
    for columns in (40, 300):
        r = piped[(tuple(argv), columns)]
        assert r.returncode == 2, (argv, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr
        err = r.stderr.splitlines()
        assert len(err) == 1, f"{argv} at COLUMNS={columns} printed {len(err)} lines:\n{r.stderr}"
        assert mentions in err[0]
        lines[columns] = err[0]
    assert lines[40] == lines[300]


def test_the_bench_error_is_one_line_at_any_width(deep_dir):
    """The bench's own entry point (argparse, not typer) keeps the same contract."""
    argv = [sys.executable, "-m", "rmptwin.bench", "--quick", "--only", "matching",
            "--reference", str(deep_dir / "not-json.json"), "--out", str(deep_dir / "out")]
    for columns in (40, 300):
        r = run_piped(argv, deep_dir, columns)
        assert r.returncode == 2, r.stderr
        err = r.stderr.splitlines()
        assert len(err) == 1 and "not valid JSON" in err[0], r.stderr
        assert str(deep_dir / "not-json.json") in err[0]


def test_a_long_success_line_is_whole_in_a_pipe(deep_dir):
    """A path longer than the width stays on one line when the output is piped (``| tail -1``)."""
    exp = deep_dir / "q.yaml"
    exp.write_text((REPO / "experiments" / "quickstart.yaml").read_text().replace(
        "../topologies/", str(REPO / "topologies") + "/"))
    r = run_piped(cli("validate", str(exp)), deep_dir, 40)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 1 and str(exp) in out[0], r.stdout
