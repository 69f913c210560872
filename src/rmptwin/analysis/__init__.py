"""PySpark analysis of run directories (simulated or emulated): metrics, loss correlation,
MINC link-loss inference, and a self-contained HTML report with plots.

Layout: ``session`` (SparkSession), ``schemas`` (the Spark twin of events.EVENT_SCHEMA),
``extract`` (run directory -> DataFrames), transforms in ``latency``, ``loss``, ``minc``,
``control``, ``throughput`` (pure DataFrame -> DataFrame), ``job`` (extract/transform/load),
``plots`` and ``report`` (HTML), ``compare`` (two runs side by side).
"""
