"""Runtime pieces that need no network: node logs, the node config, CLI errors (port
routing and node clocks: tests/unit/test_host_model.py); and (as root) a whole `rmptwin run` on the flat bridge network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.core.events import Event, Kind
from rmptwin.model import load_experiment
from rmptwin.node.eventlog import EventWriter, merge_logs
from rmptwin.node.node_config import NodeConfig
from rmptwin.rundir.run import NODE_FILES, RunDir

REPO = Path(__file__).resolve().parents[2]


def test_node_logs_merge_in_time_order_and_skip_a_torn_last_line(tmp_path: Path):
    a, b = EventWriter(tmp_path / "a.0.jsonl"), EventWriter(tmp_path / "b.0.jsonl")
    a.add(30, "a", "customer", Event(Kind.CUST_RECV, gseq=3, detail={"stripe": 0}))
    b.add(10, "b", "primary", Event(Kind.DELIVER, "s", 1, 1, 64))
    a.add(20, "a", "customer", Event(Kind.CUST_GAP, gseq=2))
    a.close()
    b.close()
    with open(tmp_path / "b.0.jsonl", "a") as f:
        f.write('{"t_ns": 40, "node": "b", "ki')  # killed mid-write
    table, bad = merge_logs(sorted(tmp_path.glob("*.jsonl")))
    assert bad == 1
    assert table.column("t_ns").to_pylist() == [10, 20, 30]
    assert table.column("kind").to_pylist() == [Kind.DELIVER, Kind.CUST_GAP, Kind.CUST_RECV]
    assert json.loads(table.column("detail").to_pylist()[2]) == {"stripe": 0}


def test_node_config_carries_the_resolved_spec(tmp_path: Path):
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    cfg = NodeConfig.for_run(loaded, 7, {"src1": "10.0.0.1"}, tmp_path, NODE_FILES)
    back = NodeConfig.read(cfg.write(tmp_path / "c.json")).loaded()
    assert back.experiment == loaded.experiment and back.topology == loaded.topology


def _cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "rmptwin.cli.main", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=REPO)


def test_cli_bad_experiment_and_bad_node_kind_are_one_line_errors(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntopology: ../nowhere.yaml\n")
    r = _cli("run", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "nowhere.yaml" in r.stderr
    r = _cli("run", str(REPO / "experiments" / "line3.yaml"), "--nodes", "vm", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "docker, ns or flat" in r.stderr


@pytest.mark.root
def test_flat_network_run_writes_a_complete_run_directory(tmp_path: Path):
    """line3 on one bridge (no switches, no loss): the node/runner machinery end to end."""
    out = tmp_path / "run"
    r = _cli("run", str(REPO / "experiments" / "line3.yaml"), "--nodes", "flat", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    run = RunDir(out)
    s = run.read_summary()
    assert s["agreement"] is True and s["messages_lost"] == 0 and s["messages_sent"] > 0
    assert s["customers"]["guaranteed_complete"] == s["customers"]["guaranteed"]
    ev = run.read_events().to_pandas()
    loaded = load_experiment(REPO / "experiments" / "line3.yaml")
    # every node's own log reached the merged table (servers that had nothing to do log nothing)
    assert {h.name for h in loaded.topology.hosts if h.role in ("source", "primary", "customer")} <= set(ev.node)
    assert run.read_manifest()["backend"] == "emulation"
    pcaps = [p.name for p in run.pcap_files()]
    assert pcaps == sorted(f"{h.name}.pcap" for h in loaded.topology.hosts if h.role in ("customer", "retransmit"))
    assert "run directory" in r.stdout
