"""sweep.html: drawing a plot warns about nothing (a one-point line once made matplotlib call
float() on a pandas Series, a FutureWarning that leaked into `rmptwin sweep`'s output); each
caption is laid out with its own plot, not nearer the next row's; a parameter given one value
(`--set KEY=V`) is listed as fixed, not as swept."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from rmptwin.rundir.sweep import SweepDir
from rmptwin.sweeps.sweep_report import _plot, write_report
from rmptwin.sweeps.task import SEED


def _table() -> pd.DataFrame:
    """Two seeds at each delta_a_ms, k_r given one value: what `--set protocol.delta_a_ms=20,150
    --set protocol.k_r=3 --seeds 2` makes."""
    rows = []
    for delta in (20, 150):
        for seed in (1, 2):
            rows.append({"protocol.delta_a_ms": delta, "protocol.k_r": 3, SEED: seed,
                         "delivery_latency_ms.p99": delta + seed * 1.5, "fairness_spread_ms.p99": 10.0 / seed})
    return pd.DataFrame(rows)


def test_a_plot_with_one_point_per_line_warns_nothing(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _plot(_table(), "protocol.k_r", ["protocol.delta_a_ms"], "delivery_latency_ms.p99", tmp_path / "k_r.png")
    assert (tmp_path / "k_r.png").stat().st_size > 0


def test_a_parameter_given_one_value_is_fixed_not_swept(tmp_path: Path) -> None:
    sweep = SweepDir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # the test above's concern, not this one's
        page = Path(write_report(sweep, _table(), ["protocol.delta_a_ms", "protocol.k_r"], "sweep of line3")
                    ).read_text()
    intro = re.search(r"<p>(.*?)</p>", page)
    assert intro is not None
    assert "swept: protocol.delta_a_ms;" in intro.group(1)
    assert "fixed: protocol.k_r = 3" in intro.group(1)
    assert "against protocol.k_r" not in page          # no one-point plots against a constant
    assert "protocol.k_r=3" not in page                  # nor a legend line per its one value


def test_each_caption_sits_right_under_its_own_plot(tmp_path: Path) -> None:
    page = Path(write_report(SweepDir(tmp_path), _table(), ["protocol.delta_a_ms"], "sweep of line3")).read_text()
    figures = re.findall(r"<figure[^>]*>.*?</figure>", page)
    assert len(figures) == 2
    for figure in figures:
        # the image a block (no inline baseline gap under it) with its caption straight after it
        assert re.fullmatch(r'<figure style="margin:0;[^"]*"><img [^>]*style="display:block"[^>]*>'
                            r'<figcaption style="margin:2px 0 0;[^"]*">[^<]+</figcaption></figure>', figure), figure
    # the figures in a wrapping grid whose rows are further apart than a caption is from its plot
    grid = re.search(r'<div style="([^"]*)"><figure', page)
    assert grid is not None and "flex-wrap:wrap" in grid.group(1)
    row_gap = re.search(r"row-gap:(\d+)px", grid.group(1))
    assert row_gap is not None and int(row_gap.group(1)) >= 20
