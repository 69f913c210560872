"""sweep.html's 95 % intervals stay within what the quantity can be: a metric no run had
negative (latency, loss, a count) is never drawn below 0; a signed one is left as it is."""

from rmptwin.sweeps.sweep_report import clipped_interval, value_range


def test_a_never_negative_metric_has_its_interval_clipped_at_zero():
    low, high = value_range([0.0, 0.4, 3.0])
    lo, hi = clipped_interval([0.5, 10.0], [2.0, 1.0], low, high)
    assert list(lo) == [0.0, 9.0] and list(hi) == [2.5, 11.0]


def test_a_signed_metric_keeps_its_interval():
    low, high = value_range([-1.0, 2.0])
    lo, _ = clipped_interval([0.5], [2.0], low, high)
    assert list(lo) == [-1.5]
