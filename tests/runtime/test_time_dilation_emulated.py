"""Virtual time on the emulated network: at a time dilation factor of 2 the run lasts twice as
long on the wall clock, and in virtual time it is the same run: the same first copies lost on
every link as the simulator (the link model's draws), delivery latencies and the run's span
those of the configured links, and the captures stamped in virtual time.

line3 scaled down (namespace hosts, the relay, the customers captured), once at TDF 2.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from test_twin_links import _overlaps, first_copy_losses

from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

pytestmark = [pytest.mark.root, pytest.mark.emulation]

REPO = Path(__file__).resolve().parents[2]
TDF = 2.0


def _scaled() -> LoadedExperiment:
    base = load_experiment(REPO / "experiments" / "line3.yaml", )
    w = base.experiment.workload.model_copy(update={"rate_per_source": 100, "duration_s": 2.0})
    exp = base.experiment.model_copy(update={"name": "line3-tdf", "workload": w, "duration_s": "auto",
                                             "time_dilation": TDF})
    return base.model_copy(update={"experiment": exp})


@pytest.fixture(scope="module")
def dilated(tmp_path_factory):
    loaded = _scaled()
    out = tmp_path_factory.mktemp("tdf")
    sim = run_experiment(loaded, "sim", seed=loaded.experiment.seed, out=out / "sim")
    start = time.monotonic()
    emu = run_experiment(loaded, "emulation", seed=loaded.experiment.seed, out=out / "emu",
                         options=EmulationOptions(nodes="ns", impair="relay", capture=["rp3", "src1"]))
    return loaded, sim, emu, time.monotonic() - start


def test_the_run_lasts_tdf_times_longer_on_the_wall_and_its_events_are_virtual(dilated):
    loaded, sim, emu, wall_s = dilated
    manifest = emu.run_dir.read_manifest()
    assert manifest["time_dilation"] == TDF
    assert wall_s >= TDF * loaded.duration_s                    # the schedule ran on the dilated clock
    events = emu.run_dir.read_events().to_pandas()
    sends = events[events.kind == "send"].t_ns
    w = loaded.experiment.workload
    # the workload's sends span its duration in virtual time, not TDF times it
    assert sends.min() >= w.start_s * 1e9 - 5e6 and sends.max() <= (w.start_s + w.duration_s) * 1e9 + 50e6


def test_in_virtual_time_it_is_the_simulated_run(dilated):
    loaded, sim, emu, _ = dilated
    s, e = sim.run_dir.read_summary(), emu.run_dir.read_summary()
    assert e["agreement"] is True and e["messages_lost"] == 0 and e["messages_sent"] == s["messages_sent"]
    # delivery latency in virtual ms: the configured links (+ the emulated path's own few ms),
    # not TDF times them
    sim_p50, emu_p50 = s["delivery_latency_ms"]["p50"], e["delivery_latency_ms"]["p50"]
    assert abs(emu_p50 - sim_p50) <= max(10.0, 0.25 * sim_p50), (sim_p50, emu_p50)
    # the link model's draws are keyed by the packet, not by time: the same first copies lost
    overlaps = _overlaps(first_copy_losses(sim.run_dir), first_copy_losses(emu.run_dir))
    assert overlaps and min(overlaps.values()) >= 0.95, overlaps


def test_captures_carry_virtual_timestamps(dilated):
    loaded, _, emu, _ = dilated
    t0 = emu.run_dir.read_manifest()["t0_unix_ns"]
    pcap = emu.run_dir.pcap_path("src1").read_bytes()
    off, last = 24, 0
    while off + 16 <= len(pcap):
        sec, usec, incl, _ = struct.unpack_from("<IIII", pcap, off)
        last = max(last, sec * 10**9 + usec * 1000)
        off += 16 + incl
    # the source's last frame within the run's virtual length (plus its drain), not TDF times it
    assert 0 < last - t0 <= (loaded.duration_s + 5) * 1e9, (last - t0) / 1e9


def test_auto_plans_its_factor_runs_on_time_and_puts_the_plan_beside_the_measure(tmp_path):
    """``time_dilation: auto`` with Docker hosts, as `make run` does: the factor comes from this
    host's calibration (made first if the host has none: five runs, ~7 min) and the
    simulator's count of the run's work; the run is on time at it, and its summary holds the
    plan beside what the machine measured."""
    from rmptwin.planning.plan import HEADROOM, LADDER

    base = _scaled()
    loaded = base.model_copy(update={"experiment": base.experiment.model_copy(
        update={"name": "line3-auto", "time_dilation": "auto"})})
    said: list[str] = []
    emu = run_experiment(loaded, "emulation", out=tmp_path / "emu", options=EmulationOptions(capture=[]),
                         say=said.append)
    manifest, runtime = emu.run_dir.read_manifest(), emu.summary["runtime"]
    plan = runtime["time_dilation_plan"]
    assert plan["requested"] == "auto" and plan["tdf"] in LADDER
    assert manifest["experiment"]["time_dilation"] == plan["tdf"] == runtime["time_dilation"]
    assert any(line.startswith(f"auto: time dilation {plan['tdf']:g}:") for line in said), said
    assert plan["predicted_busy_cpus"] <= HEADROOM * plan["cpus"] or plan["tdf"] == LADDER[-1]
    # the prediction is a measurement's neighbour, not a guess: within a factor of two
    busy = runtime["load"]["busy_cpus"]
    assert busy and 0.5 <= plan["predicted_busy_cpus"] / busy <= 2.0, (plan["predicted_busy_cpus"], busy)
    assert plan["on_time"] and not runtime["overloaded"], runtime["load"]
    assert emu.summary["agreement"] and emu.summary["messages_lost"] == 0
