"""The job as one DataFrame transformation: event rows in, output rows out (``replicate``).

    events -> groupBy(topic, partition).applyInPandasWithState(step the core: one payload per group)
              (or .transformWithState(PartitionProcessor): ``operator``, streaming.operators)
           -> mapInArrow(the payloads as output rows: one ``OUTPUT_SCHEMA`` row each, a ``kind`` column)

It works on a batch or a streaming DataFrame from any source; ``replemu stream`` is this
transformation up to the payloads (``payloads``), with the file or workload source in front and
``streaming.sink.ParquetSink`` behind, which unpacks them itself.  The state function is
``make_state_function`` (``applyInPandasWithState``, the default) or ``make_processor``
(``transformWithState``); both call ``streaming.processor.process_batch`` alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

if TYPE_CHECKING:
    from streaming.processor import StreamProtocol


def group_key(key: tuple) -> tuple[str | None, int | None]:
    """Spark's grouping key ``(topic, partition)`` as Python values (None where unreadable)."""
    import pandas as pd

    topic = None if key[0] is None else str(key[0])
    partition = None if key[1] is None or pd.isna(key[1]) else int(key[1])
    return topic, partition


def events_from_frames(topic, partition, pdfs: Iterable) -> list[dict]:
    """One group's event rows (Spark may split a group over several frames, in any order):
    from the ``PACKED_COLUMN`` the job hands over, or from the event columns themselves."""
    import pandas as pd

    from streaming.schemas import CORRUPT_COLUMN, PACKED_COLUMN, REASON_COLUMN

    def text(v):
        return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v

    events = []
    for pdf in pdfs:
        if PACKED_COLUMN in pdf:
            loads = json.loads
            for packed in pdf[PACKED_COLUMN].tolist():
                d = loads(packed)
                event = {"topic": topic, "partition": partition, "seq": d.get("seq"), "type": d.get("type"),
                         "args": d.get("args"), "raw": d.get(CORRUPT_COLUMN)}
                if d.get(REASON_COLUMN) is not None:
                    event["reason"] = d[REASON_COLUMN]
                events.append(event)
            continue
        raws = pdf[CORRUPT_COLUMN].tolist() if CORRUPT_COLUMN in pdf else [None] * len(pdf)
        reasons = pdf[REASON_COLUMN].tolist() if REASON_COLUMN in pdf else [None] * len(pdf)
        for seq, type_, args, raw, reason in zip(pdf["seq"].tolist(), pdf["type"].tolist(), pdf["args"].tolist(), raws, reasons):
            event = {
                "topic": topic, "partition": partition,
                "seq": seq if type(seq) is int else (None if pd.isna(seq) else int(seq)),
                "type": text(type_), "args": text(args), "raw": text(raw),
            }
            if text(reason) is not None:
                event["reason"] = reason
            events.append(event)
    return events


STATE_STORE_PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

_FRAME_AXES: tuple = ()


def output_frame(topic, partition, rows):
    """A group's output rows as the one-row frame of ``GROUP_OUTPUT_SCHEMA`` (built from an object
    array with ready axes: a quarter of the cost of a frame from a dict, paid per partition and batch)."""
    import numpy as np
    import pandas as pd

    global _FRAME_AXES
    if not _FRAME_AXES:
        _FRAME_AXES = (pd.Index(["payload"]), pd.RangeIndex(1))
    values = np.empty((1, 1), dtype=object)
    values[0, 0] = rows.payload()
    return pd.DataFrame(values, columns=_FRAME_AXES[0], index=_FRAME_AXES[1], copy=False)


def make_state_function(protocol: "StreamProtocol", gap_timeout_ms: int | None, compact_min_records: int) -> Callable:
    """The ``applyInPandasWithState`` function: one group's frames -> output frames (``protocol``:
    ``streaming.processor.stream_protocol``'s, resolved once by the caller)."""

    def step_partition(key: tuple, pdfs: Iterator, state) -> Iterator:
        from streaming.processor import process_batch
        from streaming.state_codec import from_tuple, to_tuple

        topic, partition = group_key(key)
        current = from_tuple(state.get) if state.exists else None
        events = [] if state.hasTimedOut else events_from_frames(topic, partition, pdfs)
        rows, new_state, waiting = process_batch(topic, partition, events, current, protocol, timed_out=state.hasTimedOut,
                                                 compact_min_records=compact_min_records)
        if topic is not None and partition is not None:
            state.update(to_tuple(new_state))
            if waiting and gap_timeout_ms is not None:
                state.setTimeoutDuration(gap_timeout_ms)
        if len(rows):  # one row: every kind's rows in one payload
            yield output_frame(topic, partition, rows)

    return step_partition


def events_from_rows(topic, partition, rows: Iterable) -> list[dict]:
    """One group's event rows as ``transformWithState`` hands them (``Row``s of topic, partition and
    the ``PACKED_COLUMN``): the events ``events_from_frames`` builds from the same packed column."""
    from streaming.schemas import CORRUPT_COLUMN, PACKED_COLUMN, REASON_COLUMN

    loads = json.loads
    events = []
    for row in rows:
        d = loads(row[PACKED_COLUMN])
        event = {"topic": topic, "partition": partition, "seq": d.get("seq"), "type": d.get("type"),
                 "args": d.get("args"), "raw": d.get(CORRUPT_COLUMN)}
        if d.get(REASON_COLUMN) is not None:
            event["reason"] = d[REASON_COLUMN]
        events.append(event)
    return events


def make_processor(protocol: "StreamProtocol", gap_timeout_ms: int | None, compact_min_records: int):
    """The ``transformWithState`` processor: what ``make_state_function`` does, with the state row
    (``STATE_SCHEMA``) as one ``ValueState`` (``TWS_STATE_VAR``) and the gap timeout as a
    processing-time timer.  The timeout's meaning is ``applyInPandasWithState``'s: a group that
    gets rows in a micro-batch starts its wait afresh (its timer is replaced, or dropped when
    nothing waits), and a group whose wait expires with no rows in between is stepped with
    ``timed_out`` and, while rows still wait, waits again."""
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    from streaming.operators import TWS_STATE_VAR
    from streaming.schemas import STATE_SCHEMA

    class PartitionProcessor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.state = handle.getValueState(TWS_STATE_VAR, STATE_SCHEMA)

        def _step(self, key, events, now_ms: int, timed_out: bool) -> Iterator:
            from streaming.processor import process_batch
            from streaming.state_codec import from_tuple, to_tuple

            topic, partition = group_key(key)
            keyed = topic is not None and partition is not None
            current = from_tuple(self.state.get()) if keyed and self.state.exists() else None
            rows, new_state, waiting = process_batch(topic, partition, events, current, protocol, timed_out=timed_out,
                                                     compact_min_records=compact_min_records)
            if keyed:
                self.state.update(to_tuple(new_state))
                if gap_timeout_ms is not None:
                    if not timed_out:  # the wait starts afresh, as a GroupState timeout's (Spark drops an expired timer)
                        for at in list(self.handle.listTimers()):
                            self.handle.deleteTimer(at)
                    if waiting:
                        self.handle.registerTimer(now_ms + gap_timeout_ms)
            if len(rows):  # one row: every kind's rows in one payload
                yield Row(payload=rows.payload())

        def handleInputRows(self, key, rows, timerValues) -> Iterator:
            topic, partition = group_key(key)
            yield from self._step(key, events_from_rows(topic, partition, rows),
                                  timerValues.getCurrentProcessingTimeInMs(), False)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
            yield from self._step(key, [], timerValues.getCurrentProcessingTimeInMs(), True)

        def close(self) -> None:
            pass

    return PartitionProcessor()


def payloads_to_rows(batches: Iterable) -> Iterator:
    """The ``mapInArrow`` function behind ``replicate``: record batches of payloads (one per
    partition and micro-batch, ``GROUP_OUTPUT_SCHEMA``) -> record batches of ``OUTPUT_SCHEMA``
    rows, kind by kind (``OUTPUT_KINDS`` order), each kind's rows in payload then emission order."""
    from streaming.processor import tables_from_payloads
    from streaming.schemas import output_rows_table

    for batch in batches:
        if not batch.num_rows:
            continue
        tables, _ = tables_from_payloads(batch.column(0).to_pylist())
        yield from output_rows_table(tables).to_batches()


def replicate(events, protocol: "str | StreamProtocol" = "kip320", knobs: dict[str, Any] | None = None, gap_timeout_ms: int | None = None,
              compact_min_records: int | None = None, operator: str | None = None):
    """Every partition's events stepped through the core under ``protocol`` (a preset of any
    protocol family, with ``knobs``; or what ``streaming.processor.stream_protocol`` resolved them
    to, knobs included): a DataFrame of output rows (``OUTPUT_SCHEMA``: a ``kind`` column and the
    union of every kind's columns).

    ``events``: a batch or streaming DataFrame with the event columns (``EVENT_FIELDS``: topic,
    partition, seq, type, args; other columns are ignored, and ``_corrupt_record`` / ``_reason``,
    when present, send a row to quarantine with that text and reason).  Per (topic, partition) the
    rows are applied in ``seq`` order across micro-batches; the state lives in Spark's state store
    (the query's checkpoint).  ``gap_timeout_ms``: for a stream that never drains (a
    processing-time trigger), how long rows ahead of a missing ``seq`` wait before the gap is
    reported once in quarantine; None (the default) never times out, which an available-now
    stream needs to end.  ``operator``: Spark's stateful operator for a streaming DataFrame
    (``streaming.operators.OPERATOR_NAMES``; None: ``applyInPandasWithState``); ``transformWithState``
    needs the session's state store to be RocksDB when the query starts.  A batch DataFrame keeps
    no state and is stepped the same way under either.  ``ValueError`` names a missing or
    mistyped column and an unknown protocol, knob or operator.
    """
    from streaming.schemas import OUTPUT_SCHEMA

    return payloads(events, protocol, knobs, gap_timeout_ms, compact_min_records, operator).mapInArrow(
        payloads_to_rows, OUTPUT_SCHEMA)


def payloads(events, protocol: "str | StreamProtocol" = "kip320", knobs: dict[str, Any] | None = None, gap_timeout_ms: int | None = None,
             compact_min_records: int | None = None, operator: str | None = None):
    """``replicate`` before its last step: one row per partition and micro-batch holding all its
    output rows as one payload (``GROUP_OUTPUT_SCHEMA``; ``streaming.processor.OutputRows.payload``).
    ``replemu stream`` runs this and unpacks the payloads in its sink (``ParquetSink``), so the
    rows never cross into the JVM one by one: ``scripts/bench_stream.py --mode rows`` measured
    the row form at 1.14x the CPU and 1.29x the wall time per micro-batch (1,000 partitions)."""
    from pyspark.sql.functions import col, lit, struct, to_json
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.operators import operator_named
    from streaming.processor import COMPACT_MIN_RECORDS, stream_protocol
    from streaming.schemas import (
        CORRUPT_COLUMN,
        EVENT_FIELDS,
        GROUP_OUTPUT_SCHEMA,
        PACKED_COLUMN,
        PACKED_FIELDS,
        REASON_COLUMN,
        STATE_SCHEMA,
    )

    resolved = stream_protocol(protocol, knobs)  # ValueError: an unknown protocol, knob or value
    stateful = operator_named(operator)  # ValueError: an unknown operator
    types = dict(events.dtypes)
    missing = [f.name for f in EVENT_FIELDS if f.name not in types]
    if missing:
        raise ValueError(f"the events DataFrame lacks the event column(s) {', '.join(missing)} "
                         f"(it has {', '.join(types) or 'none'}; docs/api.md lists the event columns)")
    spark_type = {"string": "string", "int": "int", "long": "bigint"}
    numeric = {"tinyint", "smallint", "int", "bigint"}
    for f in EVENT_FIELDS:
        want, have = spark_type[f.type], types[f.name]
        if have != want and not (want in ("int", "bigint") and have in numeric):
            raise ValueError(f"the events column {f.name!r} is {have}, expected {want}")
    none = lit(None).cast("string")
    packed = events.select(
        col("topic"), col("partition").cast("int").alias("partition"), col("seq").cast("bigint").alias("seq"),
        col("type"), col("args"),
        (col(CORRUPT_COLUMN) if CORRUPT_COLUMN in types else none).alias(CORRUPT_COLUMN),
        (col(REASON_COLUMN) if REASON_COLUMN in types else none).alias(REASON_COLUMN),
    ).select("topic", "partition", to_json(struct(*PACKED_FIELDS)).alias(PACKED_COLUMN))
    compact = COMPACT_MIN_RECORDS if compact_min_records is None else compact_min_records
    if not events.isStreaming:  # Spark keeps no state across a batch query: each group once, from nothing
        step_all = make_state_function(resolved, None, compact)
        payloads = packed.groupBy("topic", "partition").applyInPandas(
            lambda key, pdf: pd_concat(step_all(key, iter([pdf]), _NoState())), GROUP_OUTPUT_SCHEMA)
        return payloads
    if stateful.name == "transformWithState":
        provider = events.sparkSession.conf.get(STATE_STORE_PROVIDER_CONF, None) or ""
        if "RocksDB" not in provider:
            raise ValueError(f"operator transformWithState runs only on the RocksDB state store: set "
                             f"{STATE_STORE_PROVIDER_CONF} to {ROCKSDB_PROVIDER} before the query starts "
                             f"(the session has {provider or 'the default, HDFS-backed'})")
        return packed.groupBy("topic", "partition").transformWithState(
            make_processor(resolved, gap_timeout_ms, compact), GROUP_OUTPUT_SCHEMA, "Append",
            "None" if gap_timeout_ms is None else "ProcessingTime")
    timeout = GroupStateTimeout.NoTimeout if gap_timeout_ms is None else GroupStateTimeout.ProcessingTimeTimeout
    payloads = packed.groupBy("topic", "partition").applyInPandasWithState(
        make_state_function(resolved, gap_timeout_ms, compact), GROUP_OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout,
    )
    return payloads


class _NoState:
    """The ``GroupState`` of a batch query's group: none before, nothing kept after."""

    exists = False
    hasTimedOut = False

    def update(self, _value) -> None:
        pass


def pd_concat(frames: Iterator):
    """The frames a state function yielded as one (the single payload row, or none)."""
    import pandas as pd

    from streaming.schemas import GROUP_OUTPUT_SCHEMA

    frames = list(frames)
    return frames[0] if len(frames) == 1 else pd.DataFrame({f.name: [] for f in GROUP_OUTPUT_SCHEMA.fields})
