"""Topology mistakes that silence a role are rejected before a run (issue 21, item 1): one
test per rule with the YAML that triggers it, the issue's 13-switch tree, the warnings and
``--strict``, and every shipped topology and experiment still loading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rmptwin.errors import UserError
from rmptwin.model import load_experiment, load_topology, read_yaml
from rmptwin.model.role_checks import experiment_warnings, topology_warnings

REPO = Path(__file__).resolve().parents[2]

# The issue's tree, written from scratch: s1 at the root, west under s2, east's switches
# s9, s10, s11 all hang off s4, which is not in east, so inside east they are not connected.
TREE13 = """\
name: tree13
switches: [s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13]
regions:
  west: [s2, s5, s6, s12]
  east: [s9, s10, s11]
links:
  - {a: s1, b: s2, delay_ms: 5}
  - {a: s1, b: s3, delay_ms: 5}
  - {a: s1, b: s4, delay_ms: 5}
  - {a: s2, b: s5, delay_ms: 2}
  - {a: s2, b: s6, delay_ms: 2}
  - {a: s3, b: s7, delay_ms: 2}
  - {a: s3, b: s8, delay_ms: 2}
  - {a: s4, b: s9, delay_ms: 2}
  - {a: s4, b: s10, delay_ms: 2}
  - {a: s4, b: s11, delay_ms: 2}
  - {a: s5, b: s12, delay_ms: 2}
  - {a: s6, b: s13, delay_ms: 2}
hosts:
  - {name: src1, role: source, switch: s1}
  - {name: rp1, role: primary, switch: s2, regions: [west]}
  - {name: rp2, role: primary, switch: s9, regions: [east]}
  - {name: xr1, role: reformation, switch: s1}
  - {name: rxw, role: retransmit, switch: s2, regions: [west]}
  - {name: rxe, role: retransmit, switch: s9, regions: [east]}
  - {name: c1, role: customer, switch: s5, regions: [west], retransmit: rxw}
  - {name: c2, role: customer, switch: s12, regions: [west], retransmit: rxw}
  - {name: c3, role: customer, switch: s10, regions: [east], retransmit: rxe}
  - {name: c4, role: customer, switch: s11, regions: [east], grade: best_effort}
"""

EXPERIMENT = """\
name: tree13-run
topology: {topo}
duration_s: 2.0
protocol: {{token_mode: event_driven, dn_ms: 40, p_ms: 1}}
workload: {{rate_per_source: 20, duration_s: 1.0, stripes: {stripes}}}
"""


def _topo(tmp_path: Path, text: str = TREE13, edit=None) -> Path:
    """``text`` as a topology file, after ``edit(data)`` changed its parsed form in place."""
    if edit is not None:
        data = yaml.safe_load(text)
        edit(data)
        text = yaml.safe_dump(data, sort_keys=False)
    p = tmp_path / "topo.yaml"
    p.write_text(text)
    return p


def _connected_east(d: dict) -> None:
    d["regions"]["east"] = ["s4", "s9", "s10", "s11"]


def _host(d: dict, name: str) -> dict:
    return next(h for h in d["hosts"] if h["name"] == name)


def _rejects(path: Path) -> str:
    with pytest.raises(UserError) as e:
        load_topology(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}:")
    return msg


def _line_of(path: Path, needle: str, after: str | None = None) -> int:
    """The first line holding ``needle`` (at or after the first line holding ``after``)."""
    lines = path.read_text().splitlines()
    start = _line_of(path, after) - 1 if after else 0
    return next(i for i, ln in enumerate(lines[start:], start + 1) if needle in ln)


# ----------------------------------------------------------------------------- (a) region cut


def test_the_issues_13_switch_tree_is_rejected_naming_the_cut_off_switch_and_its_path(tmp_path):
    p = _topo(tmp_path)
    msg = _rejects(p)
    assert msg.startswith(f"{p}:{_line_of(p, 'east:')}: regions.east: switch 's10' is cut off from 's9'"), msg
    assert "s9 - s4 - s10" in msg and "add it to east" in msg


def test_the_same_tree_with_east_connected_inside_the_region_loads(tmp_path):
    assert load_topology(_topo(tmp_path, edit=_connected_east)).name == "tree13"


def test_sim_and_validate_refuse_the_issues_tree_before_starting(tmp_path):
    topo = _topo(tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(topo=topo.name, stripes=1))
    out = tmp_path / "run"
    for args in (["validate", str(exp)], ["sim", str(exp), "--out", str(out)]):
        r = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True,
                           cwd=REPO, timeout=120, env={**os.environ, "COLUMNS": "40"})
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1 and "regions.east: switch 's10' is cut off" in r.stderr
    assert not out.exists()


# ----------------------------------------------------------------------------- (b) own switch


def test_a_customer_outside_its_own_region_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "c1")["switch"] = "s7"   # s7 is in no region
    p = _topo(tmp_path, edit=edit)
    msg = _rejects(p)
    assert msg.startswith(f"{p}:{_line_of(p, 'regions:', after='name: c1')}: hosts.6.regions: customer c1 is attached to switch "
                          "s7, which is not in region west"), msg
    assert "never hear west's remulticast" in msg


def test_a_primary_remulticasting_into_a_region_it_is_not_in_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "rp1")["regions"] = ["west", "east"]
    msg = _rejects(_topo(tmp_path, edit=edit))
    assert "hosts.1.regions: primary rp1 is attached to switch s2, which is not in region east" in msg
    assert "reach nobody" in msg


# ----------------------------------------------------------------------------- (c) no R_T


def test_a_region_with_customers_and_no_r_t_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "rp2")["regions"] = []
    p = _topo(tmp_path, edit=edit)
    msg = _rejects(p)
    assert msg.startswith(f"{p}:{_line_of(p, 'east:')}: regions.east: customers c3, c4 listen to region east, "
                          "but no primary or secondary remulticasts into it"), msg


def test_a_customer_stripe_nobody_remulticasts_into_its_regions_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "rp2")["stripes"] = [0]      # east gets stripe 0 only; rp1 serves west both
    topo = _topo(tmp_path, edit=edit)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(topo=topo.name, stripes=2))
    with pytest.raises(UserError) as e:
        load_experiment(exp)
    assert str(e.value) == (f"{exp}:5: workload.stripes: customer c3 joins stripe 1, but no primary or secondary "
                            "serving stripe 1 remulticasts into its regions (east)")


# ----------------------------------------------------------------------------- (d) R_x region


def test_a_guaranteed_customer_whose_retransmit_server_serves_another_region_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "c3")["retransmit"] = "rxw"
    p = _topo(tmp_path, edit=edit)
    msg = _rejects(p)
    assert msg.startswith(f"{p}:{_line_of(p, 'retransmit:', after='name: c3')}: hosts.8.retransmit: guaranteed customer c3 "
                          "(regions east) re-requests from rxw, which serves west"), msg


# ----------------------------------------------------------------------------- (e) primaries


def test_a_stripe_with_no_primary_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "rp1")["stripes"] = [0]
        _host(d, "rp2")["stripes"] = [0]
    topo = _topo(tmp_path, edit=edit)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(topo=topo.name, stripes=2))
    with pytest.raises(UserError) as e:
        load_experiment(exp)
    assert str(e.value).startswith(f"{exp}:5: workload.stripes: stripe 1 has no primary (it needs a ring of at "
                                   "least 1 R_P; src1, c1, c2, c3 and 1 more use it)"), str(e.value)


def test_a_secondary_on_a_stripe_its_primary_does_not_serve_is_rejected(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "rp2")["stripes"] = [0]
        d["hosts"].append({"name": "rs1", "role": "secondary", "switch": "s10", "primary": "rp2", "ring": "e",
                           "regions": ["east"], "stripes": [0, 1]})
    msg = _rejects(_topo(tmp_path, edit=edit))
    assert "hosts.10.stripes: secondary rs1 serves stripe 1, but its primary rp2 does not" in msg


# ----------------------------------------------------------------------------- warnings


def _warning_keys(path: Path) -> list[str]:
    return [w.key for w in topology_warnings(load_topology(path))]


def test_a_region_no_host_names_warns(tmp_path):
    def edit(d):
        _connected_east(d)
        d["regions"]["north"] = ["s3", "s7"]
    assert _warning_keys(_topo(tmp_path, edit=edit)) == ["region_unused"]


def test_a_region_remulticast_into_with_nobody_listening_warns(tmp_path):
    def edit(d):
        _connected_east(d)
        d["regions"]["north"] = ["s3", "s7"]
        d["hosts"].append({"name": "rp3", "role": "primary", "switch": "s3", "regions": ["north"]})
    assert _warning_keys(_topo(tmp_path, edit=edit)) == ["region_unheard"]


def test_a_retransmit_server_nobody_names_and_a_best_effort_retransmit_warn(tmp_path):
    def edit(d):
        _connected_east(d)
        _host(d, "c3")["grade"] = "best_effort"   # rxe: now named only by a best-effort customer
    assert _warning_keys(_topo(tmp_path, edit=edit)) == ["best_effort_retransmit"]

    def edit2(d):
        _connected_east(d)
        _host(d, "c3").pop("retransmit")
    assert _warning_keys(_topo(tmp_path, edit=edit2)) == ["retransmit_unused"]


def test_crashing_the_only_primary_of_a_stripe_warns(tmp_path):
    def edit(d):
        _connected_east(d)
        for name, k in (("rp1", 0), ("c1", 0), ("c2", 0), ("rp2", 1), ("c3", 1), ("c4", 1)):
            _host(d, name)["stripes"] = [k]
    topo = _topo(tmp_path, edit=edit)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(topo=topo.name, stripes=2) + "faults:\n  - {at_s: 1.0, action: crash, node: rp2}\n")
    loaded = load_experiment(exp)
    assert [w.key for w in experiment_warnings(loaded.experiment, loaded.topology)] == ["lone_primary_crashed"]


def test_validate_prints_role_warnings_and_strict_refuses(tmp_path):
    def edit(d):
        _connected_east(d)
        d["regions"]["north"] = ["s3", "s7"]
    topo = _topo(tmp_path, edit=edit)
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.format(topo=topo.name, stripes=1))
    for target in (topo, exp):
        r = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "validate", str(target)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
        warn = [ln for ln in r.stderr.splitlines() if "region_unused" in ln]
        assert r.returncode == 0 and len(warn) == 1, r.stderr
        assert warn[0].startswith(f"warning: {topo}:{_line_of(topo, 'north:')}: regions.north: region_unused: ")
        strict = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "validate", "--strict", str(target)],
                                capture_output=True, text=True, cwd=REPO, timeout=120)
        assert strict.returncode == 2 and "--strict makes warnings errors" in strict.stderr.splitlines()[-1]


# ----------------------------------------------------------------------------- shipped files


def _shipped() -> list[Path]:
    files = sorted((REPO / "topologies").rglob("*.yaml")) + sorted((REPO / "experiments").rglob("*.yaml"))
    files += sorted((REPO / "labs").rglob("*.yaml"))
    return [f for f in files if "topology" in read_yaml(f)[0] or "switches" in read_yaml(f)[0]]


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_topology_and_experiment_still_validates(path):
    data, _ = read_yaml(path)
    loaded = load_experiment(path) if "topology" in data else load_topology(path)
    assert loaded is not None
