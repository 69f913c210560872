"""`rmptwin topo gen` and `rmptwin campaign twin` as a user calls them."""

from __future__ import annotations

import pyarrow.parquet as pq
from typer.testing import CliRunner

from rmptwin.cli.main import app
from rmptwin.model import load_experiment

runner = CliRunner()


def test_topo_gen_writes_a_valid_topology_and_a_fitted_experiment(tmp_path):
    topo, exp = tmp_path / "t" / "gen.yaml", tmp_path / "e" / "gen.yaml"
    res = runner.invoke(app, ["topo", "gen", "--switches", "9", "--seed", "3", "--regions", "2", "--mesh", "0.3",
                              "--out", str(topo), "--experiment-out", str(exp)])
    assert res.exit_code == 0, res.output
    loaded = load_experiment(exp)
    assert len(loaded.topology.switches) == 9 and set(loaded.topology.regions) == {"r1", "r2"}
    again = tmp_path / "again.yaml"
    runner.invoke(app, ["topo", "gen", "--switches", "9", "--seed", "3", "--regions", "2", "--mesh", "0.3",
                        "--out", str(again)])
    assert again.read_text() == topo.read_text()


def test_topo_gen_rejects_more_regions_than_switches_in_one_line():
    res = runner.invoke(app, ["topo", "gen", "--switches", "2", "--seed", "1", "--regions", "3"])
    assert res.exit_code != 0 and "--regions must be in 1..2" in str(res.exception)


def test_campaign_twin_writes_one_row_per_run(tmp_path):
    res = runner.invoke(app, ["campaign", "twin", "--count", "4", "--seed", "50", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "c" / "campaign.parquet").to_pylist()
    assert [r["seed"] for r in table] == [50, 51, 52, 53]
    assert all(r["clean"] for r in table), table
    assert "4 clean" in (tmp_path / "c" / "campaign.md").read_text()
