"""Every figure a docs page quotes from a simulated run of a shipped experiment is what the run
gives. Each row of ``FIGURES`` is a page, its words (whitespace aside) and what the simulator
gives for them; the simulator is deterministic, so a figure that moves is a page to update
(or a change to explain). Each experiment runs once (seed 1 unless a row says otherwise),
through ``rmptwin.api`` as ``rmptwin sim`` runs it.

The labs' figures, README.md's and those docs/venue-sync.md takes from lab 4's runs are checked
on the runs of the commands themselves (tests/labs/test_docs_commands.py). Figures that are no
simulated run of today's code stay out of this table: measurements of emulated runs and of
`make bench` (each with its date and machine on the page), and the history of a change (a
figure "before" a dated commit, which today's code cannot reproduce).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from rmptwin import api
from rmptwin.factories.keys import generate, key_path, write_keys

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Callable[..., api.Run]:
    """``sim(name, seed=1, **overrides)``: the shipped experiment ``name`` simulated, once."""
    out = tmp_path_factory.mktemp("runs")
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))   # the secure runs' key files
    done: dict[tuple, api.Run] = {}

    def get(name: str, seed: int = 1, **overrides: Any) -> api.Run:
        key = (name, seed, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
        if key not in done:
            loaded = api.load_experiment(EXPERIMENTS / f"{name}.yaml", overrides or None)
            security = getattr(loaded.experiment, "security", None)
            if security is not None and security.enabled and not key_path(loaded).exists():
                write_keys(generate(loaded), key_path(loaded))
            done[key] = api.simulate(loaded, seed=seed, out=out / f"run-{len(done)}")
        return done[key]
    yield get
    mp.undo()


@dataclass(frozen=True)
class Figure:
    page: str                                        # the page that quotes it
    quote: str                                       # its words there
    observed: Callable[[Callable[..., api.Run]], Any]
    expected: Any


def _resent(run: api.Run) -> tuple[int, int]:
    """(messages the sources re-sent, re-sends)."""
    ev = run.events()
    resent = ev[ev.kind == "src_retx"]
    return len(resent[["src", "src_seq"]].drop_duplicates()), len(resent)


def _orders(s: dict) -> list[float]:
    return [s["near_first_fraction"][d] for d in ("5", "20", "45", "80")]


def _edge(s: dict, customer: str) -> float:
    return round(s["edge"]["customers"][customer]["received_kbps"], 1)


_EDGE_500 = {"workload.rate_per_source": 500, "topology.links.0.loss": 0.01, "topology.hosts.7.stripes": [9]}


def _edge_claim(run: api.Run) -> tuple[int, bool]:
    """(edge stripes, the claim's verdict: within every line, none starving, complete, the broker all)."""
    e = run.summary["edge"]
    return e["stripes"], all(e[k] for k in ("all_within_line", "none_starving", "guaranteed_complete",
                                             "broker_everything"))


def _modem_complete(sim) -> int:
    """docs/edge-stripes.md's repair scan: modem1 complete in how many of its 12 runs."""
    return sum(sim("edge-stripes", seed, **{"workload.rate_per_source": 500, "topology.links.0.loss": loss,
                                            "topology.hosts.7.stripes": [stripe]})
               .summary["edge"]["customers"]["modem1"]["complete"]
               for loss in (0.01, 0.03) for seed in (1, 2, 3) for stripe in (9, 21))


def _taxonomy_p50(sim) -> list[float]:
    return [round(sim(f"taxonomy/{p}").summary["taxonomy"]["latency_ms"]["p50"], 1) for p in ("ub", "bb", "uub", "gup")]


def _bound(name: str, key: str) -> str:
    from rmptwin.model.bounds import violated_bounds

    loaded = api.load_experiment(EXPERIMENTS / f"{name}.yaml")
    return next(v.numbers for v in violated_bounds(loaded) if v.key == key)


def _run_length(name: str) -> str:
    from rmptwin.cli.bound_warnings import run_length

    return run_length(api.load_experiment(EXPERIMENTS / f"{name}.yaml"))


def _chaos_run_s(name: str) -> tuple[float, float]:
    """(recovery_s, how long a campaign's run lasts) for a shipped experiment."""
    import math

    from rmptwin.model.drain import recovery_s, workload_end_s

    loaded = api.load_experiment(EXPERIMENTS / f"{name}.yaml")
    e, t = loaded.experiment, loaded.topology
    return round(recovery_s(e, t), 2), math.ceil(round((workload_end_s(e, t) + recovery_s(e, t)) * 10, 6)) / 10


def _warning_files() -> dict[str, list[str]]:
    """Every shipped topology and experiment that gets a role or run-length warning, and its keys."""
    from rmptwin.model import load_topology
    from rmptwin.model.drain import run_length_warnings
    from rmptwin.model.role_checks import experiment_warnings, topology_warnings

    out = {}
    for t in sorted((REPO / "topologies").glob("*.yaml")):
        if keys := [f.key for f in topology_warnings(load_topology(t))]:
            out[str(t.relative_to(REPO))] = keys
    for e in sorted([*EXPERIMENTS.glob("*.yaml"), *EXPERIMENTS.glob("taxonomy/*.yaml"), *REPO.glob("labs/*/*.yaml")]):
        loaded = api.load_experiment(e)
        findings = (experiment_warnings(loaded.experiment, loaded.topology)
                    + run_length_warnings(loaded.experiment, loaded.topology))
        if keys := [f.key for f in findings]:
            out[str(e.relative_to(REPO))] = keys
    return out


def _london_new_york() -> tuple[int, float, float]:
    from rmptwin.model import load_topology
    from rmptwin.topotools.zoo_import import haversine_km, link_delay_ms

    km = haversine_km(51.5074, -0.1278, 40.7128, -74.006)   # topologies/zoo/intercontinental.graphml's
    link = next(lk for lk in load_topology(REPO / "topologies" / "intercontinental.yaml").links
                if {lk.a, lk.b} == {"london", "newyork"})
    return round(km, -1), round(link_delay_ms(km), 2), link.delay_ms


def _trace_fit() -> tuple:
    from rmptwin.model.traces import read_trace
    from rmptwin.topotools.trace_fit import fit, report_lines

    lines = "\n".join(report_lines(fit(read_trace(REPO / "traces" / "ge-bursts.txt")["packets"])))
    return (re.search(r"p_gb = (0\.\d{4})", lines).group(1), re.search(r"p_bg = (0\.\d{2})", lines).group(1),
            re.findall(r"log-likelihood (-[\d.]+)", lines), re.search(r"p = (0\.\d{3})", lines).group(1))


EXP, APPS, SYNC, EDGE = "docs/experiments.md", "docs/apps.md", "docs/venue-sync.md", "docs/edge-stripes.md"

FIGURES = [
    # the quickstart
    Figure(EXP, "Expected: agreement, nothing lost, fairness spread 0 simulated",
           lambda sim: [sim("quickstart").summary[k] for k in ("agreement", "messages_lost")]
           + [sim("quickstart").summary["fairness_spread_ms"]["max"]], [True, 0, 0.0]),
    Figure(EXP, "in the simulator sources re-send 77 of their 610 messages (85 re-sends)",
           lambda sim: (*_resent(sim("quickstart")), sim("quickstart").summary["messages_sent"]), (77, 85, 610)),
    Figure(EXP, "Its τ_t (300 ms) is far below the seed's bound dN + 2 k_r τ_r (2,400 ms)",
           lambda sim: _bound("quickstart", "tau_t_vs_recovery"), "tau_t 300 ms < 180 + 2 x 3 x 370 = 2400 ms"),
    Figure("docs/tour.md", "the quickstart passes the token faster (τ_t 300 ms) than the seed's recovery bound "
           "dN + 2 k_r τ_r (2,400 ms) allows",
           lambda sim: _bound("quickstart", "tau_t_vs_recovery"), "tau_t 300 ms < 180 + 2 x 3 x 370 = 2400 ms"),
    Figure("docs/run-directory.md", "`runs 10.6 s (auto: the work ends at 4.5 s, then 6.1 s of drain)`",
           lambda sim: _run_length("quickstart"), "runs 10.6 s (auto: the work ends at 4.5 s, then 6.1 s of drain)"),
    Figure("docs/fault-campaigns.md", "Quickstart's is 8.89 s, so its runs last 13.4 s",
           lambda sim: _chaos_run_s("quickstart"), (8.89, 13.4)),
    # security
    Figure(EXP, "Simulated: agreement, 0 lost, 9/9 guaranteed customers complete, 0 alarms",
           lambda sim: [sim("quickstart-secure").summary[k] for k in ("agreement", "messages_lost", "customers",
                                                                      "alarms")],
           [True, 0, {"count": 14, "guaranteed": 9, "guaranteed_complete": 9}, {}]),
    Figure(EXP, "Simulated: 12,900 alarms, every attack mode caught, ticker p99 under attack equal to the baseline's",
           lambda sim: (sum(sim("security-attack").summary["alarms"].values()),
                        sorted(m for m, n in sim("security-attack").summary["security"]["alarms_by_attack"].items()
                               if n > 0),
                        sim("security-attack").summary["security"]["ticker_latency_ms"]["p99"]
                        == sim("security-baseline").summary["security"]["ticker_latency_ms"]["p99"]),
           (12900, ["flood", "forge", "replay", "unauthorized"], True)),
    Figure(EXP, "With sealing off, the same attacks get 3,300 frames sequenced, 616 forgeries and 109 replays "
           "delivered (simulated)",
           lambda sim: [sim("security-attack", **{"security.enabled": False}).summary[k]
                        for k in ("unauthorized_sequenced", "forged_delivered", "replayed_delivered")], [3300, 616, 109]),
    # unified orders and the trading floor (docs/experiments.md and docs/apps.md say the same)
    *(Figure(page, quote, lambda sim: _orders(sim("unified-orders").summary), [0.505, 0.56, 0.52, 0.485])
      for page, quote in ((EXP, "`near_first_fraction` per distance, simulated 0.505 / 0.56 / 0.52 / 0.485 (seed 1)"),
                          (APPS, "per distance, simulated 0.505 / 0.56 / 0.52 / 0.485 (seed 1)"))),
    *(Figure(page, "`near_first_fraction` 1.0 at every distance simulated",
             lambda sim: _orders(sim("unified-orders-direct").summary), [1.0] * 4) for page in (EXP, APPS)),
    *(Figure(page, quote, lambda sim: [sim("trading-floor").summary[k] for k in (
        "trades_tentative", "trades_confirmed", "floor_trades_lost", "participants_agree")]
        + [sim("trading-floor").summary["confirm_latency_ms"]["p50"], sim("trading-floor").summary[
            "token_rotation_ms"]["p50"]], [39, 39, 0, True, 400.0, 400.0])
      for page, quote in ((EXP, "Simulated: 39 tentative, 39 confirmed, 0 lost, `participants_agree`, confirm latency "
                                "p50 400 ms = the token rotation"),
                          (APPS, "simulated: 39 tentative, 39 confirmed, 0 lost, `participants_agree`, confirm latency "
                                 "p50 400 ms = the token rotation"))),
    *(Figure(page, "39 confirmed, 0 withdrawn, 0 lost, everyone agrees",
             lambda sim: [sim("trading-floor-crash").summary[k] for k in (
                 "trades_confirmed", "trades_withdrawn", "floor_trades_lost", "participants_agree")], [39, 0, 0, True])
      for page in (EXP, APPS)),
    # the taxonomy's shipped experiments
    Figure("docs/taxonomy.md", "5.4 / 5.4 / 9.6 / 36 ms simulated", _taxonomy_p50, [5.4, 5.4, 9.6, 36.0]),
    Figure(EXP, "p50 order the same: UB ≈ BB < UUB < GUP", _taxonomy_p50, [5.4, 5.4, 9.6, 36.0]),
    # the venue at 5,000 req/s
    Figure(EXP, "(`sync_ms`: 0.57 ms simulated", lambda sim: round(sim("venue-failover").summary["sync_ms"], 2), 0.57),
    Figure(SYNC, "`experiments/venue-failover.yaml` (5,000 req/s) goes from `sync_ms` 8.78 to 0.57 ms, and the "
           "figures measured after the sync move with it (`max_gap` 48 → 4, the live throughput window, latency p50 "
           "0.70365 ms before and after)",
           lambda sim: [round(sim("venue-failover").summary["sync_ms"], 2), sim("venue-failover").summary["max_gap"],
                        sim("venue-failover").summary["latency_ms"]["p50"]], [0.57, 4, 0.70365]),
    Figure(SYNC, "0.42 ms in the simulator at 5,000 req/s (the shipped experiment, seed 1, 0 trades lost, ev2's and "
           "ev3's state hashes equal)",
           lambda sim: [round(sim("venue-failover-standby").summary["sync_ms"], 2)]
           + [sim("venue-failover-standby").summary[k] for k in ("trades_lost", "ev_agreement")], [0.42, 0, True]),
    # edge stripes
    Figure(EDGE, "50 edge stripes of 4 symbols, the busiest 46.3 kbps",
           lambda sim: (sim("edge-stripes").summary["edge"]["stripes"],
                        round(sim("edge-stripes").summary["edge"]["largest_stripe_kbps"], 1)), (50, 46.3)),
    Figure(EDGE, "| modem1 (guaranteed, subscribes to stripe 9) | 56 kbps | 1 | 35.2 kbps | yes |",
           lambda sim: _edge(sim("edge-stripes").summary, "modem1"), 35.2),
    Figure(EDGE, "| modem2 (best effort, no subscription) | 56 kbps | 1 (the first) | 42.2 kbps | — |",
           lambda sim: _edge(sim("edge-stripes").summary, "modem2"), 42.2),
    Figure(EDGE, "| t1 (guaranteed) | 1.5 Mbps | 29 | 1,170 kbps | yes |",
           lambda sim: (len(sim("edge-stripes").summary["edge"]["customers"]["t1"]["stripes"]),
                        round(sim("edge-stripes").summary["edge"]["customers"]["t1"]["received_kbps"])), (29, 1170)),
    Figure(EDGE, "| broker (guaranteed) | 45 Mbps | 50 (all) | 2,040 kbps | yes: every message of the ticker |",
           lambda sim: (round(sim("edge-stripes").summary["edge"]["customers"]["broker"]["received_kbps"]),
                        sim("edge-stripes").summary["edge"]["broker_everything"]), (2040, True)),
    Figure(EDGE, "before, 4 of 12 runs left modem1 7 messages short; now 12 of 12 complete", _modem_complete, 12),
    Figure(EDGE, "sweeps the ticker at 500 and 1,000 msg/s a source (26 and 50 edge stripes): holds at both",
           lambda sim: [_edge_claim(sim("edge-stripes", 1, **_EDGE_500)), _edge_claim(sim("edge-stripes"))],
           [(26, True), (50, True)]),
    # no run: what the shipped files warn, and the importer's and trace fit's arithmetic
    Figure("docs/validation.md", "Shipped files that warn today: `topologies/floor.yaml` (`region_unused`: the "
           "trading floor's participants hear the whole sequence, not a region) and `topologies/orders-line.yaml` "
           "(`region_unheard`",
           lambda sim: _warning_files(),
           {"topologies/floor.yaml": ["region_unused"], "topologies/orders-line.yaml": ["region_unheard"]}),
    Figure("docs/bring-your-own-topology.md", "London-New York (5,570 km) is 27.97 ms",
           lambda sim: _london_new_york(), (5570, 27.97, 27.97)),
    Figure("docs/bring-your-own-topology.md", "`trace fit` gives back p_gb 0.0082, p_bg 0.30 (log-likelihood -187.7 "
           "against -365.3 for Bernoulli p 0.026)",
           lambda sim: _trace_fit(), ("0.0082", "0.30", ["-365.267", "-187.668"], "0.026")),
]


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("figure", FIGURES, ids=[f"{f.page.split('/')[-1][:-3]}-{i}" for i, f in enumerate(FIGURES)])
def test_a_figure_a_docs_page_quotes_is_what_the_simulator_gives(sim, figure):
    assert _words(figure.quote) in _words((REPO / figure.page).read_text()), \
        f"{figure.page} no longer says: {figure.quote}"
    observed = figure.observed(sim)
    assert observed == figure.expected, f"{figure.page} says: {figure.quote}\nthe simulator gives {observed!r}"


# ----------------------------------------------------------------------------- docs/taxonomy.md's table

TAXONOMY_ROWS = {"UB": "ub", "BB": "bb", "UUB": "uub", "GUP": "gup", "RMP, time-driven": "rmp_time",
                 "RMP, event-driven": "rmp_event", "CAS sequencer": "cas"}


def _numbers(cell: str) -> list[str]:
    return re.findall(r"\d[\d,]*(?:\.\d+)?", cell)


def _as_quoted(value: float, quoted: str) -> Decimal:
    """``value`` rounded (half up) to as many decimals as ``quoted`` shows."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    return Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)


def test_the_taxonomy_table_is_what_taxonomy_compare_gives():
    """docs/taxonomy.md: `rmptwin taxonomy compare`'s points at 500 receivers, 100 msg/s, and the
    sequencer crash at 50 receivers (about 45 s: the 500-receiver points, CAS's the longest)."""
    from rmptwin.studies.taxonomy_compare import Point, run_point

    text = (REPO / "docs" / "taxonomy.md").read_text()
    lines = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
             for ln in text.splitlines() if ln.startswith("| ") and ln.split("|")[1].strip() in TAXONOMY_ROWS}
    assert set(lines) == set(TAXONOMY_ROWS)
    steady = {p: run_point(Point(p, 500, 100.0, "steady")) for p in TAXONOMY_ROWS.values()}
    crash = {p: run_point(Point(p, 50, 100.0, "crash")) for p in TAXONOMY_ROWS.values()}
    ub, rmp = steady["ub"], steady["rmp_time"]
    assert "the busiest primary ordered 6.5 msg/s, 6 % of UB's single sequencer" in _words(text)
    assert (rmp["ordered_per_s"], round(100 * rmp["ordered_per_s"] / ub["ordered_per_s"])) == (6.5, 6)
    assert "time-driven latency is 3.8 × UB's at p50" in _words(text)
    assert round(rmp["latency_p50_ms"] / ub["latency_p50_ms"], 1) == 3.8
    for name, p in TAXONOMY_ROWS.items():
        s, c = steady[p], crash[p]
        per_message = [s["msgs_per_delivered"]]
        if p == "bb":
            per_message += [s["rx_per_delivered"], steady["ub"]["rx_per_delivered"]]
        if p == "gup":
            per_message += [s["ordered_per_s"]]
        resume = [c["resume_ms"]] if c["resume_ms"] is not None else []
        expected = [per_message, [s["seq_msgs_per_s"]], [s["ordered_per_s"]],
                    [s["latency_p50_ms"], s["latency_p99_ms"]], resume + [c["lost"]]]
        for cell, values in zip(lines[name], expected):
            quoted = _numbers(cell)
            assert len(quoted) == len(values), f"docs/taxonomy.md, {name}: '{cell}' against {values}"
            for q, v in zip(quoted, values):
                assert _as_quoted(v, q) == Decimal(q.replace(",", "")), \
                    f"docs/taxonomy.md, {name}: '{cell}' says {q}, taxonomy compare gives {v}"


# ----------------------------------------------------------------------------- docs/wireshark.md's tshark output


def tshark_examples(markdown: str) -> list[tuple[str, list[str]]]:
    """(command, the lines it prints) of each fenced block that starts with ``$ tshark``."""
    out = []
    for block in re.findall(r"^```\n(\$ tshark.*?)^```", markdown, flags=re.S | re.M):
        lines = block.replace("\\\n", " ").splitlines()
        out.append((re.sub(r"\s+", " ", lines[0][2:]), [ln.rstrip() for ln in lines[1:]]))
    return out


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_the_wireshark_pages_tshark_output_is_what_tshark_prints(tmp_path):
    """docs/wireshark.md: its pcap written as the page writes it (the simulated line3-crash), then
    each of its ``$ tshark`` commands, whose output must be the page's (after a ``...`` line,
    the lines that follow must appear in that order, one after another)."""
    page = (REPO / "docs" / "wireshark.md").read_text()
    examples = tshark_examples(page)
    assert len(examples) >= 4
    (tmp_path / "wireshark").symlink_to(REPO / "wireshark", target_is_directory=True)
    writes = re.search(r'^(write_pcap\("line3-crash.pcap", .*\))$', page, flags=re.M)
    assert writes, "docs/wireshark.md no longer writes line3-crash.pcap with write_pcap"
    from rmptwin.model.loading import load_experiment
    from rmptwin.sim.pcap import simulated_datagrams, write_pcap

    write_pcap(tmp_path / "line3-crash.pcap", simulated_datagrams(load_experiment(EXPERIMENTS / "line3-crash.yaml")))
    for command, expected in examples:
        got = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        lines = [ln.rstrip() for ln in got.stdout.splitlines()]
        if expected and expected[0] == "...":
            tail = expected[1:]
            assert any(lines[i:i + len(tail)] == tail for i in range(len(lines))), \
                f"docs/wireshark.md: $ {command}\nprints:\n{got.stdout}{got.stderr}"
        else:
            assert lines == expected, f"docs/wireshark.md: $ {command}\nprints:\n{got.stdout}{got.stderr}"


def test_the_quickstarts_captures_take_about_5_mb(tmp_path):
    """docs/wireshark.md: "with it, the quickstart's 31 captures take about 5 MB"."""
    assert "the quickstart's 31 captures take about 5 MB" in _words((REPO / "docs" / "wireshark.md").read_text())
    run = api.simulate(EXPERIMENTS / "quickstart.yaml", out=tmp_path / "qs", pcap=True)
    files = run.dir.pcap_files()
    assert (len(files), round(sum(f.stat().st_size for f in files) / 1e6)) == (31, 5)


# ----------------------------------------------------------------------------- docs/venue-sync.md's trace


def _sync_trace(rates: list[int]) -> dict[int, dict[str, Any]]:
    """scripts/venue_sync_trace.py on labs/venue-failover/failover.yaml, as the page runs it,
    read back: per rate the sync target, the checkpoint, the hardened requests, each run of
    re-executed positions (its end time, first and last position) and SYNC_DONE."""
    cmd = [sys.executable, "scripts/venue_sync_trace.py", "labs/venue-failover/failover.yaml"]
    for r in rates:
        cmd += ["--rate", str(r)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")}).stdout
    traces: dict[int, dict[str, Any]] = {}
    for block in out.split("== ")[1:]:
        rate = int(float(re.search(r"rate ([\d.]+) req/s", block).group(1)))
        t = traces[rate] = {"runs": []}
        for line in block.splitlines()[1:]:
            ms = line.split("ms", 1)[0].strip()
            if m := re.search(r"sync target: position (\d+)", line):
                t["probe"], t["target"] = ms, int(m.group(1))
            elif m := re.search(r"checkpoint installed: positions up to (\d+)", line):
                t["checkpoint"] = ms, int(m.group(1))
            elif m := re.search(r"known up to (\d+) \((\d+) positions to re-execute\)", line):
                t["hardened"] = ms, int(m.group(1)), int(m.group(2))
            elif m := re.search(r"re-executed \(hardened\): positions (\d+)\.\.(\d+)", line):
                t["runs"].append((ms, int(m.group(1)), int(m.group(2))))
            elif m := re.search(r"SYNC_DONE: position (\d+), (\d+) positions executed", line):
                t["sync"] = ms, int(m.group(1)), int(m.group(2))
    return traces


def test_the_venue_sync_trace_is_what_the_script_prints():
    """docs/venue-sync.md's condensed trace (about 15 s: three failovers simulated)."""
    page = _words((REPO / "docs" / "venue-sync.md").read_text())
    quoted = {
        1000: ["0.060 ms sequencer probe answered: sync target: position 2318",
               "0.080 ms checkpoint installed: positions up to 2047",
               "0.080 ms hardened requests received: known up to 2316 (269 positions to re-execute)",
               "0.099 … 0.335 ms re-executed (hardened): 2048..2317 in 5 runs",
               "0.335 ms SYNC_DONE: position 2317, 270 positions executed since restart"],
        2000: ["0.060 / 0.080 / 0.080 ms probe (target 4653) / checkpoint (4095) / hardened (555 to re-execute)",
               "0.099 … 0.597 ms re-executed (hardened): 4096..4652 in 11 runs",
               "0.597 ms SYNC_DONE: position 4652"],
        4000: ["0.060 / 0.080 / 0.080 ms probe (target 9252) / checkpoint (9215) / hardened (35 to re-execute)",
               "0.099, 0.114 ms re-executed (hardened): 9216..9250",
               "0.378 ms re-executed 9251",
               "0.378 ms SYNC_DONE: position 9251"],
    }
    for lines in quoted.values():
        for line in lines:
            assert line in page, f"docs/venue-sync.md no longer says: {line}"
    traces = _sync_trace(sorted(quoted))
    t = traces[1000]
    assert (t["probe"], t["target"], t["checkpoint"], t["hardened"]) == ("0.060", 2318, ("0.080", 2047),
                                                                        ("0.080", 2316, 269))
    assert (t["runs"][0][0], t["runs"][-1][0], t["runs"][0][1], t["runs"][-1][2], len(t["runs"])) == \
        ("0.099", "0.335", 2048, 2317, 5)
    assert t["sync"] == ("0.335", 2317, 270)
    t = traces[2000]
    assert (t["probe"], t["target"], t["checkpoint"], t["hardened"][0], t["hardened"][2]) == \
        ("0.060", 4653, ("0.080", 4095), "0.080", 555)
    assert (t["runs"][0][0], t["runs"][-1][0], t["runs"][0][1], t["runs"][-1][2], len(t["runs"])) == \
        ("0.099", "0.597", 4096, 4652, 11)
    assert t["sync"][:2] == ("0.597", 4652)
    t = traces[4000]
    assert (t["probe"], t["target"], t["checkpoint"], t["hardened"][0], t["hardened"][2]) == \
        ("0.060", 9252, ("0.080", 9215), "0.080", 35)
    assert t["runs"] == [("0.099", 9216, 9233), ("0.114", 9234, 9250), ("0.378", 9251, 9251)]
    assert t["sync"][:2] == ("0.378", 9251)
