"""One experiment on one backend, into one run directory: the single pipeline behind
`rmptwin sim`, `rmptwin run`, `rmptwin rerun`, the benchmarks and the tests.

    backend (sim.simulate.simulate | emulation.emulate.emulate)  ->  tables and counters
    RunDir                                                   ->  manifest, events, links, summary
    analysis.summary.summarize                               ->  summary.json

The backends return tables and never write, summarize or print; the command line shows the
progress and the summary (``rmptwin.cli.display``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rmptwin.analysis.summary import summarize
from rmptwin.emulation import emulate as runner
from rmptwin.emulation import run_facts
from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment
from rmptwin.node import event_loop as event_loops
from rmptwin.planning.calibration import cached
from rmptwin.planning.demand import simulated_demand
from rmptwin.planning.plan import assess, plan_record, predict
from rmptwin.rundir.run import RunDir
from rmptwin.runner.calibrate import identity_for, plan_run
from rmptwin.sim.pcap import simulate_with_pcaps
from rmptwin.sim.simulate import simulate

BACKENDS = ("sim", "emulation")

ProgressFn = Callable[[float, str], None]  # (fraction of the duration done, what is happening)
SayFn = Callable[[str], None]              # a line for the user (what a plan chose)


@dataclass(frozen=True)
class EmulationOptions:
    """How `rmptwin run` emulates: host kind, link impairment backend, hosts captured."""

    nodes: str = "docker"                # docker, ns or flat
    impair: str = "auto"                 # auto, netem or relay
    capture: list[str] | None = None     # None: customers and retransmit servers
    cpus: float | None = runner.NODE_CPUS          # per Docker host; None: unlimited
    memory_mb: int | None = runner.NODE_MEMORY_MB  # per Docker host; None: unlimited
    event_loop: str = event_loops.DEFAULT          # the nodes' asyncio loop: uvloop or asyncio (node.event_loop)
    servers: tuple[str, ...] = ()                  # several servers (emulation.cluster); () : this machine
    placement: str = "regions"                     # how switches go over servers: regions or bins (emulation.placement)


class RunOutcome(NamedTuple):
    run_dir: RunDir
    summary: dict[str, Any]
    stats: dict[str, Any]      # the backend's counters: simulator events and wall time, or the runtime's figures
    backend: str


def run_experiment(loaded: LoadedExperiment, backend: str = "sim", seed: int | None = None,
                   out: str | Path | None = None, options: EmulationOptions | None = None,
                   progress: ProgressFn | None = None, manifest_extra: dict[str, Any] | None = None,
                   pcap: bool = False, say: SayFn | None = None) -> RunOutcome:
    """Run ``loaded`` on ``backend`` with ``seed`` (default: the experiment's) into a new run
    directory ``out`` (default results/<experiment>/<run-id>): tables, manifest (with
    ``manifest_extra``, e.g. which run this one repeats), summary. ``pcap`` (simulator): every
    host's capture in pcaps/ too, as an emulated run with ``capture`` naming every host has.
    ``say`` hears what an emulated run at ``time_dilation: auto`` planned (and a calibration's
    progress when this host has none yet)."""
    seed = loaded.experiment.seed if seed is None else seed
    spec = {**loaded.to_manifest(), **(manifest_extra or {})}
    if pcap and backend == "emulation":
        raise UserError("pcap: the simulator's captures; an emulated run captures the hosts its options' "
                        "capture names (rmptwin run --capture)")
    if backend == "sim":
        return _simulated(loaded, spec, seed, out, progress, pcap)
    if backend == "emulation":
        return _emulated(loaded, spec, seed, out, options or EmulationOptions(), progress, say)
    raise UserError(f"unknown backend {backend!r}; choose {' or '.join(BACKENDS)}")


def _simulated(loaded: LoadedExperiment, spec: dict[str, Any], seed: int, out: str | Path | None,
               progress: ProgressFn | None, pcap: bool = False) -> RunOutcome:
    run = RunDir.create(loaded.experiment.name, out)
    duration_ns = max(loaded.duration_s * 1e9, 1.0)
    tick = None if progress is None else (lambda t_ns: progress(t_ns / duration_ns, "running"))
    try:
        # Two calls, not a flag inside the simulator: without captures it runs exactly as before.
        if pcap:
            result = simulate_with_pcaps(loaded, seed, run.append_pcap, progress=tick)
        else:
            result = simulate(loaded, seed, progress=tick)
    except BaseException:
        run.remove_pcaps()
        run.remove_if_empty()
        raise
    if pcap:   # as an emulated run's manifest lists them
        spec = {**spec, "pcaps": [p.name for p in run.pcap_files()]}
    run.write_manifest(spec, backend="sim", seed=seed)
    run.write_events(result.events)
    run.write_drops(result.drops)
    run.write_link_counts(result.link_counts)
    summary = summarize(result.events, loaded)
    run.write_summary(summary)
    return RunOutcome(run, summary, result.stats, "sim")


def _emulated(loaded: LoadedExperiment, spec: dict[str, Any], seed: int, out: str | Path | None,
              options: EmulationOptions, progress: ProgressFn | None, say: SayFn | None = None) -> RunOutcome:
    run_facts.check_arguments(loaded, options.nodes, options.capture, options.event_loop)
    loaded, plan = _dilation_plan(loaded, options, seed, say or _quiet)
    spec = {**spec, "experiment": {**spec["experiment"], "time_dilation": loaded.time_dilation}}
    if plan is not None:
        spec["time_dilation_plan"] = plan
    run = RunDir.create(loaded.experiment.name, out)
    try:
        result = runner.emulate(loaded, seed, run, nodes=options.nodes, impair=options.impair,
                                capture=options.capture, progress=progress, cpus=options.cpus,
                                memory_mb=options.memory_mb, event_loop=options.event_loop,
                                servers=options.servers, placement=options.placement)
    except BaseException:
        run.remove_if_empty()   # a run stopped before its nodes wrote anything leaves no directory
        raise
    run.write_events(result.events)
    run.write_drops(result.drops)
    run.write_link_counts(result.link_counts)
    run.write_manifest({**spec, **result.manifest}, backend="emulation", seed=seed,
                       emulation=result.environment)
    stats = dict(result.stats)
    if plan is not None:   # the plan beside what the run measured
        stats["time_dilation_plan"] = assess(plan, stats.get("load") or {}, bool(stats.get("overloaded")))
    summary = {**summarize(result.events, loaded), "runtime": stats}
    run.write_summary(summary)
    return RunOutcome(run, summary, stats, "emulation")


def _quiet(_: str) -> None:
    pass


def _dilation_plan(loaded: LoadedExperiment, options: EmulationOptions, seed: int,
                   say: SayFn) -> tuple[LoadedExperiment, dict[str, Any] | None]:
    """``loaded`` at a number: ``auto`` planned (calibrating this host first if it never was),
    a given factor predicted where this host has a calibration, so that every run's summary
    can put its prediction beside its measure."""
    if loaded.experiment.time_dilation == "auto":
        return plan_run(loaded, options, seed, say)
    cal = cached(identity_for(options))
    if cal is None:
        return loaded, None
    demand = simulated_demand(loaded, seed)
    return loaded, plan_record(predict(demand, cal, loaded.time_dilation), demand, cal, loaded.time_dilation)
