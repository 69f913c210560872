"""Analysis of run directories (simulated or emulated): summary.json, and with PySpark
metrics, loss correlation, MINC link-loss inference and a self-contained HTML report.

Layout: ``summary`` (summary.json's figures, pandas, no Spark; run after every experiment),
``session`` (SparkSession), ``schemas`` (the Spark twin of tables.EVENT_SCHEMA), ``extract``
(run directory -> DataFrames), transforms in ``latency``, ``loss``, ``minc``, ``control``,
``throughput`` (pure DataFrame -> DataFrame), ``job`` (extract/transform/load), ``plots`` and
``report`` (HTML), ``compare`` (two runs side by side); the commands `rmptwin analyze` and `compare` are ``rmptwin.cli.analyze``.
A figure summary.json and the Spark jobs both compute has one definition (``summary``'s
docstring), held equal by tests/spark/test_summary_agrees.py.
"""
