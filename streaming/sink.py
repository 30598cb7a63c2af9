"""The job's own sink: each micro-batch's output rows as Parquet, one directory per kind and
batch id (``OUTPUT/<kind>/batch_id=<id>/``), replaced when Spark replays a batch after a restart,
so each micro-batch lands exactly once.  A ``BatchObserver`` (the expectation suites, given by
the application) sees every micro-batch's rows after they landed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from streaming.checkpoint import RUN_FILE
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
    _watch: bool | None = None  # OUTPUT held its run.json when this process first wrote a batch

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
        one payload per partition) or ``replicate`` (``OUTPUT_SCHEMA`` rows)."""
        from streaming.processor import tables_from_payloads
        from streaming.schemas import tables_by_kind

        if "payload" in df.columns:
            tables, partitions = tables_from_payloads(row["payload"] for row in df.select("payload").collect())
        else:
            tables = tables_by_kind(df.toArrow())
            # Every partition that applied a step this batch has one summary row.
            partitions = tables["summary"].num_rows if "summary" in tables else 0
        self.write(tables, batch_id, partitions)

    def write(self, tables: dict[str, Any], batch_id: int, partitions: int) -> None:
        """Write each kind's rows (Arrow tables) of batch ``batch_id``, sorted; run the observer.

        The sort keys are unique per row (a partition, a step, a row index or replica), so the
        written order is the same whatever order Spark handed the partitions over in."""
        from streaming.schemas import OUTPUT_KINDS

        counts, written = {}, {}
        self.check_output(f"before micro-batch {batch_id}")
        try:
            for kind in OUTPUT_KINDS:
                table = tables.get(kind)
                counts[kind] = 0 if table is None else table.num_rows
                target = f"{kind}/batch_id={batch_id}"
                if not counts[kind]:
                    self.store.remove(target)  # a replayed batch that now has nothing of this kind
                    continue
                table = written[kind] = sorted_kind_table(kind, table)
                self.store.replace_dir(target, {BATCH_FILE: parquet_bytes(table)})
            if self.observer is not None:
                self.observer.on_batch({kind: t.to_pandas() for kind, t in written.items()}, batch_id, self.observer_dir)
                if self._mirror is not None:
                    self._mirror.upload_changes()
        except OSError:
            self.check_output(f"while micro-batch {batch_id} was written")  # a write that failed because OUTPUT went
            raise
        self.check_output(f"while micro-batch {batch_id} was written")  # before Spark commits it
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


SORT_KEYS = ("topic", "partition", "seq", "idx", "replica")  # unique per row within each kind


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
