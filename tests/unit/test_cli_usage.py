"""Usage errors: every command of the CLI answers ``--help``; a usage mistake prints typer's
usage text on stderr and exits 2, never a traceback; a group given no subcommand prints its
help and exits 2 (typer's no_args_is_help). The tree is walked from the app itself, so a new
command or group is covered without touching this file.

Each case runs ``python -m rmptwin.cli.main`` in a process of its own, as a user would; the
processes are forked from one interpreter that has imported the CLI once (cli_forks.py: a fresh
interpreter per case spent 101 s of CI's suite importing the CLI 109 times), and a few cases
are run the usual way too, to show that the forked ones print the same bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer
import typer.main
from cli_forks import SRC, run_cli_cases

from rmptwin.cli import main as cli
from rmptwin.errors import UserError

BOGUS = "--bogus-flag-xyz"


def _walk(command, path=()):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


TREE = list(_walk(typer.main.get_command(cli.app)))


def _is_group(command) -> bool:
    return hasattr(command, "commands")


def _cases() -> list[tuple[str, tuple[str, ...]]]:
    cases = []
    for path, command in TREE:
        cases += [("help", path), ("bogus", path)]
        if _is_group(command):
            cases.append(("no-args", path))
        elif any(p.required for p in command.params):
            cases.append(("missing", path))
    return cases


CASES = _cases()
ARGS = {"help": ["--help"], "bogus": [BOGUS], "no-args": [], "missing": []}


def _env() -> dict[str, str]:
    # Wide and colourless, so typer's error panel neither wraps nor splits the words checked.
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(COLUMNS="200", NO_COLOR="1", TERM="dumb", PYTHONPATH=str(SRC))
    return env


def _argv(case: tuple[str, tuple[str, ...]]) -> list[str]:
    kind, path = case
    return [*path, *ARGS[kind]]


@pytest.fixture(scope="module")
def results() -> dict:
    unsafe = [" ".join(p) for p, c in TREE if (c.context_settings or {}).get("ignore_unknown_options")]
    assert not unsafe, f"{unsafe} ignore unknown options: a mistyped flag would run them"
    return dict(zip(CASES, run_cli_cases([_argv(c) for c in CASES], env=_env())))


# One case of each kind, at the top and deeper down, also run in a fresh interpreter of its own
ALONE = [("help", ()), ("bogus", ("net", "up")), ("missing", ("validate",))]


@pytest.mark.parametrize("case", ALONE, ids=lambda c: f"{c[0]}:rmptwin {' '.join(c[1])}".strip())
def test_a_forked_case_prints_what_a_fresh_interpreter_prints(results, case):
    alone = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *_argv(case)], capture_output=True,
                           text=True, env=_env(), stdin=subprocess.DEVNULL, timeout=120)
    forked = results[case]
    assert (forked.returncode, forked.stdout, forked.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def _usage_line(path) -> str:
    return " ".join(("Usage: rmptwin", *path))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}:rmptwin {' '.join(c[1])}".strip())
def test_usage(results, case):
    kind, path = case
    out = results[case]
    shown = f"rc={out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    assert "Traceback" not in out.stdout + out.stderr, shown
    if kind == "help":
        assert out.returncode == 0, shown
        assert _usage_line(path) in out.stdout, shown
    elif kind == "no-args":
        assert out.returncode == 2, shown
        assert _usage_line(path) in out.stdout and "Commands" in out.stdout, shown
    elif kind == "bogus":
        assert out.returncode == 2, shown
        assert _usage_line(path) in out.stderr and "No such option" in out.stderr and BOGUS in out.stderr, shown
    else:
        assert out.returncode == 2, shown
        assert _usage_line(path) in out.stderr and "Missing" in out.stderr, shown


def test_the_walk_reaches_subcommands():
    """Guards the walk itself: one that stopped at the top would leave `net up` untested."""
    paths = {" ".join(p) for p, _ in TREE}
    assert {"", "validate", "schema", "sim", "net", "net up", "venue gap"} <= paths


def _app_raising(exc: BaseException) -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command()
    def boom() -> None:
        raise exc

    @app.command()
    def other() -> None:
        """A second command, so that `boom` is a subcommand as in the real tree."""

    return app


@pytest.mark.parametrize("exc,code,line", [
    (UserError("topologies/x.yaml:3: links.0.delay_ms: must be >= 0"), 2,
     "rmptwin: topologies/x.yaml:3: links.0.delay_ms: must be >= 0"),
    (KeyboardInterrupt(), 130, "rmptwin: interrupted"),
], ids=["user-error", "ctrl-c"])
def test_main_turns_errors_into_one_line_and_an_exit_code(monkeypatch, capsys, exc, code, line):
    monkeypatch.setattr(cli, "app", _app_raising(exc))
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # typer installs its own; restore it after
    monkeypatch.setattr(sys, "argv", ["rmptwin", "boom"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == code
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if ln.strip()] == [line]
