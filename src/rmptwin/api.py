"""rmptwin from Python: what the command line does, as functions and a ``Run`` object.

    from rmptwin import api

    exp = api.load_experiment("experiments/quickstart.yaml", {"protocol.delta_a_ms": 800})
    run = api.simulate(exp, seed=2)                 # a Run: results/<experiment>/<run-id>
    run.summary["fairness_spread_ms"]["p99"]
    run.events()                                   # pandas; run.events_arrow() for Arrow
    run.drops(), run.counts()                      # the ground-truth drop log, link counts
    run.releases()                                 # per release: latency; per message: fairness
    run.first_copies(), run.minc()                 # who heard each packet first-hand; MINC per link
    report = api.analyze(run)                       # Spark: metrics.json, report.html
    run.metrics["headline"]
    sw = api.sweep(exp, {"protocol.delta_a_ms": [200, 800]}, seeds=2)
    sw.table                                       # pandas, one row per (point, seed)

Overrides are sweep's ``--set`` keys (``rmptwin.model.overrides``): dotted paths into the
experiment as its YAML spells them (``protocol.delta_a_ms``, ``faults.0.at_s``), or into its
topology with a ``topology.`` prefix (``topology.links.0.loss``); the result is validated as
the YAML file would be. Bad input raises ``rmptwin.errors.UserError`` with the same one line
the command line prints; nothing here prints unless handed a ``console`` or a ``progress``
callback (what the command line does: it is a thin layer over these functions), and every
file goes where the command line puts it (``rundir.RunDir`` owns a run's files).
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pyarrow as pa

from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment, Topology, read_yaml
from rmptwin.model import load_experiment as _load_experiment
from rmptwin.model import load_topology as _load_topology
from rmptwin.model.overrides import assign, dilated, make_point, time_dilation_value
from rmptwin.rundir.run import RunDir
from rmptwin.runner.pipeline import EmulationOptions, ProgressFn, RunOutcome, run_experiment

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession
    from rich.console import Console

    from rmptwin.planning.calibration import Calibration
    from rmptwin.planning.demand import Demand
    from rmptwin.planning.plan import Prediction
    from rmptwin.runner.rerun import Replay

__all__ = ["UserError", "EmulationOptions", "ProgressFn", "LoadedExperiment", "Topology", "Run", "Comparison",
           "SweepResult", "load", "load_experiment", "load_topology", "parse_sets", "with_overrides", "simulate",
           "emulate", "servers", "check_servers", "placement", "replay_of", "rerun", "open_run", "spark_session", "analyze", "compare", "sweep"]


# ----------------------------------------------------------------------------- loading


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedExperiment:
    """An experiment YAML with its topology, validated; ``overrides`` as sweep's ``--set``."""
    return with_overrides(_load_experiment(path), overrides)


def with_overrides(experiment: LoadedExperiment, overrides: dict[str, Any] | None) -> LoadedExperiment:
    """``experiment`` with ``overrides`` (key -> one value, as sweep's ``--set`` names the key)
    applied and validated as the YAML file would be; ``experiment`` itself is left as it was."""
    return make_point(experiment, dict(overrides)).loaded if overrides else experiment


def parse_sets(texts: list[str]) -> dict[str, list[Any]]:
    """``KEY=V1,V2,...`` strings as ``--set`` spells them: key -> its values, each read as a
    YAML scalar (``200`` an int, ``true`` a bool); a UserError for a malformed one or a key
    given twice. What `rmptwin sweep` and `rmptwin sim --set` read their options with."""
    from rmptwin.model.overrides import parse_sets as parse

    return parse(list(texts))


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


def _experiment(experiment: LoadedExperiment | str | Path, overrides: dict[str, Any] | None) -> LoadedExperiment:
    if isinstance(experiment, LoadedExperiment):
        return with_overrides(experiment, overrides)
    return load_experiment(experiment, overrides)


# ----------------------------------------------------------------------------- runs


class Run:
    """One run directory (written by the simulator or the emulation) and what it holds."""

    # The backend's counters, for a run made by this process (simulate, emulate, rerun): the
    # simulator's scheduler_events, deliveries and wall_s, or the emulation's runtime figures
    # (also the summary's "runtime"); None for a run opened from disk.
    stats: dict[str, Any] | None = None
    _computed: dict[str, Any] | None = None   # the summary as this process computed it (see ``summary``)

    def __init__(self, path: str | Path, check: bool = True) -> None:
        self.dir = RunDir(path)
        if check:
            self.dir.check()   # a UserError naming the path if it is no run directory

    @classmethod
    def _made(cls, outcome: RunOutcome) -> Run:
        run = cls(outcome.run_dir.path)
        run.stats, run._computed = outcome.stats, outcome.summary
        return run

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def path(self) -> Path:
        return self.dir.path

    @property
    def summary(self) -> dict[str, Any]:
        """summary.json: the headline figures (``analysis.summary`` defines each). For a run
        made by this process, the same figures in the order ``summarize`` gave them (the file
        sorts its keys), which is the order the command line prints them in."""
        if self._computed is not None:
            return copy.deepcopy(self._computed)
        return self.dir.read_summary()

    @property
    def manifest(self) -> dict[str, Any]:
        """manifest.json: the resolved experiment and topology, seed, backend, environment."""
        return self.dir.read_manifest()

    @property
    def backend(self) -> str:
        """"sim" or "emulation", as the manifest records it."""
        backend: str = self.manifest.get("backend", "")
        return backend

    def events_arrow(self) -> pa.Table:
        """The event log (``tables.EVENT_SCHEMA``) as an Arrow table."""
        return self.dir.read_events()

    def events(self) -> pd.DataFrame:
        """The event log as pandas: one row per protocol event (t_ns, node, kind, src, ...)."""
        return self.events_arrow().to_pandas()

    def drops(self) -> pd.DataFrame:
        """Ground truth: one row per packet lost on a link (``tables.DROP_SCHEMA``)."""
        return self.dir.read_drops().to_pandas()

    def counts(self) -> pd.DataFrame:
        """Per link direction and frame type, packets offered and dropped."""
        return self.dir.read_link_counts().to_pandas()

    @property
    def experiment(self) -> LoadedExperiment:
        """The experiment and topology this run ran, as its manifest recorded them (resolved,
        every default filled: what `rmptwin rerun` repeats), not the YAML files of today."""
        from rmptwin.runner.rerun import loaded_from_manifest

        return loaded_from_manifest(self.manifest, str(self.dir.manifest_path))

    def releases(self) -> pd.DataFrame:
        """One row per release by a primary or secondary (node, stripe, src, src_seq, gseq,
        send_ns, release_ns, latency_ms, operable): summary.json's ``delivery_latency_ms`` is
        the percentiles of ``latency_ms``, its ``fairness_spread_ms`` those of each message's
        latest minus earliest ``release_ns`` over the operable rows (``analysis.summary``)."""
        from rmptwin.analysis.summary import release_table

        return release_table(self.events(), self.experiment)

    def first_copies(self) -> pd.DataFrame:
        """One row per (packet, receiver that expected it): src, stripe, src_seq, node, send_ns,
        received, first (it heard the packet's first copy, not a repair or the source's
        re-send): the per-receiver losses that loss correlation and MINC read
        (``analysis.link_loss.fates``, the same words as `rmptwin analyze`)."""
        from rmptwin.analysis.link_loss import fates

        return fates(self.events(), self.experiment)

    def minc(self) -> pd.DataFrame:
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
    def metrics(self) -> dict[str, Any] | None:
        """metrics.json of the Spark analysis, None before ``analyze``."""
        return self.dir.read_metrics() if self.analysed else None

    @property
    def report_path(self) -> Path | None:
        """report.html of the Spark analysis, None before ``analyze``."""
        return self.dir.report_path if self.dir.report_path.exists() else None

    def analyze(self, master: str | None = None, spark: SparkSession | None = None) -> Path:
        return analyze(self, master, spark)


def open_run(path: str | Path, check: bool = True) -> Run:
    """A run directory already written (results/<experiment>/<run-id>). ``check=False`` reads
    nothing yet (``rerun`` needs its manifest only, not its event files)."""
    return Run(path, check)


def simulate(experiment: LoadedExperiment | str | Path, seed: int | None = None, out: str | Path | None = None,
             overrides: dict[str, Any] | None = None, progress: ProgressFn | None = None,
             pcap: bool = False) -> Run:
    """`rmptwin sim`: run in the deterministic simulator; the run directory as a ``Run``.
    ``progress(fraction, what)``: called as the simulated time advances (the command's bar).
    ``pcap`` (`--pcap`): every host's packets in ``run.dir.pcap_files()`` too, laid out as an
    emulated run's captures (``sim.pcap``)."""
    outcome = run_experiment(_experiment(experiment, overrides), "sim", seed=seed, out=out, progress=progress,
                             pcap=pcap)
    return Run._made(outcome)


def emulate(experiment: LoadedExperiment | str | Path, seed: int | None = None, out: str | Path | None = None,
            overrides: dict[str, Any] | None = None, options: EmulationOptions | None = None,
            progress: ProgressFn | None = None, time_dilation: float | Literal["auto"] | None = None,
            say: Callable[[str], None] | None = None) -> Run:
    """`rmptwin run`: the emulated network (as root; see `rmptwin env` for what this machine offers).
    ``progress(fraction, what)``: called as the network comes up and the run goes on.
    ``time_dilation`` (`--tdf`): the time dilation factor, a number >= 1 or "auto" (the smallest
    factor this host needs, planned before the run: ``plan``); None: the experiment's own
    ``time_dilation``. ``say(line)``: hears what ``auto`` chose (and a first calibration's steps)."""
    if time_dilation is not None and overrides and "time_dilation" in overrides:
        raise UserError("time_dilation and overrides['time_dilation'] both given: give one")
    loaded = dilated(_experiment(experiment, overrides), time_dilation)
    outcome = run_experiment(loaded, "emulation", seed=seed, out=out, options=options or EmulationOptions(),
                             progress=progress, say=say)
    return Run._made(outcome)


@dataclass(frozen=True)
class Plan:
    """`rmptwin plan`: what an emulated run of an experiment would ask of this host."""

    experiment: LoadedExperiment
    calibration: Calibration          # this host's costs (planning.calibration)
    calibration_path: Path
    demand: Demand                    # the simulator's count of the run's work per virtual second
    chosen: Prediction                # the smallest factor on time (planning.plan.choose)

    def at(self, factor: float) -> Prediction:
        """The prediction at another factor."""
        from rmptwin.planning.plan import predict

        return predict(self.demand, self.calibration, factor)


def servers(text: str) -> tuple[tuple[str, ...], str | None]:
    """``--servers`` as given: a,b[,c] or a servers file (``model.servers_file``: FILE.yaml
    with ``servers:`` and optionally ``placement:``); the names and the file's placement (None
    for a list). Fewer than two servers is one UserError line: one server is this machine."""
    from rmptwin.model.servers_file import is_servers_file, load_servers

    if is_servers_file(text):
        listed = load_servers(text.strip())
        return tuple(listed.servers), listed.placement
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if len(names) == 1:
        raise UserError(f"--servers {names[0]}: give two or more servers (without --servers the run is on this machine)")
    return names, None


def check_servers(names: Sequence[str]) -> None:
    """That each of ``names`` is a server a run can use (up, reachable as root with the
    cluster key, its packages and this checkout there), or one UserError line saying what to
    fix: what `rmptwin run --servers` checks before it prints a placement over them."""
    from rmptwin.emulation.servers import resolve

    resolve(list(names))


def placement(experiment: LoadedExperiment | str | Path, servers: Sequence[str], how: str = "regions") -> list[str]:
    """Where a run over ``servers`` puts each switch (its hosts and relays beside it), a server
    a line, then the links cut between servers: what `rmptwin run --servers` prints first and
    the manifest's ``placement`` records (docs/cluster.md)."""
    from rmptwin.emulation.placement import place

    loaded = _experiment(experiment, None)
    return place(loaded.topology, list(servers), how).lines(loaded.topology)


def plan(experiment: LoadedExperiment | str | Path, overrides: dict[str, Any] | None = None,
         options: EmulationOptions | None = None, recalibrate: bool = False,
         say: Callable[[str], None] | None = None) -> Plan:
    """`rmptwin plan`: the time dilation factor ``experiment`` needs on this host, without running
    it. Calibrates the host first when it has no calibration for ``options`` (five emulated runs:
    the quickstart and line3 at two factors each, the venue at one; about seven minutes; as root) or when ``recalibrate``."""
    from rmptwin.planning.calibration import cache_path
    from rmptwin.planning.demand import simulated_demand
    from rmptwin.planning.plan import choose
    from rmptwin.runner.calibrate import calibration_for

    options = options or EmulationOptions()
    loaded = _experiment(experiment, overrides).with_time_dilation(1.0)
    cal = calibration_for(options, say or (lambda _: None), recalibrate=recalibrate)
    demand = simulated_demand(loaded)
    return Plan(loaded, cal, cache_path(cal.identity), demand, choose(demand, cal))


def measure_dilation(experiment: LoadedExperiment | str | Path, factors: Sequence[float | str],
                     out: str | Path, overrides: dict[str, Any] | None = None,
                     options: EmulationOptions | None = None,
                     say: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """`rmptwin plan --measure`: ``experiment`` simulated once and emulated at each of ``factors``
    into ``out`` (sim/, tdf-N/), one row per factor beside its plan (wall time, busy CPUs,
    timer lateness, overloaded, the twin verdict); ladder.json and ladder.png in ``out``."""
    from rmptwin.runner.dilation_ladder import measure_ladder

    values = [time_dilation_value(f, f"time dilation factor {f}") for f in factors]
    return measure_ladder(_experiment(experiment, overrides), values, Path(out), options or EmulationOptions(),
                          say or (lambda _: None))


def _unchecked(run: Run | str | Path) -> Run:
    return run if isinstance(run, Run) else Run(run, check=False)


def replay_of(run: Run | str | Path) -> Replay:
    """How ``rerun`` repeats ``run``: the experiment and topology its manifest recorded (resolved,
    every default filled), the seed, the backend and, emulated, the node mode, the impairment
    actually used and the hosts captured; a UserError if the manifest cannot be repeated."""
    from rmptwin.runner.rerun import replay_from_manifest

    r = _unchecked(run)
    return replay_from_manifest(r.manifest, str(r.dir.manifest_path))


def rerun(run: Run | str | Path, out: str | Path | None = None, progress: ProgressFn | None = None) -> Run:
    """`rmptwin rerun`: ``run`` again from its manifest alone (``replay_of``), into a new run
    directory (default results/<experiment>/<run-id>) whose manifest names the run it repeats."""
    from rmptwin.runner.rerun import repeat

    r = _unchecked(run)
    return Run._made(repeat(replay_of(r), r.dir, out, progress))


def _runs(*runs: Run | str | Path) -> list[Run]:
    return [r if isinstance(r, Run) else Run(r) for r in runs]


@contextmanager
def spark_session(master: str | None = None) -> Iterator[SparkSession]:
    """A SparkSession (embedded local[2], or on ``master``) for several ``analyze`` calls,
    stopped when the ``with`` block ends: ``with api.spark_session() as s: api.analyze(run, spark=s)``."""
    from rmptwin.analysis.session import spark_session as start

    session = start(master)
    try:
        yield session
    finally:
        session.stop()


def analyze(run: Run | str | Path, master: str | None = None, spark: SparkSession | None = None,
            console: Console | None = None) -> Path:
    """`rmptwin analyze`: the Spark analysis (embedded, or on ``master``); report.html's path.
    ``spark``: a SparkSession to use (and leave running) instead of starting one for the call.
    ``console``: a rich Console to show the analysis's progress bar on (the command line's)."""
    from rmptwin.analysis.job import analyze as run_analysis

    (r,) = _runs(run)
    if spark is not None:
        return run_analysis(spark, r.path, console=console or _quiet())
    with spark_session(master) as session:
        return run_analysis(session, r.path, console=console or _quiet())


def _quiet() -> Console:
    """A console that writes into a string: plain text, also in Jupyter (where rich would
    otherwise print into the notebook instead of the file it was given)."""
    from rich.console import Console

    return Console(file=io.StringIO(), width=200, force_jupyter=False, force_terminal=False, color_system=None)


@dataclass(frozen=True)
class Comparison:
    html: Path | None      # the side-by-side page (None with analyze=False)
    passed: bool | None    # the twin verdict (None with verdict=False)
    text: str              # what `rmptwin compare` prints ("" when given a console: it went there)
    rules: pd.DataFrame | None = None   # the verdict, one row per rule: metric a b tolerance status note


def compare(sim_run: Run | str | Path, emu_run: Run | str | Path, html: str | Path | None = None,
            verdict: bool = True, analyze_missing: bool = True, master: str | None = None,
            console: Console | None = None, spread_seeds: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> Comparison:
    """`rmptwin compare`: two runs side by side (analysing either first if it has no metrics)
    and the twin verdict of B against A. ``console``: a rich Console to print on as the command
    does, the analyses' progress bars included (the command line's); ``text`` is then empty.
    ``spread_seeds``: where B keeps no drop log (netem), how many other seeds of A's experiment
    are simulated for the control-per-data rule (default ``SPREAD_SEEDS``; 0: not judged);
    ``progress(done, total)`` after each."""
    import pandas as pd

    from rmptwin.analysis.compare import compare as compare_runs
    from rmptwin.analysis.compare import print_verdict, verdict_rules

    a, b = _runs(sim_run, emu_run)
    if not analyze_missing and not verdict:
        raise UserError("analyze_missing=False with verdict=False leaves nothing to compare")
    out = console or _quiet()
    from rmptwin.analysis.seed_spread import SPREAD_SEEDS

    seeds = SPREAD_SEEDS if spread_seeds is None else spread_seeds
    if seeds < 0:
        raise UserError(f"spread_seeds: expected 0 or more, got {seeds}")
    rules = verdict_rules(a.path, b.path, seeds, progress) if verdict else None
    page = None
    if analyze_missing:
        todo = [r for r in (a, b) if not r.analysed]
        if todo:
            with spark_session(master) as session:   # one JVM for both
                for r in todo:
                    analyze(r, spark=session, console=console)
        page = compare_runs(a.path, b.path, out, Path(html) if html else None, rules)
        out.print(f"comparison: {page}", highlight=False)
    if rules is None:
        return Comparison(page, None, _printed(out, console))
    ok = print_verdict(rules, out)
    table = pd.DataFrame([asdict(r) for r in rules], columns=["metric", "a", "b", "tolerance", "status", "note"])
    return Comparison(page, ok, _printed(out, console), table)


def _printed(out: Console, given: Console | None) -> str:
    """What went into ``out``: the quiet console's text, or "" when it was the caller's."""
    return "" if given is not None else cast(io.StringIO, out.file).getvalue()   # _quiet's console


# ----------------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class SweepResult:
    path: Path              # the sweep directory (sweep.parquet, sweep.html)
    table: pd.DataFrame   # one row per (point, seed): parameters, seed, every summary figure
    report_path: Path | None   # sweep.html (None with report=False)
    ran: int                # runs executed by this call (the rest were already in the table)
    skipped: int
    text: str = ""          # what `rmptwin sweep` prints: runs, seconds, rows and the table's path

    def write_report(self) -> Path:
        """sweep.html of this sweep (what ``report=True`` writes), e.g. after ``report=False``."""
        from rmptwin.sweeps.sweep_report import write_sweep_report

        return Path(write_sweep_report(self.path, self.table))


def sweep(experiment: LoadedExperiment | str | Path, sets: dict[str, list[Any]], seeds: int = 3,
          master: str | None = None, out: str | Path | None = None, probes: list[str] | None = None,
          keep_runs: bool = False, backend: str = "sim", in_process: bool = False,
          report: bool = True, progress: Callable[[int, int], None] | None = None,
          time_dilation: float | Literal["auto"] | None = None, options: EmulationOptions | None = None) -> SweepResult:
    """`rmptwin sweep`: every combination of ``sets`` (key -> values), ``seeds`` seeds each
    (the experiment's seed, +1, ...); resumes in ``out`` like the command. ``in_process``: the
    simulated runs one after another in this process instead of as Spark tasks (no JVM to
    start: quicker for a few short runs, e.g. in a notebook); the rows are the same. ``report=False``
    skips sweep.html (a plot per metric: seconds) for a caller that draws its own.
    ``progress(done, total)``: called as runs finish (the command's bar). ``time_dilation``
    (`--tdf`): every emulated run's time dilation factor, a number >= 1 or "auto"; None: the
    experiment's own (the simulator ignores it; ``sets`` may sweep ``time_dilation`` instead).
    ``options``: how each emulated run runs (e.g. ``EmulationOptions(nodes="ns", servers=...)``
    for a sweep over several servers); the defaults where None."""
    from rmptwin.sweeps.sweep_loop import SweepPlan, describe, run_loop, run_sweep
    from rmptwin.sweeps.sweep_report import write_outcome_report

    if backend not in ("sim", "emulation"):
        raise UserError(f"backend {backend!r}: choose sim or emulation")
    if not sets:
        raise UserError("give at least one key to sweep (e.g. {'protocol.delta_a_ms': [100, 200]})")
    if time_dilation is not None:
        time_dilation_value(time_dilation, f"time_dilation={time_dilation!r}")
        if "time_dilation" in sets:
            raise UserError("time_dilation and a swept time_dilation both given: give one")
    loaded = _experiment(experiment, None)
    if backend == "emulation":
        loaded = dilated(loaded, time_dilation)
    base_seed = loaded.experiment.seed
    if options is not None and backend != "emulation":
        raise UserError("options are for emulated runs; give backend='emulation' or drop them")
    plan = SweepPlan(loaded, {k: list(v) for k, v in sets.items()}, [base_seed + i for i in range(seeds)],
                     backend, list(probes or []), keep_runs, options)
    if in_process and backend != "sim":
        raise UserError("in_process=True runs simulated sweeps only; drop it for backend='emulation'")
    outcome = run_sweep(plan, out=out, master=master, progress=progress, runner=run_loop if in_process else None)
    page = Path(write_outcome_report(outcome)) if report else None
    return SweepResult(outcome.sweep.path, outcome.table.to_pandas(), page, outcome.ran, outcome.skipped,
                       describe(outcome))
