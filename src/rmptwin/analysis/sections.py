"""Application sections of a run: what an application adds to summary.json, metrics.json
and report.html, beside the ticker's figures that every run has.

Each entry of ``SECTIONS`` is a module that defines any of:

- ``summarize(df: pandas.DataFrame, loaded) -> dict``: keys merged into summary.json; return
  ``{}`` when the run is not of this application (look at the roles in the topology);
- ``spark_metrics(spark, events: pyspark DataFrame, rd: extract.RunData) -> dict``: merged
  into metrics.json under the section's name (omit it, or return ``{}``, when not applicable);
- ``report_html(m: dict) -> str``: one HTML fragment (its own ``<h2>``) from metrics.json,
  ``""`` when there is nothing to say;
- ``headline(summary: dict) -> list[tuple[str, object]]``: the few (label, value) rows of the
  application's headline keys that ``rmptwin sim`` / ``rmptwin run`` print under the ticker's
  table (``cli.display``); ``[]`` when the summary has none of them (not this application's run).
"""

from __future__ import annotations

from collections.abc import ItemsView
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rmptwin.analysis import (
    customer_completeness,
    drain_state,
    edge_summary,
    floor_summary,
    orders_summary,
    security_summary,
    taxonomy_summary,
)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

    from rmptwin.analysis.extract import RunData
    from rmptwin.model import LoadedExperiment

SECTIONS: dict[str, ModuleType] = {
    # name -> module; an application adds one line.
    "unified_orders": orders_summary,
    "security": security_summary,
    "trading_floor": floor_summary,
    "taxonomy": taxonomy_summary,
    "customer_completeness": customer_completeness,
    "edge_stripes": edge_summary,
    "drain": drain_state,
}


def _modules() -> ItemsView[str, ModuleType]:
    return SECTIONS.items()


def summary_sections(df: pd.DataFrame, loaded: LoadedExperiment) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _, mod in _modules():
        if hasattr(mod, "summarize"):
            out.update(mod.summarize(df, loaded))
    return out


def spark_sections(spark: SparkSession, events: DataFrame, rd: RunData) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, mod in _modules():
        if hasattr(mod, "spark_metrics"):
            figures = mod.spark_metrics(spark, events, rd)
            if figures:
                out[name] = figures
    return out


def headline_sections(summary: dict[str, Any]) -> list[tuple[str, list[tuple[str, object]]]]:
    """(section name, its headline rows) of every section with rows for this summary."""
    return [(name, rows) for name, mod in _modules() if hasattr(mod, "headline") and (rows := mod.headline(summary))]


def report_sections(m: dict[str, Any]) -> list[str]:
    return [html for _, mod in _modules() if hasattr(mod, "report_html") and (html := mod.report_html(m))]
