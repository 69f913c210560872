"""The twin verdict (rmptwin.analysis.twin_verdict) as a test assertion, for the emulated
tests that have a simulated twin of their run: test_runtime_emulated.py (quickstart) and
test_twin_links.py (the scaled-down binary-tree-loss).

    from twin_checks import assert_twin_verdict
    rules = assert_twin_verdict(sim.run_dir, emu.run_dir)

Every rule must pass, or be one the caller names in ``known_failures`` (a rule that cannot
pass on this machine yet; the caller marks a separate test xfail(strict=True) on it, see
``assert_rule_passes``), or be 'not comparable' / 'not deterministic' only where ``skippable``
allows it (by default the order rule may be 'not deterministic': several sources per stripe).
"""

from __future__ import annotations

from pathlib import Path

from rmptwin.analysis.compare import verdict_rules
from rmptwin.analysis.twin_verdict import NOT_DETERMINISTIC, PASS, Rule
from rmptwin.rundir.run import RunDir

ORDER_RULE = "delivered_order_across_sources"


def twin_rules(sim_run: RunDir | Path, emu_run: RunDir | Path) -> dict[str, Rule]:
    """The verdict's rules by metric name, run A simulated and run B emulated, as `rmptwin
    compare` judges them (under netem, control per data by the simulator's seed spread)."""
    a, b = (r.path if isinstance(r, RunDir) else Path(r) for r in (sim_run, emu_run))
    return {r.metric: r for r in verdict_rules(a, b)}


def _shown(r: Rule) -> str:
    return f"{r.metric}: A {r.a}, B {r.b}, tolerance {r.tolerance}, {r.status} ({r.note})"


def assert_twin_verdict(sim_run: RunDir | Path, emu_run: RunDir | Path, known_failures: frozenset[str] = frozenset(),
                        skippable: dict[str, str] | None = None) -> dict[str, Rule]:
    """Assert the twin verdict of ``emu_run`` against ``sim_run``; returns the rules.
    ``skippable``: metric -> the one non-judged status it may have (default: the order rule
    may be 'not deterministic'); every other rule must be judged."""
    skippable = {ORDER_RULE: NOT_DETERMINISTIC} if skippable is None else skippable
    rules = twin_rules(sim_run, emu_run)
    bad = [_shown(r) for m, r in rules.items() if m not in known_failures
           and r.status != PASS and skippable.get(m) != r.status]
    assert not bad, "twin verdict failed:\n" + "\n".join(bad)
    return rules


# The scaled-down emulated binary-tree-loss at TDF 1 on the 2-core machine (namespace hosts,
# relays, no captures; 2026-11-26) failed control per data (5.97 against 4.34), latency p50 at
# 500 msg/s (6,655 against 498 ms, overloaded) and fairness p99 (391 ms), and the test allowed
# them. At `auto` (16 here: its 4 ms paths against the emulated path's own latency) every rule
# passed on 2026-11-29, control per data 3.426 against 3.43, fairness p99 0.07 ms: none is allowed.
def assert_binary_tree_loss_twin(sim_run: RunDir | Path, emu_run: RunDir | Path,
                                 known_failures: frozenset[str] = frozenset()) -> dict[str, Rule]:
    """The twin verdict on binary-tree-loss: one source on one stripe, so every rule is judged
    (the order rule too); agreement, losses, per-link first-copy loss and order must pass."""
    rules = assert_twin_verdict(sim_run, emu_run, known_failures=known_failures, skippable={})
    for metric in ("agreement", "messages_lost", "first_copy_loss_per_link", ORDER_RULE):
        assert rules[metric].status == PASS, _shown(rules[metric])
    return rules
