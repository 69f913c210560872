"""report.html reads plainly: a receiver that lost nothing is named as 'no loss' under the loss
correlation matrix instead of drawn as a blank row (its correlation is 0/0, undefined, and zeros
would claim its losses are independent of the others'); count axes have whole-number ticks (never
1.25 receivers); a large number is written 15,210, not 1.521e+04. From a metrics dict, no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from rmptwin.analysis import plots
from rmptwin.analysis.report import fmt, table


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plot functions draw, kept for a look before they are written."""
    figures: list[Figure] = []
    keep = plots.save_figure

    def save(fig: Figure, path: Path, dpi: int = 90) -> Path:
        figures.append(fig)
        return keep(fig, path, dpi)

    monkeypatch.setattr(plots, "save_figure", save)
    return figures


def _correlation(losses: dict[str, list[int]], packets: int) -> list[dict[str, Any]]:
    """loss.loss_correlation's rows (a <= b, the diagonal included) for loss indicator vectors."""
    rows = []
    names = sorted(losses)
    for i, a in enumerate(names):
        for b in names[i:]:
            x, y = np.array(losses[a], float), np.array(losses[b], float)
            defined = 0 < x.sum() < packets and 0 < y.sum() < packets
            rows.append({"a": a, "b": b, "packets": packets, "loss_a": int(x.sum()), "loss_b": int(y.sum()),
                         "loss_both": int((x * y).sum()),
                         "correlation": float(np.corrcoef(x, y)[0, 1]) if defined else None})
    return rows


def test_a_receiver_without_loss_is_named_not_drawn_as_a_blank_row(drawn: list[Figure], tmp_path: Path) -> None:
    losses = {"r1": [1, 0, 1, 0, 0, 1], "r2": [1, 0, 0, 0, 0, 1], "r3": [0, 0, 0, 0, 0, 0],
              "r4": [0, 1, 0, 0, 1, 0]}
    m = {"correlation": _correlation(losses, 6), "tree_order": ["r1", "r2", "r3", "r4"]}
    plots.correlation_matrix(m, tmp_path / "correlation.png")
    ax = drawn[-1].axes[0]
    matrix = np.asarray(ax.images[0].get_array(), dtype=float)
    assert not np.isnan(matrix).all(axis=1).any(), "a blank row in the heatmap"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["r1", "r2", "r4"]
    assert np.allclose(np.diag(matrix), 1.0)
    assert "no loss: r3" in ax.get_xlabel()


def test_a_run_where_no_receiver_lost_says_so(drawn: list[Figure], tmp_path: Path) -> None:
    m = {"correlation": _correlation({"r1": [0, 0], "r2": [0, 0]}, 2), "tree_order": ["r1", "r2"]}
    plots.correlation_matrix(m, tmp_path / "correlation.png")
    ax = drawn[-1].axes[0]
    assert not ax.images and "no loss: r1, r2" in ax.get_xlabel()


def test_count_axes_have_whole_number_ticks(drawn: list[Figure], tmp_path: Path) -> None:
    m = {"nacks_by_losers": [{"receivers_lost": 1, "mean_nacks": 1.05, "max_nacks": 2, "packets": 19},
                             {"receivers_lost": 2, "mean_nacks": 2.4, "max_nacks": 3, "packets": 5}]}
    plots.nacks_per_loss(m, tmp_path / "nacks.png")
    ax = drawn[-1].axes[0]
    for ticks in (ax.get_xticks(), ax.get_yticks()):
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), list(ticks)


@pytest.mark.parametrize("value, shown", [(15210.0, "15,210"), (15210, "15,210"), (9999.6, "10,000"),
                                          (123456.7, "123,457"), (1521.3, "1521"), (0.5, "0.5"), (12, "12")])
def test_large_numbers_are_written_plainly(value: float, shown: str) -> None:
    assert fmt(value) == shown


def test_a_report_table_has_no_exponent() -> None:
    page = table([{"node": "r1", "repaired": 15210.0, "bytes": 1_234_567}])
    assert "15,210" in page and "1,234,567" in page and "e+" not in page
