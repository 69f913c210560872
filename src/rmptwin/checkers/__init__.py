"""History checkers: invariants written once and applied to any run directory.

Each checker is a pure function over a history (plain records built from the event table by
``checkers.histories``) that returns ``None`` or the FIRST ``Violation``, with the events that
show it. ``checkers.suite.check_events`` decides which checkers apply to a run and runs them;
``rmptwin check RUN_DIR`` prints the verdicts and exits 1 on a violation; ``rmptwin chaos``
runs them on every run of a campaign.

The checkers (names are what the verdict tables and `rmptwin check` print):

- ``total_order``: per stripe, every receiver's delivered sequence is a gap-free run of one
  sequence (a prefix of it for a receiver that never crashed); with safe delivery this
  includes what receivers delivered before they crashed or were cut off: nothing delivered
  that a later ring gave away.
- ``messages``: no acknowledged message lost, none delivered twice, every delivered message sent.
- ``customers``: guaranteed customers gap-free at the end (their events; the wire if pcaps exist).
- ``cas_linearizable``: the sequencer's compare-and-swap history, as the EVs recorded it,
  is linearizable (Wing-Gong search with Lowe's memoisation; timeouts are indeterminate).
- ``venue``: no trade lost or executed twice, the EVs' states equal.
- ``floor`` and ``orders``: the trading floor's and unified orders' agreement keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK, VIOLATION, SKIPPED = "ok", "violation", "skipped"
SHORT = "short"   # the drain line: the run ended before its work (analysis.drain_state)


@dataclass(frozen=True)
class Violation:
    """What a checker found first: its name, one line saying what is wrong, and the events
    (dicts with at least t_ns, node and kind) that show it."""

    checker: str
    message: str
    events: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def line(self) -> str:
        return f"{self.checker}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    checker: str
    status: str                      # OK, VIOLATION or SKIPPED (SHORT: the drain line)
    violation: Violation | None = None
    note: str = ""                   # why skipped; what was checked

    @property
    def violated(self) -> bool:
        return self.status == VIOLATION


def first_violation(verdicts: list[Verdict]) -> Violation | None:
    return next((v.violation for v in verdicts if v.violated), None)
