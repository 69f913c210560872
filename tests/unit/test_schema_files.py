"""Editor schemas: schemas/*.schema.json are what the spec models generate now, every shipped
YAML names its schema in a yaml-language-server modeline, and satisfies that schema.

After changing a model in src/rmptwin/model/, regenerate the files with
``rmptwin schema topology > schemas/topology.schema.json`` and
``rmptwin schema experiment > schemas/experiment.schema.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rmptwin.errors import UserError
from rmptwin.model import Experiment, Topology, json_schemas, load_topology

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
KINDS = ("topology", "experiment")
SHIPPED = sorted([*(REPO / "experiments").glob("*.yaml"), *(REPO / "topologies").glob("*.yaml"),
                  *(REPO / "tests").rglob("*.yaml")])

try:
    import jsonschema
except ImportError:  # not in requirements.lock yet: fall back to the pydantic models
    jsonschema = None


def _regenerate(kind: str) -> str:
    return f".venv/bin/rmptwin schema {kind} > schemas/{kind}.schema.json"


def _kind_of(data: dict) -> str:
    """As `rmptwin validate` decides: an experiment names its topology."""
    return "experiment" if "topology" in data else "topology"


def _shipped_schema(kind: str) -> dict:
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


@pytest.mark.parametrize("kind", KINDS)
def test_schema_file_is_what_the_models_generate(kind):
    assert _shipped_schema(kind) == json_schemas()[kind], (
        f"schemas/{kind}.schema.json is stale: regenerate it with `{_regenerate(kind)}`")


@pytest.mark.parametrize("kind", KINDS)
def test_schema_command_prints_the_file_byte_for_byte(kind):
    """So the regeneration command in the message above really regenerates the file."""
    out = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "schema", kind], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (SCHEMAS / f"{kind}.schema.json").read_text(), f"regenerate with `{_regenerate(kind)}`"


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_a_standalone_draft_2020_12_schema(kind):
    schema = _shipped_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and kind in schema["title"]
    assert schema["additionalProperties"] is False, "a typo in a top-level key must be flagged by the editor"
    if jsonschema is not None:
        jsonschema.Draft202012Validator.check_schema(schema)


def test_every_shipped_yaml_is_covered():
    names = {p.relative_to(REPO).as_posix() for p in SHIPPED}
    assert {"experiments/quickstart.yaml", "topologies/global.yaml", "tests/emulation/net4.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_shipped_yaml_names_its_schema_on_its_first_line(path):
    kind = _kind_of(yaml.safe_load(path.read_text()))
    schema = Path(os.path.relpath(SCHEMAS / f"{kind}.schema.json", path.parent)).as_posix()
    first = path.read_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema={schema}", f"{path}: first line should point at {schema}"
    assert (path.parent / schema).is_file()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_shipped_yaml_satisfies_its_schema(path):
    data = yaml.safe_load(path.read_text())
    kind = _kind_of(data)
    if jsonschema is not None:
        errors = list(jsonschema.Draft202012Validator(_shipped_schema(kind)).iter_errors(data))
        assert not errors, f"{path}: " + "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)
    else:
        {"topology": Topology, "experiment": Experiment}[kind].model_validate(data)


def test_modeline_keeps_error_line_numbers_true(tmp_path):
    """The modeline adds a line above the data; an error must still name the line it is on."""
    text = (REPO / "topologies" / "line3.yaml").read_text()
    assert text.startswith("# yaml-language-server:")
    lines = text.splitlines()
    typo_line = next(i for i, ln in enumerate(lines, 1) if "delay_ms:" in ln)
    lines[typo_line - 1] = lines[typo_line - 1].replace("delay_ms:", "delay_msec:", 1)
    bad = tmp_path / "line3.yaml"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=rf"line3\.yaml:{typo_line}: .*delay_msec: unknown field"):
        load_topology(bad)
