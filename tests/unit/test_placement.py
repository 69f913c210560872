"""Placement over several servers (emulation.placement) and the SSH plumbing's pure parts
(emulation.cluster): on the shipped topologies and on generated ones nobody placed by hand."""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmptwin.cli.run_commands import server_names
from rmptwin.emulation.cluster import remote_command, server_cleanup_script
from rmptwin.emulation.placement import SLACK, place
from rmptwin.errors import UserError
from rmptwin.model import load_topology
from rmptwin.topotools.generate import GenParams, loaded_generated

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["global", "binary-tree", "line3", "euro-research", "venue", "edge"]


def servers(n: int) -> list[str]:
    return [f"rts{i}" for i in range(1, n + 1)]


def check(topo, n: int) -> None:
    p = place(topo, servers(n))
    assert set(p.switch_server) == set(topo.switches)
    load = p.load(topo)
    assert all(v > 0 for v in load.values()), load           # no server idle
    even = (len(topo.switches) + len(topo.hosts)) / n
    w = [1 + sum(h.switch == s for h in topo.hosts) for s in topo.switches]
    cap = max(SLACK * even, max(w))
    if max(load.values()) > cap + 1e-9:   # only where no placement fits: shown by trying them all
        assert len(w) <= 12, (load, cap)
        assert not any(max(sum(x for x, k in zip(w, ks) if k == i) for i in range(n)) <= cap
                       for ks in itertools.product(range(n), repeat=len(w))), (load, cap)
    assert p.cut_links == tuple(lk.name for lk in topo.links if p.switch_server[lk.a] != p.switch_server[lk.b])
    assert place(topo, servers(n)) == p                       # deterministic


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_shipped_topology_places_within_the_balance(name, n):
    topo = load_topology(REPO / "topologies" / f"{name}.yaml")
    if n > len(topo.switches):
        pytest.skip("fewer switches than servers")
    check(topo, n)


def test_one_server_cuts_nothing_and_regions_stay_whole_on_three():
    topo = load_topology(REPO / "topologies" / "global.yaml")
    assert place(topo, servers(1)).cut_links == ()
    p = place(topo, servers(3))
    for region in ("namerica", "europe", "asia"):
        assert len({p.switch_server[s] for s in topo.regions[region]}) == 1, region
    assert len(p.cut_links) == 2   # nyc-lon and lon-sgp: the ocean crossings


def test_the_printed_placement_names_every_server_and_the_cut_links():
    topo = load_topology(REPO / "topologies" / "global.yaml")
    lines = place(topo, servers(2)).lines(topo)
    assert [ln.split(":")[0] for ln in lines[:2]] == ["rts1", "rts2"]
    assert lines[-1].startswith("cut links (")
    assert sum(int(ln.split(", ")[-1].split()[0]) for ln in lines[:2]) == len(topo.hosts)


def test_a_placement_that_cannot_fit_is_one_line():
    topo = load_topology(REPO / "topologies" / "line3.yaml")
    with pytest.raises(UserError, match="cannot fit"):
        place(topo, servers(4))
    with pytest.raises(UserError, match="at least one server"):
        place(topo, [])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(1, 10_000), switches=st.integers(3, 24), regions=st.integers(1, 3),
       mesh=st.sampled_from([0.0, 0.5]), n=st.integers(2, 3))
def test_generated_topologies_place_within_the_balance(seed, switches, regions, mesh, n):
    topo = loaded_generated(GenParams(switches=switches, regions=regions, mesh=mesh,
                                      primaries=max(3, regions)), seed).topology
    check(topo, n)


def test_commands_cross_ssh_with_their_words_and_environment():
    cmd = ["/usr/bin/python3", "-m", "rmptwin.node.main", "/tmp/a run/cfg.json", "it's"]
    words = remote_command(cmd, {"PYTHONPATH": "/src dir", "X": "a;b"})
    assert shlex.split(" ".join(words)) == ["env", "PYTHONPATH=/src dir", "X=a;b", *cmd]


def test_server_cleanup_never_touches_the_servers_own_namespace():
    script = server_cleanup_script([123], ["r1s1"], "^r1s")
    assert 'readlink /proc/$$/ns/net' in script and "continue" in script
    assert "del-br r1s1" in script


def test_one_server_is_a_typo_not_a_cluster():
    assert server_names("rts1, rts2") == (("rts1", "rts2"), "regions")
    assert server_names("rts1,rts2", "bins") == (("rts1", "rts2"), "bins")
    assert server_names("") == ((), "regions")
    with pytest.raises(UserError, match="two or more"):
        server_names("rts1")


def test_a_servers_file_lists_the_servers_and_may_set_the_placement(tmp_path):
    f = tmp_path / "servers.yaml"
    f.write_text("# two workers\nservers: [w1, w2]\nplacement: bins\n")
    assert server_names(str(f)) == (("w1", "w2"), "bins")
    assert server_names(str(f), "regions") == (("w1", "w2"), "regions")   # --placement wins
    f.write_text("servers:\n  - w1\n  - w2\n")
    assert server_names(str(f)) == (("w1", "w2"), "regions")


@pytest.mark.parametrize("text, said", [
    ("servers: [w1]\n", ":1: servers: List should have at least 2 items"),
    ("servers: [w1, w2]\nplacment: bins\n", ":2: placment: unknown field (check its spelling)"),
    ("servers: [w1, w2]\nplacement: random\n", ":2: placement: Input should be 'regions' or 'bins'"),
    ("servers: [w1, w1]\n", "'w1' is listed twice"),
    ("servers: ['w1 w2', w3]\n", "without spaces or commas"),
    ("servers: [w1, w2\n", "not valid YAML"),
])
def test_a_bad_servers_file_is_one_line_naming_what_to_fix(tmp_path, text, said):
    f = tmp_path / "servers.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        server_names(str(f))
    assert said in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError, match="no such file"):
        server_names(str(tmp_path / "missing.yml"))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("n", [2, 3])
def test_bins_is_mininet_s_own_switch_bin_placer(name, n):
    from mininet.examples.cluster import SwitchBinPlacer

    topo = load_topology(REPO / "topologies" / f"{name}.yaml")
    if n > len(topo.switches):
        pytest.skip("fewer switches than servers")
    assert place(topo, servers(n), "bins").switch_server == SwitchBinPlacer.bin(topo.switches, servers(n))


def test_regions_cut_fewer_links_than_mininet_s_bins_on_the_quickstart():
    topo = load_topology(REPO / "topologies" / "global.yaml")
    regions, bins = (place(topo, servers(3), how) for how in ("regions", "bins"))
    assert len(regions.cut_links) < len(bins.cut_links)
    assert max(regions.load(topo).values()) < max(bins.load(topo).values())
    with pytest.raises(UserError, match="unknown placement"):
        place(topo, servers(3), "random")
