"""The simulator's seed-to-seed spread of a run's control per data: the yardstick the twin
verdict (``twin_verdict``) judges an emulated run by where that run's losses are not the
simulator's draw (netem: the kernel draws them, and keeps no drop log). With other lost first
copies come other re-sends, so B cannot match A's count; it should fall where the simulator
itself falls over seeds of the same experiment.

The seeds are A's seed + 1 .. + n: fixed by A, so the same two runs get the same verdict."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from rmptwin.rundir.run import RunDir

SPREAD_SEEDS = 12   # with A's own: 13 draws; the quickstart simulates in about a second each
# A twin as good as the simulator (B another draw of the same experiment) fails the spread
# rule this often. The 13 draws' range widened by 10 % failed one in 21 such twins (300 seeds
# of the quickstart simulated, 20,000 resamples of 13 + 1); this interval failed 1 in 1,050.
FALSE_FAIL = 0.001
MIN_DRAWS = 5       # the t quantile below is within 1.3 % of the exact one from 4 degrees of freedom


def t_quantile(p: float, dof: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion around the normal one, to dof^-4:
    4.317 against 4.318 at p 0.9995 and 12 degrees of freedom; no scipy on these machines)."""
    z = statistics.NormalDist().inv_cdf(p)
    terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(t / float(dof) ** (i + 1) for i, t in enumerate(terms))


def prediction_interval(values: Sequence[float], false_fail: float = FALSE_FAIL,
                        at_least: float = 0.0) -> tuple[float, float] | None:
    """Where one more seed's value falls, but for a ``false_fail`` share of draws: the
    prediction interval of a log-normal fitted to ``values`` (control per data over seeds is
    skewed to the right, its log near symmetric: skew 0.15 over 300 quickstart seeds), at
    least ``at_least`` wide on each side in relative terms. None with fewer than ``MIN_DRAWS``
    positive values."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < MIN_DRAWS:
        return None
    n, mean, sd = len(logs), statistics.fmean(logs), statistics.stdev(logs)
    half = max(t_quantile(1 - false_fail / 2, n - 1) * sd * math.sqrt(1 + 1 / n), math.log1p(at_least))
    return math.exp(mean - half), math.exp(mean + half)


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
