"""Extract: a run directory -> Spark DataFrames (events with parsed detail, drops, counts, hosts)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from rmptwin.analysis import schemas
from rmptwin.core.events import Kind
from rmptwin.model import HostSpec, Topology
from rmptwin.records.tables import DETAIL_COLUMNS
from rmptwin.rundir.run import RunDir

RECEIVER_ROLES = ("primary", "secondary")
# The event columns every transform may read, beside the detail columns.
EVENT_KEYS = ("t_ns", "node", "role", "kind", "src", "src_seq", "gseq")


# The detail keys the transforms read; a detail without any of these quoted names parses to
# nulls for all of them, so it is not parsed at all (JSON parsing is most of the extract cost).
_DETAIL_KEYS = ('"repair"', '"stripe"', '"type"', '"count"')
# Exact texts of the commonest details (RECV, as events.py writes them: compact separators),
# mapped to their parsed values without a JSON parse.
_DETAIL_LITERALS = {'{"repair":false}': False, '{"repair":true}': True}


def _parsed_detail() -> Column:
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


def _detail_columns(stripe: Column, repair: Column, d_type: Column, d_count: Column) -> list[Column]:
    """The columns the transforms key on, flat so the cached frame scans fast: ``stripe`` (0 if
    absent), ``repair`` (false if absent), ``d_type`` and ``d_count``."""
    return [F.coalesce(stripe, F.lit(0)).cast("long").alias("stripe"),
            F.coalesce(repair, F.lit(False)).alias("repair"), d_type.alias("d_type"), d_count.alias("d_count")]


def parse_events(events: DataFrame) -> DataFrame:
    """Replace ``detail`` by the columns the transforms key on (``_detail_columns``), parsed from
    its JSON: for event files written before the typed detail columns (tables.DETAIL_COLUMNS).
    ``bytes`` is dropped: no metric reads it, and the cached frame stays small."""
    d = events.withColumn("d", _parsed_detail())
    return d.select(*EVENT_KEYS, *_detail_columns(F.col("d.stripe"), F.col("d.repair"), F.col("d.type"),
                                                  F.col("d.count")))


def typed_events(events: DataFrame) -> DataFrame:
    """``parse_events`` of an event file with the typed detail columns: read, not parsed."""
    return events.select(*EVENT_KEYS, *_detail_columns(F.col("d_stripe"), F.col("d_repair"), F.col("d_type"),
                                                       F.col("d_count")))


def has_typed_detail(files: list[Path]) -> bool:
    """Whether every event file has the typed detail columns (older runs' files have not)."""
    return all(set(DETAIL_COLUMNS) <= set(pq.read_schema(f).names) for f in files)


def read_events(spark: SparkSession, files: list[Path], parse: bool | None = None) -> DataFrame:
    """The events of these files as the transforms read them; their detail JSON is parsed only
    when a file lacks the typed detail columns (or ``parse`` says so: tests compare the two)."""
    if parse is None:
        parse = not has_typed_detail(files)
    paths = [str(f) for f in files]
    if parse:
        return parse_events(spark.read.schema(schemas.LEGACY_EVENTS).parquet(*paths))
    return typed_events(spark.read.schema(schemas.EVENTS).parquet(*paths))


# Partitions of the cached events: a few per core, so that both cores stay busy when one
# partition holds more of the unkeyed rows (releases, customer receptions) than the others.
LAYOUT_PARTITIONS = 4


# Kinds whose packet key (src, stripe, src_seq) the transforms read even without a source.
_PACKET_KINDS = (Kind.SEND, Kind.RECV)


# The names the shuffle of ``packet_layout`` carries as 8-bit codes in one long column
# (``_CODES``), with the repair flag: a short string costs 16 bytes of a shuffled row (slot and
# padded text), each of these columns an 8-byte slot; together they were ~40 of its ~128 bytes.
# A name no table lists gets the reserved code; the row then keeps every coded name as text
# (``_TEXTS``), so that any name round-trips.
_UNKNOWN = 255
_REPAIR_BIT = 1 << 24
_CODES, _TEXTS = "_names_code", "_names_text"
# Kind codes in name order, so that sorting by code sorts by kind as the text would.
_KIND_NAMES = sorted({v for k, v in vars(Kind).items() if k.isupper() and isinstance(v, str)})
# A node is coded only when the topology has this many hosts or fewer: each name costs a
# comparison per row (a CASE), which outgrows the bytes it saves on big topologies.
_MAX_CODED_NODES = 64


def _name_tables(node_names: list[str] | None) -> dict[str, list[str]]:
    """The coded columns, lowest bits first (kind in bits 0-7), each with its names by code."""
    from rmptwin.model import ROLES
    tables = {"kind": _KIND_NAMES, "role": sorted(ROLES)}
    nodes = sorted(set(node_names or ()))
    if 0 < len(nodes) <= _MAX_CODED_NODES:
        tables["node"] = nodes
    return tables


def _encode(column: str, names: list[str]) -> Column:
    code = F.when(F.col(column) == names[0], F.lit(0))
    for i, name in enumerate(names[1:], 1):
        code = code.when(F.col(column) == name, F.lit(i))
    return code.otherwise(F.lit(_UNKNOWN)).cast("long")


def _encode_names(events: DataFrame, tables: dict[str, list[str]]) -> DataFrame:
    """``events`` with the coded columns and ``repair`` replaced by ``_CODES`` and ``_TEXTS``."""
    # The codes first, in a projection of their own: each CASE is then evaluated once per row,
    # though both the packed code and the unknown-name test read it.
    coded = events.select("*", *[_encode(c, names).alias(f"_code_{c}") for c, names in tables.items()])
    codes = [F.col(f"_code_{c}") for c in tables]
    packed = F.when(F.col("repair"), F.lit(_REPAIR_BIT)).otherwise(F.lit(0)).cast("long")
    for i, code in enumerate(codes):
        packed = packed.bitwiseOR(F.shiftleft(code, 8 * i))
    unknown = F.lit(False)
    for code in codes:
        unknown = unknown | (code == _UNKNOWN)
    texts = F.when(unknown, F.array(*[F.col(c) for c in tables]))
    return coded.select(*[c for c in events.columns if c not in tables and c != "repair"],
                        packed.alias(_CODES), texts.alias(_TEXTS))


def _decode_names(coded: DataFrame, columns: list[str], tables: dict[str, list[str]]) -> DataFrame:
    """The inverse of ``_encode_names``: ``columns`` in their order, as they were."""
    decoded = {"repair": (F.col(_CODES).bitwiseAND(_REPAIR_BIT) != 0).alias("repair")}
    for i, (c, names) in enumerate(tables.items()):
        code = F.shiftright(F.col(_CODES), 8 * i).bitwiseAND(0xFF).cast("int")
        by_code = F.element_at(F.array(*[F.lit(n) for n in names]), code + 1)
        decoded[c] = F.when(F.col(_TEXTS).isNull(), by_code).otherwise(F.col(_TEXTS)[i]).alias(c)
    return coded.select(*[decoded.get(c, F.col(c)) for c in columns])


def packet_layout(events: DataFrame, partitions: int = LAYOUT_PARTITIONS,
                  node_names: list[str] | None = None) -> DataFrame:
    """The parsed events as the analysis caches them, laid out once: hash-partitioned by
    packet (src, stripe, src_seq), so that the per-packet aggregations and joins read them in
    place instead of shuffling millions of rows each, and sorted by kind within each partition,
    so that a filter on one kind reads only that kind's cached batches (the cache keeps each
    batch's min and max; measured on 10M events: 1.5 s instead of 5.1 s to count the RECVs).

    Rows without a source (releases and customer receptions numbered by gseq, token passes,
    control messages) would all share one packet key, ("", stripe, -1), hence one partition,
    and every job on those kinds would run on one core. No transform reads src_seq of such a
    row (but of a SEND or RECV, kept as logged), so there it holds t_ns, which spreads them.

    The shuffle carries kind, role, node (``node_names``: the topology's hosts) and repair as
    codes (``_encode_names``), decoded before the cache: the cached frame, its partitioning by
    (src, stripe, src_seq) and every transform are as without codes."""
    unkeyed = (F.col("src") == "") & ~F.col("kind").isin(*_PACKET_KINDS)
    spread = events.withColumn("src_seq", F.when(unkeyed, F.col("t_ns")).otherwise(F.col("src_seq")))
    tables = _name_tables(node_names)
    laid = (_encode_names(spread, tables).repartition(partitions, "src", "stripe", "src_seq")
            .sortWithinPartitions(F.col(_CODES).bitwiseAND(0xFF), "t_ns"))
    return _decode_names(laid, events.columns, tables)


def host_region(topo: Topology, host: HostSpec) -> str:
    """The region of a host's switch (first by name if several), else its first listed region."""
    for region in sorted(topo.regions):
        if host.switch in topo.regions[region]:
            return region
    listed = getattr(host, "regions", None) or []
    return listed[0] if listed else "none"


def host_rows(topo: Topology) -> list[tuple[str, str, str, str, list[int] | None]]:
    return [
        (h.name, h.role, h.switch, host_region(topo, h),
         None if (stripes := getattr(h, "stripes", None)) is None else [int(s) for s in stripes])
        for h in topo.hosts
    ]


def hosts_frame(spark: SparkSession, topo: Topology) -> DataFrame:
    return spark.createDataFrame(host_rows(topo), schemas.HOSTS)


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    topology: Topology
    events: DataFrame           # parsed (see parse_events)
    drops: DataFrame | None     # the link drops, None if the backend wrote none
    counts: DataFrame | None    # the packets per link
    hosts: DataFrame


def _parquet(spark: SparkSession, path: Path, schema: StructType) -> DataFrame | None:
    if not path.exists():
        return None
    return spark.read.schema(schema).parquet(str(path))


def load_run(spark: SparkSession, run: str | Path, parse: bool | None = None) -> RunData:
    rd = RunDir(run)
    manifest, topo, files = rd.check()
    return RunData(
        path=rd.path, manifest=manifest, topology=topo, events=read_events(spark, files, parse),
        drops=_parquet(spark, rd.drops_path, schemas.DROPS),
        counts=_parquet(spark, rd.counts_path, schemas.LINK_COUNTS),
        hosts=hosts_frame(spark, topo),
    )
