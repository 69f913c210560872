"""Extract: a run directory -> Spark DataFrames (events with parsed detail, drops, counts, hosts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..errors import UserError
from ..results import read_manifest
from ..spec import Topology
from . import schemas

RECEIVER_ROLES = ("primary", "secondary")


# The detail keys the transforms read; a detail without any of these quoted names parses to
# nulls for all of them, so it is not parsed at all (JSON parsing is most of the extract cost).
_DETAIL_KEYS = ('"repair"', '"stripe"', '"type"', '"count"')
# Exact texts of the commonest details (RECV, as events.py writes them: compact separators),
# mapped to their parsed values without a JSON parse.
_DETAIL_LITERALS = {'{"repair":false}': False, '{"repair":true}': True}


def _parsed_detail():
    """The parsed detail (struct of DETAIL_USED), null when there is nothing to read."""
    detail = F.col("detail")
    parsed = F.from_json(detail, schemas.DETAIL_USED)
    mentions = F.lit(False)
    for key in _DETAIL_KEYS:
        mentions = mentions | detail.contains(key)
    d = F.when(detail == "{}", F.lit(None).cast(schemas.DETAIL_USED))
    for text, repair in _DETAIL_LITERALS.items():
        d = d.when(detail == text, F.struct(F.lit(repair).alias("repair"), F.lit(None).cast("long").alias("stripe"),
                                            F.lit(None).cast("string").alias("type"),
                                            F.lit(None).cast("long").alias("count")))
    return d.when(mentions, parsed)


def parse_events(events: DataFrame) -> DataFrame:
    """Replace ``detail`` by the columns the transforms key on: ``stripe`` (detail.stripe, 0 if
    absent), ``repair`` (detail.repair, false if absent), ``d_type`` (detail.type) and
    ``d_count`` (detail.count), flat so the cached frame scans fast.
    ``bytes`` is dropped: no metric reads it, and the cached frame stays small."""
    return (
        events.withColumn("d", _parsed_detail())
        .select("t_ns", "node", "role", "kind", "src", "src_seq", "gseq",
                F.coalesce(F.col("d.stripe"), F.lit(0)).cast("long").alias("stripe"),
                F.coalesce(F.col("d.repair"), F.lit(False)).alias("repair"),
                F.col("d.type").alias("d_type"), F.col("d.count").alias("d_count"))
    )


def host_region(topo: Topology, host) -> str:
    """The region of a host's switch (first by name if several), else its first listed region."""
    for region in sorted(topo.regions):
        if host.switch in topo.regions[region]:
            return region
    listed = getattr(host, "regions", None) or []
    return listed[0] if listed else "none"


def host_rows(topo: Topology) -> list[tuple]:
    return [
        (h.name, h.role, h.switch, host_region(topo, h),
         None if getattr(h, "stripes", None) is None else [int(s) for s in h.stripes])
        for h in topo.hosts
    ]


def hosts_frame(spark: SparkSession, topo: Topology) -> DataFrame:
    return spark.createDataFrame(host_rows(topo), schemas.HOSTS)


@dataclass
class RunData:
    path: Path
    manifest: dict
    topology: Topology
    events: DataFrame           # parsed (see parse_events)
    drops: DataFrame | None     # links/drops.parquet, None if the backend wrote none
    counts: DataFrame | None    # links/counts.parquet
    hosts: DataFrame


def _parquet(spark: SparkSession, path: Path, schema) -> DataFrame | None:
    if not path.exists():
        return None
    return spark.read.schema(schema).parquet(str(path))


def check_run(run: str | Path) -> tuple[dict, Topology, list[Path]]:
    """The manifest, topology and event files of a run directory, or a one-line UserError."""
    run = Path(run)
    if not run.is_dir():
        raise UserError(f"{run}: no such run directory")
    manifest = read_manifest(run)
    if "topology" not in manifest:
        raise UserError(f"{run}/manifest.json: no resolved topology (was it written by rmptwin?)")
    try:
        topo = Topology.model_validate(manifest["topology"])
    except Exception as e:  # pydantic ValidationError: the manifest was edited or is from elsewhere
        raise UserError(f"{run}/manifest.json: topology is not valid ({str(e).splitlines()[0]})") from None
    files = sorted((run / "events").glob("*.parquet"))
    if not files:
        raise UserError(f"{run}: no events/*.parquet (is this a run directory?)")
    return manifest, topo, files


def load_run(spark: SparkSession, run: str | Path) -> RunData:
    run = Path(run)
    manifest, topo, files = check_run(run)
    events = spark.read.schema(schemas.EVENTS).parquet(*[str(f) for f in files])
    return RunData(
        path=run, manifest=manifest, topology=topo, events=parse_events(events),
        drops=_parquet(spark, run / "links" / "drops.parquet", schemas.DROPS),
        counts=_parquet(spark, run / "links" / "counts.parquet", schemas.LINK_COUNTS),
        hosts=hosts_frame(spark, topo),
    )
