"""Spark's JVM writes start-up noise to stderr before any configuration of ours can apply
("WARNING: Using incubator modules", "Setting default log level", "To adjust logging level
..."): three lines before every Spark command's own output. The JVM inherits this process's
stderr when it starts, so it is started with stderr pointing at a log file instead; the JVM
keeps writing there (its later warnings too) and this process's stderr is restored at once.

The file is ``$RMPTWIN_SPARK_LOG`` or ``<tmp>/rmptwin-spark-<uid>.log`` (appended to, one
header line per start); ``RMPTWIN_SPARK_LOG=-`` leaves the JVM on the terminal.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def spark_log_path() -> Path | None:
    chosen = os.environ.get("RMPTWIN_SPARK_LOG")
    if chosen == "-":
        return None
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"rmptwin-spark-{os.getuid()}.log"


@contextmanager
def jvm_stderr_to_log() -> Iterator[Path | None]:
    """Within the block, fd 2 is the log file (a JVM started here keeps it); yields its path."""
    path = spark_log_path()
    if path is None:
        yield None
        return
    try:
        log = open(path, "a")
    except OSError:
        yield None   # no log file to be had: noise is better than no Spark
        return
    with log:
        log.write(f"--- rmptwin Spark start {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}\n")
        log.flush()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            yield path
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
