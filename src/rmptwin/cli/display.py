"""What the command line shows while an experiment runs and after: the progress bar and the
summary table. `rmptwin sim`, `rmptwin run` and `rmptwin rerun` share it; the simulator,
the runtime runner and ``rmptwin.api`` print nothing themselves."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rmptwin import api, corebuild
from rmptwin.analysis.sections import headline_sections
from rmptwin.core.groups import REGION_PORT, REREQUEST_PORT


@contextmanager
def counted_progress(console: Console, label: str, title: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A rich bar over ``total`` steps of one kind (``unit``: runs, seeds); yields ``progress(done,
    total)``. The bar shows from the first call until done reaches total, so the work around it
    (the analysis's own bars in `rmptwin compare`) may show its own: rich runs one at a time."""
    columns = (TextColumn(f"[bold]{label}[/] {{task.description}}"), BarColumn(), MofNCompleteColumn(),
               TextColumn(unit), TimeElapsedColumn())
    bar = Progress(*columns, console=console, transient=True)
    task = bar.add_task(title, total=None)

    def progress(done: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=min(done, total), total=total)
        if done >= total:
            bar.stop()

    try:
        yield progress
    finally:
        bar.stop()


HEADLINE_KEYS = ("receivers", "agreement", "messages_sent", "messages_delivered_min", "messages_lost",
                 "control_per_data", "delivery_latency_ms", "fairness_spread_ms", "reformation_ms", "customers")
VENUE_KEYS = ("ev_agreement", "trades_lost", "sync_ms", "max_gap", "latency_ms")

@contextmanager
def progress_bar(console: Console, loaded: api.LoadedExperiment, backend: str) -> Iterator[api.ProgressFn]:
    """A transient bar over the experiment's duration; yields the ``progress(fraction, what)``
    callback ``api.simulate``, ``api.emulate`` and ``api.rerun`` take. Where the console is not
    a terminal (CI's log, a pipe, the VM's serial console), plain lines instead (``_progress_lines``)."""
    duration = loaded.duration_s
    if not console.is_terminal:
        yield _progress_lines(console, loaded.experiment.name, duration, backend)
        return
    if backend == "sim":
        columns = (TextColumn("[bold]simulating[/] {task.description}"), BarColumn(),
                   TextColumn("{task.completed:.2f}/{task.total:.2f} s simulated"), TimeElapsedColumn())
    else:
        columns = (TextColumn("[bold]emulating[/] {task.description}"), BarColumn(),
                   TextColumn("{task.fields[what]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(loaded.experiment.name, total=duration, what="")

        def progress(fraction: float, what: str) -> None:
            shown = f"{fraction * duration:.1f}/{duration:.1f} s" if what == "running" else what
            bar.update(task, completed=fraction * duration, what=shown)

        yield progress


def _progress_lines(console: Console, name: str, duration: float, backend: str) -> api.ProgressFn:
    """Progress as lines, for a console no bar can redraw: a line when a phase of an emulated
    run begins (bringing the network up, nodes ready, running, draining, ...), for each tenth of
    the duration, and at most every 10 s within a phase whose count moves (nodes ready 7/31),
    each with the wall seconds since the start. A transient bar there would show nothing for
    minutes."""
    verb = "simulating" if backend == "sim" else "emulating"
    t0 = time.monotonic()
    last: dict[str, Any] = {"phase": None, "tenth": -1, "at": t0}

    def progress(fraction: float, what: str) -> None:
        now, tenth = time.monotonic(), int(fraction * 10)
        phase = re.sub(r"[\d.]+", "#", what.split(":")[0])
        if phase == last["phase"] and tenth == last["tenth"] and now - last["at"] < 10:
            return
        last.update(phase=phase, tenth=tenth, at=now)
        shown = f"{fraction * duration:.1f}/{duration:.1f} s" if what in ("running", "") else what
        console.print(f"{verb} {name}: {shown} ({now - t0:.0f} s)", highlight=False)

    return progress


def _shown(val: object) -> str:
    if isinstance(val, float):
        return f"{val:.3f}"
    if isinstance(val, dict):
        return ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in val.items())
    if isinstance(val, list):
        if val and isinstance(val[0], dict) and "ratio" in val[0]:   # live_throughput_ratio
            return ", ".join(f"{v['live']} {v['ratio']:.2f} over {v['window_ms']:.0f} ms" for v in val)
        return ", ".join(f"{v:.0f}" for v in val) or "-"
    return str(val)


def _rounded(val: object) -> str:
    """A measured figure as a line shows it: a float to one decimal (a percentile of run-queue
    samples is 9.299999999999997 as computed), two significant digits below 1 (0.042 ms, not
    0.0), anything else as it is."""
    if not isinstance(val, float):
        return str(val)
    return f"{val:.1f}" if abs(val) >= 1 or val == 0 else f"{val:.2g}"


def summary_table(s: dict[str, Any], title: str = "summary") -> Table:
    """The headline figures of a summary as a rich table (the backend adds its own last row)."""
    table = Table(title=title, show_header=False)
    # A venue-only run has no ticker: its rows would be empty (receivers 0, p50 None).
    ticker = HEADLINE_KEYS if s.get("receivers") or not any(k in s for k in VENUE_KEYS) else ()
    venue = VENUE_KEYS + ("live_throughput_ratio",) if "sync_ms" in s else VENUE_KEYS
    for key in ticker + tuple(k for k in venue if k in s):
        table.add_row(key, _shown(s.get(key)))
    return table


def applications_table(s: dict[str, Any]) -> Table | None:
    """The applications' headline rows (each section's ``headline``), None when no section has any."""
    sections = headline_sections(s)
    if not sections:
        return None
    table = Table(title="applications", show_header=False)
    for name, rows in sections:
        for i, (label, val) in enumerate(rows):
            table.add_row(name if i == 0 else "", label, _shown(val))
    return table


def _print_tables(console: Console, table: Table, s: dict[str, Any]) -> None:
    console.print(table)
    apps = applications_table(s)
    if apps is not None:
        console.print(apps)


def print_sim_summary(console: Console, run: api.Run) -> None:
    """`rmptwin sim`: the summary with the simulator's own figures, and where the run is."""
    s = run.summary
    table = summary_table(s)
    st = run.stats
    assert st is not None   # a simulated run has the simulator's stats
    rate = st["scheduler_events"] / st["wall_s"] if st["wall_s"] > 0 else 0.0
    table.add_row("simulator", f"{st['scheduler_events']:,} events, {st['deliveries']:,} deliveries "
                                f"in {st['wall_s']:.1f} s ({rate:,.0f} events/s, {corebuild.ACTIVE.kind} cores)")
    _print_tables(console, table, s)
    _print_captures(console, run)
    console.print(f"run directory: {run.path}")


def _print_captures(console: Console, run: api.Run) -> None:
    """Where the run's pcaps are and how to decode them (wireshark/rmp.lua for RMP)."""
    pcaps = run.dir.pcap_files()
    if pcaps:
        console.print(f"captures: {len(pcaps)} in {run.dir.pcaps_dir} (tshark -X lua_script:wireshark/rmp.lua "
                      f"-r FILE -d udp.port=={REGION_PORT},moldudp64 -d udp.port=={REREQUEST_PORT},moldudp64)",
                      soft_wrap=True)


def print_emulation_summary(console: Console, run: api.Run) -> None:
    """`rmptwin run`: the summary with the runtime's figures, the captures and where the run is."""
    s = run.summary
    table = summary_table(s, title="summary (emulation)")
    figures = s.get("runtime", {})
    drained = f", drained {figures['drain_s']} s past the duration" if figures.get("drain_s", 0) >= 1 else ""
    table.add_row("runtime", f"{figures.get('nodes')} nodes, {_rounded(figures.get('wall_s'))} s wall{drained}")
    table.add_row("time dilation", dilation_line(figures))
    if figures.get("outstanding"):
        console.print(f"[yellow]not quiescent after the drain cap: {figures['outstanding']}[/yellow]")
    if figures.get("overloaded"):
        load = figures.get("load", {})
        queue, late = _rounded(load.get("run_queue", {}).get("p90")), _rounded(load.get("timer_lateness_p99_ms"))
        console.print(f"[yellow]machine overloaded (run queue p90 {queue} on {load.get('cpus')} CPUs, "
                      f"{load.get('timer_lateness_role')} timers {late} ms late at p99, as timer_lateness_ms in the "
                      "summary): latency and fairness figures are distorted by this machine, not the protocol[/yellow]",
                      soft_wrap=True)  # one line, however narrow the terminal
    _print_tables(console, table, s)
    _print_captures(console, run)
    console.print(f"run directory: {run.path}")


def dilation_line(runtime: dict[str, Any]) -> str:
    """The factor a run ran at, how it was chosen, and its busy CPUs beside the plan's."""
    tdf = runtime.get("time_dilation") or 1.0
    plan = runtime.get("time_dilation_plan") or {}
    load = runtime.get("load") or {}
    how = "auto" if plan.get("requested") == "auto" else "given"
    busy = load.get("busy_cpus")
    parts = [f"{tdf:g} ({how})"]
    if busy is not None:
        planned = plan.get("predicted_busy_cpus")
        parts.append(f"{busy:.2f} of {load.get('cpus')} CPUs busy" + (f", {planned:.2f} planned" if planned is not None
                                                                      else ", no calibration to plan against"))
    parts.append("overloaded" + (f": {plan['enough_tdf']:g} would have been enough" if plan.get("enough_tdf") else "")
                 if runtime.get("overloaded") else "on time")
    return "; ".join(parts)


def print_summary(console: Console, run: api.Run) -> None:
    if run.backend == "sim":
        print_sim_summary(console, run)
    else:
        print_emulation_summary(console, run)
