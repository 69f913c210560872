"""A servers file: the machines a run over several servers uses, kept beside the experiment
so the same list serves `rmptwin run --servers FILE`, `rmptwin sweep --servers FILE` and the
API (``api.servers``)::

    # servers.yaml
    servers: [worker1, worker2]     # two or more names (or addresses) SSH reaches as root
    placement: regions              # optional: regions (default) or bins

Unknown fields are errors, as in every spec file: a misspelt ``placment`` is not ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from rmptwin.errors import UserError
from rmptwin.model._base import _Model
from rmptwin.model.loading import _validation_message, read_yaml

SUFFIXES = (".yaml", ".yml")


class ServersFile(_Model):
    servers: list[str] = Field(min_length=2)
    placement: Literal["regions", "bins"] = "regions"

    @field_validator("servers")
    @classmethod
    def _distinct_names(cls, names: list[str]) -> list[str]:
        names = [n.strip() for n in names]
        if any(not n or any(c.isspace() or c == "," for c in n) for n in names):
            raise ValueError("each server is one name or address, without spaces or commas")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"'{twice[0]}' is listed twice")
        return names


def is_servers_file(text: str) -> bool:
    """Whether ``--servers TEXT`` names a file rather than a list of servers."""
    return text.strip().endswith(SUFFIXES)


def load_servers(path: str | Path) -> ServersFile:
    """The servers file at ``path``, or one UserError line naming the field to fix."""
    path = Path(path)
    data, text = read_yaml(path)
    try:
        return ServersFile.model_validate(data)
    except ValidationError as e:
        raise UserError(_validation_message(path, text, e)) from None
