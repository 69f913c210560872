"""The simulator's seed-to-seed spread of a run's control per data: the yardstick the twin
verdict (``twin_verdict``) judges an emulated run by where that run's losses are not the
simulator's draw (netem: the kernel draws them, and keeps no drop log). With other lost first
copies come other re-sends, so B cannot match A's count; it should fall where the simulator
itself falls over seeds of the same experiment.

The seeds are A's seed + 1 .. + n: fixed by A, so the same two runs get the same verdict."""

from __future__ import annotations

from collections.abc import Callable

from rmptwin.rundir.run import RunDir

SPREAD_SEEDS = 12   # with A's own: 13 draws; the quickstart simulates in about a second each


def control_spread(run_a: RunDir, seeds: int = SPREAD_SEEDS,
                   progress: Callable[[int, int], None] | None = None) -> tuple[float, ...]:
    """control_per_data of A's experiment simulated at ``seeds`` other seeds (no run directory
    is written). ``progress(done, total)`` after each."""
    from rmptwin.analysis.summary import summarize
    from rmptwin.model import LoadedExperiment
    from rmptwin.sim.simulate import simulate

    manifest = run_a.read_manifest()
    loaded = LoadedExperiment.from_manifest(manifest, run_a.path)   # A's own run: validated when written
    first = int(manifest["seed"]) + 1
    values = []
    for i, seed in enumerate(range(first, first + seeds)):
        value = summarize(simulate(loaded, seed).events, loaded).get("control_per_data")
        if value is not None:
            values.append(float(value))
        if progress:
            progress(i + 1, seeds)
    return tuple(values)
