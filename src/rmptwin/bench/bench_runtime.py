"""The emulated runtime under load: the highest ticker rate the quickstart network carries.

Each step runs the quickstart experiment (its topology, protocol and loss) on the emulated
network at a higher total ticker rate (sum over the sources) and a shorter trading period,
the default way `rmptwin run` does: packet captures on (customers and retransmit servers),
Docker hosts limited to 1 CPU each; and again with namespace hosts. A rate passes ("the seed's
rates") when, at once:

- agreement holds, nothing is lost and every guaranteed customer is complete;
- the p99 delivery latency (RELEASE - SEND) is within 2 x (Delta_A + the longest
  host-to-host path delay);
- no ring re-formed (no REFORM_START: a false failure report under load re-forms the ring);
- the sources kept the ticker's schedule: the last message went out at most
  ``SCHEDULE_SLACK_S`` after the trading period (a starved source offers less than the rate).

Per node mode the rates climb a coarse ladder and stop at the first that fails: one run per
step (a full rate search with medians of 3 per step takes over half an hour on 2 CPUs).
Full mode then runs the first failing rate with safe delivery (quickstart-safe.yaml): does
order consistency survive the overload there? And it climbs a second ladder, in virtual time:
Docker hosts at ``time_dilation: auto`` (each step at the factor its plan chooses), the same
criteria read in virtual time, the rate the design sustains on a host that many times faster
(docs/virtual-time.md). Each of its steps runs simulated beside it (the row's floor: the design
with no host under it), and a step the plan finds overloaded at twice its budget even at the
largest factor is not run (its row says what it would need). Needs root (Mininet, Open vSwitch); without root it reports one row
saying so.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rmptwin.core.events import Kind
from rmptwin.model import LoadedExperiment, Topology, load_experiment
from rmptwin.model.overrides import dilated
from rmptwin.model.tree import worst_delay_ms
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

REPO = Path(__file__).resolve().parents[3]
RUNS = 1                             # each step is one emulated run; the ladder is the repetition
QUICK_RATES = (1000,)                # the seed's rate, once per node mode
FULL_RATES = (300, 600, 1000, 1500, 2000)
DILATED_RATES = (1000, 2000, 3000, 5000)   # virtual msg/s, each at the factor `auto` plans for it
MODES = ("docker", "ns")             # `rmptwin run`'s default first
MODE_NAMES = {"docker": "Docker hosts", "ns": "namespace hosts"}
SCHEDULE_SLACK_S = 0.5               # the last publication may go out this late, no later


def longest_path_ms(topo: Topology) -> float:
    """The largest one-way delay between two hosts: access links + switch path (+ jitter)."""
    hosts = topo.hosts
    return max((worst_delay_ms(topo, a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]), default=0.0)


def latency_bound_ms(loaded: LoadedExperiment) -> float:
    """The p99 delivery latency a passing run stays within: 2 x (Delta_A + longest path)."""
    return 2 * (loaded.experiment.protocol.delta_a + longest_path_ms(loaded.topology))


def at_rate(loaded: LoadedExperiment, total_rate: float, trade_s: float) -> LoadedExperiment:
    exp = loaded.experiment
    n_sources = len(exp.workload.sources or loaded.topology.hosts_with_role("source"))
    drain = loaded.duration_s - exp.workload.start_s - exp.workload.duration_s
    wl = exp.workload.model_copy(update={"rate_per_source": total_rate / n_sources, "duration_s": trade_s})
    new = exp.model_copy(update={"workload": wl, "duration_s": exp.workload.start_s + trade_s + drain,
                                 "name": f"{exp.name}-rate{int(total_rate)}"})
    return LoadedExperiment(experiment=new, topology=loaded.topology, path=loaded.path)


def run_facts(events_path: Path, loaded: LoadedExperiment) -> dict[str, Any]:
    """What the summary does not say: how often a ring started re-forming (REFORM_START), and
    how far behind the ticker's schedule the sources' last message went out (seconds after
    the trading period's end; a starved source offers less than the rate asked)."""
    t = pq.read_table(events_path, columns=["t_ns", "kind"]).to_pydict()
    sends = [ts for ts, k in zip(t["t_ns"], t["kind"]) if k == Kind.SEND]
    wl = loaded.experiment.workload
    end_ns = (wl.start_s + wl.duration_s) * 1e9
    return {"reformations": sum(1 for k in t["kind"] if k == Kind.REFORM_START),
            "behind_s": round(max(0.0, (max(sends, default=end_ns) - end_ns) / 1e9), 2)}


def verdict(summary: dict[str, Any], bound_ms: float, facts: dict[str, Any]) -> list[str]:
    """What keeps a run from sustaining its rate; [] when it passes."""
    s = summary
    cust = s.get("customers") or {}
    p99 = (s.get("delivery_latency_ms") or {}).get("p99")
    fails = []
    if not s.get("agreement"):
        fails.append(f"no agreement (order consistent: {s.get('order_consistent')})")
    if s.get("messages_lost"):
        fails.append(f"{s['messages_lost']} lost")
    if cust.get("guaranteed_complete") != cust.get("guaranteed"):
        fails.append(f"guaranteed customers complete {cust.get('guaranteed_complete')}/{cust.get('guaranteed')}")
    if p99 is None or p99 > bound_ms:
        fails.append(f"latency p99 {p99 if p99 is None else round(p99)} ms > {bound_ms:.0f} ms")
    if facts["reformations"]:
        fails.append(f"{facts['reformations']} reformation(s)")
    if facts["behind_s"] > SCHEDULE_SLACK_S:
        fails.append(f"the sources fell {facts['behind_s']:g} s behind the schedule")
    return fails


def _step_row(rate: int, mode: str, loaded: LoadedExperiment, s: dict[str, Any], fails: list[str],
              trade_s: float) -> dict[str, Any]:
    cpu = sum((c or {}).get("cpu_s", 0.0) for c in s["runtime"]["node_counters"].values())
    cust = s["customers"]
    fair = (s.get("fairness_spread_ms") or {}).get("p99")
    tdf = s["runtime"].get("time_dilation") or 1.0
    at = "" if tdf == 1 else f", time dilation {tdf:g}"
    return {
        "metric": f"ticker at {rate} msg/s, {MODE_NAMES[mode]}, {loaded.experiment.protocol.delivery} delivery{at}",
        "value": s["delivery_latency_ms"]["p99"], "unit": "ms p99", "goal": f"<= {latency_bound_ms(loaded):.0f} ms",
        "ok": not fails, "better": "lower",
        "conditions": f"emulated, quickstart topology, {MODE_NAMES[mode]}, captures on, {trade_s:g} s of trading{at}",
        "note": ("passes" if not fails else "fails: " + "; ".join(fails))
                + f". agreement={s['agreement']} order_consistent={s.get('order_consistent')} "
                  f"sent={s['messages_sent']} lost={s['messages_lost']} control/data={s['control_per_data']:.2f} "
                  f"customers {cust['guaranteed_complete']}/{cust['guaranteed']}, fairness p99 {fair} ms, "
                  f"drained {s['runtime']['drain_s']} s, node CPU {cpu:.1f} s, load avg {os.getloadavg()[0]:.1f}, "
                  f"{'overloaded' if s['runtime'].get('overloaded') else 'on time'}"}


PASS_CRITERIA = ("agreement, 0 lost, every guaranteed customer complete, p99 <= 2 x (Delta_A + longest "
                 "path), no reformation, sources on schedule")   # what ``verdict`` checks


def highest_rate_row(metric: str, best: int | None, rates: tuple[int, ...], conditions: str,
                     **goal: Any) -> dict[str, Any]:
    """The ladder's summary row: the highest rate that passed (None: not even the first)."""
    ladder = "/".join(str(r) for r in rates)
    return {"metric": metric, "value": best, "unit": "msg/s", "ok": best is not None, **goal, "better": "higher",
            "conditions": f"{conditions}, one run per step of the ladder {ladder} msg/s (stops at the first failure)",
            "note": PASS_CRITERIA + (" (the highest rate tried)" if best == rates[-1] else "")
                    + ("" if best is not None else f"; not even {rates[0]} msg/s")}


def beyond_the_ladder(loaded: LoadedExperiment, mode: str) -> str | None:
    """Why ``loaded`` (at ``auto``) cannot be on time at any factor the plan may choose (twice
    the plan's CPU budget at the largest), or None.
    The plan's prediction is what ``auto`` runs on: past its largest factor, the CPU a run keeps
    busy outside the work (idle nodes, relays, switch, captures) no factor shrinks."""
    from rmptwin.planning.plan import LADDER
    from rmptwin.runner.calibrate import plan_run

    _, plan = plan_run(loaded, EmulationOptions(nodes=mode), say=lambda line: None)
    budget = plan["headroom"] * plan["cpus"]
    # a little over its budget the run may still be on time (the plan over-predicts two runs in
    # three, docs/virtual-time.md): run it and let its timers judge; at twice the budget, do not
    if plan["tdf"] < LADDER[-1] or plan["predicted_busy_cpus"] <= 2 * budget:
        return None
    idle, busy = plan["predicted_idle_cpus"], plan["predicted_busy_cpus"]
    need = (busy - idle) * LADDER[-1] / (budget - idle) if budget > idle else math.inf
    return (f"the plan predicts {busy:.2f} of {plan['cpus']} CPUs busy at time dilation {LADDER[-1]:g}, the "
            f"largest it chooses (plan for <= {budget:.2f}): {idle:.2f} idle (nodes, relays, switch: no factor "
            f"shrinks it) and {busy - idle:.2f} of work (datagrams and switch-link frames, divided by the factor); "
            f"on time from about time dilation {need:.0f}, {need * loaded.duration_s / 60:.0f} min of wall time")


def _simulated_floor(loaded: LoadedExperiment, out: Path) -> dict[str, Any]:
    """The same step simulated: its p99 as the dilated row's floor (what the design gives with
    no host under it), and whether the simulated run passes the same criteria."""
    sim = run_experiment(loaded, "sim", out=out)
    fails = verdict(sim.summary, latency_bound_ms(loaded), run_facts(sim.run_dir.events_path(), loaded))
    s = sim.summary
    return {"floor": s["delivery_latency_ms"]["p99"], "floor_what": "simulated, same step",
            "sim_passes": not fails,
            "sim_note": ("simulated: passes" if not fails else "simulated: fails: " + "; ".join(fails))
                        + f", control/data {s['control_per_data']:.2f}"}


def _ladder(mode: str, rates: tuple[int, ...], trade_s: float, tmp: Path, rows: list[dict[str, Any]],
            safe: bool, tdf: float | str | None = None) -> int | None:
    """Climb ``rates`` in ``mode`` until one fails; the highest that passed (None: not the first).
    ``tdf``: every step at this time dilation factor ("auto": the one its plan chooses)."""
    base = load_experiment(REPO / "experiments" / "quickstart.yaml")
    best = None

    def step(rate: int, experiment: LoadedExperiment) -> bool:
        loaded = dilated(at_rate(experiment, rate, trade_s), tdf)
        if tdf == "auto":
            beyond = beyond_the_ladder(loaded, mode)
            if beyond:   # overloaded at the largest factor by the plan: the run would measure the machine
                rows.append({"metric": f"ticker at {rate} msg/s, {MODE_NAMES[mode]}, time dilation auto",
                             "value": "not run", "ok": False, "note": beyond})
                return False
        out = run_experiment(loaded, "emulation", out=tmp / f"{mode}-{loaded.experiment.name}-{len(rows)}",
                             options=EmulationOptions(nodes=mode))   # captures: the default set
        s = out.summary
        fails = verdict(s, latency_bound_ms(experiment), run_facts(out.run_dir.events_path(), loaded))
        row = _step_row(rate, mode, loaded, s, fails, trade_s)
        if tdf is not None:   # dilated: beside it, the design itself (the simulator, no host at all)
            row.update(_simulated_floor(at_rate(experiment, rate, trade_s), tmp / f"sim-{rate}"))
            row["note"] += "; " + row["sim_note"]
        rows.append(row)
        return not fails

    for rate in rates:
        if not step(rate, base):
            if safe:
                step(rate, load_experiment(REPO / "experiments" / "quickstart-safe.yaml"))
            break
        best = rate
    return best


def run(quick: bool) -> list[dict[str, Any]]:
    if os.geteuid() != 0:
        return [{"metric": "runtime ticker rate", "value": None, "ok": False, "note": "needs root (Mininet, OVS)"}]
    rates = QUICK_RATES if quick else FULL_RATES
    trade_s = 2.0 if quick else 3.0
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-bench-runtime-"))
    try:
        for mode in MODES:
            best = _ladder(mode, rates, trade_s, tmp, rows, safe=not quick and mode == "docker")
            row = highest_rate_row(f"highest ticker rate that passes, {MODE_NAMES[mode]}", best, rates,
                                   f"emulated, quickstart topology, {MODE_NAMES[mode]}, captures on, "
                                   f"{trade_s:g} s of trading", goal=">= 1000 msg/s", goal_min=1000)
            rows.append({**row, "ok": best is not None and best >= 1000})
        if not quick:
            best = _ladder("docker", DILATED_RATES, trade_s, tmp, rows, safe=False, tdf="auto")
            row = highest_rate_row("highest ticker rate that passes in virtual time, Docker hosts, time dilation auto",
                                   best, DILATED_RATES, f"emulated, quickstart topology, Docker hosts, captures on, "
                                   f"{trade_s:g} s of trading, each step at the factor auto chose (its row)",
                                   goal=">= 5000 msg/s", goal_min=5000)
            failed = next((r for r in rows[::-1] if "sim_passes" in r), None)
            if failed is not None and not failed["ok"] and not failed["sim_passes"]:
                row["note"] += ("; the first failing step fails simulated too (" + failed["sim_note"]
                                + "): the ceiling is the experiment's protocol, not this host")
            rows.append({**row, "ok": best is not None and best >= 5000})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
