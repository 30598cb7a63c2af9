"""Spark schemas of the job: events in, the multiplexed output rows, and the partition state.

The state schema is flat: typed scalars (readable with ``spark.read.format("statestore")``
under ``value.*``) and binary fields whose layout ``streaming.state_codec`` documents.  No
ArrayType or MapType field appears in it (pyspark 4.3.0 fails on those in state).
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType,
)

EVENT_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("seq", LongType()),
    StructField("type", StringType()),
    StructField("args", StringType()),
])

# The JSON source keeps unparsable lines here instead of failing the query.
CORRUPT_COLUMN = "_corrupt_record"
EVENT_SCHEMA_WITH_CORRUPT = StructType(EVENT_SCHEMA.fields + [StructField(CORRUPT_COLUMN, StringType())])

STATE_SCHEMA_VERSION = 1
STATE_SCHEMA = StructType([
    StructField("state_version", IntegerType()),
    StructField("protocol", StringType()),
    StructField("scenario", StringType()),
    StructField("header", StringType()),  # "waiting" | "ok" | "invalid"
    StructField("next_seq", LongType()),
    StructField("steps_applied", LongType()),
    StructField("controller_leader", IntegerType()),
    StructField("controller_epoch", IntegerType()),
    StructField("violated", StringType()),  # comma-separated invariant names
    StructField("gap_reported_seq", LongType()),
    StructField("waiting", BinaryType()),  # JSON: rows that arrived ahead of a gap
    StructField("core", BinaryType()),  # JSON: the partition document without its big arrays
    StructField("logs", BinaryType()),  # Arrow IPC: replica, epoch, value
    StructField("committed", BinaryType()),  # Arrow IPC: epoch, value
    StructField("acked", BinaryType()),  # Arrow IPC: offset, epoch, value, step, holders, lost_by_power
])

OUTPUT_KINDS = ("timeline", "summary", "violations", "losses", "errors", "quarantine")

# One output row type for all kinds; each sink keeps the columns of its kind.
OUTPUT_SCHEMA = StructType([
    StructField("kind", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("scenario", StringType()),
    StructField("seq", LongType()),  # the step being applied when the row was emitted
    StructField("idx", IntegerType()),  # order among the rows of one kind emitted at that step
    StructField("event", StringType()),
    StructField("replica", IntegerType()),
    StructField("role", StringType()),
    StructField("alive", BooleanType()),
    StructField("halted", BooleanType()),
    StructField("leader_epoch", IntegerType()),
    StructField("leo", LongType()),
    StructField("hw", LongType()),
    StructField("remote_leo", StringType()),  # JSON object or null
    StructField("epoch_cache", StringType()),  # JSON list
    StructField("leader", IntegerType()),
    StructField("controller_epoch", IntegerType()),
    StructField("isr", StringType()),  # JSON list
    StructField("at_step", LongType()),  # the step a violation / loss / error refers to
    StructField("invariant", StringType()),
    StructField("detail", StringType()),
    StructField("offset", LongType()),
    StructField("value", StringType()),
    StructField("acked", BooleanType()),
    StructField("allowed", BooleanType()),
    StructField("error", StringType()),
    StructField("reason", StringType()),
    StructField("raw", StringType()),
    StructField("protocol", StringType()),
    StructField("steps", LongType()),
    StructField("final", StringType()),  # JSON: the contract's ``final`` object
    StructField("convergence", StringType()),  # EventualConvergence detail if judged now, else null
    StructField("compacted_prefix", StringType()),  # JSON {"offset", "digest"} once the log was compacted
    StructField("violated", StringType()),  # comma-separated invariants violated so far
    StructField("violations_so_far", IntegerType()),
    StructField("min_hw", LongType()),
    StructField("max_hw", LongType()),
])
OUTPUT_COLUMNS = tuple(f.name for f in OUTPUT_SCHEMA.fields)

KIND_COLUMNS = {
    "timeline": ("topic", "partition", "scenario", "seq", "event", "replica", "role", "alive", "halted",
                 "leader_epoch", "leo", "hw", "remote_leo", "epoch_cache", "leader", "controller_epoch", "isr"),
    "summary": ("topic", "partition", "scenario", "protocol", "steps", "leader", "controller_epoch", "isr",
                "min_hw", "max_hw", "violations_so_far", "violated", "convergence", "compacted_prefix", "final"),
    "violations": ("topic", "partition", "scenario", "seq", "idx", "at_step", "invariant", "detail"),
    "losses": ("topic", "partition", "scenario", "seq", "idx", "at_step", "offset", "value", "acked", "allowed"),
    "errors": ("topic", "partition", "scenario", "seq", "idx", "at_step", "error"),
    "quarantine": ("topic", "partition", "seq", "idx", "reason", "raw"),
}


def arrow_schema(kind: str):
    """The Parquet (Arrow) schema of one output kind, fixed so batches never disagree."""
    import pyarrow as pa

    to_arrow = {"StringType()": pa.string(), "IntegerType()": pa.int32(), "LongType()": pa.int64(), "BooleanType()": pa.bool_()}
    types = {f.name: to_arrow[repr(f.dataType)] for f in OUTPUT_SCHEMA.fields}
    return pa.schema([(c, types[c]) for c in KIND_COLUMNS[kind]])
