"""The time dilation planner: a calibration recovers the costs that made its runs, the plan is
the smallest factor on time, and a run's counts read the same whichever backend wrote them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmptwin.emulation.hostload import cpu_jiffies
from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.planning import calibration as cal_mod
from rmptwin.planning.calibration import RoleCost, RunSample, fit
from rmptwin.planning.demand import Demand, demand_from_counts, simulated_demand
from rmptwin.planning.measured import run_sample
from rmptwin.planning.plan import HEADROOM, LADDER, assess, choose, enough_tdf, plan_record, predict
from rmptwin.records.tables import LINK_COUNT_SCHEMA

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "experiments" / "quickstart.yaml"
IDENTITY = {"format": cal_mod.FORMAT, "cpu": "test", "cpus": 2, "memory_gb": 8, "kernel": "k", "node_mode": "docker",
            "impair": "relay"}


def _sample(tdf: float, idle: dict[str, float], per_dgram_us: dict[str, float], other_idle: float,
            per_frame_us: float, nodes: dict[str, int], dgrams: dict[str, float], frames: float,
            run_s: float = 10.0, setup_s: float = 30.0, switches: int = 0, per_element: float = 0.0) -> RunSample:
    """The sample a host with exactly these costs would measure."""
    window = tdf * run_s
    node_cpu = {r: idle[r] * nodes[r] * window + per_dgram_us[r] * 1e-6 * dgrams[r] for r in nodes}
    other = (other_idle + per_element * (sum(nodes.values()) + switches)) * window + per_frame_us * 1e-6 * frames
    busy = (sum(node_cpu.values()) + other) / window
    return RunSample(tdf, run_s, window, setup_s + window, busy, nodes, dgrams, node_cpu, frames, switches=switches)


@given(idle=st.floats(0.0, 0.05), per=st.floats(1.0, 500.0), other_idle=st.floats(0.0, 0.5),
       per_frame=st.floats(1.0, 200.0), tdfs=st.sampled_from([(2.0, 8.0), (3.0, 8.0), (1.0, 4.0, 16.0)]))
def test_fit_recovers_the_costs_that_made_the_runs(idle, per, other_idle, per_frame, tdfs):
    nodes, dgrams = {"primary": 6, "customer": 14}, {"primary": 6600.0, "customer": 4600.0}
    samples = [_sample(t, {"primary": idle, "customer": idle / 2}, {"primary": per, "customer": per / 3},
                       other_idle, per_frame, nodes, dgrams, 10_000.0) for t in tdfs]
    cal = fit(samples, IDENTITY)
    assert cal.roles["primary"].cpu_us_per_datagram == pytest.approx(per, rel=1e-3, abs=0.02)
    assert cal.roles["customer"].idle_cpus == pytest.approx(idle / 2, abs=1e-4)
    assert cal.cpu_us_per_switch_frame == pytest.approx(per_frame, rel=1e-3, abs=0.02)
    assert cal.other_idle_cpus == pytest.approx(other_idle, abs=1e-3)
    assert cal.setup_s_per_node == pytest.approx(30.0 / 20, abs=1e-3)


@given(other_idle=st.floats(0.0, 0.1), per_element=st.floats(0.0, 0.01), per_frame=st.floats(1.0, 500.0))
def test_runs_of_two_sizes_part_the_constant_idle_from_the_idle_per_host_and_switch(other_idle, per_element,
                                                                                    per_frame):
    """As the calibration runs them: a large experiment at two factors, a small one at one. A
    plan for a third size is then what such a host would measure."""
    def run(tdf, hosts, switches, frames):
        return _sample(tdf, {"primary": 0.002}, {"primary": 200.0}, other_idle, per_frame, {"primary": hosts},
                       {"primary": 300.0 * hosts}, frames, switches=switches, per_element=per_element)
    cal = fit([run(3.0, 31, 10, 10_000.0), run(8.0, 31, 10, 10_000.0), run(8.0, 9, 3, 800.0)], IDENTITY)
    assert cal.other_idle_cpus == pytest.approx(other_idle, abs=1e-4)
    assert cal.other_idle_cpus_per_element == pytest.approx(per_element, abs=1e-5)
    assert cal.cpu_us_per_switch_frame == pytest.approx(per_frame, rel=1e-3, abs=0.05)
    third = run(12.0, 20, 6, 3000.0)
    demand = Demand(run_s=10.0, nodes={"primary": 20}, datagrams={"primary": 600.0}, switch_frames=300.0,
                    switch_links=5, switches=6)
    assert predict(demand, cal, 12.0).busy_cpus == pytest.approx(third.busy_cpus, rel=1e-3, abs=1e-3)   # rounded costs


def test_a_role_run_at_one_factor_takes_the_typical_idle_and_the_rest_is_work():
    """The venue's roles run in one calibration run only: an idle-only fit would cost their
    datagrams nothing, and a run at nine times the rate would be planned as free."""
    rmp = [_sample(t, {"primary": 0.002}, {"primary": 200.0}, 0.05, 100.0, {"primary": 6}, {"primary": 6000.0},
                   5000.0) for t in (3.0, 8.0)]
    venue = _sample(12.0, {"venue": 0.002}, {"venue": 120.0}, 0.05, 100.0, {"venue": 2}, {"venue": 9000.0}, 1000.0)
    cal = fit([*rmp, venue], IDENTITY)
    assert cal.roles["venue"].idle_cpus == pytest.approx(0.002, abs=1e-5)
    assert cal.roles["venue"].cpu_us_per_datagram == pytest.approx(120.0, rel=1e-3)


def test_fit_needs_two_factors():
    s = _sample(2.0, {"p": 0.01}, {"p": 50.0}, 0.1, 20.0, {"p": 3}, {"p": 900.0}, 100.0)
    with pytest.raises(ValueError, match="two or more"):
        fit([s, s], IDENTITY)


def _calibration() -> cal_mod.Calibration:
    return cal_mod.Calibration(IDENTITY, {"primary": RoleCost(0.01, 200.0), "customer": RoleCost(0.005, 60.0)},
                               other_idle_cpus=0.2, cpu_us_per_switch_frame=100.0, setup_s_per_node=1.0)


def test_counts_read_as_work_per_virtual_second():
    loaded = load_experiment(QUICKSTART)
    host = loaded.topology.hosts[0]
    sw, other = host.switch, next(s for s in loaded.topology.switches if s != host.switch)
    counts = pa.table({"link": ["l", "l", "h", "h"], "from_node": [sw, other, host.name, sw],
                       "to_node": [other, sw, sw, host.name], "frame": ["ALL"] * 4,
                       "packets": [1000, 10, 5, 300], "dropped": [3, 0, 0, 20]}, schema=LINK_COUNT_SCHEMA)
    d = demand_from_counts(counts, loaded, 2.0)
    assert d.switch_frames == pytest.approx(1010 / 2.0)            # both directions, offered
    assert d.per_node[host.name] == pytest.approx((5 + 300 - 20) / 2.0)   # sent + received (not dropped)
    assert d.datagrams[host.role] == pytest.approx((5 + 280) / 2.0)
    assert sum(d.nodes.values()) == len(loaded.topology.hosts)


def test_the_plan_is_the_smallest_factor_on_time_and_the_prediction_falls_with_it():
    loaded = load_experiment(QUICKSTART)
    demand = simulated_demand(loaded)
    cal = _calibration()
    busy = [predict(demand, cal, n).busy_cpus for n in LADDER]
    assert all(a > b for a, b in zip(busy, busy[1:]))
    chosen = choose(demand, cal, cpus=2)
    assert chosen.busy_cpus <= HEADROOM * 2
    smaller = [n for n in LADDER if n < chosen.tdf]
    assert all(predict(demand, cal, n).busy_cpus > HEADROOM * 2 for n in smaller)
    assert set(chosen.borrowed) == set(demand.nodes) - {"primary", "customer"}
    # the wall time is the set-up plus the dilated run
    assert chosen.wall_s == pytest.approx(sum(demand.nodes.values()) * 1.0 + chosen.tdf * demand.run_s)


def test_a_run_overloaded_names_the_factor_that_would_have_been_enough():
    # idle 0.2 CPUs; at factor 2 the work kept 1.8 more busy: 3.6 CPU-s of work per virtual s
    n = enough_tdf(2.0, 2.0, 0.2, cpus=2)
    assert predict_busy(0.2, 3.6, n) <= HEADROOM * 2
    assert predict_busy(0.2, 3.6, LADDER[LADDER.index(n) - 1]) > HEADROOM * 2
    assert math.isinf(enough_tdf(2.0, 2.0, 1.5, cpus=2))   # idle alone above the headroom
    rec = {"tdf": 2.0, "predicted_busy_cpus": 1.0, "predicted_idle_cpus": 0.2, "cpus": 2}
    out = assess(rec, {"busy_cpus": 2.0, "cpus": 2}, overloaded=True)
    assert out["enough_tdf"] == n and out["enough_tdf_is_floor"] and not out["on_time"]
    assert out["error_pct"] == pytest.approx(-50.0)
    assert "enough_tdf" not in assess(rec, {"busy_cpus": 0.9, "cpus": 2}, overloaded=False)


def predict_busy(idle: float, work: float, n: float) -> float:
    return idle + work / n


def test_run_sample_of_an_old_run_is_none_and_of_a_new_one_sums_roles():
    loaded = load_experiment(QUICKSTART)
    counts = pa.table({c: [] for c in LINK_COUNT_SCHEMA.names}, schema=LINK_COUNT_SCHEMA)
    assert run_sample(loaded, {"load": {"cpus": 2}, "node_counters": {}}, counts) is None
    hosts = loaded.topology.hosts
    counters = {h.name: {"run_cpu_s": 0.5} for h in hosts}
    s = run_sample(loaded, {"load": {"busy_cpus": 1.2, "window_s": 20.0}, "node_counters": counters,
                            "time_dilation": 2.0, "wall_s": 50.0}, counts)
    assert s is not None and s.tdf == 2.0 and s.busy_cpus == 1.2
    assert sum(s.node_cpu_s.values()) == pytest.approx(0.5 * len(hosts))


def test_the_cache_holds_only_for_the_same_host(tmp_path, monkeypatch):
    monkeypatch.setenv("RMPTWIN_CALIBRATION_DIR", str(tmp_path))
    cal = _calibration()
    path = cal_mod.save(cal)
    assert cal_mod.cached(IDENTITY) == cal
    assert cal_mod.cached({**IDENTITY, "cpus": 4}) is None
    path.write_text("{not json")
    assert cal_mod.cached(IDENTITY) is None
    path.write_text(json.dumps({**cal.to_dict(), "format": cal_mod.FORMAT + 1}))
    assert cal_mod.cached(IDENTITY) is None


def test_plan_record_is_json():
    loaded = load_experiment(QUICKSTART)
    demand = simulated_demand(loaded)
    rec = plan_record(predict(demand, _calibration(), 4.0), demand, _calibration(), "auto")
    assert json.loads(json.dumps(rec))["tdf"] == 4.0


def test_proc_stat_busy_and_steal():
    text = "cpu  100 5 30 1000 7 2 3 11 0 0\ncpu0 50 2 15 500 3 1 1 5 0 0\nprocs_running 3\n"
    assert cpu_jiffies(text) == (100 + 5 + 30 + 2 + 3, 11)
    assert cpu_jiffies("intr 1\n") is None


def test_rmptwin_plan_prints_the_factor_from_this_hosts_calibration(tmp_path, monkeypatch):
    """The command with a calibration in the cache (as `--recalibrate` leaves one): the per-role
    table and the one line a user acts on; no emulated run."""
    from typer.testing import CliRunner

    from rmptwin.cli.main import app
    from rmptwin.runner.calibrate import identity_for
    from rmptwin.runner.pipeline import EmulationOptions

    monkeypatch.setenv("RMPTWIN_CALIBRATION_DIR", str(tmp_path))
    identity = identity_for(EmulationOptions(nodes="ns", impair="relay"))
    cal = cal_mod.Calibration(identity, _calibration().roles, 0.2, 100.0, 1.0)
    cal_mod.save(cal)
    res = CliRunner().invoke(app, ["plan", str(QUICKSTART), "--nodes", "ns", "--impair", "relay", "--at", "8"])
    assert res.exit_code == 0, res.output
    chosen = choose(simulated_demand(load_experiment(QUICKSTART)), cal)
    assert f"time dilation {chosen.tdf:g}:" in res.output
    assert "CPUs at 8" in res.output and "costed as the dearest calibrated role" in res.output
    bad = CliRunner().invoke(app, ["plan", str(QUICKSTART), "--nodes", "ns", "--impair", "relay", "--measure", "1,x"])
    assert isinstance(bad.exception, UserError) and "time dilation factor x" in str(bad.exception)
    assert bad.output == ""   # refused before any calibration or simulation


def test_the_paths_own_latency_raises_the_factor_where_links_are_short():
    """A tree of 1 ms links: the CPU would do at a low factor, but the emulated path's own
    latency per link (wall time) must shrink below a tenth of the path's delay in virtual time."""
    from dataclasses import replace

    from rmptwin.planning.plan import LATENCY_SHARE, latency_ok

    loaded = load_experiment(QUICKSTART)
    demand = simulated_demand(loaded)
    short = replace(demand, path_delay_ms=5.0, path_hops=6.0)
    cheap = cal_mod.Calibration(IDENTITY, _calibration().roles, 0.01, 1.0, 1.0, path_excess_ms_per_hop=0.6)
    by_cpu = choose(demand, replace(cheap, path_excess_ms_per_hop=0.0), cpus=2)
    p = choose(short, cheap, cpus=2)
    assert p.bound_by == "latency" and p.tdf > by_cpu.tdf
    assert latency_ok(p, short) and p.path_excess_ms == pytest.approx(0.6 * 6 / p.tdf)
    assert not latency_ok(predict(short, cheap, LADDER[LADDER.index(p.tdf) - 1]), short)
    assert p.path_excess_ms <= LATENCY_SHARE * 5.0


def test_the_calibration_keeps_the_paths_latency_per_link_in_wall_time():
    from dataclasses import replace

    base = [_sample(t, {"p": 0.01}, {"p": 50.0}, 0.1, 20.0, {"p": 3}, {"p": 900.0}, 100.0) for t in (2.0, 8.0)]
    # 4 links: 2 ms of wall latency per path, so 1.0 virtual ms at factor 2 and 0.25 at 8
    samples = [replace(s, path_excess_ms=2.0 / s.tdf, path_hops=4.0) for s in base]
    assert fit(samples, IDENTITY).path_excess_ms_per_hop == pytest.approx(0.5)


def test_a_noisy_high_factor_sample_does_not_cancel_the_paths_latency():
    """This host's calibration (2026-11-30, namespace hosts): the path's excess was 0.55 ms at
    factor 3 over 4 links and -0.11, -0.07 ms at 8 (smaller than the p50's noise). A mean of
    excess x factor / links gave 0.007 ms per link and planned factor 1 for a generated tree whose
    emulated path then ran 0.8 ms slow; the fit through the origin keeps the signal."""
    from dataclasses import replace

    base = [_sample(t, {"p": 0.01}, {"p": 50.0}, 0.1, 20.0, {"p": 3}, {"p": 900.0}, 100.0) for t in (3.0, 8.0, 8.0)]
    measured = [(0.546, 4.0), (-0.105, 4.0), (-0.067, 3.0)]
    samples = [replace(s, path_excess_ms=e, path_hops=h) for s, (e, h) in zip(base, measured)]
    per_hop = fit(samples, IDENTITY).path_excess_ms_per_hop
    assert 0.25 < per_hop < 0.35
    only_noise = [replace(s, path_excess_ms=-0.1, path_hops=4.0) for s in base]
    assert fit(only_noise, IDENTITY).path_excess_ms_per_hop == 0.0


def test_a_cached_calibration_is_refitted_from_its_samples(tmp_path, monkeypatch):
    """The samples are what was measured; a calibration saved by an older fit plans with the
    current one, without running the calibration again."""
    from dataclasses import replace

    monkeypatch.setenv("RMPTWIN_CALIBRATION_DIR", str(tmp_path))
    base = [_sample(t, {"p": 0.01}, {"p": 50.0}, 0.1, 20.0, {"p": 3}, {"p": 900.0}, 100.0) for t in (2.0, 8.0)]
    samples = [replace(s, path_excess_ms=2.0 / s.tdf, path_hops=4.0) for s in base]
    stale = replace(fit(samples, IDENTITY), path_excess_ms_per_hop=0.007)
    cal_mod.save(stale)
    assert cal_mod.cached(IDENTITY).path_excess_ms_per_hop == pytest.approx(0.5)
