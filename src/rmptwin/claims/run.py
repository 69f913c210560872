"""`rmptwin claims`: run each claim's sweep (simulated; emulated where asked) and judge it.

Each claim's sweep goes to results/claims/<claim>/sim/<sweep id> (and emulated/<sweep id>); sweeps resume, so a
second `rmptwin claims` reruns nothing. A claim whose experiment does not exist yet, or whose
sweep fails (a key another feature has not landed, keys not generated), is a row saying so,
never a failure of the whole report.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from rmptwin.errors import UserError
from rmptwin.spec import load_experiment
from rmptwin.sweepdir import sweep_id
from rmptwin.sweeps.engine import SweepPlan, run_sweep
from rmptwin.claims.model import Claim
from rmptwin.claims.verdicts import judge

NOT_MEASURED, NOT_RUN = "not yet measured", "not run"
CLAIMS_DIR = Path(__file__).resolve().parents[3] / "experiments" / "claims"
OUT_DIR = Path("results") / "claims"
REPORT, TABLE = "claims.html", "claims.json"


@dataclass
class ClaimRow:
    name: str
    claim: str
    source: str
    quote: str
    seed_figure: str
    simulated: str
    emulated: str
    verdict: str
    note: str = ""
    runs: int = 0


def measure(claim: Claim, out: Path, backend: str, runner=None, master: str | None = None) -> tuple[str, str, int]:
    """(verdict, what we measured, runs in the table) for one backend's sweep of ``claim``."""
    if not claim.experiment_path.exists():
        return NOT_MEASURED, f"{NOT_MEASURED}: {claim.experiment} does not exist yet", 0
    sets, seeds = claim.sets, claim.seeds
    if backend == "emulation":
        if claim.emulated is None:
            return NOT_RUN, f"{NOT_RUN}: no emulated sweep planned for this claim", 0
        sets, seeds = claim.emulated.sets or sets, claim.emulated.seeds
    try:
        base = load_experiment(claim.experiment_path)
        plan = SweepPlan(base, sets, [base.experiment.seed + i for i in range(seeds)], backend, claim.probes)
        # One directory per sweep: editing a claim's sets starts a new sweep instead of clashing with the old.
        where = out / claim.name / ("sim" if backend == "sim" else "emulated") / sweep_id(plan.spec())
        outcome = run_sweep(plan, out=where, master=master, runner=runner)
        df = outcome.table.to_pandas()
        verdict, ours = judge(df, list(sets), claim.verdict)
    except UserError as e:
        return NOT_MEASURED, f"{NOT_MEASURED}: {e}", 0
    except (KeyError, TypeError, ValueError, NameError, ZeroDivisionError) as e:
        return NOT_MEASURED, f"{NOT_MEASURED}: the sweep has no {e} (a summary key not produced yet?)", 0
    return verdict, ours, len(df)


def run_claims(claims: list[Claim], out: Path = OUT_DIR, emulated: bool = False, runner=None,
               master: str | None = None, progress=None) -> list[ClaimRow]:
    rows = []
    for i, claim in enumerate(claims):
        if progress:
            progress(i, len(claims), claim.name)
        verdict, sim, runs = measure(claim, out, "sim", runner, master)
        emu = NOT_RUN
        if emulated:
            if os.geteuid() != 0:
                emu = f"{NOT_RUN}: emulation needs root"
            else:
                emu_verdict, emu, _ = measure(claim, out, "emulation", None, master)
                emu = f"{emu} [{emu_verdict}]"
        if claim.partial and verdict == "holds":
            verdict = "partly"
        rows.append(ClaimRow(claim.name, claim.claim, claim.source, claim.quote, claim.seed_figure, sim, emu,
                             verdict, "; ".join(x for x in (claim.note, claim.partial or "") if x), runs))
    if progress:
        progress(len(claims), len(claims), "done")
    return rows


COLOURS = {"holds": "#d7f5d7", "does not hold": "#f8d4d4", "partly": "#fdf0c2"}


def write_report(rows: list[ClaimRow], out: Path = OUT_DIR) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / TABLE).write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    head = "".join(f"<th>{h}</th>" for h in ("claim", "the seed's figure", "ours, simulated", "ours, emulated",
                                              "verdict"))
    body = []
    for r in rows:
        colour = COLOURS.get(r.verdict, "#eeeeee")
        body.append(
            "<tr>"
            f"<td><b>{html.escape(r.claim)}</b><br><small>{html.escape(r.name)}.yaml</small></td>"
            f"<td>{html.escape(r.seed_figure)}<br><small><i>“{html.escape(r.quote)}”</i> "
            f"({html.escape(r.source)})</small></td>"
            f"<td>{html.escape(r.simulated)}<br><small>{r.runs} runs; {html.escape(r.note)}</small></td>"
            f"<td>{html.escape(r.emulated)}</td>"
            f"<td style='background:{colour}'>{html.escape(r.verdict)}</td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>rmptwin: the seeds' claims</title>"
            "<style>body{font-family:sans-serif}td,th{border:1px solid #bbb;padding:6px;vertical-align:top}"
            "table{border-collapse:collapse}</style><h1>The seeds' claims beside the twin</h1>"
            "<p>Each row is one sweep (experiments/claims/&lt;name&gt;.yaml); figures are means over seeds. "
            "Sweeps are in results/claims/&lt;name&gt;/.</p>"
            f"<table><tr>{head}</tr>{''.join(body)}</table>")
    path = out / REPORT
    path.write_text(page)
    return path
