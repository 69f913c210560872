"""What security costs the emulated ticker: the highest rate it carries sealed and in the clear.

The quickstart experiment (its topology, protocol and loss) on the emulated network with
namespace hosts, once with ``security.enabled`` (sources seal, control frames carry MACs,
R_T re-encrypt per region, the controller restricts senders; keys generated for the run in
a temporary directory outside any run directory) and once without. Per setting the total
ticker rate climbs a coarse ladder and stops at the first rate that fails; a rate passes by
``bench_runtime.verdict`` (agreement, nothing lost, every guaranteed customer complete, p99
delivery latency within 2 x (Delta_A + the longest path), no reformation, the sources on
schedule). One run per step: the ladder is the repetition. Needs root (Mininet, Open
vSwitch); without root it reports one row saying so.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rmptwin.bench.bench_runtime import at_rate, highest_rate_row, latency_bound_ms, run_facts, verdict
from rmptwin.factories.keys import generate, write_keys
from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.runner.pipeline import EmulationOptions, run_experiment

REPO = Path(__file__).resolve().parents[3]
RUNS = 1                             # each step is one emulated run; the ladder is the repetition
QUICK_RATES = (1000,)
FULL_RATES = (300, 600, 1000, 1500, 2000)
NODES = "ns"                         # the cheaper node kind: the comparison is on vs off, not the hosts
SETTINGS = {"on": True, "off": False}


def with_security(loaded: LoadedExperiment, enabled: bool, key_file: Path) -> LoadedExperiment:
    exp = loaded.experiment
    sec = exp.security.model_copy(update={"enabled": enabled, "keys": str(key_file) if enabled else None})
    new = exp.model_copy(update={"security": sec, "name": f"{exp.name}-security-{'on' if enabled else 'off'}"})
    return LoadedExperiment(experiment=new, topology=loaded.topology, path=loaded.path)


def _ladder(setting: str, rates: tuple[int, ...], trade_s: float, tmp: Path, key_file: Path,
            rows: list[dict[str, Any]]) -> int | None:
    base = with_security(load_experiment(REPO / "experiments" / "quickstart.yaml"), SETTINGS[setting], key_file)
    best = None
    for rate in rates:
        loaded = at_rate(base, rate, trade_s)
        out = run_experiment(loaded, "emulation", out=tmp / f"{setting}-{rate}",
                             options=EmulationOptions(nodes=NODES, capture=[]))
        s = out.summary
        fails = verdict(s, latency_bound_ms(base), run_facts(out.run_dir.events_path(), loaded))
        rows.append({
            "metric": f"ticker at {rate} msg/s, security {setting}",
            "value": (s.get("delivery_latency_ms") or {}).get("p99"),
            "unit": "ms p99", "goal": f"<= {latency_bound_ms(base):.0f} ms", "ok": not fails, "better": "lower",
            "conditions": f"emulated, quickstart topology, namespace hosts, no captures, {trade_s:g} s of trading",
            "note": ("passes" if not fails else "fails: " + "; ".join(fails))
                    + f". sent={s.get('messages_sent')} lost={s.get('messages_lost')} alarms={s.get('alarms', {})} "
                      f"load avg {os.getloadavg()[0]:.1f}"})
        if fails:
            break
        best = rate
    return best


def run(quick: bool) -> list[dict[str, Any]]:
    if os.geteuid() != 0:
        return [{"metric": "ticker rate, security on and off", "value": None, "ok": False,
                 "note": "needs root (Mininet, OVS)"}]
    rates = QUICK_RATES if quick else FULL_RATES
    trade_s = 2.0 if quick else 3.0
    rows: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="rmptwin-bench-security-"))
    try:
        key_file = tmp / "keys" / "quickstart.json"
        write_keys(generate(load_experiment(REPO / "experiments" / "quickstart.yaml")), key_file)
        best = {setting: _ladder(setting, rates, trade_s, tmp / "runs", key_file, rows) for setting in SETTINGS}
        for setting, rate in best.items():
            rows.append(highest_rate_row(f"highest ticker rate that passes, security {setting}", rate, rates,
                                         f"emulated, quickstart topology, namespace hosts, no captures, "
                                         f"{trade_s:g} s of trading"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
