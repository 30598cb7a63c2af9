"""The Spark Structured Streaming job of ``replemu stream``.

    file or workload source -> streaming.pipeline.replicate (step the core per partition)
                            -> foreachBatch: streaming.sink.ParquetSink — the executors turn the
                               payloads into rows and write one Parquet directory per output kind
                               and batch id; the driver renames it into place

Every output kind is written under ``OUTPUT/<kind>/batch_id=<id>/``; a batch that Spark
replays after a restart replaces its own directory, so each micro-batch lands exactly once.
The session is ``streaming.session``'s, the progress lines ``streaming.progress``'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .checkpoint import RUN_FILE
from .pipeline import ROCKSDB_PROVIDER, STATE_STORE_PROVIDER_CONF, payloads, replicate
from .processor import StreamProtocol, stream_protocol
from .progress import input_rows, print_progress, progress_listener, state_bytes
from .session import build_spark, is_connect
from .sink import BatchObserver, BatchStats, ParquetSink, landed_stats
from .triggers import Trigger, parse_trigger

if TYPE_CHECKING:
    from .workload_source import WorkloadSpec

STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": ROCKSDB_PROVIDER,
}
STATE_STORE_CONF = STATE_STORE_PROVIDER_CONF
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"


def start_stream(spark, input_dir: str | Path, output_dir: str | Path, checkpoint_dir: str | Path, protocol: str | StreamProtocol,
                 trigger: Trigger | str = "available-now", max_files_per_trigger: int | None = None, fmt: str | None = None,
                 gap_timeout_ms: int = 60000, on_batch: Callable[[BatchStats], None] | None = None,
                 compact_min_records: int | None = None, observer: BatchObserver | None = None,
                 workload: WorkloadSpec | None = None, knobs: dict[str, Any] | None = None, state_store: str | None = None,
                 shuffle_partitions: int | None = None, store=None, rows: bool = False, retention: dict | None = None,
                 operator: str | None = None):
    """Start the query; returns ``(query, sink)``.  ``protocol`` (and ``knobs``): a preset of any
    protocol family, or what ``streaming.processor.stream_protocol`` resolved them to.  ``store``: the output's (``streaming.storage``),
    opened here when not given.  ``rows``: hand the sink ``replicate``'s rows instead of the
    payloads (the same files; a benchmark and a test compare the two).

    ``retention``: ``{kind: batches}`` kept of the bulky kinds (``replemu stream --retain``); older
    micro-batches are compacted into ranges after every batch either way (``streaming.compaction``).

    ``state_store`` and ``shuffle_partitions`` (None: the session's) apply to this query only; Spark
    records both in a new checkpoint and a restart uses the recorded ones.  ``operator``: the
    stateful operator (``streaming.operators``; None: ``applyInPandasWithState``); ``transformWithState``
    runs on RocksDB (the default store then) with changelog checkpointing, and refuses another
    ``state_store`` with ``ValueError``.

    ``workload`` (instead of ``input_dir``): a ``streaming.workload_source.WorkloadSpec``, the
    profile in it as data (``profile_spec``, JSON), so executors need no files.
    """
    trigger = parse_trigger(trigger) if isinstance(trigger, str) else trigger
    from pyspark.sql.functions import lit

    from streaming.operators import operator_named, state_store_for
    from streaming.schemas import BINARY_FILE_SCHEMA, CORRUPT_COLUMN, DECODED_SCHEMA, REASON_COLUMN

    stateful = operator_named(operator)
    state_store = state_store_for(stateful.name, state_store)
    protocol = stream_protocol(protocol, knobs)  # ValueError: an unknown protocol, knob or value
    if store is None:
        from streaming.storage import open_store

        store = open_store(output_dir, spark)
        store.mkdirs()
    no_corrupt = lit(None).cast("string")  # sources without unreadable lines
    reader = spark.readStream
    if workload is not None:
        # Generated events (streaming.workload_source): no input files.
        from streaming.workload_source import register

        register(spark)
        fmt = "workload"
        events = (reader.format("replemu_workload").options(**workload.to_options())
                  .load().withColumn(CORRUPT_COLUMN, no_corrupt).withColumn(REASON_COLUMN, no_corrupt))
    else:
        # Whole files, decoded in Python (streaming.files): JSON lines and Parquet side by side,
        # and a file that cannot be decoded goes to quarantine instead of failing the query.
        from streaming.files import decode_file_batches

        fmt = "files"
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        events = (reader.format("binaryFile").schema(BINARY_FILE_SCHEMA).option("recursiveFileLookup", "true")
                  .load(str(input_dir)).mapInArrow(decode_file_batches, DECODED_SCHEMA))
    query_conf = dict(stateful.query_conf)  # fixed in the checkpoint by the query's first start
    if state_store is not None:
        query_conf[STATE_STORE_CONF] = STATE_STORES[state_store]
    if shuffle_partitions is not None:
        query_conf[SHUFFLE_PARTITIONS_CONF] = str(int(shuffle_partitions))
    store.write_bytes(RUN_FILE, (json.dumps({"protocol": protocol.name, "knobs": protocol.knobs or {}, "input": str(input_dir), "format": fmt,
                                               "workload": None if workload is None else workload.document(), "state_store": state_store or "hdfs",
                                               "operator": stateful.name}) + "\n").encode("utf-8"))
    previous = {key: spark.conf.get(key, None) for key in query_conf}
    try:
        for key, value in query_conf.items():  # before the plan is built: transformWithState checks the store there
            spark.conf.set(key, value)
        # A processing-time timeout makes Spark schedule another (empty) batch forever, so an
        # available-now or once run, which must end when the input is drained, runs without one;
        # partitions still waiting for a sequence number are then reported from the state store.
        if workload is not None and compact_min_records is None:
            from streaming.processor import WORKLOAD_COMPACT_MIN_RECORDS

            compact_min_records = WORKLOAD_COMPACT_MIN_RECORDS
        outputs = (replicate if rows else payloads)(events, protocol, None, None if trigger.drains else gap_timeout_ms,
                                                    compact_min_records, stateful.name)
        from streaming.compaction import CompactionPolicy

        sink = ParquetSink(output_dir, on_batch=on_batch, observer=observer, store=store,
                           compaction=CompactionPolicy(retain=dict(retention or {})))
        writer = outputs.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint_dir)).queryName("replemu")
        writer = trigger.apply(writer)
        return writer.start(), sink
    finally:
        for key, value in previous.items():  # the started query keeps its own copy of the session conf
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def run_stream(input_dir, output_dir, checkpoint_dir, protocol, trigger="available-now", max_files_per_trigger=None,
               master=None, fmt=None, gap_timeout_ms=60000, spark=None, quiet=False, out=sys.stdout,
               compact_min_records=None, observer=None, workload=None, knobs=None, state_store=None,
               stop=None, shuffle_partitions=None, rows=False, retention=None, operator=None) -> list[BatchStats]:
    """Run the job until the input is drained (available-now / once) or forever (processing-time),
    or until ``stop`` (a ``threading.Event``) is set: then the query is stopped between two
    micro-batches — the one running finishes and commits first — and the run ends normally.

    Prints one progress line per micro-batch from Spark's query progress and the sink's counts.
    """
    trigger = parse_trigger(trigger) if isinstance(trigger, str) else trigger
    own = spark is None
    spark = spark or build_spark(master)
    from streaming.storage import open_store

    store = open_store(output_dir, spark)
    store.mkdirs()
    listener = progress_listener(store)
    spark.streams.addListener(listener)
    try:
        query, sink = start_stream(spark, input_dir, output_dir, checkpoint_dir, protocol, trigger,
                                   max_files_per_trigger, fmt, gap_timeout_ms, compact_min_records=compact_min_records,
                                   observer=observer, workload=workload, knobs=knobs, state_store=state_store,
                                   shuffle_partitions=shuffle_partitions, store=store, rows=rows, retention=retention,
                                   operator=operator)
        printed = set()
        sink_elsewhere = is_connect(spark)  # the sink ran on the Connect server: its counts are in its files

        handled = None  # progress_key of the newest progress when every retained one was handled

        def progress_key(progress) -> tuple:
            return progress["batchId"], progress["timestamp"]

        def drain() -> None:
            """Print the progress of every micro-batch that completed since the last call (and
            fill in its ``BatchStats``); a progress whose sink counts are not known yet waits for a
            later call.  ``lastProgress`` first: the whole ``recentProgress`` (up to 100 progresses,
            a py4j call each) is read only when something new is there."""
            nonlocal handled
            last = query.lastProgress
            if last is None or progress_key(last) == handled:
                return
            by_id = {s.batch_id: s for s in sink.stats}
            recent = query.recentProgress
            for progress in recent:
                if sink_elsewhere and progress["batchId"] not in by_id and progress["batchId"] not in printed:
                    landed = landed_stats(store, progress["batchId"])
                    if input_rows(progress) or any(landed.rows.values()):  # not a no-data batch
                        sink.stats.append(landed)
                        by_id[landed.batch_id] = landed
                if progress["batchId"] not in printed and (progress["batchId"] in by_id or input_rows(progress) == 0):
                    printed.add(progress["batchId"])
                    if progress["batchId"] in by_id:
                        by_id[progress["batchId"]].input_rows = input_rows(progress)
                        by_id[progress["batchId"]].duration_s = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
                        by_id[progress["batchId"]].state_bytes = state_bytes(progress)
                    st = by_id.get(progress["batchId"])
                    idle = input_rows(progress) == 0 and (st is None or not any(st.rows.values()))
                    if not quiet and not idle:  # no-data batches that only check timeouts stay silent
                        print_progress(progress, by_id, out)
            handled = progress_key(recent[-1]) if recent and all(p["batchId"] in printed for p in recent) else None

        stop_after = None  # the micro-batch to finish before stopping
        while query.isActive:
            query.awaitTermination(0.5)
            drain()
            if stop is not None and stop.is_set():
                last = query.lastProgress["batchId"] if query.lastProgress else -1
                if stop_after is None:
                    stop_after = last + 1 if query.status["isTriggerActive"] else last
                if last >= stop_after or not query.status["isTriggerActive"]:
                    # The running micro-batch committed (a later one, just started, is abandoned
                    # before its commit and runs again on restart): nothing is half-applied.
                    query.stop()
        query.awaitTermination()  # re-raises a query failure
        drain()
        sink.finish()
        if trigger.drains:
            report_gaps(spark, checkpoint_dir, output_dir, out=None if quiet else out, store=store, operator=operator)
        return sink.stats
    finally:
        spark.streams.removeListener(listener)
        if own:
            spark.stop()


def checkpoint_operator(spark, checkpoint_dir: str | Path) -> str:
    """The stateful operator a checkpoint was written by: from its run identity, else (a query
    started through the API, ``replicate``) from Spark's ``state-metadata`` of it."""
    from streaming.checkpoint import read_identity
    from streaming.operators import DEFAULT_OPERATOR
    from streaming.storage import open_store

    doc = read_identity(open_store(checkpoint_dir, spark))
    if doc is not None:
        return doc["identity"].get("operator") or DEFAULT_OPERATOR  # recorded before the choice: the default
    names = [r["operatorName"] for r in spark.read.format("state-metadata").load(str(checkpoint_dir)).collect()]
    return "transformWithState" if any(n.startswith("transformWithState") for n in names) else DEFAULT_OPERATOR


def state_frame(spark, checkpoint_dir: str | Path, operator: str | None = None):
    """The partitions' latest state rows, read with Spark's ``statestore`` source: a DataFrame of
    ``topic``, ``partition`` and the ``STATE_SCHEMA`` fields, whichever operator wrote them
    (``applyInPandasWithState`` keeps them under ``value.groupState``; ``transformWithState``
    under its ``ValueState`` ``TWS_STATE_VAR``, read with the source's ``stateVarName``)."""
    from streaming.operators import TWS_STATE_VAR, operator_named

    name = operator_named(operator or checkpoint_operator(spark, checkpoint_dir)).name
    reader = spark.read.format("statestore")
    if name == "transformWithState":
        return reader.option("stateVarName", TWS_STATE_VAR).load(str(checkpoint_dir)).select(
            "key.topic", "key.partition", "value.*")
    return reader.load(str(checkpoint_dir)).select("key.topic", "key.partition", "value.groupState.*")


def read_partition_states(spark, checkpoint_dir: str | Path, operator: str | None = None) -> list[dict[str, Any]]:
    """Every partition's latest state, read with Spark's ``statestore`` source and decoded
    (``operator``: None reads it from the checkpoint's identity)."""
    from streaming.state_codec import decode_state_row

    out = []
    for row in state_frame(spark, checkpoint_dir, operator).collect():
        d = row.asDict()
        decoded = decode_state_row(d)
        out.append({"topic": d["topic"], "partition": d["partition"], **decoded})
    return sorted(out, key=lambda s: (s["topic"] is None, s["topic"] or "", s["partition"] if s["partition"] is not None else -1))


def report_gaps(spark, checkpoint_dir: str | Path, output_dir: str | Path, out=sys.stdout, store=None,
                operator: str | None = None) -> list[dict[str, Any]]:
    """After a run that drained its input: partitions still waiting for a missing sequence number.

    Written to ``OUTPUT/gaps.json`` (replaced on every run) and printed unless ``out`` is None; the
    buffered rows stay in the state and are applied if the missing row arrives in a later run.
    Only the two state fields it needs are read (no partition's logs are decoded).
    """
    from pyspark.sql.functions import col, length

    df = state_frame(spark, checkpoint_dir, operator)
    gaps = []
    held = col("waiting")  # "[]" when nothing waits: only the waiting partitions reach the driver
    for row in df.where(held.isNotNull() & (length(held) > 2)).select("topic", "partition", "next_seq", "waiting").collect():
        waiting = json.loads(bytes(row["waiting"]).decode("utf-8")) if row["waiting"] is not None else []
        if waiting:
            gaps.append({"topic": row["topic"], "partition": row["partition"], "missing_seq": row["next_seq"],
                         "waiting_seqs": [w[0] for w in waiting]})
    gaps.sort(key=lambda g: (g["topic"] is None, g["topic"] or "", g["partition"] if g["partition"] is not None else -1))
    from streaming.storage import open_store

    (store or open_store(output_dir, spark)).write_bytes("gaps.json", (json.dumps(gaps, indent=2) + "\n").encode("utf-8"))
    if out is not None:
        for g in gaps:
            print(f"gap: {g['topic']}/{g['partition']} waits for seq {g['missing_seq']} "
                  f"({len(g['waiting_seqs'])} later rows held back)", file=out, flush=True)
    return gaps
