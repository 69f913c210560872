"""`rmptwin spark up|down|status`: a standalone Spark cluster on this machine (``analysis.cluster``)
for `analyze`, `sweep` and `claims` with ``--master spark://127.0.0.1:7077``."""

from __future__ import annotations

from pathlib import Path

import typer

from rmptwin.analysis import cluster as standalone
from rmptwin.cli.console import make_console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="a standalone Spark cluster on 127.0.0.1 from the installed pyspark")
console = make_console()

STATE_HELP = "state directory (pids, logs, work dirs); default ~/.local/state/rmptwin/spark"


@app.command()
def up(
    workers: int = typer.Option(2, "--workers", min=1, help="worker JVMs"),
    cores: int = typer.Option(1, "--cores", min=1, help="cores each worker offers"),
    memory: str = typer.Option("1g", "--memory", help="memory each worker offers executors (Spark syntax: 512m, 2g)"),
    port: int = typer.Option(standalone.DEFAULT_PORT, "--port", help="master port"),
    webui_port: int = typer.Option(standalone.DEFAULT_WEBUI_PORT, "--webui-port", help="master web UI port"),
    state: Path | None = typer.Option(None, "--state-dir", help=STATE_HELP),
) -> None:
    """Start a Spark master and workers on 127.0.0.1; print the URL to give --master."""
    c = standalone.up(workers, cores, memory, port, webui_port, state)
    console.print(f"Spark master {c.master_url} with {c.workers} workers x {c.cores} cores x {c.memory} "
                  f"(web UI {c.webui_url}; state in {c.state_dir})", highlight=False, soft_wrap=True)
    console.print(f"use: rmptwin analyze RUN --master {c.master_url}; stop: rmptwin spark down",
                  highlight=False, soft_wrap=True)


@app.command()
def down(state: Path | None = typer.Option(None, "--state-dir", help=STATE_HELP)) -> None:
    """Stop the cluster `rmptwin spark up` started."""
    stopped = standalone.down(state)
    console.print(f"stopped {', '.join(stopped)}" if stopped else "no Spark cluster was running",
                  highlight=False, soft_wrap=True)


@app.command()
def status(state: Path | None = typer.Option(None, "--state-dir", help=STATE_HELP)) -> None:
    """The cluster's master URL and its workers, if one is up."""
    c = standalone.read_state(state)
    alive = c and [n for n, p in c.pids.items() if standalone._is_spark_daemon(p)]
    if not alive:
        console.print("no Spark cluster is running", highlight=False)
        raise typer.Exit(1)
    assert c is not None   # a cluster is up
    console.print(f"{c.master_url}: {', '.join(alive)} running (web UI {c.webui_url})", highlight=False,
                  soft_wrap=True)
