"""`rmptwin topo import`: delays from coordinates, the stated choices for what real graphs hold
(parallel edges, self loops, missing coordinates, disconnected parts), regions from an
attribute, and the shipped zoo topologies re-import to the shipped YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmptwin.errors import UserError
from rmptwin.model import Topology
from rmptwin.topotools.yaml_files import dump_yaml
from rmptwin.topotools.zoo_import import ImportOptions, haversine_km, import_graph, link_delay_ms

ROOT = Path(__file__).resolve().parents[2]


def graphml(tmp_path: Path, nodes: list[tuple], edges: list[tuple], name: str = "g.graphml") -> Path:
    """nodes: (id, label, lat | None, lon | None, country); edges: (a, b, bit/s | None)."""
    out = ['<?xml version="1.0" encoding="utf-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
           '<key attr.name="label" attr.type="string" for="node" id="l"/>',
           '<key attr.name="Latitude" attr.type="double" for="node" id="la"/>',
           '<key attr.name="Longitude" attr.type="double" for="node" id="lo"/>',
           '<key attr.name="Country" attr.type="string" for="node" id="c"/>',
           '<key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="s"/>',
           '<graph edgedefault="undirected">']
    for i, label, lat, lon, country in nodes:
        out.append(f'<node id="{i}"><data key="l">{label}</data>'
                   + (f'<data key="la">{lat}</data><data key="lo">{lon}</data>' if lat is not None else "")
                   + f'<data key="c">{country}</data></node>')
    for j, (a, b, speed) in enumerate(edges):
        out.append(f'<edge id="e{j}" source="{a}" target="{b}">'
                   + (f'<data key="s">{speed}</data>' if speed else "") + "</edge>")
    out += ["</graph>", "</graphml>"]
    path = tmp_path / name
    path.write_text("\n".join(out))
    return path


CITIES = [("0", "London", 51.5074, -0.1278, "UK"), ("1", "New York", 40.7128, -74.0060, "US"),
          ("2", "Boston", 42.3601, -71.0589, "US"), ("3", "Paris", 48.8566, 2.3522, "FR")]


def test_haversine_and_delay_at_two_thirds_of_light_speed():
    km = haversine_km(51.5074, -0.1278, 40.7128, -74.0060)
    assert km == pytest.approx(5570, abs=10)            # London - New York, published great circle
    assert link_delay_ms(km, 1.0, 0.0) == pytest.approx(km / 199.8616)
    assert link_delay_ms(km, 1.0, 0.1) == pytest.approx(km / 199.8616 + 0.1)
    assert link_delay_ms(km, 1.5, 0.0) == pytest.approx(1.5 * km / 199.8616)


def test_links_get_delay_bandwidth_and_regions(tmp_path):
    path = graphml(tmp_path, CITIES, [("0", "1", 1e10), ("1", "2", None), ("0", "3", 1e11)])
    topo, notes = import_graph(path, ImportOptions(region_by="Country", overhead_ms=0.0))
    links = {(lk["a"], lk["b"]): lk for lk in topo["links"]}
    lon_ny = links[("london", "newyork")]
    assert lon_ny["delay_ms"] == pytest.approx(5570 / 199.8616, abs=0.06)
    assert lon_ny["bandwidth_mbps"] == 10_000 and "bandwidth_mbps" not in links[("boston", "newyork")]
    assert topo["regions"] == {"fr": ["paris"], "uk": ["london"], "us": ["boston", "newyork"]}
    assert notes == []
    Topology.model_validate(topo)
    for region, members in topo["regions"].items():     # every region has its R_T inside it
        assert any(h["role"] == "primary" and h.get("regions") == [region] and h["switch"] in members
                   for h in topo["hosts"])


def test_a_value_in_two_islands_gives_two_regions(tmp_path):
    nodes = CITIES[:3] + [("3", "Dublin", 53.35, -6.26, "US")]   # 'US' again, far from the others
    path = graphml(tmp_path, nodes, [("0", "1", None), ("1", "2", None), ("0", "3", None)])
    topo, _ = import_graph(path, ImportOptions(region_by="Country"))
    assert topo["regions"]["us"] == ["boston", "newyork"] and topo["regions"]["us2"] == ["dublin"]


def test_parallel_edges_merge_and_self_loops_are_left_out_with_a_note(tmp_path):
    path = graphml(tmp_path, CITIES[:2], [("0", "1", 1e10), ("0", "1", 1e10), ("0", "0", None)])
    topo, notes = import_graph(path, ImportOptions())
    assert len(topo["links"]) == 1 and topo["links"][0]["bandwidth_mbps"] == 20_000
    assert any("merged 1 parallel" in n for n in notes) and any("self loop" in n for n in notes)


def test_missing_coordinates_is_one_line_error_or_dropped(tmp_path):
    nodes = CITIES[:2] + [("2", "Nowhere", None, None, "US")]
    path = graphml(tmp_path, nodes, [("0", "1", None), ("1", "2", None)])
    with pytest.raises(UserError, match=r"1 node\(s\) without Latitude/Longitude: 'Nowhere'") as e:
        import_graph(path, ImportOptions())
    assert "\n" not in str(e.value)
    topo, notes = import_graph(path, ImportOptions(drop_uncoordinated=True))
    assert topo["switches"] == ["london", "newyork"] and "Nowhere" in notes[0]


def test_disconnected_graph_is_one_line_error_or_largest_part(tmp_path):
    path = graphml(tmp_path, CITIES, [("0", "1", None), ("1", "2", None)])
    with pytest.raises(UserError, match="not connected .2 components.*Paris.*--largest-component") as e:
        import_graph(path, ImportOptions())
    assert "\n" not in str(e.value)
    topo, notes = import_graph(path, ImportOptions(largest_component=True))
    assert "paris" not in topo["switches"] and "Paris" in notes[0]


def test_gml_with_parallel_edges_needs_multigraph(tmp_path):
    path = tmp_path / "g.gml"
    path.write_text('graph [ node [ id 0 label "A" Latitude 1 Longitude 1 ] node [ id 1 label "B" Latitude 2 '
                    'Longitude 2 ] edge [ source 0 target 1 ] edge [ source 0 target 1 ] ]')
    with pytest.raises(UserError, match="multigraph 1"):
        import_graph(path, ImportOptions())
    path.write_text(path.read_text().replace("graph [", "graph [ multigraph 1", 1))
    topo, notes = import_graph(path, ImportOptions())
    assert len(topo["links"]) == 1 and notes


def test_not_a_graph_is_one_line(tmp_path):
    path = tmp_path / "bad.graphml"
    path.write_text("<graphml><graph>")
    with pytest.raises(UserError) as e:
        import_graph(path, ImportOptions())
    assert str(e.value).startswith(f"{path}: not a readable graph") and "\n" not in str(e.value)


@pytest.mark.parametrize("name, region_by, sources, primaries", [("euro-research", "Region", 1, 3),
                                                                ("intercontinental", "Continent", 2, 4)])
def test_shipped_zoo_topologies_reimport_to_the_shipped_yaml(name, region_by, sources, primaries):
    topo, _ = import_graph(ROOT / "topologies" / "zoo" / f"{name}.graphml",
                           ImportOptions(region_by=region_by, sources=sources, primaries=primaries, loss=0.005))
    shipped = (ROOT / "topologies" / f"{name}.yaml").read_text()
    body = shipped[shipped.index("name:"):]
    assert dump_yaml(topo) == body
