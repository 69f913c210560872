"""Security on (issue 12, seed 6 and 7.1) in the simulator: the sealed quickstart keeps the
ticker's guarantees, its keys never reach the run directory, and a run without keys stops
in one line that says how to make them."""

from __future__ import annotations

import base64
import os
import stat

import pytest

from rmptwin.core.events import Kind
from rmptwin.errors import UserError
from rmptwin.factories.keys import generate, key_path, load_keys, write_keys
from rmptwin.model import load_experiment
from rmptwin.runner.pipeline import run_experiment


@pytest.fixture
def key_home(tmp_path, monkeypatch):
    """Key files go to a scratch $XDG_CONFIG_HOME, never the user's own."""
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture
def secure(repo, key_home):
    loaded = load_experiment(repo / "experiments" / "quickstart-secure.yaml")
    write_keys(generate(loaded), key_path(loaded))
    return loaded


def _spellings(key: bytes) -> list[bytes]:
    return [key, key.hex().encode(), key.hex().upper().encode(), base64.b64encode(key),
            base64.urlsafe_b64encode(key), base64.b64encode(key).rstrip(b"=")]


def test_sealed_quickstart_keeps_agreement_and_every_guaranteed_customer_and_leaks_no_key(secure, tmp_path):
    outcome = run_experiment(secure, "sim", seed=1, out=tmp_path / "run")
    s = outcome.summary
    assert s["agreement"] and s["messages_lost"] == 0
    assert s["customers"]["guaranteed"] == 9 and s["customers"]["guaranteed_complete"] == 9
    events = outcome.run_dir.read_events().to_pandas()
    assert (events.kind == Kind.ALARM).sum() == 0
    assert (events.kind == Kind.RELEASE).sum() > 0 and (events.kind == Kind.CUST_RECV).sum() > 0
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) >= 3
    keys = load_keys(secure)
    for path in files:
        data = path.read_bytes()
        for key in keys.all_keys():
            assert not any(spelled in data for spelled in _spellings(key)), f"a key leaked into {path}"


def test_security_is_off_by_default_and_the_sealed_run_delivers_what_the_clear_one_does(repo, secure, tmp_path):
    clear = load_experiment(repo / "experiments" / "quickstart.yaml")
    assert not clear.experiment.security.enabled and load_keys(clear) is None
    a = run_experiment(clear, "sim", seed=2, out=tmp_path / "clear").summary
    b = run_experiment(secure, "sim", seed=2, out=tmp_path / "sealed").summary
    assert a["messages_sent"] == b["messages_sent"]
    assert a["messages_delivered_min"] == b["messages_delivered_min"] == b["messages_sent"]


def test_a_secure_run_without_a_key_file_stops_in_one_line_naming_keys_gen(repo, key_home, tmp_path):
    loaded = load_experiment(repo / "experiments" / "quickstart-secure.yaml")
    with pytest.raises(UserError) as e:
        run_experiment(loaded, "sim", seed=1, out=tmp_path / "run")
    assert "rmptwin keys gen" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


def test_keys_gen_writes_a_private_file_outside_the_run_directory_and_never_overwrites_silently(repo, key_home):
    from typer.testing import CliRunner

    from rmptwin.cli.main import app

    exp = str(repo / "experiments" / "quickstart-secure.yaml")
    runner = CliRunner()
    r = runner.invoke(app, ["keys", "gen", exp])
    assert r.exit_code == 0, r.output
    path = key_home / "rmptwin" / "keys" / "quickstart-secure.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    keys = load_keys(load_experiment(exp))
    assert sorted(keys.sources) == ["srclon", "srcny", "srctyo"]
    assert keys.control is not None and set(keys.regions) == set(keys.retransmit)
    assert not any(base64.b64encode(k).decode() in r.output for k in keys.all_keys())
    again = runner.invoke(app, ["keys", "gen", exp])
    assert again.exit_code != 0 and isinstance(again.exception, UserError) and "--force" in str(again.exception)
    assert runner.invoke(app, ["keys", "gen", exp, "--force"]).exit_code == 0
    into_results = runner.invoke(app, ["keys", "gen", exp, "--out", str(key_home / "results" / "k.json")])
    assert isinstance(into_results.exception, UserError) and "results/" in str(into_results.exception)


def test_each_role_gets_only_the_keys_it_is_entitled_to(secure):
    from rmptwin.factories.rmp import keys_for

    everything = load_keys(secure)
    for host in secure.topology.hosts:
        got = keys_for(host, secure)
        regions = set(getattr(host, "regions", []) or [])
        if host.role == "source":
            assert set(got.sources) == {host.name} and got.control and not got.regions and not got.retransmit
        elif host.role in ("primary", "secondary"):
            assert set(got.sources) == set(everything.sources) and got.control
            assert set(got.regions) == set(got.retransmit) == regions
        elif host.role == "reformation":
            assert got.control and not got.sources and not got.regions and not got.retransmit
        elif host.role == "retransmit":
            assert not got.sources and got.control is None and set(got.regions) == set(got.retransmit) == regions
        elif host.role == "customer":
            assert not got.sources and got.control is None and set(got.regions) == regions
            assert set(got.retransmit) == (regions if host.grade == "guaranteed" else set())


def test_an_emulated_node_gets_the_key_files_path_and_never_the_keys(secure, tmp_path):
    from rmptwin.node.node_config import NodeConfig
    from rmptwin.rundir.run import NODE_FILES

    path = NodeConfig.for_run(secure, 1, {"srcny": "10.0.0.1"}, tmp_path, NODE_FILES).write(tmp_path / "node.json")
    text = path.read_bytes()
    assert str(key_path(secure)).encode() in text
    assert not any(s in text for k in load_keys(secure).all_keys() for s in _spellings(k))
    node_side = NodeConfig.read(path).loaded()       # a node's HOME differs: the absolute path travels
    assert node_side.experiment.security.keys == str(key_path(secure))
    assert load_keys(node_side).control == load_keys(secure).control
