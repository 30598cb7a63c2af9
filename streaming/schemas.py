"""Every schema of the job, in one place: events in, the multiplexed output rows, the state.

The event table (``EVENT_FIELDS``) is the one description of an input row: the Spark schema,
the Arrow schema of Parquet event files and the DDL string of the workload source are all
derived from it (docs/streaming.md, "Events", describes it in words).  The step kinds in its
``type`` column are ``emulator.steps.STEP_TABLE``.

The state schema is flat: typed scalars (readable with ``spark.read.format("statestore")``
under ``value.*``) and binary fields whose layout ``streaming.state_codec`` documents.  No
ArrayType or MapType field appears in it (pyspark 4.3.0 fails on those in state).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from emulator.partition_family import PARTITION
from emulator.quorum.family import QUORUM
from emulator.steps import STEP_KINDS

HEADER_TYPE = PARTITION.stream_header_type  # the ``type`` of a partition's header row (seq 0): "partition"
# The metadata quorum (docs/quorum.md "Streaming"): the ``type`` of a metadata partition's header
# row (seq 0; args ``{"scenario", "voters", "observers", "knobs"}``) and the topic of its rows.
QUORUM_HEADER_TYPE = QUORUM.stream_header_type  # "quorum"
QUORUM_TOPIC = "__cluster_metadata"
# The ``type`` of the workload source's rows: "partition P advances to steps first..last", which
# the state function turns into the generated steps (``streaming.processor``, ``streaming.workload_source``).
TICK_TYPE = "workload_tick"


@dataclass(frozen=True)
class EventField:
    name: str
    type: str  # "string" | "int" | "long"
    doc: str


EVENT_FIELDS: tuple[EventField, ...] = (
    EventField("topic", "string", "the partition key's topic: the scenario's `topic` if the file names one, else its `name`"),
    EventField("partition", "int", "the scenario's `partition` (default 0)"),
    EventField("seq", "long", "per-partition sequence number: 0 is the header row, steps are 1..N"),
    EventField("type", "string", f"`{HEADER_TYPE}` for the header, else a step kind: {', '.join(STEP_KINDS)}"),
    EventField("args", "string", "a JSON object: the step's arguments exactly as in the scenario YAML; for the "
                                 "header `{\"scenario\", \"replicas\", \"config\"}`"),
)
EVENT_COLUMNS: tuple[str, ...] = tuple(f.name for f in EVENT_FIELDS)
_SPARK_TYPES = {"string": StringType(), "int": IntegerType(), "long": LongType()}

EVENT_SCHEMA = StructType([StructField(f.name, _SPARK_TYPES[f.type]) for f in EVENT_FIELDS])
EVENT_DDL = ", ".join(f"{f.name} {f.type}" for f in EVENT_FIELDS)


def event_arrow_schema():
    """The Arrow schema of Parquet event files."""
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}
    return pa.schema([(f.name, types[f.type]) for f in EVENT_FIELDS])


# An input row that cannot be read keeps its text here, and why in REASON_COLUMN (streaming.files).
CORRUPT_COLUMN = "_corrupt_record"
REASON_COLUMN = "_reason"
# What the state function is handed per row: the grouping key and the other columns of
# ``DECODED_SCHEMA`` as one JSON object (nulls left out), packed by Spark before the shuffle.
# pyspark turns every column of a group into a pandas Series and joins them, per group: three
# columns instead of seven halve that fixed cost, which the state function paid on every partition.
PACKED_COLUMN = "packed"
PACKED_FIELDS = ("seq", "type", "args", CORRUPT_COLUMN, REASON_COLUMN)
EVENT_SCHEMA_WITH_CORRUPT = StructType(EVENT_SCHEMA.fields + [StructField(CORRUPT_COLUMN, StringType())])
DECODED_SCHEMA = StructType(EVENT_SCHEMA_WITH_CORRUPT.fields + [StructField(REASON_COLUMN, StringType())])


# Spark's ``binaryFile`` source (a streaming source must be given its schema).
BINARY_FILE_SCHEMA = StructType([StructField("path", StringType()), StructField("modificationTime", TimestampType()),
                                 StructField("length", LongType()), StructField("content", BinaryType())])


def decoded_arrow_schema():
    """The Arrow schema of ``DECODED_SCHEMA`` (what ``streaming.files`` hands Spark)."""
    import pyarrow as pa

    return pa.schema(list(event_arrow_schema()) + [(CORRUPT_COLUMN, pa.string()), (REASON_COLUMN, pa.string())])

STATE_SCHEMA_VERSION = 4  # 2: one JSON document in ``core`` (logs inline); 3: ``generator``; 4: generator 2 (counter-based draws)
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
    StructField("core", BinaryType()),  # JSON: the partition document (emulator.state), logs = the window; a metadata partition: emulator.quorum.codec's
    StructField("generator", BinaryType()),  # a workload partition's generator (emulator.workload), else null
])

OUTPUT_KINDS = ("timeline", "log", "summary", "violations", "losses", "errors", "quarantine")

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
    StructField("op", StringType()),  # log rows: append | truncate | epoch
    StructField("epoch", IntegerType()),  # log rows: the record's (or the cache entry's) leader epoch
    StructField("reason", StringType()),
    StructField("raw", StringType()),
    StructField("protocol", StringType()),
    StructField("steps", LongType()),
    StructField("final", StringType()),  # JSON: the contract's ``final`` object
    StructField("final_findings", StringType()),  # JSON: the final tier judged as of this batch ([] when none)
    StructField("knobs", StringType()),  # JSON: every knob in force when they differ from the preset, else null
    StructField("compacted_prefix", StringType()),  # JSON {"offset", "digest"} once the log was compacted
    StructField("violated", StringType()),  # comma-separated invariants violated so far
    StructField("violations_so_far", IntegerType()),
    StructField("min_hw", LongType()),
    StructField("max_hw", LongType()),
])
OUTPUT_COLUMNS = tuple(f.name for f in OUTPUT_SCHEMA.fields)

# What the state function hands Spark: one row per partition and micro-batch, its output rows of
# every kind as one JSON payload (``streaming.processor.OutputRows.payload``) — one binary value
# instead of tens of thousands of mostly-null multiplexed rows crossing Python -> JVM -> Python.
# The payload names its partition; no other column (each is a pandas column to build per group).
GROUP_OUTPUT_SCHEMA = StructType([
    StructField("payload", BinaryType()),
])

KIND_COLUMNS = {
    "timeline": ("topic", "partition", "scenario", "seq", "event", "replica", "role", "alive", "halted",
                 "leader_epoch", "leo", "hw", "remote_leo", "epoch_cache", "leader", "controller_epoch", "isr"),
    "log": ("topic", "partition", "scenario", "seq", "idx", "replica", "op", "offset", "epoch", "value"),
    "summary": ("topic", "partition", "scenario", "protocol", "steps", "leader", "controller_epoch", "isr",
                "min_hw", "max_hw", "violations_so_far", "violated", "final_findings", "knobs", "compacted_prefix", "final"),
    "violations": ("topic", "partition", "scenario", "seq", "idx", "at_step", "invariant", "detail"),
    "losses": ("topic", "partition", "scenario", "seq", "idx", "at_step", "offset", "value", "acked", "allowed"),
    "errors": ("topic", "partition", "scenario", "seq", "idx", "at_step", "error"),
    "quarantine": ("topic", "partition", "seq", "idx", "reason", "raw"),
}


@functools.lru_cache(maxsize=None)
def arrow_schema(kind: str):
    """The Parquet (Arrow) schema of one output kind, fixed so batches never disagree."""
    import pyarrow as pa

    rows = output_arrow_schema()
    return pa.schema([(c, rows.field(c).type) for c in KIND_COLUMNS[kind]])


@functools.lru_cache(maxsize=None)
def output_arrow_schema():
    """The Arrow schema of ``OUTPUT_SCHEMA`` (the rows ``streaming.pipeline.replicate`` returns)."""
    import pyarrow as pa

    to_arrow = {"StringType()": pa.string(), "IntegerType()": pa.int32(), "LongType()": pa.int64(), "BooleanType()": pa.bool_()}
    return pa.schema([(f.name, to_arrow[repr(f.dataType)]) for f in OUTPUT_SCHEMA.fields])


def output_rows_table(tables: dict):
    """Per-kind Arrow tables (``arrow_schema(kind)``) as one table of ``OUTPUT_SCHEMA`` rows: the
    ``kind`` column, each kind's own columns, nulls in the others; kinds in ``OUTPUT_KINDS`` order."""
    import pyarrow as pa

    schema = output_arrow_schema()
    parts = []
    for kind in OUTPUT_KINDS:
        table = tables.get(kind)
        if table is None or not table.num_rows:
            continue
        n = table.num_rows
        columns = [pa.array([kind] * n, pa.string())]
        columns += [table.column(f.name) if f.name in KIND_COLUMNS[kind] else pa.nulls(n, f.type) for f in list(schema)[1:]]
        parts.append(pa.table(columns, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def tables_by_kind(rows) -> dict:
    """The inverse of ``output_rows_table``: an Arrow table of ``OUTPUT_SCHEMA`` rows -> one table
    per kind that has rows, with that kind's columns (``arrow_schema(kind)``), rows in the given order."""
    import pyarrow.compute as pc

    out = {}
    for kind in OUTPUT_KINDS:
        table = rows.filter(pc.equal(rows.column("kind"), kind))
        if table.num_rows:
            out[kind] = table.select(list(KIND_COLUMNS[kind])).cast(arrow_schema(kind))
    return out


KIND_MEANINGS = {
    "timeline": "one row per applied step and replica: role, liveness, leader epoch, LEO, HW, remote LEOs, epoch cache, the controller's leader, epoch and ISR",
    "log": "each log change: a record appended (`append`), the log cut to `offset` (`truncate`), a cold epoch-cache entry (`epoch`)",
    "summary": "one row per partition and micro-batch that applied a step: steps so far, HW range, invariants violated so far, the contract's `final` object",
    "violations": "an invariant broken at a step (`docs/protocol.md` §7)",
    "losses": "a committed or acknowledged record that is gone (`acked`: it was acknowledged; `allowed`: a fault the model permits to lose it, such as an unclean election or power loss, was involved)",
    "errors": "an answer a step got instead of its effect (a fetch the leader refused, a produce with no leader...)",
    "quarantine": "an input row that could not be applied, with its reason and text",
}
assert set(KIND_MEANINGS) == set(OUTPUT_KINDS)


def kinds_markdown() -> str:
    """The output kinds and their columns (docs/api.md)."""
    lines = ["| kind | columns | one row per |", "|---|---|---|"]
    lines += [f"| `{kind}` | {', '.join(f'`{c}`' for c in KIND_COLUMNS[kind])} | {KIND_MEANINGS[kind]} |" for kind in OUTPUT_KINDS]
    return "\n".join(lines) + "\n"
