"""A topology or experiment `rmptwin topo import` / `topo gen` writes names a JSON Schema that is
there, wherever the file is written: resolved as the YAML language server (VS Code's YAML
extension) resolves a modeline's ``$schema=`` (a ``file:`` URI as it is, a path relative to the
file's own folder)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from typer.testing import CliRunner

from rmptwin.cli.main import app

REPO = Path(__file__).resolve().parents[2]
GRAPH = REPO / "topologies" / "zoo" / "euro-research.graphml"
runner = CliRunner()


def _schema_named_by(path: Path) -> Path:
    """The file a YAML's first-line modeline points at, resolved as yaml-language-server does."""
    first = path.read_text().splitlines()[0]
    found = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert found, f"{path}: first line is no modeline: {first!r}"
    ref = found.group(1)
    if ref.startswith("file:"):
        return Path(unquote(urlparse(ref).path))
    return (path.parent / ref).resolve()


def test_imported_topology_written_outside_the_clone_names_a_schema_that_is_there(tmp_path: Path) -> None:
    topo, exp = tmp_path / "x.yaml", tmp_path / "deeper" / "folder with space" / "x-exp.yaml"
    res = runner.invoke(app, ["topo", "import", str(GRAPH), "--region-by", "Region", "--out", str(topo),
                              "--experiment-out", str(exp)])
    assert res.exit_code == 0, res.output
    assert _schema_named_by(topo) == REPO / "schemas" / "topology.schema.json"
    assert _schema_named_by(exp) == REPO / "schemas" / "experiment.schema.json"


def test_generated_topology_written_outside_the_clone_names_a_schema_that_is_there(tmp_path: Path) -> None:
    topo = tmp_path / "gen.yaml"
    res = runner.invoke(app, ["topo", "gen", "--switches", "4", "--seed", "1", "--out", str(topo)])
    assert res.exit_code == 0, res.output
    assert _schema_named_by(topo) == REPO / "schemas" / "topology.schema.json"


@pytest.mark.parametrize("where, expected", [
    ("topologies/new.yaml", "../schemas/topology.schema.json"),          # as every shipped topology
    ("topologies/zoo/sub/new.yaml", "../../../schemas/topology.schema.json"),
])
def test_inside_the_clone_the_reference_is_relative_as_in_the_shipped_files(where: str, expected: str) -> None:
    from rmptwin.topotools.yaml_files import schema_ref

    assert schema_ref("topology", REPO / where) == expected


def test_printed_yaml_names_the_schema_by_its_absolute_uri() -> None:
    from rmptwin.topotools.yaml_files import schema_ref

    assert schema_ref("experiment", None) == (REPO / "schemas" / "experiment.schema.json").as_uri()
