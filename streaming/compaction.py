"""Outputs that last: older micro-batches compacted into ranges, bulky kinds dropped when asked.

A day's stream writes ~17,000 micro-batches; each adds one directory per kind.  After the sink
commits a micro-batch it calls (the lead's sink, ``streaming/sink.py``)::

    maybe_compact(store, spark, committed_batch, policy) -> CompactionReport

``store``: the output's ``streaming.storage`` store; ``spark``: the job's session (the merges
run as Spark jobs on the executors), or None for the pure-pyarrow path (local outputs only:
``replemu compact OUTPUT``, tests, the benchmark); ``committed_batch``: the newest micro-batch
whose outputs landed; ``policy``: a ``CompactionPolicy`` (``retain`` from ``replemu stream
--retain KIND=BATCHES``, which reaches ``streaming.job.run_stream(..., retention={kind: batches})``;
the job builds ``CompactionPolicy(retain=retention or {})``).  The layout and the readers' rule
are ``streaming.output_layout``; a sink in another process counts a landed batch with
``streaming.output_layout.landed_counts(store, batch_id)`` (fresh or compacted).

**Policy (tiered, aligned blocks).**  With ``keep_recent`` K (200), ``batches_per_range`` S
(100) and ``fan_in`` F (10), level L has blocks of S·F^(L-1) batches aligned on multiples of
their size (0-99, 100-199 ...; 0-999 ...; 0-9999 ...).  A block is *due* once its last batch is
at least K behind the newest committed one.  Each call merges, for every kind, every due block
that is not yet one range into ``batch_range=A-B`` (A, B the block's bounds; the batches in it
that have rows of the kind), largest level first, so ten 100-batch ranges become one 1,000-batch
range when that block is due, and so on.  A kind then holds at most K + S - 1 fresh batch
directories plus F - 1 ranges per level (levels: log_F of the batch count / S): after 17,000
micro-batches 215 directories per kind (200 fresh, 0-9999, six of 1,000 from 10000 to 15999,
eight of 100 from 16000 to 16799), after 10,000 217, against 17,000 and 10,000 uncompacted.  The
price is that a batch's rows are rewritten once per level (3 times by 10,000 batches), the
biggest merge (10,000 batches) in the one call that makes it.  A range holds up to
``spark.sql.shuffle.partitions`` files (Spark path) or one file per ``ROWS_PER_FILE`` rows (pyarrow path).

**A merge**: the inputs are read (fresh ``batch_id=N`` with the id from the path, ranges with
their column), sorted by batch_id then the kind's sort keys (``_sort_spec``), written to
``OUTPUT/<kind>/.batch_range=A-B.tmp/`` with the range's ``_batches.json``, renamed to
``batch_range=A-B``, and only then are the inputs removed.  A crash before the rename leaves a
``.tmp`` (never read; removed by the next call); between the rename and the removals, the
inputs are shadowed (``streaming.output_layout``) and removed by the next call.  Each batch is
in exactly one place a reader reads, at every moment.

Only batches at least K behind the newest are touched: the in-flight batch Spark may replay is
never compacted, nor the few that ``replemu checkpoint repair`` rolls back.  **A repair that
rolls back into a compacted range** (more than K batches: only with a tiny K) re-runs batches
whose rows the range already holds; the sink writes them again as ``batch_id=N``, which readers
ignore (shadowed by the range: the rows are identical, same input and seed), and the next call
removes them.

**Retention** (``retain = {kind: R}``): whole units (fresh batches or ranges) of that kind whose
last batch is R or more behind the newest are removed; ``OUTPUT/retention.json`` records the
policy and the first batch still kept per kind *before* anything is removed, so readers know
that, e.g., timelines before batch X were dropped.  Only kinds nothing else needs can be
dropped: ``retention_problem`` refuses the kinds ``replemu results`` rebuilds from
(``streaming.results.RESULT_KINDS``), the quarantine and the expectation results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from streaming import output_layout as layout
from streaming.output_layout import Unit

ALL_KINDS = ("timeline", "log", "summary", "violations", "losses", "errors", "quarantine", "validations")
# Kinds that retention may never drop, and why (exit 2 when asked to).
KEPT_KINDS = {
    "summary": "replemu results reads every partition's latest state from it",
    "violations": "replemu results lists every violation from it",
    "losses": "replemu results lists every lost record from it",
    "errors": "replemu results lists every error answer from it",
    "log": "replemu results rebuilds every replica's log from it",
    "quarantine": "replemu results lists the bad input rows from it",
    "validations": "the expectation verdicts are kept",
}
ROWS_PER_FILE = 500_000  # pyarrow path: a range's files roll over at this many rows
ROW_GROUP = 64_000


def _sort_spec(kind: str) -> tuple[tuple[str, ...], bool]:
    """``(columns, nulls_first)`` a range's rows are sorted by after batch_id: the sink's
    ``SORT_KEYS`` (pyarrow's nulls last, as the sink sorts); the expectation results by
    ``expectations.suites.write_validations``' keys (a missing frame sorts first there)."""
    if kind == "validations":
        return ("frame", "invariant", "expectation"), True
    return tuple(layout.SORT_KEYS), False


@dataclass(frozen=True)
class CompactionPolicy:
    keep_recent: int = 200
    batches_per_range: int = 100
    fan_in: int = 10
    retain: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.keep_recent < 1 or self.batches_per_range < 2 or self.fan_in < 2:
            raise ValueError("keep_recent >= 1, batches_per_range >= 2, fan_in >= 2")
        problem = retention_problem(self.retain)
        if problem:
            raise ValueError(problem)

    def block_sizes(self, horizon: int) -> list[int]:
        """The block sizes whose first block can be due at ``horizon``, largest first."""
        sizes, size = [], self.batches_per_range
        while size <= horizon + 1:
            sizes.append(size)
            size *= self.fan_in
        return sizes[::-1]


def parse_retain(items: list[str]) -> dict[str, int]:
    """``["timeline=1000", ...]`` -> ``{"timeline": 1000}``; ValueError names the bad item."""
    out: dict[str, int] = {}
    for item in items:
        kind, sep, number = item.partition("=")
        kind = kind.strip()
        if not sep or not kind:
            raise ValueError(f"--retain {item[:60]!r}: give KIND=BATCHES (e.g. timeline=1000)")
        try:
            value = int(number)
        except ValueError:
            raise ValueError(f"--retain {item[:60]!r}: BATCHES must be a whole number of micro-batches") from None
        if value < 1:
            raise ValueError(f"--retain {item[:60]!r}: keep at least 1 micro-batch")
        out[kind] = value
    problem = retention_problem(out)
    if problem:
        raise ValueError(problem)
    return out


def retention_problem(retain: Mapping[str, int]) -> str | None:
    for kind, batches in retain.items():
        if kind in KEPT_KINDS:
            droppable = [k for k in ALL_KINDS if k not in KEPT_KINDS]
            return (f"--retain {kind}={batches}: {kind} is kept whole ({KEPT_KINDS[kind]}); "
                    f"only {', '.join(droppable)} can be dropped")
        if kind not in ALL_KINDS:
            return f"--retain {kind}={batches}: no output kind {kind!r} (kinds: {', '.join(ALL_KINDS)})"
        if not isinstance(batches, int) or batches < 1:
            return f"--retain {kind}={batches}: keep at least 1 micro-batch"
    return None


@dataclass
class Merge:
    kind: str
    first: int
    last: int
    inputs: list[Unit]

    @property
    def name(self) -> str:
        return layout.range_dir_name(self.first, self.last)


@dataclass
class Plan:
    merges: list[Merge] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)  # store-relative: shadowed units, stale .tmp ranges
    dropped: list[str] = field(default_factory=list)  # retention
    kept_from: dict[str, int] = field(default_factory=dict)  # retention: kind -> first batch id kept


@dataclass
class CompactionReport:
    merged: list[str] = field(default_factory=list)  # "kind/batch_range=A-B (N inputs)"
    removed: int = 0
    dropped: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.merged or self.removed or self.dropped)


def plan(store, committed_batch: int, policy: CompactionPolicy, kinds=ALL_KINDS) -> Plan:
    """What ``maybe_compact`` would do (directory listings only)."""
    p = Plan()
    horizon = committed_batch - policy.keep_recent  # batches <= horizon may be compacted
    sizes = policy.block_sizes(horizon) if horizon >= 0 else []
    for kind in kinds:
        names = store.list(kind)
        p.removals += [f"{kind}/{n}" for n in names if n.startswith(".batch_range=") and n.endswith(".tmp")]
        visible, shadowed = layout.split_units(layout.all_units(store, kind))
        p.removals += [f"{kind}/{u.name}" for u in shadowed]
        keep = policy.retain.get(kind)
        if keep is not None:
            cut = committed_batch - keep + 1  # the first batch kept
            if cut > 0:
                p.kept_from[kind] = cut
                gone = [u for u in visible if u.last < cut]
                p.dropped += [f"{kind}/{u.name}" for u in gone]
                visible = [u for u in visible if u.last >= cut]
        claimed: set[str] = set()
        for size in sizes:
            # only the blocks that hold a unit (a long run has ~F ranges per level and K + S fresh batches)
            for start in sorted({u.first // size * size for u in visible if u.last <= horizon}):
                last = start + size - 1
                if last > horizon:
                    continue
                inside = [u for u in visible if start <= u.first and u.last <= last and u.name not in claimed]
                if not inside:
                    continue
                claimed.update(u.name for u in inside)
                if len(inside) == 1 and inside[0].ranged and (inside[0].first, inside[0].last) == (start, last):
                    continue  # already this block's range
                p.merges.append(Merge(kind, start, last, inside))
    return p


def maybe_compact(store, spark, committed_batch: int, policy: CompactionPolicy | None = None) -> CompactionReport:
    """Compact and drop what ``policy`` says is due after micro-batch ``committed_batch``
    committed (see the module's docstring); returns what was done.  Never touches a batch less
    than ``policy.keep_recent`` behind ``committed_batch``; safe to call after every batch
    (nothing due: a listing of each kind's directory)."""
    policy = policy or CompactionPolicy()
    p = plan(store, committed_batch, policy)
    report = CompactionReport()
    if p.kept_from:
        _record_retention(store, policy, p.kept_from)
    for rel in p.removals:  # left by a crash: shadowed inputs, a range never renamed into place
        store.remove(rel)
        report.removed += 1
    for rel in p.dropped:
        store.remove(rel)
        report.dropped.append(rel)
    for m in p.merges:
        merge(store, spark, m)
        report.merged.append(f"{m.kind}/{m.name} ({len(m.inputs)} inputs)")
    return report


def merge(store, spark, m: Merge, crash_before_removal: bool = False) -> None:
    """Write ``m``'s range aside, rename it into place, then remove its inputs
    (``crash_before_removal``: stop after the rename, as a crash there would — for tests)."""
    tmp = f"{m.kind}/.{m.name}.tmp"
    target = f"{m.kind}/{m.name}"
    store.remove(tmp)
    rows = _write_spark(store, spark, m, tmp) if spark is not None else _write_arrow(store, m, tmp)
    store.write_bytes(f"{tmp}/{layout.MANIFEST}", layout.manifest_bytes(m.first, m.last, rows))
    if store.exists(target):  # a block's range rewritten (its inputs included the old one's rows)
        store.remove(target)
    _rename(store, tmp, target)
    if crash_before_removal:
        return
    for u in m.inputs:
        if u.name != m.name:
            store.remove(f"{m.kind}/{u.name}")


def _rename(store, src: str, dst: str) -> None:
    import os

    from streaming.storage import StoreError

    root = getattr(store, "root", None)
    if not hasattr(store, "fs"):
        os.replace(root / src, root / dst)
        return
    if not store._call(f"rename to {dst}", store.fs.rename, store._p(src), store._p(dst)):
        raise StoreError(f"{store.location}: could not rename {src} to {dst}")


def _write_spark(store, spark, m: Merge, tmp: str) -> dict[int, int]:
    """The merge as a Spark job: the executors read the inputs and write the range's files."""
    from pyspark.sql import functions as F

    from streaming.storage import join

    base = join(store.location, m.kind)
    frames = []
    fresh = [u for u in m.inputs if not u.ranged]
    ranged = [u for u in m.inputs if u.ranged]
    if fresh:  # batch_id comes from the directory names (Spark's partition discovery)
        frames.append(spark.read.option("basePath", base).parquet(*[join(base, u.name) for u in fresh]))
    if ranged:
        frames.append(spark.read.parquet(*[join(base, u.name) for u in ranged]))
    frames = [f.withColumn("batch_id", F.col("batch_id").cast("long")) for f in frames]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other, allowMissingColumns=True)
    columns = [c for c in df.columns if c != "batch_id"] + ["batch_id"]
    keys, nulls_first = _sort_spec(m.kind)
    order = [F.col("batch_id").asc()] + [F.col(c).asc_nulls_first() if nulls_first else F.col(c).asc_nulls_last()
                                         for c in keys if c in columns]
    df.select(*columns).orderBy(*order).write.mode("overwrite").parquet(join(store.location, tmp))
    # The manifest's row counts, from the range just written (its batch_id column, on the executors).
    counted = spark.read.parquet(join(store.location, tmp)).groupBy("batch_id").count().collect()
    return {int(b): int(n) for b, n in counted}


def _write_arrow(store, m: Merge, tmp: str) -> dict[int, int]:
    """The merge with pyarrow (a local output, no Spark): unit by unit, in batch order, so memory
    holds one input at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = layout._local_root(store)
    if root is None:
        raise ValueError(f"{store.location}: compacting a Hadoop output needs a Spark session")
    out = root / tmp
    out.mkdir(parents=True)
    keys, nulls_first = _sort_spec(m.kind)
    schema, pending, rows, part = None, [], 0, 0
    counts: dict[int, int] = {}

    def flush() -> None:
        nonlocal pending, rows, part
        if pending:  # one file, row groups of ROW_GROUP rows (not one per input: thousands of tiny groups read slowly)
            pq.write_table(pa.concat_tables(pending), str(out / f"part-{part:05d}.parquet"), row_group_size=ROW_GROUP)
            part += 1
        pending, rows = [], 0

    for u in sorted(m.inputs, key=lambda u: u.first):
        table = layout.read_units(root, [u])
        if not table.num_rows:
            continue
        if not u.ranged:
            nulls = "at_start" if nulls_first else "at_end"
            sort = [(c, "ascending", nulls) for c in keys if c in table.column_names]
            if sort:
                table = table.sort_by(sort)
        if schema is None:
            schema = table.schema
        pending.append(table.select(schema.names).cast(schema))
        rows += table.num_rows
        for b, t in layout.split_by_batch(table).items():
            counts[b] = counts.get(b, 0) + t.num_rows
        if rows >= ROWS_PER_FILE:
            flush()
    flush()
    return counts


def _record_retention(store, policy: CompactionPolicy, kept_from: dict[str, int]) -> None:
    """``OUTPUT/retention.json``, written before anything is dropped (only when it changes)."""
    doc = layout.read_retention(store)
    new = {"retain": dict(sorted(policy.retain.items())),
           "dropped_before": dict(sorted({**doc.get("dropped_before", {}), **kept_from}.items())),
           "note": "rows of these kinds in micro-batches before dropped_before[kind] were removed by --retain"}
    if new != doc:
        store.write_bytes(layout.RETENTION_FILE, (json.dumps(new, indent=2) + "\n").encode("utf-8"))


def compaction_text(report: CompactionReport) -> str:
    parts = []
    if report.merged:
        parts.append(f"{len(report.merged)} ranges written ({', '.join(report.merged[:3])}{' ...' if len(report.merged) > 3 else ''})")
    if report.dropped:
        parts.append(f"{len(report.dropped)} directories dropped by --retain")
    if report.removed:
        parts.append(f"{report.removed} left-overs removed")
    return "; ".join(parts) or "nothing to compact"


def file_count(where) -> dict[str, Any]:
    """``{"files": N, "dirs": N}`` under an output's kind directories (the benchmark's measure)."""
    import os

    root = layout._local_root(where)
    files = dirs = 0
    for kind in ALL_KINDS:
        for _dirpath, dirnames, filenames in os.walk(root / kind):
            dirs += len(dirnames)
            files += len(filenames)
    return {"files": files, "dirs": dirs}
