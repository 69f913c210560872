"""`rmptwin keys gen`: a fresh key set for a secure experiment (``factories.keys``)."""

from __future__ import annotations

from pathlib import Path

import typer

from rmptwin import api
from rmptwin.errors import UserError
from rmptwin.factories.keys import generate, key_path, write_keys

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="key sets of secure experiments (security: {enabled: true})")


@app.command("gen")
def gen(
    experiment: Path = typer.Argument(..., help="experiment YAML"),
    out: Path | None = typer.Option(None, "--out", help="key file (default: the experiment's security.keys, "
                                                         "else $XDG_CONFIG_HOME/rmptwin/keys/<name>.json)"),
    force: bool = typer.Option(False, "--force", help="replace an existing key file"),
) -> None:
    """Write a fresh key set for EXPERIMENT (mode 0600, outside any run directory)."""
    loaded = api.load_experiment(experiment)
    path = out.expanduser().resolve() if out is not None else key_path(loaded)
    if path.exists() and not force:
        raise UserError(f"{path} exists; pass --force to replace it (runs sealed with the old keys stay unreadable)")
    keys = generate(loaded)
    write_keys(keys, path)
    typer.echo(f"wrote {len(keys.sources)} source, {len(keys.regions)} region, {len(keys.retransmit)} retransmit "
               f"and 1 control key to {path} (mode 0600)")
