"""This host's calibration (``planning.calibration``), made by running the quickstart emulated at
two time dilation factors, line3 and the venue at one, and the plan of a run at
``time_dilation: auto``.

The quickstart runs every RMP role with captures on; at factors 3 and 8 it is nearly on time
here, so the CPU it measures is what its work costs rather than what an overloaded machine let
it have. line3 (3 switches, 9 hosts against the quickstart's 10 and 31) tells the idle cost
that grows with a network's size from the one that does not; venue-latency costs the venue's
gateway, EVs, sequencer, history recorder and clients. A simulated run of each gives
the emulated path's own latency (its first-copy data delay less the simulator's). The runs go
to a temporary directory: a calibration keeps their figures, not their logs. It takes about
six minutes on a 2-CPU machine, once: the result is cached with the host's identity
(``planning.calibration.host_identity``). The runs capture what a default run captures,
whatever the run being planned asks: one calibration serves every run of the host (a run
capturing less costs less than planned).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rmptwin.analysis.twin_verdict import data_delay_ms
from rmptwin.emulation.env import choose_impair, has_netem
from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.planning import calibration as cal_mod
from rmptwin.planning.demand import simulated_demand
from rmptwin.planning.measured import run_sample
from rmptwin.planning.plan import choose, describe, plan_record

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"
# (experiment, factor): two factors of one experiment part the work from the wall time, two
# sizes part the constant idle from the idle per host and switch, and the venue (1,000 req/s,
# one gateway) costs its five roles, which the plan would otherwise borrow from RMP's dearest.
# line3 at factor 1 measures the emulated path's own latency where it is largest: at 3 and 8 it
# is inside the first-copy delay's noise (a calibration measured -0.02 and -0.20 ms there, the
# fit gave 0 ms a link, and `auto` chose factor 1 for a generated tree whose path then ran
# 1.3 ms slower than the simulator's: its twin verdict failed in CI).
CALIBRATION_RUNS = ((EXPERIMENTS / "quickstart.yaml", 3.0), (EXPERIMENTS / "quickstart.yaml", 8.0),
                    (EXPERIMENTS / "line3.yaml", 8.0), (EXPERIMENTS / "line3.yaml", 1.0),
                    (EXPERIMENTS / "venue-latency.yaml", 12.0))

Say = Callable[[str], None]


def identity_for(options: Any) -> dict[str, Any]:
    """The host identity for runs with these emulation options (node mode, link backend: for
    ``auto`` the one ``env.choose_impair`` picks, netem where the kernel attaches it)."""
    impair = options.impair if options.impair != "auto" else ("netem" if has_netem() else "relay")
    return cal_mod.host_identity(options.nodes, choose_impair(impair))


def calibrate(options: Any, say: Say = print,
              runs: tuple[tuple[Path, float], ...] = CALIBRATION_RUNS) -> cal_mod.Calibration:
    """Run each calibration experiment at its factor, fit, cache and return the result."""
    from rmptwin.runner.pipeline import run_experiment  # the pipeline plans with this module

    identity = identity_for(options)
    samples = []
    sim_delay: dict[Path, float | None] = {}
    with tempfile.TemporaryDirectory(prefix="rmptwin-calibration-") as tmp:
        for i, (path, tdf) in enumerate(runs):
            loaded = load_experiment(path).with_time_dilation(1.0)
            if path not in sim_delay:
                sim = run_experiment(loaded, "sim", out=Path(tmp) / f"sim{i}")
                sim_delay[path] = data_delay_ms(sim.run_dir.read_events())
            say(f"calibrating this host ({i + 1}/{len(runs)}): {path.name} emulated at time dilation {tdf:g} "
                f"(~{tdf * loaded.duration_s + 35:.0f} s)")
            outcome = run_experiment(loaded.with_time_dilation(tdf), "emulation", out=Path(tmp) / f"run{i}",
                                     options=replace(options, capture=None))
            counts = pq.read_table(outcome.run_dir.counts_path)
            sample = run_sample(loaded, outcome.summary["runtime"], counts)
            if sample is None:
                raise UserError("calibration: the run measured no busy CPUs or node CPU; is /proc/stat readable?")
            emu_delay, sim_ms = data_delay_ms(outcome.run_dir.read_events()), sim_delay[path]
            excess = None if emu_delay is None or sim_ms is None else emu_delay - sim_ms
            samples.append(replace(sample, path_excess_ms=excess))
    cal = cal_mod.fit(samples, identity)
    path = cal_mod.save(cal)
    say(f"calibration saved: {path}")
    return cal


def calibration_for(options: Any, say: Say = print, recalibrate: bool = False) -> cal_mod.Calibration:
    """This host's cached calibration for ``options``, made first when there is none."""
    if not recalibrate:
        found = cal_mod.cached(identity_for(options))
        if found is not None:
            return found
    return calibrate(options, say)


def plan_run(loaded: LoadedExperiment, options: Any, seed: int | None = None,
             say: Say = print) -> tuple[LoadedExperiment, dict[str, Any]]:
    """``loaded`` at the factor its plan chooses (``time_dilation: auto``), and the plan's record."""
    cal = calibration_for(options, say)
    demand = simulated_demand(loaded.with_time_dilation(1.0), seed)
    pred = choose(demand, cal)
    cpus = int(cal.identity.get("cpus") or os.cpu_count() or 1)
    say(f"auto: {describe(pred, cpus)}")
    return loaded.with_time_dilation(pred.tdf), plan_record(pred, demand, cal, "auto")
