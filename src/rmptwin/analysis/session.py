"""One SparkSession for the analysis: embedded local mode by default, any master on request."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmptwin.analysis.spark_log import jvm_stderr_to_log, spark_log_path
from rmptwin.errors import UserError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
LOG4J = Path(__file__).with_name("log4j2.properties")


def spark_session(master: str | None = None, app_name: str = "rmptwin-analysis",
                  conf: dict[str, Any] | None = None) -> SparkSession:
    """A quiet SparkSession: no UI, few shuffle partitions, UTC, WARN-level logs.

    ``master`` None means embedded ``local[2]``; ``spark://host:7077`` (or any master URL)
    runs the same jobs on a cluster. ``conf``: more Spark settings (e.g. spark.executor.memory
    for a cluster's executors).
    """
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UserError("Spark needs Java: install openjdk-17-jre-headless (scripts/provision.sh does)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UserError("pyspark is not installed: run `make provision` (or pip install pyspark)") from None
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # never bind Spark to a real interface
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python tasks (sweeps) run in this venv's Python
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", "6g")
        # The analysis caches the parsed events once and scans them ~20 times: compressing the
        # cached string columns costs more CPU than it saves (measured: cache fill 19 s -> 10 s
        # for 10M events); uncompressed, 10M events take ~1.5 GB, hence 6g above.
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # Let adaptive execution broadcast a measured join side up to 64 MB (default 10 MB):
        # the per-packet send table (tens of MB for 360k packets) is joined with millions of
        # deliveries, receptions and drops, which a sort-merge join would sort each time.
        .config("spark.sql.adaptive.autoBroadcastJoinThreshold", "64MB")
        # The cached events are hash-partitioned by packet (src, stripe, src_seq) once
        # (extract.packet_layout); a join on the packet and more, such as (packet, receiver),
        # may then read both sides in place instead of shuffling both again.
        .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
        # ... and keep the cached events' partitioning known to the plans that read them
        # (by default adaptive execution may re-plan a cached query, which hides it).
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "false")
        # Co-partitioned joins then need no exchange: hash the smaller side (per-packet sends)
        # rather than sort both sides of millions of rows for a sort-merge join.
        .config("spark.sql.join.preferSortMergeJoin", "false")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if LOG4J.exists():
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J}")
    try:
        with jvm_stderr_to_log():   # the JVM's start-up lines go to a log file, not the terminal
            spark = builder.getOrCreate()
    except Exception as e:  # py4j/JVM start failures
        seen = f" (JVM output: {spark_log_path()})" if spark_log_path() else ""
        raise UserError(f"cannot start Spark ({master or DEFAULT_MASTER}): {str(e).splitlines()[0]}{seen}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark
