#!/usr/bin/env python3
"""How much late timers alone change a generated run's control traffic and reformations, in
the simulator: each generated experiment (``topotools.generate``) runs twice with the same
seed, with exact timers and with every primary's clock behind by U(0, L) ms (its timers then
fire up to L ms late in true time, as a loaded emulated node's do). Prints how many runs differ
in failure reports, reformations, and control per data by more than the twin verdict's 10 %.

    PYTHONPATH=src python3 scripts/late_timers_sim.py --late-ms 5 --count 120
    PYTHONPATH=src python3 scripts/late_timers_sim.py --late-ms 5 --count 40 --k-r 3 --switches 13 --loss-max 0.08
"""

import argparse
import random

from rmptwin.analysis.summary import summarize
from rmptwin.analysis.twin_verdict import reformation_counts
from rmptwin.model import Clock
from rmptwin.sim.simulate import simulate
from rmptwin.topotools.generate import GenParams, campaign_params, loaded_generated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--late-ms", type=float, default=5.0)
    ap.add_argument("--count", type=int, default=120)
    ap.add_argument("--k-r", type=int, default=None, help="force k_r (default: the generator's)")
    ap.add_argument("--switches", type=int, default=None, help="fixed shape (default: campaign_params)")
    ap.add_argument("--loss-max", type=float, default=0.08)
    a = ap.parse_args()
    runs = reports = reforms = control = 0
    totals = [[0, 0], [0, 0]]
    for seed in range(a.count):
        p = (GenParams(switches=a.switches, regions=2, loss_max=a.loss_max, rate_per_source=50, workload_s=2.0)
             if a.switches else campaign_params(seed))
        if p.loss_max == 0:
            continue
        runs += 1
        base = loaded_generated(p, seed)
        if a.k_r is not None:
            pr = base.experiment.protocol.model_copy(update={"k_r": a.k_r})
            base = base.model_copy(update={"experiment": base.experiment.model_copy(update={"protocol": pr})})
        rng = random.Random(seed)
        clocks = {h.name: Clock(offset_ms=-rng.uniform(0, a.late_ms)) for h in base.topology.hosts_with_role("primary")}
        late = base.model_copy(update={"experiment": base.experiment.model_copy(update={"clocks": clocks})})
        out = []
        for loaded in (base, late):
            r = simulate(loaded, seed)
            out.append((reformation_counts(r.events), summarize(r.events, loaded)["control_per_data"]))
        ((ra, fa), ca), ((rb, fb), cb) = out
        totals[0][0] += fa
        totals[0][1] += fb
        totals[1][0] += ra
        totals[1][1] += rb
        reports += fa != fb
        reforms += ra != rb
        control += abs(cb - ca) > 0.1 * ca
    print(f"late timers up to {a.late_ms:g} ms, {runs} lossy runs: failure reports differ in {reports} "
          f"({totals[0][0]} exact, {totals[0][1]} late), reformations differ in {reforms} ({totals[1][0]} exact, "
          f"{totals[1][1]} late), control per data off by > 10 % in {control}")


if __name__ == "__main__":
    main()
