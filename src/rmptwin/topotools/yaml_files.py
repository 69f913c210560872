"""Writing what a user would have written: a topology or experiment as readable YAML, and
the file itself (one error line when it cannot be written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rmptwin.errors import UserError

TOPOLOGY_HEADER = "# yaml-language-server: $schema=../schemas/topology.schema.json\n"
EXPERIMENT_HEADER = "# yaml-language-server: $schema=../schemas/experiment.schema.json\n"


def dump_yaml(data: dict[str, Any], header: str = "") -> str:
    """A spec dict as YAML in the field order given (links and hosts one flow mapping a line)."""

    class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # yaml is untyped here (no stubs locked)
        pass

    def flow_row(dumper: Any, row: dict[str, Any]) -> Any:   # a yaml Dumper -> its node
        return dumper.represent_mapping("tag:yaml.org,2002:map", row.items(), flow_style=True)

    def block_map(dumper: Any, m: dict[str, Any]) -> Any:
        return dumper.represent_mapping("tag:yaml.org,2002:map", m.items())

    _Dumper.add_representer(dict, block_map)
    _Dumper.add_representer(_Row, flow_row)
    body: dict[str, Any] = {k: ([_Row(r) for r in v] if k in ("links", "hosts") else v) for k, v in data.items()}
    if "regions" in body:
        body["regions"] = {r: _Flow(m) for r, m in body["regions"].items()}
    _Dumper.add_representer(_Flow, lambda d, seq: d.represent_sequence("tag:yaml.org,2002:seq", seq, flow_style=True))
    if isinstance(body.get("switches"), list):
        body["switches"] = _Flow(body["switches"])
    text: str = yaml.dump(body, Dumper=_Dumper, sort_keys=False, width=100000)
    return header + text


class _Row(dict[str, Any]):
    pass


class _Flow(list[Any]):
    pass


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror})") from None
