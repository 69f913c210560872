"""Runs ``python -m rmptwin.cli.main ARGS`` for many ARGS, each in a process of its own, forked
from this interpreter once it has imported the CLI's modules (cli_forks.py starts it).

Why: a fresh interpreter spends ~1.5 s of CPU importing the CLI (pandas, pyarrow, pydantic)
before it parses a flag; a hundred usage cases paid that a hundred times (101 s of CI's suite).
A child forked here starts with those modules loaded and runs ``rmptwin.cli.main`` afresh as
``__main__``, as ``python -m`` does, with fd 0 on /dev/null and fds 1 and 2 on pipes of its
own; it exits with the status, the output and the atexit calls the command's own interpreter
would give it (``_child`` says what differs: the modules' teardown, which prints nothing).

Reads one JSON line on stdin, {"cases": [[arg, ...], ...], "jobs": N}; writes one JSON line,
a [returncode, stdout, stderr] per case in order.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import runpy
import selectors
import sys

import rmptwin.cli
import rmptwin.cli.main  # noqa: F401 - everything main imports, loaded once for every child

# main itself runs afresh in each child, as __main__ (left in sys.modules, runpy would warn)
del sys.modules["rmptwin.cli.main"]
del sys.modules["rmptwin.cli"].main


def _warm_up() -> None:
    """Run a help and a usage error here once, their output dropped: typer and rich import
    what they format help and errors with on first use, and read each command's signature;
    done here, every child finds them done (about 0.2 s of CPU less each, measured)."""
    for args in (["--help"], ["--no-such-flag-warm-up"]):
        sys.argv = ["-m", *args]
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                runpy.run_module("rmptwin.cli.main", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass


def _exit_status(code) -> int:
    """The status Python exits with for ``SystemExit(code)`` (a non-integer code is printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _child(args: list[str], out_w: int, err_w: int) -> None:
    """In the forked child: become ``python -m rmptwin.cli.main *args`` and never return.

    It ends as the interpreter would end it (SystemExit's status, or the traceback and 1;
    then the atexit functions and the flush of stdout and stderr), less the teardown of
    every module: in a child of this big a process that costs ~0.9 s (measured), and no
    output depends on it."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    sys.argv = ["-m", *args]   # run_module puts main.py's path in argv[0], as -m does
    try:
        runpy.run_module("rmptwin.cli.main", run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException as e:
        sys.excepthook(type(e), e, e.__traceback__)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120   # as Python does when it cannot flush at exit
    os._exit(status)


def _start(args: list[str]) -> tuple[int, int, int]:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()   # nothing of this process's own output may reach the child's copy
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(args, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    return pid, out_r, err_r


def run_all(cases: list[list[str]], jobs: int) -> list[list]:
    results: list[list] = [[None, b"", b""] for _ in cases]
    todo = list(enumerate(cases))
    sel = selectors.DefaultSelector()
    running: dict[int, tuple[int, int]] = {}   # case -> (pid, open pipes)
    while todo or running:
        while todo and len(running) < jobs:
            i, args = todo.pop(0)
            pid, out_r, err_r = _start(args)
            running[i] = (pid, 2)
            sel.register(out_r, selectors.EVENT_READ, (i, 1))
            sel.register(err_r, selectors.EVENT_READ, (i, 2))
        for key, _ in sel.select():
            i, slot = key.data
            chunk = os.read(key.fd, 65536)
            if chunk:
                results[i][slot] += chunk
                continue
            sel.unregister(key.fd)
            os.close(key.fd)
            pid, open_pipes = running[i]
            if open_pipes > 1:
                running[i] = (pid, open_pipes - 1)
                continue
            _, status = os.waitpid(pid, 0)
            results[i][0] = os.waitstatus_to_exitcode(status)
            del running[i]
    return [[rc, out.decode(errors="replace"), err.decode(errors="replace")] for rc, out, err in results]


if __name__ == "__main__":
    _warm_up()
    request = json.loads(sys.stdin.readline())
    answer = run_all(request["cases"], request["jobs"])
    sys.stdout.write(json.dumps(answer) + "\n")
