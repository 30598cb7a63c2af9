"""The job's own sink: each micro-batch's output rows as Parquet, one directory per kind and
batch id (``OUTPUT/<kind>/batch_id=<id>/part-00000.parquet, part-00001.parquet...``, one file per
Spark task that had rows of that kind), replaced when Spark replays a batch after a restart, so
each micro-batch lands exactly once.

The driver plans and commits; the executors do the work that grows with the data: they turn the
payloads into rows, write each kind with Spark's Parquet writer into ``.batch_id=N.tmp``, and the
driver renames that directory into place (``commit_written``).  What reaches the driver is one
count per kind.  A ``BatchObserver`` (the expectation suites, given by the application) sees the
same rows as Spark DataFrames: after they landed, or, with ``begin_spark_batch``, while they are
written, its results recorded after they landed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from streaming.checkpoint import RUN_FILE
from streaming.output_layout import SORT_KEYS, batch_dir_name
from streaming.storage import StoreError

VANISHED = "the output directory vanished while the stream ran"  # streaming.failures knows it by these words


class OutputVanished(StoreError):
    """OUTPUT was removed (or replaced) while the stream wrote into it: the outputs of the
    micro-batches Spark has committed went with it, and Spark does not run those again."""


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
    """Sees each micro-batch's output rows once they landed (``kinds``: kind -> Spark DataFrame of
    that kind's ``KIND_COLUMNS``, cached on the executors for the call; only the kinds with rows;
    ``counts``: rows per kind); must never raise into the query, and may bring rows to the driver
    only up to a bound of its own (never a number that grows with the stream).  ``finish`` runs when
    the query ends.  An observer may instead see them while they are written (the optional
    ``begin_spark_batch`` below)."""

    def on_spark_batch(self, kinds: dict[str, Any], batch_id: int, output_dir: Path, counts: dict[str, int]) -> None: ...

    # Optional: ``begin_spark_batch(kinds, batch_id, output_dir, counts) -> Callable[[], None]``
    # does the work of ``on_spark_batch`` that reads the frames, while the sink writes them, and
    # returns the part that records its results, which the sink calls after the kinds landed.

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
    _watch: bool | None = None  # OUTPUT held its run.json when this process first wrote a batch
    compaction: Any = None  # a streaming.compaction.CompactionPolicy: run after every landed batch

    def __post_init__(self) -> None:
        from streaming.storage import LocalStore, Mirror

        if self.store is None:
            self.store = LocalStore(self.output_dir)
        if not isinstance(self.store, LocalStore) and self.observer is not None:
            self._mirror = Mirror(self.store, keep=("gx_results",))

    @property
    def observer_dir(self) -> Path:
        return self._mirror.local if self._mirror is not None else Path(self.output_dir)

    def check_output(self, when: str) -> None:
        """Raise ``OutputVanished`` when OUTPUT's ``run.json``, there when this process wrote its
        first batch, is gone: the directory was removed (``rm -rf``) or replaced while the stream
        ran.  Writing on would recreate it with the later micro-batches only and end in exit 0: a
        silent loss of every earlier one."""
        if self._watch is None:
            self._watch = self.store.exists(RUN_FILE)
        elif self._watch and not self.store.exists(RUN_FILE):
            raise OutputVanished(f"{self.store.location}: {VANISHED} ({RUN_FILE} is gone: removed or replaced?), {when}")

    def finish(self) -> None:
        self.check_output("after the last micro-batch")
        if self.observer is not None:
            self.observer.finish(self.observer_dir)
            if self._mirror is not None:
                self._mirror.upload_changes()

    def __call__(self, df, batch_id: int) -> None:
        """The ``foreachBatch`` function, behind ``streaming.pipeline.payloads`` (the job's own:
        one payload per partition) or ``replicate`` (``OUTPUT_SCHEMA`` rows).

        Nothing of the micro-batch comes to the driver but its row count per kind: the payloads
        become rows on the executors (``payloads_to_rows``), the rows are cached there, and each
        kind is written by Spark's Parquet writer from the executors (``land``)."""
        from streaming.pipeline import payloads_to_rows
        from streaming.schemas import OUTPUT_SCHEMA

        rows = df if "kind" in df.columns else df.mapInArrow(payloads_to_rows, OUTPUT_SCHEMA)
        rows = rows.persist()
        try:
            counts = {kind: int(n) for kind, n in rows.groupBy("kind").count().collect()}
            self.land({kind: kind_frame(rows, kind, n) for kind, n in counts.items() if n}, counts, batch_id)
        finally:
            rows.unpersist()
        if self.compaction is not None:
            self.compact(df.sparkSession, batch_id)

    def compact(self, spark, batch_id: int) -> None:
        """After batch ``batch_id`` landed: merge the older batches the policy says are due into
        ranges, drop what retention asks (``streaming.compaction``; the merges are Spark jobs)."""
        from streaming.compaction import maybe_compact

        self.check_output(f"before compacting after micro-batch {batch_id}")
        maybe_compact(self.store, spark, batch_id, self.compaction)

    def land(self, kinds: dict[str, Any], counts: dict[str, int], batch_id: int) -> None:
        """Write each kind's rows of batch ``batch_id`` (Spark DataFrames, ``kind_frame``) into
        ``OUTPUT/<kind>/.batch_id=N.tmp`` with Spark's writer, then commit it as ``batch_id=N``
        (``commit_written``); remove what a replayed batch no longer has; run the observer on the
        same frames: an observer with ``begin_spark_batch`` (the expectation suites) validates while
        the kinds are written, as one more concurrent action (its Spark jobs fill the executors'
        slots the small writes leave, its GX work runs in the driver meanwhile), and its results
        are recorded once every kind landed."""
        from streaming.schemas import OUTPUT_KINDS

        counts = {kind: int(counts.get(kind, 0)) for kind in OUTPUT_KINDS}
        self.check_output(f"before micro-batch {batch_id}")
        try:
            written = [kind for kind in OUTPUT_KINDS if counts[kind]]
            staging = {kind: f"{kind}/.{batch_dir_name(batch_id)}.tmp" for kind in written}
            actions = [lambda kind=kind: kinds[kind].write.mode("overwrite").option(SUCCESS_MARKER, "false")
                       .parquet(self.store.uri(staging[kind])) for kind in written]
            observed = {k: kinds[k] for k in OUTPUT_KINDS if counts[k]}
            begin = getattr(self.observer, "begin_spark_batch", None)
            record: list[Callable[[], None]] = []
            if begin is not None:  # the observer's Spark jobs and GX beside the writes; its results land after them
                actions.append(lambda: record.append(begin(observed, batch_id, self.observer_dir, counts)))
            run_concurrently(actions, kinds[written[0]].sparkSession if written else None)
            for kind in OUTPUT_KINDS:
                target = f"{kind}/{batch_dir_name(batch_id)}"
                if kind in staging:
                    commit_written(self.store, staging[kind], target)
                else:
                    self.store.remove(target)  # a replayed batch that now has nothing of this kind
            if self.observer is not None:
                if begin is None:
                    self.observer.on_spark_batch(observed, batch_id, self.observer_dir, counts)
                for step in record:
                    step()
                if self._mirror is not None:
                    self._mirror.upload_changes()
        except OSError:
            self.check_output(f"while micro-batch {batch_id} was written")  # a write that failed because OUTPUT went
            raise
        self.check_output(f"while micro-batch {batch_id} was written")  # before Spark commits it
        self._record(BatchStats(batch_id, counts, counts["summary"], counts["violations"], counts["quarantine"]))

    def _record(self, stats: "BatchStats") -> None:
        self.stats.append(stats)
        if self.on_batch:
            self.on_batch(stats)

    def write(self, tables: dict[str, Any], batch_id: int, partitions: int) -> None:
        """Write Arrow tables (per kind) as batch ``batch_id`` from this process, one file per kind:
        for rows already in memory (tests, tools), never the stream's path (``__call__``).  The
        observer is not run."""
        from streaming.schemas import OUTPUT_KINDS

        counts = {}
        self.check_output(f"before micro-batch {batch_id}")
        for kind in OUTPUT_KINDS:
            table = tables.get(kind)
            counts[kind] = 0 if table is None else table.num_rows
            target = f"{kind}/{batch_dir_name(batch_id)}"
            if not counts[kind]:
                self.store.remove(target)
                continue
            self.store.replace_dir(target, {part_name(0): parquet_bytes(sorted_kind_table(kind, table))})
        self._record(BatchStats(batch_id, counts, partitions, counts["violations"], counts["quarantine"]))


# Spark's file committer writes an empty _SUCCESS file beside the parts unless told not to.
SUCCESS_MARKER = "mapreduce.fileoutputcommitter.marksuccessfuljobs"


def run_concurrently(actions: list[Callable[[], Any]], session=None) -> None:
    """Run Spark actions (each kind's write) as concurrent Spark jobs from threads that inherit the
    caller's Spark local properties: the executors' slots fill with every kind's tasks at once
    instead of one small job after another.  Re-raises the first failure once all have ended."""
    if len(actions) < 2:
        for action in actions:
            action()
        return
    from pyspark import InheritableThread

    errors: list[BaseException] = []

    def guarded(action: Callable[[], Any]) -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            errors.append(exc)

    threads = [InheritableThread(guarded, args=(action,), session=session) for action in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def part_name(index: int) -> str:
    """The name of the ``index``-th Parquet file of a committed batch directory."""
    return f"part-{index:05d}.parquet"


def is_part(name: str) -> bool:
    """A Parquet data file of a batch directory: ``part-00000.parquet`` (this layout),
    ``part-0.parquet`` (the single-file layout before it) or Spark's own ``part-…-c000.snappy.parquet``."""
    return name.startswith("part-") and name.endswith(".parquet")


def commit_written(store, staging: str, target: str) -> list[str]:
    """Make the directory Spark's writer filled (``staging``) the batch directory ``target``:
    everything but the data files goes (Hadoop's ``.crc`` files, markers), the data files are
    renamed ``part-00000.parquet``, ``part-00001.parquet``... in Spark's task order (so the same
    rows under the same partitioning give the same names and bytes), then ``target`` is replaced
    by the whole directory in one rename: a reader sees the old batch or the new one, never half.
    Returns the data files' names."""
    names = store.list(staging)
    parts = sorted(n for n in names if is_part(n))
    for name in names:  # markers and the like; a part's checksum moves with it through Hadoop
        if name not in parts and not name.endswith(".crc"):
            store.remove(f"{staging}/{name}")
    final = [part_name(i) for i in range(len(parts))]
    for old, new in zip(parts, final):
        if old != new:
            store.rename(f"{staging}/{old}", f"{staging}/{new}")
    for name in store.list(staging):  # checksums left behind by a rename outside Hadoop
        if name.endswith(".crc") and name[1:-4] not in final:
            store.remove(f"{staging}/{name}")
    store.remove(target)
    store.rename(staging, target)
    return final


ROWS_PER_FILE = 1_000_000  # a micro-batch's kind is written as ceil(rows / ROWS_PER_FILE) files


def files_for(rows: int) -> int:
    """How many files a kind of ``rows`` rows is written as: a function of the data alone."""
    return max(1, -(-rows // ROWS_PER_FILE))


def kind_frame(rows, kind: str, count: int):
    """One kind's rows of a Spark DataFrame of ``OUTPUT_SCHEMA`` rows: that kind's columns, in
    ``files_for(count)`` Spark partitions, each sorted by ``SORT_KEYS`` (the order the sink writes).

    The split depends on the rows only, never on the job's shuffle partitions, executors or
    master: one partition (``coalesce``: the cached rows read by one task) up to a million rows,
    else Spark's hash partitioning by (topic, partition) into a fixed number of files. So a batch
    is the same files with the same rows on ``local[*]``, a cluster or Spark Connect, run once or
    replayed (the bytes can differ between JVMs: ``output_layout.same_parquet_content``)."""
    from pyspark.sql.functions import col

    from streaming.schemas import KIND_COLUMNS

    cols = KIND_COLUMNS[kind]
    frame = rows.where(col("kind") == kind).select(*cols)
    files = files_for(count)
    frame = frame.coalesce(1) if files == 1 else frame.repartition(files, "topic", "partition")
    return frame.sortWithinPartitions(*[c for c in SORT_KEYS if c in cols])




def parquet_bytes(table) -> bytes:
    """``table`` as the bytes of one Parquet file (pyarrow's defaults: the same bytes for the same rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def write_batch_dir(target: Path, table) -> None:
    """Replace the local directory ``target`` with one holding ``part-00000.parquet``: written aside,
    then swapped in, so a replayed batch replaces its output and a reader never sees half of it."""
    from streaming.storage import LocalStore

    LocalStore(target.parent).replace_dir(target.name, {part_name(0): parquet_bytes(table)})



def landed_stats(store, batch_id: int) -> BatchStats:
    """The counts of micro-batch ``batch_id`` read back from what landed in ``store`` (Parquet
    footers, or a compacted range's manifest: ``streaming.output_layout.landed_counts``): for a
    sink that ran in another process (Spark Connect runs foreachBatch on the server).  Every
    partition with rows has one summary row per batch."""
    from streaming.output_layout import landed_counts

    rows = landed_counts(store, batch_id)
    return BatchStats(batch_id, rows, rows["summary"], rows["violations"], rows["quarantine"])


def sorted_kind_table(kind: str, table):
    """One kind's rows (Arrow) with that kind's columns and types, in the order the sink writes
    them: by ``SORT_KEYS``, whatever order Spark handed the partitions over in."""
    from streaming.schemas import KIND_COLUMNS, arrow_schema

    cols = KIND_COLUMNS[kind]
    return table.select(list(cols)).cast(arrow_schema(kind)).sort_by([(c, "ascending") for c in SORT_KEYS if c in cols])


def kind_frames(rows) -> dict[str, Any]:
    """A micro-batch of ``OUTPUT_SCHEMA`` rows (a Spark DataFrame, a pandas DataFrame or an Arrow
    table) split by kind: kind -> pandas frame of that kind's ``KIND_COLUMNS``, sorted as the sink
    writes them; only the kinds that have rows."""
    import pyarrow as pa

    from streaming.schemas import output_arrow_schema, tables_by_kind

    if hasattr(rows, "toArrow"):  # Spark (classic or Connect)
        rows = rows.toArrow()
    elif not isinstance(rows, pa.Table):  # pandas
        rows = pa.Table.from_pandas(rows, schema=output_arrow_schema(), preserve_index=False)
    return {kind: sorted_kind_table(kind, t).to_pandas() for kind, t in tables_by_kind(rows).items()}
