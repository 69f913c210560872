"""The commands in the docs work as written, and what the docs say they show is what they show.

The shell blocks of README.md and of every lab's README are extracted and the quick, simulated
ones run in a temporary copy of the clone (experiments/, topologies/, labs/ and a .venv/bin
with this interpreter's rmptwin and python), as a student would paste them from the clone's
top directory. Each page's commands run once per session; then:

- every command exits 0 and every lab check line must PASS (every lab's checks on every
  simulated run and sweep its README makes);
- every figure a page quotes from those runs (``FIGURES``: the page's words, and what the
  runs give) is what the runs give: the simulator is deterministic, so a figure that moves
  is a page to update;
- the warning keys a lab's commands print are the keys its README explains, one bullet each
  (``- `key`: ...``) under "## Warnings you will see".

Not run: sudo, emulated runs (run, net), make, vagrant, and commands whose output is an HTML
report only (claims); `analyze` runs (it is what lab 2's check compares with).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICK = ("rmptwin validate", "rmptwin sim", "rmptwin sweep", "rmptwin analyze", "rmptwin venue timeline",
         "python labs/")
# The README's tour sweeps and claims stand for minutes of Spark; the labs' sweeps run below.
SLOW_IN_README = ("rmptwin claims", "rmptwin analyze results/qs-sim results/qs-emu", "rmptwin compare",
                  "rmptwin sweep experiments/")
WARNINGS_SECTION = "## Warnings you will see"


def shell_commands(markdown: str) -> list[str]:
    """Each command of each ```sh block: continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"^ *```sh\n(.*?)^ *```", markdown, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+", " ", line))
    return out


def is_quick(command: str) -> bool:
    return (not command.startswith("sudo") and any(q in command for q in QUICK)
            and not any(s in command for s in SLOW_IN_README))


def warning_keys(stderr: str) -> list[str]:
    """The key of each ``warning:`` line: ``warning: FILE[:LINE]: [FIELD: ]KEY: what``
    (a seed bound has no field; a role or run-length warning names one)."""
    keys = []
    for line in stderr.splitlines():
        if line.startswith("warning: "):
            m = re.match(r"warning: \S+?: (?:[\w.]+: )?([a-z]+(?:_[a-z]+)+): ", line)
            assert m, f"a warning line without a key: {line}"
            keys.append(m.group(1))
    return keys


def explained_warning_keys(readme: str) -> set[str]:
    """The keys a README explains: one bullet each, ``- `key`: ...``, under WARNINGS_SECTION."""
    assert WARNINGS_SECTION in readme, f"no '{WARNINGS_SECTION}' section"
    section = readme.split(WARNINGS_SECTION, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `([a-z_]+)`", section, flags=re.M))


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clone")
    for d in ("experiments", "topologies", "labs", "schemas"):
        shutil.copytree(REPO / d, root / d)
    bin_ = root / ".venv" / "bin"
    bin_.mkdir(parents=True)
    env = f'PYTHONPATH={shlex.quote(str(REPO / "src"))} exec {shlex.quote(sys.executable)}'
    (bin_ / "python").write_text(f"#!/bin/sh\n{env} \"$@\"\n")
    (bin_ / "rmptwin").write_text(f"#!/bin/sh\n{env} -m rmptwin.cli.main \"$@\"\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return root


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COLUMNS": "100"})


@dataclass
class Ran:
    """A page's quick commands, run once in the clone, and what they printed."""
    clone: Path
    results: list[tuple[str, subprocess.CompletedProcess]]

    def output(self, part: str) -> subprocess.CompletedProcess:
        """The (first) command containing ``part``."""
        return next(r for c, r in self.results if part in c)

    def summary(self, run: str) -> dict[str, Any]:
        return json.loads((self.clone / run / "summary.json").read_text())

    def rows(self, sweep: str) -> list[dict[str, Any]]:
        """Each row of a sweep (its parameters, seed and flattened summary), its lists read back."""
        from rmptwin.studies.labs import summaries

        return [row for _, row in summaries(self.clone / sweep)]

    def run(self, run: str):
        from rmptwin import api

        return api.open_run(self.clone / run)


@pytest.fixture(scope="module")
def ran(clone) -> Callable[[str], Ran]:
    """``ran(page)``: the page's quick commands (README.md or labs/<lab>/README.md), run once."""
    done: dict[str, Ran] = {}

    def get(page: str) -> Ran:
        if page not in done:
            commands = [c for c in shell_commands((REPO / page).read_text()) if is_quick(c)]
            done[page] = Ran(clone, [(c, _run(c, clone)) for c in commands])
        return done[page]
    return get


def test_the_readme_quick_commands_work_as_written(ran):
    commands = ran("README.md").results
    assert any("rmptwin sim" in c for c, _ in commands)
    for command, r in commands:
        assert r.returncode == 0, f"{command}\n{r.stderr}"


LABS = sorted(p.parent.name for p in (REPO / "labs").glob("*/check.py"))


def _readme(lab: str) -> str:
    return f"labs/{lab}/README.md"


@pytest.mark.spark
@pytest.mark.parametrize("lab", LABS)
def test_a_lab_readme_works_as_written_and_every_check_passes(ran, lab):
    commands = ran(_readme(lab)).results
    assert any("check.py" in c for c, _ in commands)
    checked = 0
    for command, r in commands:
        assert r.returncode == 0, f"{command}\n{r.stdout}\n{r.stderr}"
        if "check.py" in command:
            lines = r.stdout.splitlines()
            assert lines and all(ln.startswith("PASS") for ln in lines), f"{command}\n{r.stdout}"
            checked += len(lines)
    assert checked


@pytest.mark.spark
@pytest.mark.parametrize("lab", LABS)
def test_a_lab_readme_explains_every_warning_its_commands_print(ran, lab):
    printed = {k for _, r in ran(_readme(lab)).results for k in warning_keys(r.stderr)}
    explained = explained_warning_keys((REPO / _readme(lab)).read_text())
    assert printed == explained, (f"{_readme(lab)}: printed {sorted(printed)}, explained under "
                                  f"'{WARNINGS_SECTION}' {sorted(explained)}")


# ----------------------------------------------------------------------------- the pages' figures


@dataclass(frozen=True)
class Figure:
    page: str                          # the page that quotes it
    quote: str                         # its words there (whitespace aside)
    observed: Callable[[Ran], Any]     # what the page's commands give
    expected: Any
    runs: str = ""                     # whose commands give it (default: the page's own)


def _warned(ran: Ran, command: str, text: str) -> bool:
    return text in ran.output(command).stderr


def _fairness_by(ran: Ran, metric: str) -> dict[tuple[float, int], float]:
    """(loss, Delta_A) -> the sweep's mean of ``metric`` over the seeds."""
    acc: dict[tuple[float, int], list[float]] = {}
    for r in ran.rows("results/labs/fairness"):
        key = (r["topology.links.0.loss"], r["protocol.delta_a_ms"])
        acc.setdefault(key, []).append(r[metric])
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _fair_from(ran: Ran) -> dict[float, int]:
    """Per loss, the smallest Delta_A from which every seed's spread p99 is 0 (and above it)."""
    rows = ran.rows("results/labs/fairness")
    out = {}
    for loss in sorted({r["topology.links.0.loss"] for r in rows}):
        deltas = sorted({r["protocol.delta_a_ms"] for r in rows})
        zero = [all(r["fairness_spread_ms.p99"] == 0 for r in rows
                    if r["topology.links.0.loss"] == loss and r["protocol.delta_a_ms"] >= d) for d in deltas]
        out[loss] = deltas[zero.index(True)]
    return out


def _resends(ran: Ran) -> tuple[int, int]:
    """Lab 2, step 1: (the sources' re-sends, the messages re-sent)."""
    ev = ran.run("results/labs/minc").events()
    resent = ev[ev.kind == "src_retx"]
    return len(resent), len(resent[["src", "src_seq"]].drop_duplicates())


def _control_per_data(ran: Ran, frame: str) -> float:
    rows = ran.run("results/labs/minc").dir.read_metrics()["control"]
    return next(r["per_data"] for r in rows if r["type"] == frame)


def _late_releases(ran: Ran) -> tuple:
    """Lab 3, step 1: the messages whose releases spread, and when each receiver released them."""
    rel = ran.run("results/labs/crash").releases()
    rel = rel[rel.operable]
    by = rel.groupby(["src", "src_seq"])["release_ns"]
    spread = (by.max() - by.min())[lambda x: x > 0]
    late = rel.set_index(["src", "src_seq"]).sort_index().loc[spread.index]
    survivors = late[late.node != "rp2"].release_ns / 1e6
    down = late.send_ns.between(1.5e9, 3.5e9).all()
    return (len(spread), len(by), bool(down), round(survivors.min()), round(survivors.max()),
            sorted({round(t / 1e6) for t in late[late.node == "rp2"].release_ns}))


def _outages(ran: Ran) -> dict[int, tuple[int, int]]:
    acc: dict[int, list[int]] = {}
    for r in ran.rows("results/labs/crash-sweep"):
        acc.setdefault(r["protocol.tau_t_ms"], []).extend(round(o) for o in r["reformation_ms"])
    return {k: (min(v), max(v)) for k, v in acc.items()}


def _third_reformations(ran: Ran) -> tuple:
    thirds = [(r["protocol.tau_t_ms"], r["seed"], r["reformations"][2]) for r in ran.rows("results/labs/crash-sweep")
              if len(r["reformations"]) > 2]
    return ({(t, s) for t, s, _ in thirds}, {f["cause"] for _, _, f in thirds},
            min(round(f["start_ms"]) for *_, f in thirds), max(round(f["start_ms"]) for *_, f in thirds))


def _sync_ms(ran: Ran, rate: int, seed: int = 1) -> float:
    row = next(r for r in ran.rows("results/labs/venue-sweep") if r["venue.rate"] == rate and r["seed"] == seed)
    return round(row["sync_ms"], 3)


def _run_length(lab: str, experiment: str) -> tuple[float, float]:
    from rmptwin.model import load_experiment
    from rmptwin.model.drain import workload_end_s

    loaded = load_experiment(REPO / "labs" / lab / experiment)
    return loaded.duration_s, workload_end_s(loaded.experiment, loaded.topology)


FAIR, MINC, CRASH, VENUE = (_readme(lab) for lab in ("fairness-delta-a", "loss-minc", "ring-crash", "venue-failover"))

FIGURES = [
    # README.md: the tour
    Figure("README.md", "`sim` ends with agreement `True`, 610 messages sent, 0 lost and a fairness spread of 0 ms",
           lambda r: [r.summary("results/qs-sim")[k] for k in ("agreement", "messages_sent", "messages_lost")]
           + [r.summary("results/qs-sim")["fairness_spread_ms"]["max"]], [True, 610, 0, 0.0]),
    Figure("README.md", "`validate` also warns, in one yellow line, that the quickstart passes the token faster than "
           "the seed's recovery bound allows",
           lambda r: warning_keys(r.output("rmptwin validate experiments/quickstart.yaml").stderr),
           ["tau_t_vs_recovery"]),
    # lab 1: fairness against Delta_A
    Figure(FAIR, "20.3 ms at 2 % loss, 61.1 ms at 10 %",
           lambda r: {k[0]: round(v, 1) for k, v in _fairness_by(r, "fairness_spread_ms.p99").items() if k[1] == 0},
           {0.02: 20.3, 0.1: 61.1}),
    Figure(FAIR, "It is 0 for every seed from Delta_A = 100 ms on at both losses (at 2 % loss already from 50 ms)",
           _fair_from, {0.02: 50, 0.1: 100}),
    Figure(FAIR, "at 2 % loss 84.6 ms at Delta_A = 0, 280.4 ms at 200 ms",
           lambda r: [round(_fairness_by(r, "delivery_latency_ms.p50")[(0.02, d)], 1) for d in (0, 200)], [84.6, 280.4]),
    Figure(FAIR, "at 2 % and at 10 % loss on the first link, 3 seeds each (36 runs",
           lambda r: re.match(r"\s*(\d+) runs in", r.output("rmptwin sweep").stdout).group(1), "36"),
    Figure(FAIR, "dN + 2 k_r tau_r = 20 + 2 x 3 x 41 = 266 ms",
           lambda r: _warned(r, "rmptwin sim", "tau_t 143 ms < 20 + 2 x 3 x 41 = 266 ms"), True),
    # lab 2: loss correlation and MINC
    Figure(MINC, "The root sent 5,000 messages, and every receiver delivered all of them (`messages_lost` 0)",
           lambda r: [r.summary("results/labs/minc")[k] for k in ("messages_sent", "messages_delivered_min",
                                                                    "messages_lost")], [5000, 5000, 0]),
    Figure(MINC, "rp2 misses 11.4 % of first copies, but of the first copies rp1 missed, rp2 missed 39.9 %",
           lambda r: "39.9 % vs 11.4 %" in r.output("check.py results/labs/minc").stdout, True),
    Figure(MINC, "(the largest difference is 0.61 points, on s7>s15>rp8)",
           lambda r: "largest difference 0.61 points on s7>s15>rp8" in r.output("check.py results/labs/minc").stdout,
           True),
    Figure(MINC, "within 0.13 points of its truth",
           lambda r: "largest error 0.13 points" in r.output("check.py results/labs/minc").stdout, True),
    Figure(MINC, "490 ms (dN + 2 k_r tau_r = 10 + 2 x 6 x 40)",
           lambda r: _warned(r, "rmptwin sim", "tau_t 50 ms < 10 + 2 x 6 x 40 = 490 ms"), True),
    Figure(MINC, "2,860 re-sends, of 2,531 of the 5,000 messages", _resends, (2860, 2531)),
    Figure(MINC, "DATA 0.572 per data message in its control table", lambda r: _control_per_data(r, "DATA"), 0.572),
    Figure(MINC, "fails with q = 0.415", lambda r: _warned(r, "rmptwin sim", "q = 0.415"), True),
    Figure(MINC, "the warning expects 0.23 such reports per run",
           lambda r: _warned(r, "rmptwin sim", "passes give 0.23"), True),
    Figure(MINC, "In step 1 (seed 1) it does not happen: `reformation_ms` is empty (`-`)",
           lambda r: r.summary("results/labs/minc")["reformation_ms"], []),
    # lab 3: ring reformation under a crash
    Figure(CRASH, "(366 ms with seed 1)", lambda r: [round(o) for o in r.summary("results/labs/crash")["reformation_ms"]],
           [366]),
    Figure(CRASH, 'Two reformations (163 ms each with seed 1): at 1,698 ms "rp2 reported (via rp1)", when rp1\'s '
           'token pass to rp2 failed k_r times, and at 3,500 ms "rp2 asks to join"',
           lambda r: [(round(f["start_ms"]), f["took_ms"], f["cause"])
                      for f in r.summary("results/labs/crash")["reformations"]],
           [(1698, 163.0, "rp2 reported (via rp1)"), (3500, 163.0, "rp2 asks to join")]),
    Figure(CRASH, "`fairness_spread_ms` p99 is 300.8 ms",
           lambda r: r.summary("results/labs/crash")["fairness_spread_ms"]["p99"], 300.8),
    Figure(CRASH, "23 of the 381 messages, sent while rp2 was down, were released by rp1 and rp3 between 3,516 and "
           "3,672 ms and by rp2 only at 3,817 ms", _late_releases, (23, 381, True, 3516, 3672, [3817])),
    Figure(CRASH, "366 ms at 50 ms with every seed, 416 ms at 100 ms, 816 ms at 200 ms (at 25 ms 341 to 384 ms",
           _outages, {25: (341, 384), 50: (366, 366), 100: (416, 416), 200: (816, 816)}),
    Figure(CRASH, 'tau_t = 25 ms (every seed) and tau_t = 50 ms with seed 3 show a third reformation, "rp2 reported '
           '(via rp1)" again, at 3,842 to 3,867 ms', _third_reformations,
           ({(25, 1), (25, 2), (25, 3), (50, 3)}, {"rp2 reported (via rp1)"}, 3842, 3867)),
    Figure(CRASH, "`delivery_latency_ms` p50 is 41.9 ms agreed and 131.1 ms safe (seed 1)",
           lambda r: [round(r.summary(f"results/labs/crash-{d}")["delivery_latency_ms"]["p50"], 1)
                      for d in ("agreed", "safe")], [41.9, 131.1]),
    Figure(CRASH, "`fairness_spread_ms` p99 is 205.2 ms agreed and 40.4 ms safe (seed 1)",
           lambda r: [round(r.summary(f"results/labs/crash-{d}")["fairness_spread_ms"]["p99"], 1)
                      for d in ("agreed", "safe")], [205.2, 40.4]),
    Figure(CRASH, "dN + 2 k_r tau_r = 20 + 2 x 3 x 41 = 266 ms",
           lambda r: _warned(r, "rmptwin sim", "tau_t 50 ms < 20 + 2 x 3 x 41 = 266 ms"), True),
    Figure(CRASH, "(m - 1) tau_t + dN = 120 ms",
           lambda r: _warned(r, "delivery=safe", "Delta_A 0 ms < (3 - 1) x 50 + 20 = 120 ms"), True),
    # lab 4: venue failover
    Figure(VENUE, "`live_throughput_ratio` 1.00 over 1,001 ms",
           lambda r: [(round(x["ratio"], 2), round(x["window_ms"]))
                      for x in r.summary("results/labs/venue")["live_throughput_ratio"]], [(1.0, 1001)]),
    Figure(VENUE, "`sync_ms` is 0.597 ms at 2,000 req/s",
           lambda r: round(r.summary("results/labs/venue")["sync_ms"], 3), 0.597),
    Figure(VENUE, "`ev_agreement` true, `trades_lost` 0",
           lambda r: [r.summary("results/labs/venue")[k] for k in ("ev_agreement", "trades_lost")], [True, 0]),
    Figure(VENUE, "why the run lasts 4.8 s: the requests end at 3.7 s",
           lambda r: _run_length("venue-failover", "failover.yaml"), (4.8, 3.7)),
    # docs/labs.md, from lab 3's runs
    Figure("docs/labs.md", "its fairness spread p99 of 300.8 ms although Delta_A >= tau_t",
           lambda r: r.summary("results/labs/crash")["fairness_spread_ms"]["p99"], 300.8, runs=CRASH),
    # docs/venue-sync.md: the trace's figures after the change, from lab 4's runs (seed 1)
    Figure("docs/venue-sync.md", "| 1,000 req/s | 15.313 | **0.335** | < 5 |", lambda r: _sync_ms(r, 1000), 0.335,
           runs=VENUE),
    Figure("docs/venue-sync.md", "| 2,000 req/s | 31.075 | **0.597** | < 5 |", lambda r: _sync_ms(r, 2000), 0.597,
           runs=VENUE),
    Figure("docs/venue-sync.md", "| 4,000 req/s | 2.073 | **0.378** | < 5 |", lambda r: _sync_ms(r, 4000), 0.378,
           runs=VENUE),
    Figure("docs/venue-sync.md", "`rmptwin sim labs/venue-failover/failover.yaml` (2,000 req/s) gives the 2,000 row",
           lambda r: round(r.summary("results/labs/venue")["sync_ms"], 3), 0.597, runs=VENUE),
]


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.spark
@pytest.mark.parametrize("figure", FIGURES, ids=[f"{f.page.split('/')[-2] if '/' in f.page else 'README'}-{i}"
                                                 for i, f in enumerate(FIGURES)])
def test_a_figure_the_docs_quote_is_what_the_run_gives(ran, figure):
    assert _words(figure.quote) in _words((REPO / figure.page).read_text()), \
        f"{figure.page} no longer says: {figure.quote}"
    observed = figure.observed(ran(figure.runs or figure.page))
    assert observed == figure.expected, f"{figure.page} says: {figure.quote}\nthe run gives {observed!r}"


def test_shell_commands_are_extracted_with_continuations_joined():
    md = "x\n\n   ```sh\n   a --b \\\n       c   # note\n   d\n   ```\n"
    assert shell_commands(md) == ["a --b c", "d"]


def test_warning_keys_are_read_with_and_without_a_field():
    stderr = ("warning: labs/x.yaml: tau_t_vs_recovery: tau_t >= dN + 2 k_r tau_r (seed 5.1), but ...\n"
              "warning: labs/x.yaml:8: duration_s: duration_vs_drain: 6 s ends the run before its work\n"
              "warning: topologies/t.yaml:8: regions.atlantic: region_unused: no host names regions atlantic\n"
              "summary\n")
    assert warning_keys(stderr) == ["tau_t_vs_recovery", "duration_vs_drain", "region_unused"]


def test_explained_warnings_are_the_bullets_of_their_section():
    readme = (f"# Lab\n\n- `k_r` in a list elsewhere\n\n{WARNINGS_SECTION}\n\nIntro `not_a_key`.\n\n"
              "- `tau_t_vs_recovery`: why.\n- `k_r_vs_loss` (step 1): why.\n\n## Questions\n\n- `other_key`\n")
    assert explained_warning_keys(readme) == {"tau_t_vs_recovery", "k_r_vs_loss"}
