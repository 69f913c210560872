"""Each application's headline rows (``sections.headline_sections``), which `rmptwin sim` and
`rmptwin run` print: present keys give rows, absent ones none."""

from __future__ import annotations

from rmptwin.analysis.sections import headline_sections
from rmptwin.cli.display import applications_table


def _rows(summary: dict) -> dict[str, dict]:
    return {name: dict(rows) for name, rows in headline_sections(summary)}


def test_a_ticker_summary_has_no_application_rows():
    summary = {"receivers": 3, "agreement": True, "messages_lost": 0}
    assert headline_sections(summary) == [] and applications_table(summary) is None


def test_security_rows_total_the_alarms_and_show_edge_drops_only_when_measured():
    s = {"unauthorized_sequenced": 0, "forged_delivered": 1, "replayed_delivered": 2,
         "alarms": {"bad_seal": 3, "unknown_source": 4}}
    rows = _rows(s)["security"]
    assert rows == {"unauthorized_sequenced": 0, "forged_delivered": 1, "replayed_delivered": 2, "alarms total": 7}
    assert _rows({**s, "unauthorized_dropped": 9})["security"]["unauthorized_dropped"] == 9


def test_orders_rows_order_the_distances_numerically():
    s = {"offers_admitted": 10, "offers_rejected_total": 2, "near_first_fraction": {"20": 0.5, "5": 0.4},
         "exchanges_agree": None}
    rows = _rows(s)["unified_orders"]
    assert list(rows["near_first_fraction by distance ms"]) == ["5", "20"]
    assert "exchanges_agree" not in rows   # direct entry: no ring order to agree on
    assert _rows({**s, "exchanges_agree": True})["unified_orders"]["exchanges_agree"] is True
