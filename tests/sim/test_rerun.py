"""`rmptwin rerun RUN_DIR` repeats a run from its manifest alone: same spec, seed and backend."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin import model
from rmptwin.analysis.summary import summarize
from rmptwin.cli.main import app
from rmptwin.errors import UserError
from rmptwin.records.tables import DROP_SCHEMA, LINK_COUNT_SCHEMA, EventLog
from rmptwin.rundir.run import RunDir
from rmptwin.runner.rerun import replay_from_manifest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "experiments" / "quickstart.yaml"


def _sim(out: Path) -> Path:
    res = CliRunner().invoke(app, ["sim", str(QUICKSTART), "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


def _moved_run_without_yaml(run: Path, where: Path) -> Path:
    """The run directory copied elsewhere, its manifest pointing at an experiment file that does not exist."""
    copy = shutil.copytree(run, where)
    manifest = json.loads(RunDir(copy).manifest_path.read_text())
    manifest["experiment_file"] = str(where.parent / "gone" / "quickstart.yaml")
    RunDir(copy).manifest_path.write_text(json.dumps(manifest))
    return copy


def _refuse_yaml(monkeypatch) -> None:
    """From here on, reading any topology or experiment YAML fails the test."""
    def refuse(path):
        raise AssertionError(f"rerun read a YAML file: {path}")

    monkeypatch.setattr(model.loading, "read_yaml", refuse)


def test_rerun_of_a_simulated_quickstart_from_its_manifest_alone_is_identical(tmp_path, monkeypatch):
    original = _sim(tmp_path / "original")
    moved = _moved_run_without_yaml(original, tmp_path / "moved" / "run")
    again = tmp_path / "again"
    _refuse_yaml(monkeypatch)
    monkeypatch.chdir(tmp_path / "moved")  # no experiments/ or topologies/ relative to the cwd either
    res = CliRunner().invoke(app, ["rerun", str(moved), "--out", str(again)], catch_exceptions=False)
    assert res.exit_code == 0, res.output

    # summary.json has no wall-clock field in a simulated run, so the files are byte-identical.
    assert RunDir(again).summary_path.read_bytes() == RunDir(original).summary_path.read_bytes()
    assert json.loads(RunDir(again).summary_path.read_text())["messages_sent"] > 0
    a, b = RunDir(again), RunDir(original)
    assert a.read_events().equals(b.read_events())
    assert a.read_drops().equals(b.read_drops()) and a.read_link_counts().equals(b.read_link_counts())
    out = " ".join(res.output.split())
    assert "summary: identical to the original run's" in out
    # Same machine, same code: nothing differs (others editing this checkout may flip git dirty).
    env_line = next(ln for ln in res.output.splitlines() if ln.startswith("environment"))
    assert env_line.startswith("environment: the same") or \
        env_line.endswith("git dirty differs (False -> True)") or env_line.endswith("(True -> False)"), env_line

    then, now = (json.loads(RunDir(d).manifest_path.read_text()) for d in (moved, again))
    assert now["rerun_of"] == str(moved.resolve())
    assert (now["experiment"], now["topology"], now["seed"], now["backend"]) == \
        (then["experiment"], then["topology"], then["seed"], "sim")


def test_rerun_takes_the_seed_and_spec_from_the_manifest(tmp_path):
    """A manifest edited to another seed gives another run: the seed comes from the manifest."""
    original = _sim(tmp_path / "original")
    manifest = json.loads(RunDir(original).manifest_path.read_text())
    manifest["seed"] += 1
    edited = tmp_path / "edited"
    edited.mkdir()
    RunDir(edited).manifest_path.write_text(json.dumps(manifest))
    res = CliRunner().invoke(app, ["rerun", str(edited), "--out", str(tmp_path / "again")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    again = json.loads(RunDir(tmp_path / "again").manifest_path.read_text())
    assert again["seed"] == manifest["seed"]
    drops = [RunDir(d).read_drops() for d in (original, tmp_path / "again")]
    assert drops[0].num_rows > 0 and not drops[0].equals(drops[1])
    assert "no readable summary.json" in " ".join(res.output.split())


def test_environment_line_names_what_differs(tmp_path):
    original = _sim(tmp_path / "original")
    manifest = json.loads(RunDir(original).manifest_path.read_text())
    manifest["git_commit"] = "0" * 40
    manifest["environment"]["kernel"] = "6.1.0-28-amd64"
    RunDir(original).manifest_path.write_text(json.dumps(manifest))
    res = CliRunner().invoke(app, ["rerun", str(original), "--out", str(tmp_path / "again")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    line = " ".join(res.output.split())
    assert "git commit differs (000000000000 ->" in line and "kernel differs (6.1.0-28-amd64 ->" in line
    assert "cpu model differs" not in line  # same machine: only what was edited


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing", "no such run directory"),
    (lambda d: d, "no manifest.json"),
    (lambda d: RunDir(d).manifest_path.write_text('{"seed": ') and d, "manifest.json: not valid JSON"),
    (lambda d: RunDir(d).manifest_path.write_text("[1, 2]") and d, "expected a JSON object"),
    (lambda d: RunDir(d).manifest_path.write_text('{"experiment": {}, "topology": {}}') and d,
     "manifest.json: experiment.name: Field required"),
])
def test_a_bad_run_dir_is_one_line_and_exit_2(tmp_path, make, expected):
    run = make(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "rerun", str(run)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- emulated runs


def _emulated_manifest(**extra) -> dict:
    loaded = model.load_experiment(QUICKSTART)
    return {**loaded.to_manifest(), "backend": "emulation", "seed": 7, "nodes": "ns", "impair": "relay",
            "impair_requested": "auto", "capture": ["cu1", "cu2"],
            "limits": {"cpus": 1.5, "memory_mb": 256}, **extra}


def test_an_emulated_run_is_replayed_with_its_node_mode_impairment_and_capture():
    manifest = _emulated_manifest()
    replay = replay_from_manifest(manifest, "m.json")
    assert (replay.backend, replay.seed, replay.nodes, replay.impair, replay.capture) == \
        ("emulation", 7, "ns", "relay", ["cu1", "cu2"])
    assert replay.loaded.experiment.model_dump(mode="json") == manifest["experiment"]
    assert replay.loaded.topology.model_dump(mode="json") == manifest["topology"]
    # The flat network records impairment 'none'; an older manifest has no capture: the runner's default.
    flat = replay_from_manifest(_emulated_manifest(nodes="flat", impair="none", capture=None), "m.json")
    assert (flat.nodes, flat.impair, flat.capture) == ("flat", "auto", None)
    with pytest.raises(UserError, match="nodes: expected one of docker, ns, flat"):
        replay_from_manifest(_emulated_manifest(nodes="vm"), "m.json")


def test_a_run_over_servers_is_replayed_over_the_same_servers_and_placer():
    manifest = _emulated_manifest(servers=["rts1", "rts2"], placement={"how": "bins", "cut_links": []})
    replay = replay_from_manifest(manifest, "m.json")
    assert (replay.servers, replay.placement) == (("rts1", "rts2"), "bins")
    with pytest.raises(UserError, match="servers: expected a list of server names"):
        replay_from_manifest(_emulated_manifest(servers="rts1,rts2"), "m.json")


def test_rerun_of_an_emulated_run_calls_the_runtime_runner_with_the_recorded_arguments(tmp_path, monkeypatch):
    from rmptwin.emulation import emulate as runner
    from rmptwin.emulation import run_facts

    loaded = model.load_experiment(QUICKSTART)
    events = EventLog().table()
    original = RunDir(tmp_path / "original")
    original.replace_manifest(_emulated_manifest(nodes="docker", event_loop="asyncio"))
    # The original summary as `rmptwin run` wrote it, but for one figure and its wall time.
    original.write_summary({**summarize(events, loaded), "messages_sent": 5, "runtime": {"wall_s": 80.0}})
    calls = []

    def fake_emulate(loaded, seed, run_dir, nodes="docker", impair="auto", capture=None, progress=None,
                     cpus=None, memory_mb=None, event_loop="uvloop", servers=(), placement="regions"):
        calls.append(dict(loaded=loaded, seed=seed, out=run_dir.path, nodes=nodes, impair=impair, capture=capture,
                          limits={"cpus": cpus, "memory_mb": memory_mb}, event_loop=event_loop, servers=servers,
                          placement=placement))
        return runner.EmulationResult(
            events, DROP_SCHEMA.empty_table(), LINK_COUNT_SCHEMA.empty_table(),
            manifest={"nodes": nodes, "impair": impair, "capture": capture},
            environment={"node_mode": nodes, "impair_backend": impair, "datapath": "user",
                         "node_image": "rmptwin-node:0123456789ab", "node_image_id": None},
            stats={"wall_s": 91.0, "nodes": nodes})

    monkeypatch.setattr(run_facts, "check_arguments", lambda loaded, nodes, capture, event_loop: None)  # no root needed
    monkeypatch.setattr(runner, "emulate", fake_emulate)
    monkeypatch.setattr("rmptwin.emulation.env.is_root", lambda: False)
    new = tmp_path / "again"
    res = CliRunner().invoke(app, ["rerun", str(original.path), "--out", str(new)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    [call] = calls
    assert (call["seed"], call["out"], call["nodes"], call["impair"], call["capture"]) == \
        (7, new, "docker", "relay", ["cu1", "cu2"])
    assert call["limits"] == {"cpus": 1.5, "memory_mb": 256}  # the recorded limits, not today's defaults
    assert call["event_loop"] == "asyncio"                     # and the recorded event loop
    assert (call["servers"], call["placement"]) == ((), "regions")   # recorded on one machine: on this one
    assert call["loaded"].to_manifest()["experiment"] == _emulated_manifest()["experiment"]
    out = " ".join(res.output.split())
    # runtime.wall_s differs and does not count; the edited figure does.
    assert "summary differs from the original run's in: messages_sent" in out
    manifest = RunDir(new).read_manifest()
    assert manifest["rerun_of"] == str(original.path.resolve())
    assert (manifest["backend"], manifest["seed"], manifest["nodes"], manifest["environment"]["node_mode"]) == \
        ("emulation", 7, "docker", "docker")
