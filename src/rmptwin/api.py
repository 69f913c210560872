"""rmptwin from Python: what the command line does, as functions and a ``Run`` object.

    import rmptwin.api as rt

    exp = rt.load_experiment("experiments/quickstart.yaml", {"protocol.delta_a_ms": 800})
    run = rt.simulate(exp, seed=2)                 # a Run: results/<experiment>/<run-id>
    run.summary["fairness_spread_ms"]["p99"]
    run.events()                                   # pandas; run.events_arrow() for Arrow
    run.drops(), run.counts()                      # the ground-truth drop log, link counts
    run.releases()                                 # per release: latency; per message: fairness
    run.first_copies(), run.minc()                 # who heard each packet first-hand; MINC per link
    report = rt.analyze(run)                       # Spark: metrics.json, report.html
    run.metrics["headline"]
    sw = rt.sweep(exp, {"protocol.delta_a_ms": [200, 800]}, seeds=2)
    sw.table                                       # pandas, one row per (point, seed)

Overrides are sweep's ``--set`` keys (``rmptwin.sweeps.points``): dotted paths into the
experiment as its YAML spells them (``protocol.delta_a_ms``, ``faults.0.at_s``), or into its
topology with a ``topology.`` prefix (``topology.links.0.loss``); the result is validated as
the YAML file would be. Bad input raises ``rmptwin.errors.UserError`` with the same one line
the command line prints; nothing here prints, and every file goes where the command line
puts it (``rundir.RunDir`` owns a run's files).
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rmptwin.errors import UserError
from rmptwin.runs.experiment import EmulationOptions, run_experiment
from rmptwin.rundir.run import RunDir
from rmptwin.spec import LoadedExperiment, Topology, read_yaml
from rmptwin.spec import load_experiment as _load_experiment
from rmptwin.spec import load_topology as _load_topology
from rmptwin.sweeps.points import assign, make_point

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["UserError", "EmulationOptions", "Run", "Comparison", "SweepResult", "load", "load_experiment",
           "load_topology", "simulate", "emulate", "open_run", "analyze", "compare", "sweep"]


# ----------------------------------------------------------------------------- loading


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedExperiment:
    """An experiment YAML with its topology, validated; ``overrides`` as sweep's ``--set``."""
    loaded = _load_experiment(path)
    return make_point(loaded, dict(overrides)).loaded if overrides else loaded


def load_topology(path: str | Path, overrides: dict[str, Any] | None = None) -> Topology:
    """A topology YAML, validated; ``overrides``: dotted paths into it (``links.0.loss``)."""
    topo = _load_topology(path)
    if not overrides:
        return topo
    from pydantic import ValidationError

    doc = topo.model_dump(mode="json")
    for key, value in overrides.items():
        assign(doc, key, value, "the topology")
    try:
        return Topology.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"--set {', '.join(f'{k}={v}' for k, v in overrides.items())}: {where}: "
                        f"{first['msg'].removeprefix('Value error, ')}") from None


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedExperiment | Topology:
    """Whichever ``path`` is: an experiment (it names a topology) or a topology (what
    `rmptwin validate` checks)."""
    data, _ = read_yaml(Path(path))
    if "topology" in data:
        return load_experiment(path, overrides)
    return load_topology(path, overrides)


def _experiment(experiment: LoadedExperiment | str | Path, overrides: dict | None) -> LoadedExperiment:
    if isinstance(experiment, LoadedExperiment):
        return make_point(experiment, dict(overrides)).loaded if overrides else experiment
    return load_experiment(experiment, overrides)


# ----------------------------------------------------------------------------- runs


class Run:
    """One run directory (written by the simulator or the emulation) and what it holds."""

    def __init__(self, path: str | Path) -> None:
        self.dir = RunDir(path)
        self.dir.check()   # a UserError naming the path if it is no run directory

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def path(self) -> Path:
        return self.dir.path

    @property
    def summary(self) -> dict:
        """summary.json: the headline figures (``analysis.summary`` defines each)."""
        return self.dir.read_summary()

    @property
    def manifest(self) -> dict:
        """manifest.json: the resolved experiment and topology, seed, backend, environment."""
        return self.dir.read_manifest()

    def events_arrow(self) -> pa.Table:
        """The event log (``tables.EVENT_SCHEMA``) as an Arrow table."""
        return self.dir.read_events()

    def events(self) -> "pd.DataFrame":
        """The event log as pandas: one row per protocol event (t_ns, node, kind, src, ...)."""
        return self.events_arrow().to_pandas()

    def drops(self) -> "pd.DataFrame":
        """Ground truth: one row per packet lost on a link (``tables.DROP_SCHEMA``)."""
        return self.dir.read_drops().to_pandas()

    def counts(self) -> "pd.DataFrame":
        """Per link direction and frame type, packets offered and dropped."""
        return self.dir.read_link_counts().to_pandas()

    @property
    def experiment(self) -> LoadedExperiment:
        """The experiment and topology this run ran, as its manifest recorded them (resolved,
        every default filled: what `rmptwin rerun` repeats), not the YAML files of today."""
        from rmptwin.runs.rerun import loaded_from_manifest

        return loaded_from_manifest(self.manifest, str(self.dir.manifest_path))

    def releases(self) -> "pd.DataFrame":
        """One row per release by a primary or secondary (node, stripe, src, src_seq, gseq,
        send_ns, release_ns, latency_ms, operable): summary.json's ``delivery_latency_ms`` is
        the percentiles of ``latency_ms``, its ``fairness_spread_ms`` those of each message's
        latest minus earliest ``release_ns`` over the operable rows (``analysis.summary``)."""
        from rmptwin.analysis.summary import release_table

        return release_table(self.events(), self.experiment)

    def first_copies(self) -> "pd.DataFrame":
        """One row per (packet, receiver that expected it): src, stripe, src_seq, node, send_ns,
        received, first (it heard the packet's first copy, not a repair or the source's
        re-send): the per-receiver losses that loss correlation and MINC read
        (``analysis.link_loss.fates``, the same words as `rmptwin analyze`)."""
        from rmptwin.analysis.link_loss import fates

        return fates(self.events(), self.experiment)

    def minc(self) -> "pd.DataFrame":
        """MINC loss inference, without Spark: one row per logical link of every (source, stripe)
        multicast tree (src, stripe, link, packets, gamma, estimate, configured, truth). truth is
        the first copies the run's drop log lost on the link over those that reached it (None
        without a drop log); `rmptwin analyze` gives the same estimates (``analysis.link_loss``)."""
        import pandas as pd

        from rmptwin.analysis.link_loss import fates, minc_rows

        loaded = self.experiment
        drops = self.dir.read_drops() if self.dir.drops_path.exists() else None
        rows = minc_rows(fates(self.events(), loaded), loaded, drops)
        return pd.DataFrame(rows, columns=["src", "stripe", "link", "packets", "gamma", "estimate", "configured",
                                           "truth"])

    @property
    def analysed(self) -> bool:
        return self.dir.metrics_path.exists()

    @property
    def metrics(self) -> dict | None:
        """metrics.json of the Spark analysis, None before ``analyze``."""
        return self.dir.read_metrics() if self.analysed else None

    @property
    def report_path(self) -> Path | None:
        """report.html of the Spark analysis, None before ``analyze``."""
        return self.dir.report_path if self.dir.report_path.exists() else None

    def analyze(self, master: str | None = None, spark=None) -> Path:
        return analyze(self, master, spark)


def open_run(path: str | Path) -> Run:
    """A run directory already written (results/<experiment>/<run-id>)."""
    return Run(path)


def simulate(experiment: LoadedExperiment | str | Path, seed: int | None = None, out: str | Path | None = None,
             overrides: dict[str, Any] | None = None) -> Run:
    """`rmptwin sim`: run in the deterministic simulator; the run directory as a ``Run``."""
    outcome = run_experiment(_experiment(experiment, overrides), "sim", seed=seed, out=out)
    return Run(outcome.run_dir.path)


def emulate(experiment: LoadedExperiment | str | Path, seed: int | None = None, out: str | Path | None = None,
            overrides: dict[str, Any] | None = None, options: EmulationOptions | None = None) -> Run:
    """`rmptwin run`: the emulated network (as root; see `rmptwin env` for what this machine offers)."""
    outcome = run_experiment(_experiment(experiment, overrides), "emulation", seed=seed, out=out,
                             options=options or EmulationOptions())
    return Run(outcome.run_dir.path)


def _runs(*runs: Run | str | Path) -> list[Run]:
    return [r if isinstance(r, Run) else Run(r) for r in runs]


def analyze(run: Run | str | Path, master: str | None = None, spark=None) -> Path:
    """`rmptwin analyze`: the Spark analysis (embedded, or on ``master``); report.html's path.
    ``spark``: a SparkSession to use (and leave running) instead of starting one for the call."""
    from rmptwin.analysis.job import analyze as run_analysis
    from rmptwin.analysis.session import spark_session

    (r,) = _runs(run)
    if spark is not None:
        return run_analysis(spark, r.path, console=_quiet())
    session = spark_session(master)
    try:
        return run_analysis(session, r.path, console=_quiet())
    finally:
        session.stop()


def _quiet():
    """A console that writes into a string: plain text, also in Jupyter (where rich would
    otherwise print into the notebook instead of the file it was given)."""
    from rich.console import Console

    return Console(file=io.StringIO(), width=200, force_jupyter=False, force_terminal=False, color_system=None)


@dataclass(frozen=True)
class Comparison:
    html: Path | None      # the side-by-side page (None with analyze=False)
    passed: bool | None    # the twin verdict (None with verdict=False)
    text: str              # what `rmptwin compare` prints
    rules: "pd.DataFrame | None" = None   # the verdict, one row per rule: metric a b tolerance status note


def compare(sim_run: Run | str | Path, emu_run: Run | str | Path, html: str | Path | None = None,
            verdict: bool = True, analyze_missing: bool = True, master: str | None = None) -> Comparison:
    """`rmptwin compare`: two runs side by side (analysing either first if it has no metrics)
    and the twin verdict of B against A."""
    import pandas as pd

    from rmptwin.analysis.compare import compare as compare_runs
    from rmptwin.analysis.compare import verdict_line, verdict_rules, verdict_table
    from rmptwin.analysis.twin_verdict import passed

    a, b = _runs(sim_run, emu_run)
    if not analyze_missing and not verdict:
        raise UserError("analyze_missing=False with verdict=False leaves nothing to compare")
    console = _quiet()
    rules = verdict_rules(a.path, b.path) if verdict else None
    page = None
    if analyze_missing:
        for r in (a, b):
            if not r.analysed:
                analyze(r, master)
        page = compare_runs(a.path, b.path, Path(html) if html else None, console=console, rules=rules)
    if rules is None:
        return Comparison(page, None, console.file.getvalue())
    console.print(verdict_table(rules))
    console.print(verdict_line(rules), highlight=False)
    table = pd.DataFrame([asdict(r) for r in rules], columns=["metric", "a", "b", "tolerance", "status", "note"])
    return Comparison(page, passed(rules), console.file.getvalue(), table)


# ----------------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class SweepResult:
    path: Path              # the sweep directory (sweep.parquet, sweep.html)
    table: "pd.DataFrame"   # one row per (point, seed): parameters, seed, every summary figure
    report_path: Path | None   # sweep.html (None with report=False)
    ran: int                # runs executed by this call (the rest were already in the table)
    skipped: int


def sweep(experiment: LoadedExperiment | str | Path, sets: dict[str, list], seeds: int = 3,
          master: str | None = None, out: str | Path | None = None, probes: list[str] | None = None,
          keep_runs: bool = False, backend: str = "sim", in_process: bool = False,
          report: bool = True) -> SweepResult:
    """`rmptwin sweep`: every combination of ``sets`` (key -> values), ``seeds`` seeds each
    (the experiment's seed, +1, ...); resumes in ``out`` like the command. ``in_process``: the
    simulated runs one after another in this process instead of as Spark tasks (no JVM to
    start: quicker for a few short runs, e.g. in a notebook); the rows are the same. ``report=False``
    skips sweep.html (a plot per metric: seconds) for a caller that draws its own."""
    from rmptwin.sweeps.sweep_report import write_outcome_report
    from rmptwin.sweeps.engine import SweepPlan, run_loop, run_sweep

    if backend not in ("sim", "emulation"):
        raise UserError(f"backend {backend!r}: choose sim or emulation")
    if not sets:
        raise UserError("give at least one key to sweep (e.g. {'protocol.delta_a_ms': [100, 200]})")
    loaded = _experiment(experiment, None)
    base_seed = loaded.experiment.seed
    plan = SweepPlan(loaded, {k: list(v) for k, v in sets.items()}, [base_seed + i for i in range(seeds)],
                     backend, list(probes or []), keep_runs)
    if in_process and backend != "sim":
        raise UserError("in_process=True runs simulated sweeps only; drop it for backend='emulation'")
    outcome = run_sweep(plan, out=out, master=master, runner=run_loop if in_process else None)
    page = Path(write_outcome_report(outcome)) if report else None
    return SweepResult(outcome.sweep.path, outcome.table.to_pandas(), page, outcome.ran, outcome.skipped)
