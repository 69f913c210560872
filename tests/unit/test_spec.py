"""Spec loaders: every shipped file loads; every kind of mistake is ONE line naming the file,
the field and its line; the CLI prints that line (exit 2) and never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.errors import UserError
from rmptwin.model import load_experiment, load_topology

REPO = Path(__file__).resolve().parents[2]

GOOD_TOPO = """\
name: tiny
switches: [s1, s2]
regions:
  west: [s1]
links:
  - {a: s1, b: s2, delay_ms: 5, loss: 0.01}
hosts:
  - {name: src1, role: source, switch: s1}
  - {name: rp1, role: primary, switch: s1, regions: [west]}
  - {name: rp2, role: primary, switch: s2}
  - {name: rx1, role: retransmit, switch: s1, regions: [west]}
  - {name: c1, role: customer, switch: s1, regions: [west], retransmit: rx1}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("path", sorted((REPO / "topologies").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_topology_loads(path):
    topo = load_topology(path)
    assert topo.switches and topo.name


@pytest.mark.parametrize("path", sorted((REPO / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_experiment_loads(path):
    loaded = load_experiment(path)
    assert loaded.topology.hosts


def test_global_topology_is_what_the_quickstart_promises():
    topo = load_topology(REPO / "topologies" / "global.yaml")
    roles = [h.role for h in topo.hosts]
    assert roles.count("primary") >= 6 and roles.count("source") >= 2 and roles.count("customer") >= 12
    assert roles.count("reformation") == 2 and roles.count("retransmit") >= 1 and roles.count("secondary") >= 2
    customer_regions = {r for h in topo.hosts_with_role("customer") for r in h.regions}
    assert len(customer_regions) >= 3
    switches_in = {}
    for region, sws in topo.regions.items():
        for s in sws:
            switches_in.setdefault(s, []).append(region)
    assert any(len(v) > 1 for v in switches_in.values()), "regions must overlap"
    assert topo.link("nyc", "lon").delay_ms == pytest.approx(28, abs=3)
    assert topo.link("lon", "fra").delay_ms == pytest.approx(5, abs=2)
    lossy = [lk for lk in topo.links if lk.loss.mean >= 0.01]
    assert lossy and all(0.01 <= lk.loss.mean <= 0.05 for lk in lossy)


def test_a_valid_topology_and_experiment_load(tmp_path):
    _write(tmp_path, "t.yaml", GOOD_TOPO)
    e = _write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\nworkload: {stripes: 1}\n")
    loaded = load_experiment(e)
    assert loaded.topology.link("s2", "s1").loss.mean == 0.01
    assert loaded.topology.host("c1").retransmit == "rx1"


def _error(loader, path) -> str:
    with pytest.raises(UserError) as exc:
        loader(path)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_malformed_yaml_names_file_and_line(tmp_path):
    p = _write(tmp_path, "bad.yaml", "name: tiny\nswitches: [s1, s2\nlinks: []\n")
    msg = _error(load_topology, p)
    assert "not valid YAML" in msg and f"{p}:3" in msg


def test_unknown_field_names_field_and_line(tmp_path):
    p = _write(tmp_path, "t.yaml", GOOD_TOPO.replace("delay_ms: 5", "delay_msec: 5"))
    msg = _error(load_topology, p)
    assert f"{p}:6:" in msg and "links.0.delay_msec" in msg and "unknown field" in msg


def test_unknown_role_names_the_choices(tmp_path):
    p = _write(tmp_path, "t.yaml", GOOD_TOPO.replace("role: primary, switch: s2", "role: primery, switch: s2"))
    msg = _error(load_topology, p)
    assert f"{p}:10:" in msg and "hosts.2.role" in msg and "primary" in msg


def test_bad_reference_names_what_is_missing(tmp_path):
    p = _write(tmp_path, "t.yaml", GOOD_TOPO.replace("retransmit: rx1", "retransmit: rx9"))
    msg = _error(load_topology, p)
    assert "rx9" in msg and "retransmit" in msg
    p2 = _write(tmp_path, "t2.yaml", GOOD_TOPO.replace("{a: s1, b: s2", "{a: s1, b: s3"))
    assert "s3" in _error(load_topology, p2)


def test_a_whole_topology_check_points_at_the_line_it_names(tmp_path):
    # The topology's own checks have no field path: the line is where the named value stands.
    p = _write(tmp_path, "t.yaml", GOOD_TOPO.replace("role: primary, switch: s2", "role: primary, switch: s7"))
    msg = _error(load_topology, p)
    assert f"{p}:10:" in msg and "'s7'" in msg
    # A check that names no value gets no line, rather than line 1.
    p2 = _write(tmp_path, "t2.yaml", GOOD_TOPO.replace("switches: [s1, s2]", "switches: [s1, s2, s1]"))
    msg2 = _error(load_topology, p2)
    assert "unique" in msg2 and msg2.startswith(f"{p2}: (top level)")


def test_bad_loss_names_the_field(tmp_path):
    p = _write(tmp_path, "t.yaml", GOOD_TOPO.replace("loss: 0.01", "loss: 1.5"))
    msg = _error(load_topology, p)
    assert f"{p}:6:" in msg and "links.0.loss" in msg
    p2 = _write(tmp_path, "t2.yaml", GOOD_TOPO.replace("loss: 0.01", "loss: {model: pareto, p: 0.1}"))
    assert "links.0.loss.model" in _error(load_topology, p2)


def test_experiment_cross_references_are_checked(tmp_path):
    _write(tmp_path, "t.yaml", GOOD_TOPO)
    p = _write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\nfaults:\n  - {at_s: 1, action: crash, node: rp9}\n")
    assert "faults.0.node" in _error(load_experiment, p)
    p2 = _write(tmp_path, "e2.yaml", "name: x\ntopology: missing.yaml\n")
    with pytest.raises(UserError, match=r"e2\.yaml:2: topology: 'missing\.yaml' names no file \(.*missing\.yaml;"):
        load_experiment(p2)


@pytest.mark.parametrize("text,needle", [
    ("name: tiny\nswitches: [s1, s2\n", "not valid YAML"),
    (GOOD_TOPO.replace("role: primary, switch: s2", "role: primery, switch: s2"), "hosts.2.role"),
])
def test_cli_prints_one_line_and_exits_2(tmp_path, text, needle):
    p = _write(tmp_path, "t.yaml", text)
    for cmd in (["validate", str(p)], ["sim", str(_write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\n"))]):
        out = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *cmd], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 2, out.stderr
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr


def test_venue_etcd_api_is_grpc_by_default_json_on_request_and_nothing_else(tmp_path):
    _write(tmp_path, "t.yaml", GOOD_TOPO)
    e = _write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\nvenue: {sequencer: etcd}\n")
    assert load_experiment(e).experiment.venue.etcd_api == "grpc"
    _write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\nvenue: {sequencer: etcd, etcd_api: json}\n")
    assert load_experiment(e).experiment.venue.etcd_api == "json"
    _write(tmp_path, "e.yaml", "name: x\ntopology: t.yaml\nvenue: {sequencer: etcd, etcd_api: http}\n")
    msg = _error(load_experiment, e)
    assert "etcd_api" in msg and "'grpc' or 'json'" in msg
