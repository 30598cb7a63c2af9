"""The two validation frames of ``expectations.suites`` computed by Spark, where a micro-batch's
rows are: ``validation_frames_spark(kind -> DataFrame)`` gives the same rows as
``suites.frames_from_outputs(kind -> pandas)``, with Spark SQL functions only (``from_json``,
higher-order array functions, a window ``lag``): no Python UDF, nothing collected.

* ``timeline``: one row per step and replica; ``cache_increasing`` (the epoch cache's entries
  strictly increase in epoch and start offset) and ``leading`` (a live leader).
* ``partitions``: one row per ``summary`` row (one per partition that applied a step): the
  controller's leader is in its ISR (from ``final``), the batch's ``log`` rows append at contiguous
  offsets per replica (after an append at ``o`` the next is ``o + 1``; after a cut to ``t`` it is
  ``t``), and one column per invariant of the registry, True when the summary says it is violated
  (``violated`` so far, or the final tier's ``final_findings``: ``streaming.results.violated_in_summary``).

Both frames are ordered as the pandas ones are (timeline by topic, partition, seq, replica;
partitions by topic, partition): an aggregate ignores the order, and a bounded sample of
offending rows (GX's ``partial_unexpected_count`` under a ``limit``) becomes a top-N in that
order, so the Spark and the pandas path name the same offending partitions.
"""

from __future__ import annotations

from typing import Any

from emulator.invariants import REGISTRY
from emulator.quorum.family import QUORUM

TIMELINE_COLUMNS = ("topic", "partition", "seq", "replica", "role", "alive", "leo", "hw", "leader_epoch",
                    "cache_increasing", "leading")
PARTITION_COLUMNS = ("partition_key", "leader_in_isr", "offsets_contiguous") + tuple(inv.name for inv in REGISTRY)
# A metadata-quorum stream's partitions frame (docs/quorum.md "Streaming"): one row per metadata
# partition, one boolean column per invariant of the quorum registry (True: violated so far).
QUORUM_PARTITION_COLUMNS = ("partition_key",) + QUORUM.invariant_names()
# Each protocol family's partitions frame (by ``Family.name``): its columns.
PARTITIONS_COLUMNS = {"partition": PARTITION_COLUMNS, QUORUM.name: QUORUM_PARTITION_COLUMNS}
FAMILIES = tuple(PARTITIONS_COLUMNS)


def partition_columns(family: str = "partition") -> tuple[str, ...]:
    return PARTITIONS_COLUMNS[family]
# The order of each frame's rows (GX names the first offending rows in it).
ORDER = {"timeline": ("topic", "partition", "seq", "replica"), "partitions": ("topic", "partition")}
# The columns that name a row's partition in GX's bounded list of offending rows, per frame.
INDEX_COLUMNS = {"timeline": ("topic", "partition"), "partitions": ("partition_key",)}

# The epoch cache: a JSON list of [epoch, start offset]; increasing when every entry is above the last.
_CACHE_INCREASING = ("size(c) < 2 OR forall(sequence(1, size(c) - 1), "
                     "i -> c[i][0] > c[i - 1][0] AND c[i][1] > c[i - 1][1])")


def empty_kind(spark, kind: str):
    """An empty DataFrame of one output kind's columns and types (a kind the batch has no rows of)."""
    from pyspark.sql.types import StructType

    from streaming.schemas import KIND_COLUMNS, OUTPUT_SCHEMA

    fields = {f.name: f for f in OUTPUT_SCHEMA.fields}
    return spark.createDataFrame([], StructType([fields[c] for c in KIND_COLUMNS[kind]]))


VALIDATED_KINDS = ("timeline", "log", "summary")  # the kinds the two frames are built from


def kind_dataframes(rows) -> dict[str, Any]:
    """A micro-batch of ``OUTPUT_SCHEMA`` rows (a Spark DataFrame with the ``kind`` column, as
    ``streaming.pipeline.replicate`` returns) as the kinds ``validation_frames_spark`` reads:
    kind -> DataFrame of that kind's rows (lazy filters of ``rows``)."""
    from pyspark.sql import functions as F

    from streaming.schemas import KIND_COLUMNS

    return {kind: rows.where(F.col("kind") == kind).select(*KIND_COLUMNS[kind]) for kind in VALIDATED_KINDS}


def validation_frames_spark(kinds: dict[str, Any], spark=None, ordered: bool = True, family: str = "partition") -> dict[str, Any]:
    """``{"timeline": DataFrame, "partitions": DataFrame}`` from one micro-batch's rows by kind
    (each a Spark DataFrame with at least that kind's ``KIND_COLUMNS`` it uses; a missing kind has
    no rows).  Lazy: nothing runs until the frames are used.  ``ordered=False``: in no order, and
    the partitions frame keeps its ``topic`` and ``partition`` columns, for a caller that brings
    the rows to one process and puts them in order there (``local_frame``): a sort in Spark is two
    jobs (a sample of the keys, then the sort)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = spark or next((df.sparkSession for df in kinds.values() if df is not None), None) or SparkSession.getActiveSession()

    def kind(name: str):
        df = kinds.get(name)
        return df if df is not None else empty_kind(spark, name)

    t = kind("timeline")
    cache_json = F.when(F.col("epoch_cache").isNull() | (F.col("epoch_cache") == ""), F.lit("[]")).otherwise(F.col("epoch_cache"))
    timeline = (t.select(*TIMELINE_COLUMNS[:9], F.from_json(cache_json, "array<array<bigint>>").alias("c"))
                .withColumn("cache_increasing", F.coalesce(F.expr(_CACHE_INCREASING), F.lit(False)))
                .withColumn("leading", F.coalesce((F.col("role") == "leader") & (F.col("alive") == True), F.lit(False)))  # noqa: E712
                .drop("c"))
    if ordered:
        timeline = timeline.orderBy(*ORDER["timeline"])

    partitions = PARTITIONS_FRAMES[family](kind("summary"), kind("log"), ordered)
    return {"timeline": timeline, "partitions": partitions}


def quorum_partitions(s, log, ordered: bool):
    """A metadata-quorum stream's partitions frame: the quorum registry's verdicts only (its
    summary rows' ``violated``)."""
    from pyspark.sql import functions as F

    violated = F.split(F.coalesce(F.col("violated"), F.lit("")), ",")
    partitions = s.select("topic", "partition",
                          F.concat_ws("/", F.col("topic"), F.col("partition").cast("string")).alias("partition_key"),
                          *[F.array_contains(violated, name).alias(name) for name in QUORUM_PARTITION_COLUMNS[1:]])
    if ordered:
        partitions = partitions.orderBy(*ORDER["partitions"]).select(*QUORUM_PARTITION_COLUMNS)
    return partitions


def partition_partitions(s, log, ordered: bool):
    """The partition family's partitions frame: the controller's leader in its ISR, the batch's
    log rows contiguous, one column per invariant of the registry."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    log = log.where(F.col("op").isin("append", "truncate"))
    by_replica = Window.partitionBy("topic", "partition", "replica").orderBy("seq", "idx")
    expected_next = F.when(F.col("op") == "append", F.col("offset") + 1).otherwise(F.col("offset"))
    gapped = (log.select("topic", "partition", "op", "offset", F.lag(expected_next).over(by_replica).alias("expected"))
              .where((F.col("op") == "append") & F.col("expected").isNotNull() & (F.col("expected") != F.col("offset")))
              .select("topic", "partition").distinct().withColumn("gapped", F.lit(True)))
    controller = F.from_json("final", "struct<controller:struct<leader:int,isr:array<int>>>")["controller"]
    names = F.array_union(
        F.filter(F.split(F.coalesce(F.col("violated"), F.lit("")), ","), lambda x: x != ""),
        F.coalesce(F.transform(F.from_json("final_findings", "array<struct<invariant:string>>"), lambda f: f["invariant"]),
                   F.array().cast("array<string>")))
    partitions = (s.select("topic", "partition", controller.alias("controller"), names.alias("names"))
                  .join(gapped, ["topic", "partition"], "left")
                  .select("topic", "partition",
                          F.concat_ws("/", F.col("topic"), F.col("partition").cast("string")).alias("partition_key"),
                          F.coalesce(F.col("controller.leader").isNull()
                                     | F.array_contains(F.col("controller.isr"), F.col("controller.leader")),
                                     F.lit(False)).alias("leader_in_isr"),
                          F.col("gapped").isNull().alias("offsets_contiguous"),
                          *[F.coalesce(F.array_contains("names", inv.name), F.lit(False)).alias(inv.name) for inv in REGISTRY]))
    return partitions.orderBy(*ORDER["partitions"]).select(*PARTITION_COLUMNS) if ordered else partitions


# Each protocol family's partitions frame in Spark (by ``Family.name``): (summary, log, ordered) -> DataFrame.
PARTITIONS_FRAMES = {"partition": partition_partitions, QUORUM.name: quorum_partitions}


def local_frame(name: str, frame, family: str = "partition"):
    """A validation frame of ``validation_frames_spark(..., ordered=False)`` brought to this process
    (pandas) as the ordered one would be: sorted by ``ORDER``, with ``TIMELINE_COLUMNS`` /
    ``PARTITION_COLUMNS`` only."""
    columns = list(TIMELINE_COLUMNS if name == "timeline" else partition_columns(family))
    return frame.sort_values(list(ORDER[name]), kind="stable")[columns].reset_index(drop=True)
