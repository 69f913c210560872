"""`make bench` (= ``python -m rmptwin.bench``): performance targets, measured, never asserted.

Each benchmark is a module ``rmptwin/bench/bench_<name>.py`` with ``run(quick: bool) -> list[dict]``.
A row is a dict with these keys (all but ``metric`` and ``value`` optional):

    metric   what was measured, e.g. "simulator events/s"
    value    the number (or a short string)
    unit     "events/s", "s", "x" ...
    goal     the target as text, e.g. ">= 500k/s"
    ok       True / False when the goal is met or not, None when there is no goal
    note     how it was measured (sizes, scaling, what it was compared with)

Quote medians and ratios measured in one run; long benchmarks keep a ``quick`` variant.
"""
