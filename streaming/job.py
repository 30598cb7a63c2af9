"""The Spark Structured Streaming job.

    events (file source) -> groupBy(topic, partition).applyInPandasWithState(step the core)
                         -> foreachBatch: one Parquet directory per output kind and batch id

Every output kind is written under ``OUTPUT/<kind>/batch_id=<id>/``; a batch that Spark
replays after a restart replaces its own directory, so each micro-batch lands exactly once.
Default settings are the packaged ``spark.conf`` (``conf/spark.conf`` in the source tree,
``key value`` lines); ``--master`` overrides the master, and ``build_spark(remote=…)`` makes the job
a Spark Connect client instead (docs/cluster.md).  A ``BatchObserver`` (the expectation
suites, given by the application) sees every micro-batch's output rows after they landed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
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


def master_cores(master: str) -> int | None:
    """The cores a master URL names (local[4] -> 4, local[*] -> this machine's, local-cluster[2,3,1024] -> 6);
    None for a cluster manager, whose cores only the cluster knows."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if m:
        return os.cpu_count() or 1 if m.group(1) == "*" else int(m.group(1) or 1)
    m = re.fullmatch(r"local-cluster\[(\d+),(\d+),\d+\]", master)
    return int(m.group(1)) * int(m.group(2)) if m else None


LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")


def is_local_master(master: str | None) -> bool:
    """Whether ``master`` runs every Spark process on this machine (local, local[N], local-cluster[…])."""
    return master is not None and bool(LOCAL_MASTER.fullmatch(master))


REMOTE_FORM = re.compile(r"sc://(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})(/(;[A-Za-z_]+=[^;/\s]*)*)?")


def remote_problem(remote: str) -> str | None:
    """Why ``remote`` is not a Spark Connect URL (None when it is one): checked before anything starts."""
    m = REMOTE_FORM.fullmatch(remote)
    if m and 1 <= int(m["port"]) <= 65535:
        return None
    return (f"--remote {remote[:80]!r} is not a Spark Connect URL (sc://HOST:PORT, optionally followed by "
            f"/;token=…;use_ssl=true)")


def remote_unreachable(remote: str, timeout_s: float = 10) -> str | None:
    """Why the Spark Connect server of ``remote`` cannot be reached (None when it accepts a TCP
    connection).  Checked before anything is written: the Connect client itself retries an
    unreachable server for ten minutes."""
    import socket

    m = REMOTE_FORM.fullmatch(remote)
    host, port = m["host"].strip("[]"), int(m["port"])
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        return f"--remote {remote}: no Spark Connect server reachable at {host}:{port} ({exc.strerror or exc})"
    return None


class SessionError(RuntimeError):
    """A session could not be opened (a Spark Connect server that does not answer): one line for the user."""


def build_spark(master: str | None = None, conf_path: str | Path | None = None, app_name: str = "replemu", *,
                ui: bool = False, remote: str | None = None):
    """A SparkSession with the project's settings (``conf/spark.conf``).

    ``ui``: Spark's web UI, on for ``replemu stream`` and off everywhere else (tests, ``state``,
    campaigns: it costs start-up time).  ``remote`` (``sc://HOST:PORT``): a Spark Connect session
    on that server instead of a driver in this process; ``SessionError`` when it does not answer.

    Classic sessions: the Python workers use this interpreter; with a local master (local,
    local[N], local-cluster[…]) the driver, executors, block managers and UI bind to 127.0.0.1
    only (``SPARK_LOCAL_IP``, unless already set); with a cluster master (spark://, yarn, k8s://)
    Spark's own defaults and the user's settings decide, so executors on other hosts can reach
    the driver.  Launched by spark-submit, whatever spark-submit set (``--master``, ``--conf``,
    spark-defaults.conf) wins over ``conf/spark.conf``."""
    conf = read_spark_conf(conf_path)
    conf["spark.app.name"] = app_name
    conf["spark.ui.enabled"] = "true" if ui else "false"
    if remote is not None:
        return _connect_session(remote, conf)
    return _classic_session(master, conf)


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``build_spark(remote=…)``) rather than a
    classic driver in this process — the one test of which kind a session is.  Through Connect
    there is no SparkContext and no JVM here, and the foreachBatch sink runs in a Python process
    of the server, so its counts never come back to this process (``run_stream`` reads them
    from the files it wrote); the StreamingQueryListener runs here."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def describe_session(spark) -> str:
    """One line for the console: what runs the job and where its Spark UI is."""
    if is_connect(spark):
        return (f"Spark Connect session {spark.session_id}, server master {spark.conf.get('spark.master', '?')} "
                f"(Spark UI: the server's own)")
    sc = spark.sparkContext
    return f"Spark application {sc.applicationId}, master {sc.master}; Spark UI: {sc.uiWebUrl or 'off'}"


def _classic_session(master: str | None, conf: dict[str, str]):
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Launched by spark-submit: its JVM runs already, with spark-submit's settings as system
        # properties; SparkConf() sees them only once this process is connected to that JVM.
        SparkContext._ensure_initialized()
        submitted = SparkConf()
        master = submitted.get("spark.master", None)
    else:
        master = conf["spark.master"] = master or conf.get("spark.master", "local[*]")
    if master is not None and master.startswith("local-cluster["):
        # It exists to run on several executors: start once all registered (a standalone
        # master schedules on the first one, and state-store locality may keep every task there).
        conf["spark.scheduler.minRegisteredResourcesRatio"] = "1.0"
    if submitted is not None:
        conf = {key: value for key, value in conf.items() if not submitted.contains(key)}
    else:
        if is_local_master(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        _launch_jvm_in_own_session(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _connect_session(remote: str, conf: dict[str, str]):
    """A Spark Connect session with the settings of ``conf`` a session may change (SQL settings:
    shuffle partitions, time zone, Arrow); the others (master, memory, UI) are the server's."""
    problem = remote_unreachable(remote)
    if problem:
        raise SessionError(problem)
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark = SparkSession.builder.remote(remote).getOrCreate()
    patient = spark.client.get_retry_policies()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=2000)])  # seconds, not ten minutes
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyspark's RETRIES_EXCEEDED warning: the error says it
            for key, value in conf.items():
                if spark.conf.isModifiable(key):
                    spark.conf.set(key, value)
    except Exception as exc:
        text = str(exc).strip()
        details = re.search(r'details = "([^"]*)"', text)
        reason = details.group(1) if details else (text.splitlines() or [type(exc).__name__])[0]
        spark.client.close()  # no release RPC at exit either (it would retry for minutes)
        raise SessionError(f"--remote {remote}: the Spark Connect server did not answer: {reason[:300]}") from None
    finally:
        spark.client.set_retry_policies(patient)
    return spark


def _launch_jvm_in_own_session(conf: dict[str, str]) -> None:
    """Start the driver's JVM in a session of its own, unless one runs already.

    pyspark starts the JVM with SIGINT ignored so that Ctrl-C reaches only Python, but the
    Python workers the JVM forks restore SIGINT: a terminal's Ctrl-C (sent to the whole
    foreground process group) killed a running task, and the "finish the running micro-batch"
    stop failed.  In its own session nothing the terminal sends reaches the JVM or its workers;
    they end when this process ends (the JVM exits when its stdin, a pipe from here, closes).
    Not called under spark-submit, whose JVM exists already (PYSPARK_GATEWAY_PORT)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None:
        return
    spark_conf = SparkConf()
    for key, value in conf.items():
        spark_conf.set(key, value)
    import subprocess
    import threading

    gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True, "stderr": subprocess.PIPE})
    threading.Thread(target=_pump_jvm_stderr, args=(gateway.proc.stderr,), name="replemu-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


class ShutdownNoise:
    """Drops, from what the JVM and its Python processes print, the tracebacks pyspark's own
    Python processes print when the JVM closes their socket as a query or the application stops
    (the streaming source runner, a daemon worker): a chain of tracebacks (``During handling of
    the above exception …``) each ending in ``BrokenPipeError``, ``ConnectionResetError`` or
    ``EOFError`` raised in pyspark's runner or daemon code.  Everything else passes unchanged and
    in order; any other traceback passes whole, as soon as it ends."""

    NOISY_CODE = ("pyspark/sql/streaming/python_streaming_source_runner.py", "pyspark/daemon.py",
                  "pyspark/serializers.py", "pyspark/worker_util.py", "/socket.py")
    NOISY_ERRORS = ("BrokenPipeError", "ConnectionResetError", "EOFError")
    CHAINS = ("During handling of the above exception", "The above exception was the direct cause")
    TRACEBACK = "Traceback (most recent call last):"
    MAX_LINES = 200

    def __init__(self) -> None:
        self._held: list[str] = []
        self._start = 0  # where the traceback being read starts in _held
        self._in_traceback = False

    def feed(self, line: str) -> list[str]:
        """The lines to print now, given the next line."""
        if not self._held:
            if line.startswith(self.TRACEBACK):
                self._held, self._start, self._in_traceback = [line], 0, True
                return []
            return [line]
        if self._in_traceback:
            self._held.append(line)
            if line[:1] in (" ", "\t") and len(self._held) < self.MAX_LINES:
                return []  # a frame of the traceback
            self._in_traceback = False
            frames = [h for h in self._held[self._start:-1] if h.lstrip().startswith("File ")]
            if line.startswith(self.NOISY_ERRORS) and frames and all(any(c in f for c in self.NOISY_CODE) for f in frames):
                return []  # noise so far: held until the chain ends
            return self._flush()
        if not line.strip() or line.startswith(self.CHAINS):
            self._held.append(line)
            return []
        if line.startswith(self.TRACEBACK):
            self._held.append(line)
            self._start, self._in_traceback = len(self._held) - 1, True
            return []
        self._held = []  # a chain of noise ended
        return self.feed(line)

    def _flush(self) -> list[str]:
        held, self._held, self._in_traceback = self._held, [], False
        return held

    def close(self) -> list[str]:
        """At the end of the stream: an unfinished traceback is printed, finished noise is not."""
        return self._flush() if self._in_traceback else []


def _pump_jvm_stderr(stream) -> None:
    """Copy the JVM's stderr (its own and its Python processes') to ours, less ``ShutdownNoise``."""
    noise = ShutdownNoise()
    out = sys.__stderr__
    try:
        for raw in iter(stream.readline, b""):
            for line in noise.feed(raw.decode("utf-8", "replace")):
                out.write(line)
            out.flush()
        for line in noise.close():
            out.write(line)
        out.flush()
    except (OSError, ValueError):  # our stderr is gone: nothing left to tell
        pass


STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"


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
    """foreachBatch sink: each kind's rows of batch N replace ``OUTPUT/<kind>/batch_id=N``.

    ``store`` is where OUTPUT is (``streaming.storage``: a local directory or a Hadoop URI).  The
    observer writes local files: into OUTPUT itself when it is local, else into a local mirror
    whose new and changed files are copied to the store after every batch."""

    output_dir: Path | str
    on_batch: Callable[[BatchStats], None] | None = None
    stats: list[BatchStats] = field(default_factory=list)
    observer: BatchObserver | None = None
    store: Any = None
    _mirror: Any = None

    def __post_init__(self) -> None:
        from streaming.storage import LocalStore, Mirror

        if self.store is None:
            self.store = LocalStore(self.output_dir)
        if not isinstance(self.store, LocalStore) and self.observer is not None:
            self._mirror = Mirror(self.store, keep=("gx_results",))

    @property
    def observer_dir(self) -> Path:
        return self._mirror.local if self._mirror is not None else Path(self.output_dir)

    def finish(self) -> None:
        if self.observer is not None:
            self.observer.finish(self.observer_dir)
            if self._mirror is not None:
                self._mirror.upload_changes()

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
            target = f"{kind}/batch_id={batch_id}"
            if not counts[kind]:
                self.store.remove(target)  # a replayed batch that now has nothing of this kind
                continue
            cols = KIND_COLUMNS[kind]
            sort_by = [(c, "ascending") for c in ("topic", "partition", "seq", "idx", "replica") if c in cols]
            table = table.select(list(cols)).cast(arrow_schema(kind)).sort_by(sort_by)
            written[kind] = table
            self.store.replace_dir(target, {BATCH_FILE: parquet_bytes(table)})
        if self.observer is not None:
            self.observer.on_batch({kind: t.to_pandas() for kind, t in written.items()}, batch_id, self.observer_dir)
            if self._mirror is not None:
                self._mirror.upload_changes()
        stats = BatchStats(batch_id, counts, partitions, counts["violations"], counts["quarantine"])
        self.stats.append(stats)
        if self.on_batch:
            self.on_batch(stats)


BATCH_FILE = "part-0.parquet"


def parquet_bytes(table) -> bytes:
    """``table`` as the bytes of one Parquet file (pyarrow's defaults: the same bytes for the same rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def write_batch_dir(target: Path, table) -> None:
    """Replace the local directory ``target`` with one holding ``part-0.parquet``: written aside,
    then swapped in, so a replayed batch replaces its output and a reader never sees half of it."""
    from streaming.storage import LocalStore

    LocalStore(target.parent).replace_dir(target.name, {BATCH_FILE: parquet_bytes(table)})


def start_stream(spark, input_dir: str | Path, output_dir: str | Path, checkpoint_dir: str | Path, protocol: str,
                 trigger: Trigger | str = "available-now", max_files_per_trigger: int | None = None, fmt: str | None = None,
                 gap_timeout_ms: int = 60000, on_batch: Callable[[BatchStats], None] | None = None,
                 compact_min_records: int | None = None, observer: BatchObserver | None = None,
                 workload: dict | None = None, knobs: dict[str, Any] | None = None, state_store: str | None = None,
                 shuffle_partitions: int | None = None, store=None):
    """Start the query; returns ``(query, sink)``.  ``store``: the output's (``streaming.storage``),
    opened here when not given.

    ``state_store`` and ``shuffle_partitions`` (None: the session's) apply to this query only; Spark
    records both in a new checkpoint and a restart uses the recorded ones.

    ``workload`` (instead of ``input_dir``): ``{"seed", "profile", "profile_spec", "partitions",
    "steps_per_batch", "max_steps"}`` with the profile as data (``profile_spec``, JSON), so
    executors need no files.
    """
    trigger = parse_trigger(trigger) if isinstance(trigger, str) else trigger
    from pyspark.sql.functions import lit
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.processor import COMPACT_MIN_RECORDS
    from streaming.schemas import BINARY_FILE_SCHEMA, CORRUPT_COLUMN, DECODED_SCHEMA, GROUP_OUTPUT_SCHEMA, REASON_COLUMN, STATE_SCHEMA

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
        events = (reader.format("replemu_workload").options(**{k: str(v) for k, v in workload.items() if v is not None})
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
    # A processing-time timeout makes Spark schedule another (empty) batch forever, so an
    # available-now or once run, which must end when the input is drained, runs without one;
    # partitions still waiting for a sequence number are then reported from the state store.
    timeout = GroupStateTimeout.NoTimeout if trigger.drains else GroupStateTimeout.ProcessingTimeTimeout
    from pyspark.sql.functions import struct, to_json

    from streaming.schemas import PACKED_COLUMN, PACKED_FIELDS

    events = events.select("topic", "partition", to_json(struct(*PACKED_FIELDS)).alias(PACKED_COLUMN))
    outputs = events.groupBy("topic", "partition").applyInPandasWithState(
        make_state_function(protocol, gap_timeout_ms if timeout == GroupStateTimeout.ProcessingTimeTimeout else None,
                            COMPACT_MIN_RECORDS if compact_min_records is None else compact_min_records, knobs),
        GROUP_OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout,
    )
    sink = ParquetSink(output_dir, on_batch=on_batch, observer=observer, store=store)
    writer = outputs.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint_dir)).queryName("replemu")
    writer = trigger.apply(writer)
    query_conf = {}  # fixed in the checkpoint by the query's first start
    if state_store is not None:
        query_conf[STATE_STORE_CONF] = STATE_STORES[state_store]
    if shuffle_partitions is not None:
        query_conf[SHUFFLE_PARTITIONS_CONF] = str(int(shuffle_partitions))
    store.write_bytes("run.json", (json.dumps({"protocol": protocol, "knobs": knobs or {}, "input": str(input_dir), "format": fmt,
                                               "workload": workload, "state_store": state_store or "hdfs"}) + "\n").encode("utf-8"))
    previous = {key: spark.conf.get(key, None) for key in query_conf}
    try:
        for key, value in query_conf.items():
            spark.conf.set(key, value)
        return writer.start(), sink
    finally:
        for key, value in previous.items():  # the started query keeps its own copy of the session conf
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def state_bytes(progress: dict) -> int:
    """The state store's memory in use after a micro-batch (Spark's ``stateOperators``)."""
    return sum(op.get("memoryUsedBytes", 0) or 0 for op in progress.get("stateOperators", []))


def input_rows(progress: dict) -> int:
    """A micro-batch's input rows.  Through Spark Connect (4.3) a query's ``recentProgress`` lacks
    the top-level ``numInputRows``; its sources carry them."""
    rows = progress.get("numInputRows")
    return rows if rows is not None else sum(s.get("numInputRows") or 0 for s in progress.get("sources") or [])


def _print_progress(progress: dict, stats: dict[int, BatchStats], out) -> None:
    batch_id = progress["batchId"]
    st = stats.get(batch_id)
    duration = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
    extra = (f", {st.partitions} partitions, {st.violations} violations, {st.quarantined} quarantined"
             if st else "")
    print(f"batch {batch_id}: {input_rows(progress)} rows{extra}, {duration:.2f} s, "
          f"state {state_bytes(progress) / 1024:.0f} KiB", file=out, flush=True)


PROGRESS_FILE = "progress.jsonl"


def progress_listener(store, query_name: str = "replemu"):
    """A ``StreamingQueryListener`` appending every micro-batch's ``StreamingQueryProgress`` JSON
    to the output ``store`` as one line (``OUTPUT/progress.jsonl``): the job's history after it ended."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLog(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            progress = event.progress
            if progress.name != query_name:
                return
            store.append_line(PROGRESS_FILE, json.dumps(json.loads(progress.json), separators=(",", ":")))

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return ProgressLog()


def landed_stats(store, batch_id: int) -> BatchStats:
    """The counts of micro-batch ``batch_id`` read back from the Parquet footers the sink wrote to
    ``store``: for a sink that ran in another process (Spark Connect runs foreachBatch on the
    server).  Every partition with rows has one summary row per batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming.schemas import OUTPUT_KINDS

    rows = {}
    for kind in OUTPUT_KINDS:
        rel = f"{kind}/batch_id={batch_id}/{BATCH_FILE}"
        rows[kind] = pq.ParquetFile(pa.BufferReader(store.read_bytes(rel))).metadata.num_rows if store.exists(rel) else 0
    return BatchStats(batch_id, rows, rows["summary"], rows["violations"], rows["quarantine"])


def run_stream(input_dir, output_dir, checkpoint_dir, protocol, trigger="available-now", max_files_per_trigger=None,
               master=None, fmt=None, gap_timeout_ms=60000, spark=None, quiet=False, out=sys.stdout,
               compact_min_records=None, observer=None, workload=None, knobs=None, state_store=None,
               stop=None, shuffle_partitions=None) -> list[BatchStats]:
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
                                   shuffle_partitions=shuffle_partitions, store=store)
        printed = set()
        sink_elsewhere = is_connect(spark)  # the sink ran on the Connect server: its counts are in its files

        def drain() -> None:
            by_id = {s.batch_id: s for s in sink.stats}
            for progress in query.recentProgress:
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
            report_gaps(spark, checkpoint_dir, output_dir, out=None if quiet else out, store=store)
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


def report_gaps(spark, checkpoint_dir: str | Path, output_dir: str | Path, out=sys.stdout, store=None) -> list[dict[str, Any]]:
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
    from streaming.storage import open_store

    (store or open_store(output_dir, spark)).write_bytes("gaps.json", (json.dumps(gaps, indent=2) + "\n").encode("utf-8"))
    if out is not None:
        for g in gaps:
            print(f"gap: {g['topic']}/{g['partition']} waits for seq {g['missing_seq']} "
                  f"({len(g['waiting_seqs'])} later rows held back)", file=out, flush=True)
    return gaps
