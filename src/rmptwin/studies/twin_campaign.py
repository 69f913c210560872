"""`rmptwin campaign twin`: the twin held to N generated topologies, one table.

Run i takes seed S + i: ``generate.campaign_params(seed)`` picks its shape, ``generate``
its topology and experiment, written as YAML and loaded as a user's files are (so a
validation error is the same one line a user would see). Simulated: agreement, messages
lost, guaranteed customers complete, reformations and failure reports, control per data.
Emulated (``backend="emulation"``, as root): the same run simulated and emulated into run
directories and judged by the twin verdict (``analysis.twin_verdict``), the failed rules
named in the row.

The campaign directory (this module is the one place that names its files):

    campaign.parquet   one row per run
    campaign.md        the same table in Markdown, with the pass count
    inputs/<seed>/     topology.yaml and experiment.yaml of each run
    runs/<seed>/sim, runs/<seed>/emulation   run directories (emulated campaigns, or --keep-runs)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmptwin.errors import UserError
from rmptwin.topotools.generate import campaign_params, generate
from rmptwin.topotools.yaml_files import dump_yaml, write_text

if TYPE_CHECKING:
    from rmptwin.model import LoadedExperiment

TABLE, REPORT, INPUTS, RUNS = "campaign.parquet", "campaign.md", "inputs", "runs"
COLUMNS = ("seed", "switches", "regions", "links", "loss_max", "mesh", "stripes", "valid", "error",
           "agreement", "messages_lost", "guaranteed", "guaranteed_complete", "reformations", "failure_reports",
           "control_per_data", "clean", "verdict", "failed_rules")


def default_dir(seed: int, count: int, backend: str) -> Path:
    return Path("results") / "campaigns" / f"twin-{backend}-s{seed}-n{count}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def _sim_row(loaded: LoadedExperiment, seed: int, run_dir: Path | None) -> dict[str, Any]:
    from rmptwin.analysis.summary import summarize
    from rmptwin.analysis.twin_verdict import reformation_counts
    from rmptwin.runner.pipeline import run_experiment
    from rmptwin.sim.simulate import simulate

    if run_dir is None:
        events = simulate(loaded, seed).events
        summary = summarize(events, loaded)
    else:
        outcome = run_experiment(loaded, "sim", seed=seed, out=run_dir)
        summary, events = outcome.summary, outcome.run_dir.read_events()
    reforms, reports = reformation_counts(events)
    c = summary["customers"]
    return {"agreement": bool(summary["agreement"]), "messages_lost": int(summary["messages_lost"]),
            "guaranteed": int(c["guaranteed"]), "guaranteed_complete": int(c["guaranteed_complete"]),
            "reformations": reforms, "failure_reports": reports,
            "control_per_data": float(summary["control_per_data"]),
            "clean": bool(summary["agreement"] and summary["messages_lost"] == 0
                          and c["guaranteed_complete"] == c["guaranteed"])}


def _emulated_verdict(loaded: LoadedExperiment, seed: int, sim_dir: Path, emu_dir: Path,
                      nodes: str) -> tuple[bool, str]:
    """Emulate the run (as root) and judge it against the simulated one: (passed, failed rules)."""
    from rmptwin.analysis.twin_verdict import FAIL, inputs_of, passed, twin_verdict
    from rmptwin.rundir.run import RunDir
    from rmptwin.runner.pipeline import EmulationOptions, run_experiment

    run_experiment(loaded, "emulation", seed=seed, out=emu_dir, options=EmulationOptions(nodes=nodes, impair="relay", capture=[]))
    rules = twin_verdict(inputs_of(RunDir(sim_dir)), inputs_of(RunDir(emu_dir)))
    return passed(rules), ", ".join(f"{r.metric} ({r.a} vs {r.b})" for r in rules if r.status == FAIL)


def run_campaign(count: int, seed: int, out: Path, backend: str = "sim", keep_runs: bool = False, nodes: str = "ns",
                 progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Run ``count`` generated experiments; write the table and its Markdown; return the rows."""
    from rmptwin.model import load_experiment

    if backend not in ("sim", "emulation"):
        raise UserError(f"--backend {backend!r}: choose sim or emulation")
    if count < 1:
        raise UserError(f"--count must be at least 1, got {count}")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: campaign directory exists and is not empty; choose another --out")
    rows = []
    for i in range(count):
        s = seed + i
        params = campaign_params(s)
        topology, experiment = generate(params, s, "topology.yaml")
        inputs = out / INPUTS / str(s)
        write_text(inputs / "topology.yaml", dump_yaml(topology))
        write_text(inputs / "experiment.yaml", dump_yaml(experiment))
        row: dict[str, Any] = {k: None for k in COLUMNS}
        row.update(seed=s, switches=params.switches, regions=params.regions, links=len(topology["links"]),
                   loss_max=params.loss_max, mesh=params.mesh, stripes=params.stripes, valid=True, error="")
        try:
            loaded = load_experiment(inputs / "experiment.yaml")
        except UserError as e:
            row.update(valid=False, error=str(e), clean=False)
            rows.append(row)
            continue
        emulated = backend == "emulation"
        sim_dir = out / RUNS / str(s) / "sim" if emulated or keep_runs else None
        row.update(_sim_row(loaded, s, sim_dir))
        if emulated:
            assert sim_dir is not None   # an emulated campaign keeps its runs
            ok, failed = _emulated_verdict(loaded, s, sim_dir, out / RUNS / str(s) / "emulation", nodes)
            row.update(verdict="PASS" if ok else "FAIL", failed_rules=failed)
        rows.append(row)
        if progress is not None:
            progress(i + 1, count)
    write_table(out, rows)
    return rows


def write_table(out: Path, rows: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / TABLE)
    write_text(out / REPORT, markdown(rows))


def markdown(rows: list[dict[str, Any]]) -> str:
    clean = sum(1 for r in rows if r["clean"])
    invalid = sum(1 for r in rows if not r["valid"])
    judged = [r for r in rows if r["verdict"] is not None]
    lines = [f"# Twin campaign: {len(rows)} generated experiments", "",
             f"{clean} clean (agreement, 0 lost, every guaranteed customer complete), {invalid} rejected by "
             "validation" + (f", twin verdict PASS on {sum(r['verdict'] == 'PASS' for r in judged)}/{len(judged)}"
                             if judged else "") + ".", ""]
    shown = [c for c in COLUMNS if c != "error"]
    lines.append("| " + " | ".join(shown) + " |")
    lines.append("|" + "---|" * len(shown))
    for r in rows:
        cells = ["" if r[c] is None else (f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c])) for c in shown]
        lines.append("| " + " | ".join(cells) + " |")
    errors = [r for r in rows if r["error"]]
    if errors:
        lines += ["", "## Validation errors", ""] + [f"- seed {r['seed']}: {r['error']}" for r in errors]
    return "\n".join(lines) + "\n"
