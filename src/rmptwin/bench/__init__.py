"""`make bench` (= ``python -m rmptwin.bench``): performance targets, measured, never asserted.

Each benchmark is a module ``rmptwin/bench/bench_<name>.py`` with ``run(quick: bool) -> list[dict]``.
The harness runs a module ``RUNS`` times (module attribute, default 3) and reduces each metric
to its median, min and max; a module that repeats a measurement itself sets ``RUNS = 1`` and
gives the measurements as ``samples``. A row is a dict with these keys (all but ``metric`` and
``value``/``samples`` optional):

    metric      what was measured, e.g. "simulator events/s" (stable: it keys the reference)
    value       the number (or a short string: "skipped") of this run
    samples     instead of value: every measurement of this run
    unit        "events/s", "s", "x" ...
    better      "higher" or "lower": which way is an improvement; rows without it are not
                compared with the reference
    conditions  what the figure depends on: sizes, node mode, captures, duration, RAM disk ...
    goal        the target as text, e.g. ">= 500k/s"
    goal_min / goal_max   the target as numbers: ``ok`` is then judged on the median
    ok          True / False when the goal is met or not, None when there is no goal
    note        details of the run nearest the median

results/bench/bench.json and bench.md are rewritten by every run; bench/reference.json is the
reference copy kept in the repository (``--write-reference`` updates it). See harness.py.
"""
