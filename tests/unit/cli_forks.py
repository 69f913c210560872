"""Many ``python -m rmptwin.cli.main ARGS`` runs for the price of one interpreter start-up: each
is still a process of its own with its own pipes and exit code (cli_fork_server.py says how).

The server starts with the environment and working directory given here, so what the CLI
reads from them at import (rich reads COLUMNS when a module makes its console) is what a
command started the usual way would read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SERVER = Path(__file__).with_name("cli_fork_server.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def run_cli_cases(cases: list[list[str]], env: dict[str, str] | None = None, cwd: str | Path | None = None,
                  jobs: int | None = None, timeout: float = 600) -> list[subprocess.CompletedProcess]:
    """``python -m rmptwin.cli.main *args`` for each ``args`` in ``cases``, stdin on /dev/null,
    stdout and stderr captured as text; ``jobs`` at a time (default two per CPU)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    request = json.dumps({"cases": [list(c) for c in cases], "jobs": jobs or 2 * (os.cpu_count() or 2)})
    server = subprocess.run([sys.executable, str(SERVER)], input=request + "\n", capture_output=True, text=True,
                            env=env, cwd=cwd, timeout=timeout)
    assert server.returncode == 0 and server.stdout.strip(), f"the CLI fork server failed:\n{server.stderr}"
    answers = json.loads(server.stdout)
    return [subprocess.CompletedProcess([sys.executable, "-m", "rmptwin.cli.main", *args], rc, out, err)
            for args, (rc, out, err) in zip(cases, answers)]
