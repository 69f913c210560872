"""``--tdf N|auto``: the time dilation factor, asked for on every command that runs emulated
(`run`, `sweep`, `claims --emulated`, `chaos --backend emulation`) and as the API's
``time_dilation``, reaches the experiment each emulated run is given, as ``--set
time_dilation=`` would; bad values are one line saying what to fix.

No network starts: ``runner.pipeline._emulated`` (where an emulated run begins, after the
experiment is final) is replaced by a recorder that keeps the experiment it was handed and
stops the command there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmptwin import api
from rmptwin.chaos.campaign import Campaign
from rmptwin.claims.evaluate import measure, run_claims
from rmptwin.claims.model import load_claim
from rmptwin.cli.main import app
from rmptwin.cli.overrides import apply_set_options, parse_tdf
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_points

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"
RULE = "a time dilation factor is a number >= 1 or auto"


class NetworkWouldStart(Exception):
    """Raised where the emulated run would bring its network up."""


@pytest.fixture
def emulated(monkeypatch) -> list:
    """The experiments handed to emulated runs, in order; the first one stops the caller."""
    seen: list = []

    def record(loaded, *args, **kwargs):
        seen.append(loaded)
        raise NetworkWouldStart

    monkeypatch.setattr("rmptwin.runner.pipeline._emulated", record)
    return seen


def _invoke(args: list[str]):
    return CliRunner().invoke(app, [str(a) for a in args])


def _stopped_at_the_network(result) -> None:
    assert isinstance(result.exception, NetworkWouldStart), (result.exception, result.output)


def test_the_experiment_is_line3_at_factor_1():
    assert load_experiment(LINE3).experiment.time_dilation == 1.0   # what "not given" keeps below


# ----------------------------------------------------------------------------- the flag's value


@pytest.mark.parametrize(("text", "value"), [("2", 2.0), ("1", 1.0), ("2.5", 2.5), ("auto", "auto"),
                                             ("AUTO", "auto"), ("4e0", 4.0)])
def test_tdf_is_a_number_of_at_least_1_or_auto(text, value):
    assert parse_tdf(text) == value
    assert type(parse_tdf(text)) is type(value)


def test_no_tdf_is_the_experiments_own():
    assert parse_tdf(None) is None
    assert parse_tdf(None, ["time_dilation=2"]) is None


@pytest.mark.parametrize("text", ["0.5", "0", "-2", "fast", "", "nan", "inf", "2x", "true"])
def test_a_bad_tdf_is_one_line_saying_what_to_fix(text):
    with pytest.raises(UserError) as e:
        parse_tdf(text)
    assert str(e.value) == f"--tdf {text}: {RULE}"


def test_tdf_beside_set_time_dilation_is_refused():
    with pytest.raises(UserError, match=r"^--tdf 2 and --set time_dilation both given: give one$"):
        parse_tdf("2", ["protocol.delta_a_ms=100", "time_dilation=4"])
    assert parse_tdf("2", ["protocol.delta_a_ms=100", "topology.links.0.loss=0.1"]) == 2.0


# ----------------------------------------------------------------------------- --set and the YAML


def test_set_time_dilation_auto_loads_and_a_bad_value_says_the_rule():
    line3 = load_experiment(LINE3)
    assert apply_set_options(line3, ["time_dilation=auto"]).experiment.time_dilation == "auto"
    assert apply_set_options(line3, ["time_dilation=3"]).experiment.time_dilation == 3.0
    with pytest.raises(UserError) as e:
        apply_set_options(line3, ["time_dilation=0.5"])
    assert str(e.value) == f"--set time_dilation=0.5: {RULE}"
    sets = api.parse_sets(["time_dilation=1,auto"])
    assert [p.loaded.experiment.time_dilation for p in make_points(line3, sets)] == [1.0, "auto"]


def test_a_yaml_with_time_dilation_auto_loads_and_the_schema_allows_it(tmp_path):
    text = LINE3.read_text().replace("topology: ../topologies/line3.yaml",
                                     f"topology: {REPO / 'topologies' / 'line3.yaml'}")
    (tmp_path / "auto.yaml").write_text(f"{text.rstrip()}\ntime_dilation: auto\n")
    assert load_experiment(tmp_path / "auto.yaml").experiment.time_dilation == "auto"
    (tmp_path / "slow.yaml").write_text(f"{text.rstrip()}\ntime_dilation: 0.5\n")
    with pytest.raises(UserError, match="time_dilation"):
        load_experiment(tmp_path / "slow.yaml")
    field = json.loads((REPO / "schemas" / "experiment.schema.json").read_text())["properties"]["time_dilation"]
    assert {"const": "auto", "type": "string"} in field["anyOf"]
    assert {"minimum": 1.0, "type": "number"} in field["anyOf"]


# ----------------------------------------------------------------------------- rmptwin run


@pytest.mark.parametrize(("args", "factor"), [([], 1.0), (["--tdf", "3"], 3.0), (["--tdf", "auto"], "auto"),
                                              (["--set", "time_dilation=2"], 2.0),
                                              (["--set", "time_dilation=auto"], "auto")])
def test_run_hands_the_factor_to_the_emulated_run(emulated, tmp_path, args, factor):
    result = _invoke(["run", LINE3, "--nodes", "ns", "--out", tmp_path / "run", *args])
    _stopped_at_the_network(result)
    assert [e.experiment.time_dilation for e in emulated] == [factor]


def test_run_with_a_bad_tdf_stops_before_the_network(emulated, tmp_path):
    result = _invoke(["run", LINE3, "--out", tmp_path / "run", "--tdf", "0.5"])
    assert isinstance(result.exception, UserError) and str(result.exception) == f"--tdf 0.5: {RULE}"
    result = _invoke(["run", LINE3, "--out", tmp_path / "run", "--tdf", "2", "--set", "time_dilation=3"])
    assert isinstance(result.exception, UserError) and "give one" in str(result.exception)
    assert emulated == []


# ----------------------------------------------------------------------------- rmptwin sweep


@pytest.mark.parametrize(("args", "factor"), [([], 1.0), (["--tdf", "2"], 2.0), (["--tdf", "auto"], "auto")])
def test_an_emulated_sweep_hands_the_factor_to_its_runs(emulated, tmp_path, args, factor):
    result = _invoke(["sweep", LINE3, "--backend", "emulation", "--set", "protocol.delta_a_ms=100,200",
                      "--seeds", "1", "--out", tmp_path / "sw", *args])
    _stopped_at_the_network(result)
    assert [e.experiment.time_dilation for e in emulated] == [factor]
    assert emulated[0].experiment.protocol.delta_a_ms == 100   # the point's own overrides kept


def test_a_sweep_refuses_a_bad_tdf_and_tdf_beside_a_swept_factor(emulated, tmp_path):
    result = _invoke(["sweep", LINE3, "--set", "protocol.delta_a_ms=100", "--tdf", "fast"])
    assert isinstance(result.exception, UserError) and str(result.exception) == f"--tdf fast: {RULE}"
    result = _invoke(["sweep", LINE3, "--backend", "emulation", "--set", "time_dilation=1,2", "--tdf", "2"])
    assert isinstance(result.exception, UserError) and "give one" in str(result.exception)
    assert emulated == []


# ----------------------------------------------------------------------------- rmptwin claims


def _claim(tmp_path: Path):
    path = tmp_path / "claims" / "tiny.yaml"
    path.parent.mkdir()
    path.write_text(f"""claim: tiny
source: a test
quote: "..."
seed_figure: none
experiment: {LINE3}
sets: {{protocol.delta_a_ms: [100]}}
seeds: 1
emulated: {{seeds: 1}}
verdict: {{kind: at_most, metric: fairness_spread_ms.p99, bound: 1000}}
""")
    return load_claim(path)


def test_claims_hands_tdf_to_run_claims(monkeypatch, tmp_path):
    got: dict = {}

    def fake_run_claims(claims, out, emulated, **kwargs):
        got.update(kwargs, emulated=emulated)
        return []

    monkeypatch.setattr("rmptwin.claims.evaluate.run_claims", fake_run_claims)
    result = _invoke(["claims", "--emulated", "--tdf", "auto", "--out", tmp_path / "c"])
    assert result.exit_code == 0, result.output
    assert got["time_dilation"] == "auto" and got["emulated"] is True
    result = _invoke(["claims", "--emulated", "--out", tmp_path / "c"])
    assert result.exit_code == 0, result.output
    assert got["time_dilation"] == "auto"   # emulated claims run at auto unless told
    result = _invoke(["claims", "--emulated", "--tdf", "2", "--out", tmp_path / "c"])
    assert result.exit_code == 0, result.output
    assert got["time_dilation"] == 2.0
    result = _invoke(["claims", "--emulated", "--tdf", "0", "--out", tmp_path / "c"])
    assert isinstance(result.exception, UserError) and str(result.exception) == f"--tdf 0: {RULE}"


def test_every_emulated_claim_run_gets_the_factor_and_the_simulated_ones_do_not(emulated, monkeypatch, tmp_path):
    claim = _claim(tmp_path)
    simulated: list = []

    def sim_runner(tasks, on_rows):   # the simulated sweep's tasks, not run
        simulated.extend(t["manifest"]["experiment"]["time_dilation"] for t in tasks)

    monkeypatch.setattr("rmptwin.claims.evaluate.os.geteuid", lambda: 0)   # as root: the emulated sweep runs
    with pytest.raises(NetworkWouldStart):
        run_claims([claim], tmp_path / "out", emulated=True, runner=sim_runner, time_dilation=2.0)
    assert simulated == [1.0]
    assert [e.experiment.time_dilation for e in emulated] == [2.0]
    with pytest.raises(NetworkWouldStart):
        measure(claim, tmp_path / "out", "emulation", time_dilation="auto")
    assert emulated[-1].experiment.time_dilation == "auto"
    with pytest.raises(NetworkWouldStart):
        measure(claim, tmp_path / "out", "emulation")
    assert emulated[-1].experiment.time_dilation == 1.0


# ----------------------------------------------------------------------------- rmptwin chaos


@pytest.mark.parametrize(("args", "factor"), [([], 1.0), (["--tdf", "4"], 4.0), (["--tdf", "auto"], "auto")])
def test_an_emulated_campaign_hands_the_factor_to_its_runs(emulated, tmp_path, args, factor):
    result = _invoke(["chaos", LINE3, "--backend", "emulation", "--runs", "2", "--out", tmp_path / "c", *args])
    _stopped_at_the_network(result)
    assert [e.experiment.time_dilation for e in emulated] == [factor]
    assert emulated[0].experiment.faults   # the drawn schedule, on the dilated experiment
    spec = json.loads((tmp_path / "c" / "chaos.json").read_text())
    assert spec["time_dilation"] == factor


def test_a_simulated_campaign_ignores_the_factor_and_a_bad_one_is_refused(tmp_path):
    line3 = load_experiment(LINE3)
    sim = Campaign(line3, 1, 1, backend="sim", time_dilation=4.0)
    assert sim.loaded.experiment.time_dilation == 1.0 and "time_dilation" not in sim.spec()
    emu = Campaign(line3, 1, 1, backend="emulation", time_dilation=4.0)
    assert emu.loaded.experiment.time_dilation == 4.0 and emu.spec()["time_dilation"] == 4.0
    result = _invoke(["chaos", LINE3, "--backend", "emulation", "--tdf", "1/2", "--out", tmp_path / "c"])
    assert isinstance(result.exception, UserError) and str(result.exception) == f"--tdf 1/2: {RULE}"


# ----------------------------------------------------------------------------- the Python API


@pytest.mark.parametrize(("given", "factor"), [(None, 1.0), (2, 2.0), (1.5, 1.5), ("auto", "auto")])
def test_api_emulate_takes_time_dilation(emulated, tmp_path, given, factor):
    with pytest.raises(NetworkWouldStart):
        api.emulate(LINE3, out=tmp_path / "run", time_dilation=given)
    assert [e.experiment.time_dilation for e in emulated] == [factor]


def test_api_emulate_refuses_a_bad_factor_or_two_of_them(emulated, tmp_path):
    with pytest.raises(api.UserError) as e:
        api.emulate(LINE3, out=tmp_path / "run", time_dilation=0.5)
    assert str(e.value) == f"time_dilation=0.5: {RULE}"
    with pytest.raises(api.UserError, match="give one"):
        api.emulate(LINE3, out=tmp_path / "run", overrides={"time_dilation": 2}, time_dilation=3)
    with pytest.raises(NetworkWouldStart):   # overrides alone still work
        api.emulate(LINE3, out=tmp_path / "run", overrides={"time_dilation": 2})
    assert [e.experiment.time_dilation for e in emulated] == [2.0]


def test_api_sweep_takes_time_dilation_for_its_emulated_runs(emulated, monkeypatch, tmp_path):
    with pytest.raises(NetworkWouldStart):
        api.sweep(LINE3, {"protocol.delta_a_ms": [100]}, seeds=1, out=tmp_path / "emu", backend="emulation",
                  time_dilation="auto", report=False)
    assert [e.experiment.time_dilation for e in emulated] == ["auto"]
    simulated: list = []

    def sim_runner(tasks, on_rows):   # the simulated tasks, not run
        simulated.extend(t["manifest"]["experiment"]["time_dilation"] for t in tasks)
        raise NetworkWouldStart

    monkeypatch.setattr("rmptwin.sweeps.sweep_loop.run_loop", sim_runner)
    with pytest.raises(NetworkWouldStart):
        api.sweep(LINE3, {"protocol.delta_a_ms": [100]}, seeds=1, out=tmp_path / "sim", in_process=True,
                  time_dilation=4, report=False)
    assert simulated == [1.0]   # the simulator ignores it: the same sweep as without
    with pytest.raises(api.UserError) as e:
        api.sweep(LINE3, {"protocol.delta_a_ms": [100]}, time_dilation=0.5)
    assert str(e.value) == f"time_dilation=0.5: {RULE}"
    with pytest.raises(api.UserError, match="give one"):
        api.sweep(LINE3, {"time_dilation": [1, 2]}, backend="emulation", time_dilation=2)
