"""The command line: `rmptwin` (typer) and everything it prints.

``main`` mounts one module per command group (``run``, ``analyze``, ``net``, ``venue``,
``taxonomy``, ``sweep``, ``claims``); ``console`` makes the one kind of rich console the
project prints with (never wrapped off a terminal); ``display`` prints a run's summary;
``cli.bound_warnings`` prints the seed bounds an experiment breaks. What the Python API does
(loading, sim, run, rerun, analyze, compare, sweep) the commands ask ``rmptwin.api`` for
(tests/unit/test_cli_thin.py).
"""
