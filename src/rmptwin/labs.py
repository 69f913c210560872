"""The classroom labs (labs/<name>/): each lab's expected outcome, as a check on what the
student produced (a run directory or a sweep directory), and a quick simulated version of the
lab that the tests run. ``labs/<name>/check.py [DIR]`` calls ``main``.

A check returns ``Check`` lines: what should be seen, whether it is, and what was observed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rmptwin.errors import UserError
from rmptwin.events import Kind
from rmptwin.rundir import RunDir
from rmptwin.spec import LoadedExperiment, load_experiment
from rmptwin.sweepdir import SweepDir

LABS_DIR = Path(__file__).resolve().parents[2] / "labs"


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    observed: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.what}: {self.observed}"


# ----------------------------------------------------------------------------- lab 1: fairness


def check_fairness(df: pd.DataFrame, tau_t_ms: float) -> list[Check]:
    """A sweep over protocol.delta_a_ms (and optionally link loss): unfair below the recovery
    time, fair (spread 0) from tau_t on, latency growing with Delta_A."""
    key = "protocol.delta_a_ms"
    if key not in df:
        raise UserError(f"this sweep did not vary {key}; run the sweep in labs/fairness-delta-a/README.md")
    others = [c for c in df.columns if c.startswith(("protocol.", "workload.", "topology.")) and c != key]
    by = df.groupby(others + [key] if others else [key])
    spread = by["fairness_spread_ms.p99"].mean().reset_index()
    latency = by["delivery_latency_ms.p50"].mean().reset_index()
    fair = spread[spread[key] >= tau_t_ms]
    low = spread[spread[key] == spread[key].min()]
    rising = all(np.all(np.diff(part["delivery_latency_ms.p50"].to_numpy()) > 0)
                 for _, part in (latency.groupby(others) if others else [(None, latency)]))
    return [
        Check(f"spread p99 is 0 for every Delta_A >= tau_t ({tau_t_ms:g} ms)",
              bool(len(fair)) and bool((fair["fairness_spread_ms.p99"] == 0).all()),
              _pairs(fair, key, "fairness_spread_ms.p99")),
        Check("spread p99 > 0 at the smallest Delta_A (releases before every R_T recovered the message)",
              bool((low["fairness_spread_ms.p99"] > 0).all()), _pairs(low, key, "fairness_spread_ms.p99")),
        Check("latency p50 grows with Delta_A (about one for one)", rising,
              _pairs(latency, key, "delivery_latency_ms.p50")),
    ]


def _pairs(df: pd.DataFrame, key: str, metric: str) -> str:
    return ", ".join(f"{k:g} ms -> {v:.1f}" for k, v in zip(df[key], df[metric])) or "no such points"


# ----------------------------------------------------------------------------- lab 2: loss and MINC


def minc_from_events(events: pd.DataFrame, loaded: LoadedExperiment) -> list[dict]:
    """MINC on one run without Spark: gamma per tree node from first receptions, then each
    logical link's estimate beside its configured loss (``analysis.minc`` does the same at scale)."""
    from rmptwin.analysis.minc import configured_loss, estimate_loss, logical_tree

    topo = loaded.topology
    source = topo.hosts_with_role("source")[0].name
    receivers = sorted(h.name for h in topo.hosts if h.role in ("primary", "secondary"))
    tree = logical_tree(topo, source, receivers)
    sent = events[(events.kind == Kind.SEND) & (events.node == source)].src_seq.nunique()
    recv = events[(events.kind == Kind.RECV) & events.node.isin(receivers) & (events.src == source)]
    first = recv[[not json.loads(d).get("repair") for d in recv.detail]]
    heard = first.groupby("node").src_seq.apply(set).to_dict()
    gamma = {}
    for node in tree.nodes():
        below = [r for r in tree.receivers if node in tree.ancestors(r)]
        got = set().union(*(heard.get(r, set()) for r in below)) if below else set()
        gamma[node] = len(got) / sent if sent else 0.0
    est = estimate_loss(tree, gamma)
    return [{"link": tree.label(n), "estimate": est[n], "configured": configured_loss(topo, tree.hops[n])}
            for n in tree.nodes()]


def loss_correlation(events: pd.DataFrame, a: str, b: str) -> tuple[float, float]:
    """(P(b missed a first copy), P(b missed it | a missed it)) over the source's messages."""
    recv = events[(events.kind == Kind.RECV) & events.node.isin([a, b])]
    first = recv[[not json.loads(d).get("repair") for d in recv.detail]]
    sent = set(events[events.kind == Kind.SEND].src_seq)
    miss_a = sent - set(first[first.node == a].src_seq)
    miss_b = sent - set(first[first.node == b].src_seq)
    p_b = len(miss_b) / len(sent) if sent else 0.0
    p_b_given_a = len(miss_a & miss_b) / len(miss_a) if miss_a else 0.0
    return p_b, p_b_given_a


def check_minc(run: RunDir, tolerance: float = 0.02) -> list[Check]:
    loaded = _loaded(run)
    events = run.read_events().to_pandas()
    rows = minc_from_events(events, loaded)
    worst = max(rows, key=lambda r: abs(r["estimate"] - r["configured"]))
    p_b, p_cond = loss_correlation(events, "rp1", "rp2")
    return [
        Check(f"every link's MINC estimate within {tolerance * 100:.0f} points of its configured loss",
              abs(worst["estimate"] - worst["configured"]) <= tolerance,
              f"largest error {abs(worst['estimate'] - worst['configured']) * 100:.2f} points on {worst['link']} "
              f"({worst['estimate'] * 100:.2f} % vs {worst['configured'] * 100:.2f} %)"),
        Check("siblings' losses are correlated: P(rp2 missed | rp1 missed) >> P(rp2 missed)",
              p_cond > 3 * p_b, f"{p_cond * 100:.1f} % vs {p_b * 100:.1f} %"),
    ]


# ----------------------------------------------------------------------------- lab 3: ring crash


def check_ring_crash(run: RunDir) -> list[Check]:
    s = run.read_summary()
    outages = s.get("reformation_ms") or []
    return [
        Check("the ring re-forms after the token site crashes", len(outages) >= 1,
              f"outages {', '.join(f'{o:.0f} ms' for o in outages) or 'none'}"),
        Check("nothing acknowledged is lost and the survivors agree",
              s.get("messages_lost") == 0 and bool(s.get("agreement")),
              f"messages_lost {s.get('messages_lost')}, agreement {s.get('agreement')}"),
    ]


# ----------------------------------------------------------------------------- lab 4: venue failover


def check_venue_failover(run: RunDir) -> list[Check]:
    s = run.read_summary()
    ratios = [r["ratio"] for r in s.get("live_throughput_ratio") or []]
    return [
        Check("the restarted EV synchronizes (SYNC_DONE)", s.get("sync_ms") is not None,
              f"sync_ms {s.get('sync_ms')}"),
        Check("the live EV's throughput does not dip while the other is down and syncing",
              bool(ratios) and min(ratios) >= 0.9, f"rate during / before {', '.join(f'{r:.2f}' for r in ratios)}"),
        Check("both EVs end with the same order and no trade is lost",
              bool(s.get("ev_agreement")) and s.get("trades_lost") == 0,
              f"ev_agreement {s.get('ev_agreement')}, trades_lost {s.get('trades_lost')}"),
    ]


# ----------------------------------------------------------------------------- running a lab


def _loaded(run: RunDir) -> LoadedExperiment:
    from rmptwin.rerun import loaded_from_manifest

    return loaded_from_manifest(run.read_manifest(), str(run.manifest_path))


@dataclass(frozen=True)
class Lab:
    name: str
    experiment: str                  # file under labs/<name>/
    quick: dict                      # --set values for the quick (test) version
    check: Callable[[Path], list[Check]]


def _fairness_dir(path: Path) -> list[Check]:
    sweep = SweepDir(path)
    table = sweep.read_table()
    if table is None:
        raise UserError(f"{path}: no sweep table; give the sweep's --out directory")
    loaded = load_experiment(LABS_DIR / "fairness-delta-a" / "fairness.yaml")
    return check_fairness(table.to_pandas(), loaded.experiment.protocol.tau_t)


LABS = {
    "fairness-delta-a": Lab("fairness-delta-a", "fairness.yaml",
                            {"protocol.delta_a_ms": [0, 143], "topology.links.0.loss": [0.1]}, _fairness_dir),
    "loss-minc": Lab("loss-minc", "tree.yaml", {"workload.duration_s": [2.0], "duration_s": [2.5]},
                     lambda p: check_minc(RunDir(p))),
    "ring-crash": Lab("ring-crash", "crash.yaml", {}, lambda p: check_ring_crash(RunDir(p))),
    "venue-failover": Lab("venue-failover", "failover.yaml",
                          {"venue.rate": [1000.0], "venue.duration_s": [2.8], "duration_s": [3.4]},
                          lambda p: check_venue_failover(RunDir(p))),
}


def run_quick(name: str, out: Path) -> list[Check]:
    """The lab's quick simulated version into ``out``, then its check (what the tests run)."""
    from rmptwin.experiment_run import run_experiment
    from rmptwin.sweeps.engine import SweepPlan, run_loop, run_sweep
    from rmptwin.sweeps.points import make_point

    lab = LABS[name]
    base = load_experiment(LABS_DIR / name / lab.experiment)
    if name == "fairness-delta-a":
        run_sweep(SweepPlan(base, lab.quick, [1]), out=out, runner=run_loop)
    else:
        point = make_point(base, {k: v[0] for k, v in lab.quick.items()})
        run_experiment(point.loaded, "sim", out=out)
    return lab.check(out)


def main(name: str, argv: list[str]) -> int:
    """``labs/<name>/check.py [DIR]``: check DIR, or run the quick simulated lab and check it."""
    try:
        if argv:
            checks = LABS[name].check(Path(argv[0]))
        else:
            checks = run_quick(name, Path(tempfile.mkdtemp(prefix=f"rmptwin-lab-{name}-")) / "out")
    except UserError as e:
        print(f"rmptwin: {e}", file=sys.stderr)
        return 2
    for c in checks:
        print(c.line())
    return 0 if all(c.ok for c in checks) else 1
