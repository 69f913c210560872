"""Silence is an alarm (issue 21, item 2), in the simulator: a customer whose remulticast is
cut raises ``stale_feed`` naming its regions and R_T; a guaranteed one then recovers every
message through its retransmit server; the summary names who stayed incomplete and why."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rmptwin.core.events import Kind
from rmptwin.model import Experiment, LoadedExperiment, Topology, load_experiment
from rmptwin.runner.pipeline import run_experiment

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "tests" / "unit"

# The 13-switch tree (tests/unit/test_role_checks.py): east's switches s9, s10, s11
# hang off s4, which is not in east. Validation rejects it, so it is built here in memory,
# past the loader: the scoped remulticast of rp2 (at s9) never reaches c3 (s10) or c4 (s11);
# rxe (at s9) hears it, and c3 reaches rxe by unicast through s4.
import importlib.util

_spec = importlib.util.spec_from_file_location("role_checks_yaml", UNIT / "test_role_checks.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
TREE13 = _mod.TREE13

EXPERIMENT = {"name": "tree13-stale", "topology": "tree13.yaml", "seed": 3, "duration_s": 4.0,
              "protocol": {"token_mode": "event_driven", "dn_ms": 40, "p_ms": 1},
              "workload": {"rate_per_source": 40, "duration_s": 2.0, "start_s": 0.5}}


def _alarms(df, node):
    out = []
    for n, k, d in zip(df.node, df.kind, df.detail):
        if n == node and k == Kind.ALARM:
            det = json.loads(d)
            if det.get("reason") == "stale_feed":
                out.append(det)
    return out


def _run(tmp_path, loaded):
    run, summary, _, _ = run_experiment(loaded, "sim", out=tmp_path / "run")
    return run, summary


def _table(run):
    import pandas as pd
    import pyarrow.parquet as pq

    from rmptwin.rundir.run import RunDir
    _, _, files = RunDir(run.path).check()
    return pd.concat([pq.read_table(f).to_pandas() for f in files])


def test_a_customer_cut_off_inside_its_region_alarms_and_recovers_through_its_retransmit_server(tmp_path):
    topo = Topology.model_validate(yaml.safe_load(TREE13))    # past the loader's region check
    loaded = LoadedExperiment(experiment=Experiment.model_validate(EXPERIMENT), topology=topo,
                              path=tmp_path / "tree13-stale.yaml")
    run, s = _run(tmp_path, loaded)
    df = _table(run)
    [c3] = _alarms(df, "c3")
    assert c3["rt"] == ["rp2"] and c3["regions"] == ["east"] and c3["stripe"] == 0 and c3["next"] == 1
    assert c3["silent_ms"] >= 750    # k = 3 heartbeats of 250 ms
    [c4] = _alarms(df, "c4")
    assert c4["rt"] == ["rp2"]
    assert not _alarms(df, "c1") and not _alarms(df, "c2")   # west is connected: no false alarm
    # c3 asked rxe from the next sequence number it expected, and got everything from it
    asks = [json.loads(d) for n, k, d in zip(df.node, df.kind, df.detail) if n == "c3" and k == Kind.NACK_SENT]
    assert asks and asks[0]["to"] == "rxe" and asks[0]["first"] == 1
    assert s["customers"] == {"count": 4, "guaranteed_complete": 3, "guaranteed": 3}
    assert s["agreement"] and s["messages_lost"] == 0
    # the best-effort c4 cannot ask: it is named, with why and whom it stopped hearing
    assert s["customers_incomplete"] == {"c4": {
        "grade": "best_effort", "regions": ["east"], "missing": s["customers_incomplete"]["c4"]["missing"],
        "stripes": [0], "reason": "stale_feed", "rt": ["rp2"]}}
    assert s["customers_incomplete"]["c4"]["missing"] == s["messages_sent"]


def test_a_guaranteed_customer_without_a_retransmit_server_polls_the_silent_r_t_by_unicast(tmp_path):
    data = yaml.safe_load(TREE13)
    data["hosts"] = [h for h in data["hosts"] if h["name"] != "rxe"]
    for h in data["hosts"]:
        if h["name"] == "c3":
            del h["retransmit"]
    loaded = LoadedExperiment(experiment=Experiment.model_validate(EXPERIMENT), topology=Topology.model_validate(data),
                              path=tmp_path / "tree13-stale.yaml")
    run, s = _run(tmp_path, loaded)
    df = _table(run)
    assert _alarms(df, "c3")
    asks = [json.loads(d) for n, k, d in zip(df.node, df.kind, df.detail) if n == "c3" and k == Kind.NACK_SENT]
    assert asks and {a["to"] for a in asks} == {"rp2"}
    assert "c3" not in s["customers_incomplete"] and s["customers"]["guaranteed_complete"] == 3


def test_a_region_link_down_mid_run_raises_stale_feed_and_the_customer_completes_after(tmp_path):
    data = yaml.safe_load(TREE13)
    data["regions"]["east"] = ["s4", "s9", "s10", "s11"]     # valid: east connected through s4
    (tmp_path / "tree13.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    exp = {**EXPERIMENT, "faults": [{"at_s": 1.0, "action": "link_down", "link": "s4-s10"},
                                    {"at_s": 2.5, "action": "link_up", "link": "s4-s10"}]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp, sort_keys=False))
    run, s = _run(tmp_path, load_experiment(tmp_path / "exp.yaml"))
    df = _table(run)
    [alarm] = _alarms(df, "c3")      # c3 at s10 is cut from everything while s4-s10 is down
    assert alarm["regions"] == ["east"] and alarm["rt"] == ["rp2"]
    assert not _alarms(df, "c4") and not _alarms(df, "c1")
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"] == 3
    assert "customers_incomplete" not in s
