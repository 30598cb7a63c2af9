"""The Spark Structured Streaming job.

    events (file source) -> groupBy(topic, partition).applyInPandasWithState(step the core)
                         -> foreachBatch: one Parquet directory per output kind and batch id

Every output kind is written under ``OUTPUT/<kind>/batch_id=<id>/``; a batch that Spark
replays after a restart replaces its own directory, so each micro-batch lands exactly once.
Default settings are the packaged ``spark.conf`` (``conf/spark.conf`` in the source tree,
``key value`` lines); ``--master`` overrides the master.  A ``BatchObserver`` (the expectation
suites, given by the application) sees every micro-batch's output rows after they landed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from .triggers import Trigger, parse_trigger


def read_spark_conf(path: str | Path | None = None) -> dict[str, str]:
    """``key value`` lines of ``path``, or of the packaged defaults (``conf/spark.conf``)."""
    source = str(path) if path else "spark.conf (packaged)"
    text = Path(path).read_text() if path else resources.files("streaming").joinpath("data/spark.conf").read_text()
    conf = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(" ")
        if not sep:
            raise ValueError(f"{source}: line {number}: expected 'key value', got {line!r}")
        conf[key] = value.strip()
    return conf


MASTER_FORMS = (
    (re.compile(r"local(\[(\*|[1-9]\d{0,4})(,[1-9]\d{0,4})?\])?"), "local, local[N], local[*], local[N,F]"),
    (re.compile(r"local-cluster\[[1-9]\d{0,3},[1-9]\d{0,3},[1-9]\d{1,7}\]"), "local-cluster[WORKERS,CORES,MEMORY_MB]"),
    (re.compile(r"spark://[A-Za-z0-9._-]+:\d{1,5}(,[A-Za-z0-9._-]+:\d{1,5})*"), "spark://HOST:PORT"),
    (re.compile(r"yarn"), "yarn"),
    (re.compile(r"k8s://\S+"), "k8s://API_SERVER"),
)


def master_problem(master: str) -> str | None:
    """Why ``master`` is not a Spark master URL (None when it is one): checked before a JVM starts."""
    if any(form.fullmatch(master) for form, _ in MASTER_FORMS):
        return None
    return f"--master {master[:80]!r} is not a Spark master URL (one of: {'; '.join(text for _, text in MASTER_FORMS)})"


def build_spark(master: str | None = None, conf_path: str | Path | None = None, app_name: str = "replemu"):
    """A SparkSession with the project's settings; the Python workers use this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from pyspark import SparkConf

    builder = SparkSession.builder.appName(app_name)
    conf = read_spark_conf(conf_path)
    if master:
        conf["spark.master"] = master
    elif SparkConf().contains("spark.master"):
        conf.pop("spark.master", None)  # launched by spark-submit: its --master wins
    for key, value in conf.items():
        builder = builder.config(key, value)
    _launch_jvm_in_own_session(app_name, conf)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _launch_jvm_in_own_session(app_name: str, conf: dict[str, str]) -> None:
    """Start the driver's JVM in a session of its own, unless one runs already.

    pyspark starts the JVM with SIGINT ignored so that Ctrl-C reaches only Python, but the
    Python workers the JVM forks restore SIGINT: a terminal's Ctrl-C (sent to the whole
    foreground process group) killed a running task, and the "finish the running micro-batch"
    stop failed.  In its own session nothing the terminal sends reaches the JVM or its workers;
    they end when this process ends (the JVM exits when its stdin, a pipe from here, closes).
    Under spark-submit the JVM exists already (PYSPARK_GATEWAY_PORT) and this does nothing."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    spark_conf = SparkConf().setAppName(app_name)
    for key, value in conf.items():
        spark_conf.set(key, value)
    SparkContext._ensure_initialized(gateway=launch_gateway(spark_conf, popen_kwargs={"start_new_session": True}))


STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"


def group_key(key: tuple) -> tuple[str | None, int | None]:
    """Spark's grouping key ``(topic, partition)`` as Python values (None where unreadable)."""
    import pandas as pd

    topic = None if key[0] is None else str(key[0])
    partition = None if key[1] is None or pd.isna(key[1]) else int(key[1])
    return topic, partition


def events_from_frames(topic, partition, pdfs: Iterable) -> list[dict]:
    """One group's event rows (Spark may split a group over several frames, in any order)."""
    import pandas as pd

    from streaming.schemas import CORRUPT_COLUMN, REASON_COLUMN

    def text(v):
        return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v

    events = []
    for pdf in pdfs:
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


def output_frame(topic, partition, rows):
    """A group's output rows as the one-row frame of ``GROUP_OUTPUT_SCHEMA``."""
    import pandas as pd

    return pd.DataFrame({"topic": [topic], "partition": [partition], "rows": [len(rows)], "payload": [rows.payload()]})


def make_state_function(protocol: str, gap_timeout_ms: int | None, compact_min_records: int,
                        knobs: dict[str, Any] | None = None) -> Callable:
    """The ``applyInPandasWithState`` function: one group's frames -> output frames."""

    def step_partition(key: tuple, pdfs: Iterator, state) -> Iterator:
        from streaming.processor import process_batch
        from streaming.state_codec import from_tuple, to_tuple

        topic, partition = group_key(key)
        current = from_tuple(state.get) if state.exists else None
        events = [] if state.hasTimedOut else events_from_frames(topic, partition, pdfs)
        rows, new_state, waiting = process_batch(topic, partition, events, current, protocol, timed_out=state.hasTimedOut,
                                                 compact_min_records=compact_min_records, knobs=knobs)
        if topic is not None and partition is not None:
            state.update(to_tuple(new_state))
            if waiting and gap_timeout_ms is not None:
                state.setTimeoutDuration(gap_timeout_ms)
        if len(rows):  # one row: every kind's rows in one payload
            yield output_frame(topic, partition, rows)

    return step_partition


@dataclass
class BatchStats:
    batch_id: int
    rows: dict[str, int]
    partitions: int
    violations: int
    quarantined: int
    input_rows: int = 0  # from Spark's query progress, once the batch completed
    duration_s: float = 0.0
    state_bytes: int = 0


class BatchObserver(Protocol):
    """Sees each micro-batch's output rows once they landed (``frames``: kind -> pandas frame of
    that kind's ``KIND_COLUMNS``, sorted as written); must never raise into the query.
    ``finish`` runs when the query ends."""

    def on_batch(self, frames: dict[str, Any], batch_id: int, output_dir: Path) -> None: ...

    def finish(self, output_dir: Path) -> None: ...


@dataclass
class ParquetSink:
    """foreachBatch sink: each kind's rows of batch N replace ``OUTPUT/<kind>/batch_id=N``."""

    output_dir: Path
    on_batch: Callable[[BatchStats], None] | None = None
    stats: list[BatchStats] = field(default_factory=list)
    observer: BatchObserver | None = None

    def finish(self) -> None:
        if self.observer is not None:
            self.observer.finish(self.output_dir)

    def __call__(self, df, batch_id: int) -> None:
        from streaming.processor import tables_from_payloads

        # One row per partition: its rows of every kind in one payload.
        tables, partitions = tables_from_payloads(row["payload"] for row in df.select("payload").collect())
        self.write(tables, batch_id, partitions)

    def write(self, tables: dict[str, Any], batch_id: int, partitions: int) -> None:
        """Write each kind's rows (Arrow tables) of batch ``batch_id``, sorted; run the observer.

        The sort keys are unique per row (a partition, a step, a row index or replica), so the
        written order is the same whatever order Spark handed the partitions over in."""
        from streaming.schemas import KIND_COLUMNS, OUTPUT_KINDS, arrow_schema

        counts, written = {}, {}
        for kind in OUTPUT_KINDS:
            table = tables.get(kind)
            counts[kind] = 0 if table is None else table.num_rows
            target = self.output_dir / kind / f"batch_id={batch_id}"
            if not counts[kind]:
                if target.exists():
                    shutil.rmtree(target)  # a replayed batch that now has nothing of this kind
                continue
            cols = KIND_COLUMNS[kind]
            sort_by = [(c, "ascending") for c in ("topic", "partition", "seq", "idx", "replica") if c in cols]
            table = table.select(list(cols)).cast(arrow_schema(kind)).sort_by(sort_by)
            written[kind] = table
            write_batch_dir(target, table)
        if self.observer is not None:
            self.observer.on_batch({kind: t.to_pandas() for kind, t in written.items()}, batch_id, self.output_dir)
        stats = BatchStats(batch_id, counts, partitions, counts["violations"], counts["quarantine"])
        self.stats.append(stats)
        if self.on_batch:
            self.on_batch(stats)


def write_batch_dir(target: Path, table) -> None:
    """Replace ``target`` with a directory holding ``part-0.parquet``: written aside, then
    swapped in, so a replayed batch replaces its output and a reader never sees half of it."""
    import pyarrow.parquet as pq

    tmp = target.with_name(f".{target.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    pq.write_table(table, tmp / "part-0.parquet")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)


def start_stream(spark, input_dir: str | Path, output_dir: str | Path, checkpoint_dir: str | Path, protocol: str,
                 trigger: Trigger | str = "available-now", max_files_per_trigger: int | None = None, fmt: str | None = None,
                 gap_timeout_ms: int = 60000, on_batch: Callable[[BatchStats], None] | None = None,
                 compact_min_records: int | None = None, observer: BatchObserver | None = None,
                 workload: dict | None = None, knobs: dict[str, Any] | None = None, state_store: str | None = None):
    """Start the query; returns ``(query, sink)``.

    ``workload`` (instead of ``input_dir``): ``{"seed", "profile", "profile_spec", "partitions",
    "steps_per_batch", "max_steps"}`` with the profile as data (``profile_spec``, JSON), so
    executors need no files.
    """
    trigger = parse_trigger(trigger) if isinstance(trigger, str) else trigger
    from pyspark.sql.functions import lit
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.processor import COMPACT_MIN_RECORDS
    from streaming.schemas import BINARY_FILE_SCHEMA, CORRUPT_COLUMN, DECODED_SCHEMA, GROUP_OUTPUT_SCHEMA, REASON_COLUMN, STATE_SCHEMA

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    no_corrupt = lit(None).cast("string")  # sources without unreadable lines
    reader = spark.readStream
    if workload is not None:
        # Generated events (streaming.workload_source): no input files.
        from streaming.workload_source import register

        register(spark)
        fmt = "workload"
        events = (reader.format("replemu_workload").options(**{k: str(v) for k, v in workload.items() if v is not None})
                  .load().withColumn(CORRUPT_COLUMN, no_corrupt).withColumn(REASON_COLUMN, no_corrupt))
    else:
        # Whole files, decoded in Python (streaming.files): JSON lines and Parquet side by side,
        # and a file that cannot be decoded goes to quarantine instead of failing the query.
        from streaming.files import decode_file_batches

        input_dir = Path(input_dir)
        fmt = "files"
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        events = (reader.format("binaryFile").schema(BINARY_FILE_SCHEMA).option("recursiveFileLookup", "true")
                  .load(str(input_dir)).mapInArrow(decode_file_batches, DECODED_SCHEMA))
    # A processing-time timeout makes Spark schedule another (empty) batch forever, so an
    # available-now or once run, which must end when the input is drained, runs without one;
    # partitions still waiting for a sequence number are then reported from the state store.
    timeout = GroupStateTimeout.NoTimeout if trigger.drains else GroupStateTimeout.ProcessingTimeTimeout
    outputs = events.groupBy("topic", "partition").applyInPandasWithState(
        make_state_function(protocol, gap_timeout_ms if timeout == GroupStateTimeout.ProcessingTimeTimeout else None,
                            COMPACT_MIN_RECORDS if compact_min_records is None else compact_min_records, knobs),
        GROUP_OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout,
    )
    sink = ParquetSink(output_dir, on_batch=on_batch, observer=observer)
    writer = outputs.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint_dir)).queryName("replemu")
    writer = trigger.apply(writer)
    if state_store is not None:  # fixed in the checkpoint by the query's first start
        spark.conf.set(STATE_STORE_CONF, STATE_STORES[state_store])
    (output_dir / "run.json").write_text(json.dumps({"protocol": protocol, "knobs": knobs or {}, "input": str(input_dir),
                                                     "format": fmt, "workload": workload, "state_store": state_store or "hdfs"}) + "\n")
    previous = spark.conf.get(STATE_STORE_CONF, None)
    try:
        return writer.start(), sink
    finally:
        if state_store is not None:  # the started query keeps its own copy of the session conf
            if previous is None:
                spark.conf.unset(STATE_STORE_CONF)
            else:
                spark.conf.set(STATE_STORE_CONF, previous)


def state_bytes(progress: dict) -> int:
    """The state store's memory in use after a micro-batch (Spark's ``stateOperators``)."""
    return sum(op.get("memoryUsedBytes", 0) or 0 for op in progress.get("stateOperators", []))


def _print_progress(progress: dict, stats: dict[int, BatchStats], out) -> None:
    batch_id = progress["batchId"]
    st = stats.get(batch_id)
    duration = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
    extra = (f", {st.partitions} partitions, {st.violations} violations, {st.quarantined} quarantined"
             if st else "")
    print(f"batch {batch_id}: {progress.get('numInputRows', 0)} rows{extra}, {duration:.2f} s, "
          f"state {state_bytes(progress) / 1024:.0f} KiB", file=out, flush=True)


def progress_listener(path: Path, query_name: str = "replemu"):
    """A ``StreamingQueryListener`` appending every micro-batch's ``StreamingQueryProgress`` JSON
    to ``path`` as one line (``OUTPUT/progress.jsonl``): the job's history after it ended."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLog(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            progress = event.progress
            if progress.name != query_name:
                return
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(json.loads(progress.json), separators=(",", ":")) + "\n")

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return ProgressLog()


def run_stream(input_dir, output_dir, checkpoint_dir, protocol, trigger="available-now", max_files_per_trigger=None,
               master=None, fmt=None, gap_timeout_ms=60000, spark=None, quiet=False, out=sys.stdout,
               compact_min_records=None, observer=None, workload=None, knobs=None, state_store=None,
               stop=None) -> list[BatchStats]:
    """Run the job until the input is drained (available-now / once) or forever (processing-time),
    or until ``stop`` (a ``threading.Event``) is set: then the query is stopped between two
    micro-batches — the one running finishes and commits first — and the run ends normally.

    Prints one progress line per micro-batch from Spark's query progress and the sink's counts.
    """
    trigger = parse_trigger(trigger) if isinstance(trigger, str) else trigger
    own = spark is None
    spark = spark or build_spark(master)
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    listener = progress_listener(Path(output_dir) / "progress.jsonl")
    spark.streams.addListener(listener)
    try:
        query, sink = start_stream(spark, input_dir, output_dir, checkpoint_dir, protocol, trigger,
                                   max_files_per_trigger, fmt, gap_timeout_ms, compact_min_records=compact_min_records,
                                   observer=observer, workload=workload, knobs=knobs, state_store=state_store)
        printed = set()

        def drain() -> None:
            by_id = {s.batch_id: s for s in sink.stats}
            for progress in query.recentProgress:
                if progress["batchId"] not in printed and (progress["batchId"] in by_id or progress.get("numInputRows", 0) == 0):
                    printed.add(progress["batchId"])
                    if progress["batchId"] in by_id:
                        by_id[progress["batchId"]].input_rows = progress.get("numInputRows", 0)
                        by_id[progress["batchId"]].duration_s = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
                        by_id[progress["batchId"]].state_bytes = state_bytes(progress)
                    st = by_id.get(progress["batchId"])
                    idle = progress.get("numInputRows", 0) == 0 and (st is None or not any(st.rows.values()))
                    if not quiet and not idle:  # no-data batches that only check timeouts stay silent
                        _print_progress(progress, by_id, out)

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
            report_gaps(spark, checkpoint_dir, output_dir, out=None if quiet else out)
        return sink.stats
    finally:
        spark.streams.removeListener(listener)
        if own:
            spark.stop()


def read_partition_states(spark, checkpoint_dir: str | Path) -> list[dict[str, Any]]:
    """Every partition's latest state, read with Spark's ``statestore`` source and decoded."""
    from streaming.state_codec import decode_state_row

    df = spark.read.format("statestore").load(str(checkpoint_dir))
    out = []
    for row in df.select("key.topic", "key.partition", "value.groupState.*").collect():
        d = row.asDict()
        decoded = decode_state_row(d)
        out.append({"topic": d["topic"], "partition": d["partition"], **decoded})
    return sorted(out, key=lambda s: (s["topic"] is None, s["topic"] or "", s["partition"] if s["partition"] is not None else -1))


def report_gaps(spark, checkpoint_dir: str | Path, output_dir: str | Path, out=sys.stdout) -> list[dict[str, Any]]:
    """After a run that drained its input: partitions still waiting for a missing sequence number.

    Written to ``OUTPUT/gaps.json`` (replaced on every run) and printed unless ``out`` is None; the
    buffered rows stay in the state and are applied if the missing row arrives in a later run.
    Only the two state fields it needs are read (no partition's logs are decoded).
    """
    df = spark.read.format("statestore").load(str(checkpoint_dir))
    gaps = []
    for row in df.select("key.topic", "key.partition", "value.groupState.next_seq", "value.groupState.waiting").collect():
        waiting = json.loads(bytes(row["waiting"]).decode("utf-8")) if row["waiting"] is not None else []
        if waiting:
            gaps.append({"topic": row["topic"], "partition": row["partition"], "missing_seq": row["next_seq"],
                         "waiting_seqs": [w[0] for w in waiting]})
    gaps.sort(key=lambda g: (g["topic"] is None, g["topic"] or "", g["partition"] if g["partition"] is not None else -1))
    Path(output_dir, "gaps.json").write_text(json.dumps(gaps, indent=2) + "\n")
    if out is not None:
        for g in gaps:
            print(f"gap: {g['topic']}/{g['partition']} waits for seq {g['missing_seq']} "
                  f"({len(g['waiting_seqs'])} later rows held back)", file=out, flush=True)
    return gaps
