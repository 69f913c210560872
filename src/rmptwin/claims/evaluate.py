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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmptwin.claims.model import Claim
from rmptwin.claims.verdicts import judge
from rmptwin.errors import UserError
from rmptwin.factories.keys import generate, key_path, write_keys
from rmptwin.model import LoadedExperiment, load_experiment
from rmptwin.model.overrides import dilated
from rmptwin.rundir.sweep import sweep_id
from rmptwin.sweeps.sweep_loop import Runner, SweepPlan, run_sweep

NOT_MEASURED, NOT_RUN, NOT_APPLICABLE = "not yet measured", "not run", "not applicable"
# An emulated run whose timers ran late (the machine, not the protocol: emulation.hostload) is
# not judged: the twin tests treat such runs the same way. The one exception is a claim whose
# figure late timers cannot make pass (Emulated.late_timers_cannot_pass): its "holds" stands.
OVERLOADED = "not judged (overloaded)"
OVERLOAD_KEY, LATENESS_KEY = "runtime.overloaded", "runtime.load.timer_lateness_p99_ms"
TDF_KEY = "runtime.time_dilation"
AGREE, DIFFER = "agree", "differ"
JUDGED = ("holds", "does not hold", "partly")
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
    emulated_verdict: str = NOT_RUN   # the same rule on the emulated sweep
    twin: str = NOT_RUN               # agree / differ: the simulated and emulated verdicts; else why not judged
    emulated_runs: int = 0


def twin_verdict(simulated: str, emulated: str) -> str:
    """Whether the twin's two halves reach the same verdict on a claim (both must be judged)."""
    if simulated not in JUDGED or emulated not in JUDGED:
        return emulated if emulated not in JUDGED else simulated
    return AGREE if simulated == emulated else DIFFER


def measure(claim: Claim, out: Path, backend: str, runner: Runner | None = None,
            master: str | None = None, time_dilation: float | str | None = None) -> tuple[str, str, int]:
    """(verdict, what we measured, runs in the table) for one backend's sweep of ``claim``.
    ``time_dilation`` (`--tdf`): the emulated runs' factor, a number >= 1 or "auto" (None: the
    claim experiment's own); a simulated sweep ignores it, so its directory stays the same."""
    if not claim.experiment_path.exists():
        return NOT_MEASURED, f"{NOT_MEASURED}: {claim.experiment} does not exist yet", 0
    sets, seeds = claim.sets, claim.seeds
    if backend == "emulation":
        if claim.emulated is None:
            return NOT_RUN, f"{NOT_RUN}: no emulated sweep planned for this claim", 0
        if claim.emulated.not_applicable:
            return NOT_APPLICABLE, f"{NOT_APPLICABLE}: {claim.emulated.not_applicable}", 0
        sets, seeds = claim.emulated.sets or sets, claim.emulated.seeds
    try:
        base = load_experiment(claim.experiment_path)
        if backend == "emulation":
            base = dilated(base, time_dilation)
        _keys_for(base)
        plan = SweepPlan(base, sets, [base.experiment.seed + i for i in range(seeds)], backend, claim.probes)
        # One directory per sweep: editing a claim's sets starts a new sweep instead of clashing with the old.
        where = out / claim.name / ("sim" if backend == "sim" else "emulated") / sweep_id(plan.spec())
        outcome = run_sweep(plan, out=where, master=master, runner=runner)
        df = outcome.table.to_pandas()
        verdict, ours = judge(df, list(sets), claim.verdict)
        if backend == "emulation":
            ours = f"{ours} {_at_factors(df)}"
        hot = int(df[OVERLOAD_KEY].fillna(False).astype(bool).sum()) if OVERLOAD_KEY in df.columns else 0
        if hot:
            late = df[LATENESS_KEY].max() if LATENESS_KEY in df.columns else float("nan")
            ours = f"{ours} [{hot} of {len(df)} runs overloaded: timer lateness p99 up to {late:.0f} ms"
            # Late timers can only make such a claim fail (claim.emulated says why), so its "holds" stands.
            if backend == "emulation" and claim.emulated and claim.emulated.late_timers_cannot_pass \
                    and verdict == "holds":
                return verdict, f"{ours}; judged: {claim.emulated.late_timers_cannot_pass}]", len(df)
            return OVERLOADED, f"{ours}]", len(df)
    except UserError as e:
        return NOT_MEASURED, f"{NOT_MEASURED}: {e}", 0
    except (KeyError, TypeError, ValueError, NameError, ZeroDivisionError) as e:
        return NOT_MEASURED, f"{NOT_MEASURED}: the sweep has no {e} (a summary key not produced yet?)", 0
    return verdict, ours, len(df)


def _at_factors(df: Any) -> str:
    """"(time dilation 4)", or "4/8" when the sweep's points ran at several: a dilated figure is
    the design on a host that many times faster than this one, and the row says so."""
    factors = sorted({float(v) for v in df[TDF_KEY].dropna()}) if TDF_KEY in df.columns else []
    return f"(time dilation {'/'.join(f'{f:g}' for f in factors or [1.0])})"


def _keys_for(loaded: LoadedExperiment) -> None:
    """A secure claim's experiment gets a fresh key set where it has none, as `rmptwin keys gen`
    would write it (the claim measures what the keys protect, not which keys they are)."""
    if loaded.experiment.security.enabled and not key_path(loaded).exists():
        write_keys(generate(loaded), key_path(loaded))


def run_claims(claims: list[Claim], out: Path = OUT_DIR, emulated: bool = False, runner: Runner | None = None,
               master: str | None = None,
               progress: Callable[[int, int, str], None] | None = None,
               time_dilation: float | str | None = None) -> list[ClaimRow]:
    """One row per claim: its simulated sweep and, ``emulated``, its emulated one, every emulated
    run at ``time_dilation`` (`--tdf`; None: each claim experiment's own)."""
    rows = []
    for i, claim in enumerate(claims):
        if progress:
            progress(i, len(claims), claim.name)
        verdict, sim, runs = measure(claim, out, "sim", runner, master)
        emu, emu_verdict, emu_runs = NOT_RUN, NOT_RUN, 0
        if emulated:
            if claim.emulated is not None and claim.emulated.not_applicable:
                emu_verdict, emu, emu_runs = measure(claim, out, "emulation", None, master, time_dilation)
            elif os.geteuid() != 0:
                emu = f"{NOT_RUN}: emulation needs root"
            else:
                emu_verdict, emu, emu_runs = measure(claim, out, "emulation", None, master, time_dilation)
        if claim.partial:
            verdict = "partly" if verdict == "holds" else verdict
            emu_verdict = "partly" if emu_verdict == "holds" else emu_verdict
        rows.append(ClaimRow(claim.name, claim.claim, claim.source, claim.quote, claim.seed_figure, sim, emu,
                             verdict, "; ".join(x for x in (claim.note, claim.partial or "") if x), runs,
                             emu_verdict, twin_verdict(verdict, emu_verdict), emu_runs))
    if progress:
        progress(len(claims), len(claims), "done")
    return rows


COLOURS = {"holds": "#d7f5d7", "does not hold": "#f8d4d4", "partly": "#fdf0c2"}
TWIN_COLOURS = {AGREE: "#d7f5d7", DIFFER: "#f8d4d4"}


def write_report(rows: list[ClaimRow], out: Path = OUT_DIR) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / TABLE).write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    head = "".join(f"<th>{h}</th>" for h in ("claim", "the seed's figure", "ours, simulated", "ours, emulated",
                                              "verdict (simulated)", "verdict (emulated)", "twin"))
    body = []
    for r in rows:
        colour = COLOURS.get(r.verdict, "#eeeeee")
        body.append(
            "<tr>"
            f"<td><b>{html.escape(r.claim)}</b><br><small>{html.escape(r.name)}.yaml</small></td>"
            f"<td>{html.escape(r.seed_figure)}<br><small><i>“{html.escape(r.quote)}”</i> "
            f"({html.escape(r.source)})</small></td>"
            f"<td>{html.escape(r.simulated)}<br><small>{r.runs} runs; {html.escape(r.note)}</small></td>"
            f"<td>{html.escape(r.emulated)}<br><small>{r.emulated_runs} runs</small></td>"
            f"<td style='background:{colour}'>{html.escape(r.verdict)}</td>"
            f"<td style='background:{COLOURS.get(r.emulated_verdict, '#eeeeee')}'>"
            f"{html.escape(r.emulated_verdict)}</td>"
            f"<td style='background:{TWIN_COLOURS.get(r.twin, '#eeeeee')}'>{html.escape(r.twin)}</td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>rmptwin: the seeds' claims</title>"
            "<style>body{font-family:sans-serif}td,th{border:1px solid #bbb;padding:6px;vertical-align:top}"
            "table{border-collapse:collapse}</style><h1>The seeds' claims beside the twin</h1>"
            "<p>Each row is one sweep (experiments/claims/&lt;name&gt;.yaml); figures are means over seeds. "
            "The emulated sweep is the claim's smaller one (`rmptwin claims --emulated`), judged by the same rule; "
            "twin: whether the simulated and emulated verdicts agree. "
            f"Sweeps are in {html.escape(str(out.resolve()))}/&lt;name&gt;/ (sim/ and emulated/).</p>"
            f"<table><tr>{head}</tr>{''.join(body)}</table>")
    path = out / REPORT
    path.write_text(page)
    return path
