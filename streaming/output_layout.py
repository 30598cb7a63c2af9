"""The micro-batches of an output kind, whatever layout holds them: the one reader of
``OUTPUT/<kind>/`` and the one place that knows which directory shows which batch.

``OUTPUT/<kind>/`` holds (pyarrow only here: no Spark, no pandas)::

    batch_id=N/          micro-batch N as the sink wrote it: one or more ``*.parquet`` files
                         (``part-0.parquet`` of the first layout, ``part-00000.parquet``,
                         ``part-00001.parquet`` ... one per Spark task), the kind's columns, no
                         ``batch_id`` column (it is in the name)
    batch_range=A-B/     micro-batches A to B (inclusive, not zero-padded) compacted
                         (``streaming.compaction``): ``*.parquet`` files with the kind's columns
                         plus an int64 ``batch_id``, rows sorted by batch_id then the kind's sort
                         keys across the files in name order; ``_batches.json`` names the batch
                         ids it holds and their row counts (``{"first", "last", "rows": {id: n}}``)
    .NAME.tmp/           a directory being written: never read

A file or directory whose name starts with ``.`` or ``_`` is not data (Spark's ``_SUCCESS`` and
``.crc`` files, the manifest); a symbolic link is never followed.

**The shadowing rule** (``visible_units``): a ``batch_id=N`` whose N lies inside any
``batch_range=A-B`` is ignored, and so is a range lying inside a larger range.  A compaction
renames its range into place before it removes what the range replaces, so a crash between
the two never shows a batch twice, and a reader never sees half a range.  Ranges are aligned
blocks (``streaming.compaction``), so two ranges either nest or are disjoint; a partial
overlap is never written, and would be refused by ``visible_units`` (``LayoutError``).

Everything that reads outputs goes through here: ``streaming.results.read_output``, the
dashboard and ``replemu serve`` (``replemu.dashboard.RunReader``), ``/metrics``, the checkpoint's
"does this output hold batches" check, ``landed_counts`` for a sink in another process.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

BATCH_DIR = re.compile(r"batch_id=(\d{1,18})")
RANGE_DIR = re.compile(r"batch_range=(\d{1,18})-(\d{1,18})")
MANIFEST = "_batches.json"  # in a range: the batch ids it holds, with their row counts
RETENTION_FILE = "retention.json"  # OUTPUT/retention.json: which kinds drop old batches, and up to where
# The order of a kind's rows in its files (the columns a kind has, in this order): unique per row within
# each kind; the sink sorts a batch's rows by them, a compaction a range's rows by batch_id then them.
SORT_KEYS = ("topic", "partition", "seq", "idx", "replica")


class LayoutError(ValueError):
    pass


def batch_dir_name(batch_id: int) -> str:
    return f"batch_id={batch_id}"


def range_dir_name(first: int, last: int) -> str:
    return f"batch_range={first}-{last}"


@dataclass(frozen=True)
class Unit:
    """One directory of a kind: a fresh micro-batch (``first == last``, not ``ranged``) or a
    compacted range.  ``signature`` changes whenever the directory is replaced (local: inode
    and modification time; a Hadoop store: the name)."""

    kind: str
    name: str
    first: int
    last: int
    ranged: bool
    signature: str = ""

    def covers(self, batch_id: int) -> bool:
        return self.first <= batch_id <= self.last

    def inside(self, other: "Unit") -> bool:
        return other.first <= self.first and self.last <= other.last


def parse_unit(kind: str, name: str, signature: str = "") -> Unit | None:
    """The unit a directory name denotes (None: not a batch directory, e.g. ``.batch_id=3.tmp``)."""
    m = BATCH_DIR.fullmatch(name)
    if m:
        return Unit(kind, name, int(m[1]), int(m[1]), False, signature)
    m = RANGE_DIR.fullmatch(name)
    if m and int(m[1]) <= int(m[2]):
        return Unit(kind, name, int(m[1]), int(m[2]), True, signature)
    return None


# -- where: a local directory (a path) or a streaming.storage store (local or Hadoop) ----------

def _local_root(where) -> Path | None:
    """The local directory behind ``where`` (a path or a ``LocalStore``), None for a Hadoop store."""
    if isinstance(where, (str, os.PathLike)):
        from streaming.storage import is_uri

        return None if is_uri(where) else Path(where)
    root = getattr(where, "root", None)
    return Path(root) if root is not None and not hasattr(where, "fs") else None


def all_units(where, kind: str) -> list[Unit]:
    """Every batch directory of ``kind`` (shadowed ones too), by (first, -last, name)."""
    root = _local_root(where)
    units = []
    if root is not None:
        base = root / kind
        if base.is_symlink():
            return []
        try:
            with os.scandir(base) as it:
                for e in it:
                    if e.name.startswith(("batch_id=", "batch_range=")) and e.is_dir(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        u = parse_unit(kind, e.name, f"{st.st_ino:x}.{st.st_mtime_ns:x}")
                        if u is not None:
                            units.append(u)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
    else:
        for name in where.list(kind):
            u = parse_unit(kind, name, name)
            if u is not None:
                units.append(u)
    return sorted(units, key=lambda u: (u.first, -u.last, u.name))


def split_units(units: Iterable[Unit]) -> tuple[list[Unit], list[Unit]]:
    """``(visible, shadowed)``: the shadowing rule.  Raises ``LayoutError`` on two ranges that
    overlap without nesting (never written by replemu)."""
    units = sorted(units, key=lambda u: (u.first, -u.last, u.name))
    ranges = [u for u in units if u.ranged]
    outer: list[Unit] = []  # ranges inside no other range, disjoint, by first
    for r in ranges:  # by first, widest first: a range inside an earlier one is nested in it
        if outer and r.first <= outer[-1].last:
            if r.last > outer[-1].last:
                raise LayoutError(f"{r.kind}/{outer[-1].name} and {r.kind}/{r.name} overlap without one holding the other "
                                  f"(replemu never writes that): remove the one that is not wanted")
            continue
        outer.append(r)
    visible, shadowed, i = [], [], 0
    for u in units:
        while i < len(outer) and outer[i].last < u.first:
            i += 1
        holder = outer[i] if i < len(outer) and outer[i].first <= u.first else None
        if holder is not None and holder is not u and u.inside(holder):
            shadowed.append(u)
        else:
            visible.append(u)
    return visible, shadowed


def visible_units(where, kind: str) -> list[Unit]:
    """The units of ``kind`` a reader reads, by first batch id (each batch in at most one)."""
    return split_units(all_units(where, kind))[0]


def unit_files(where, unit: Unit) -> list[str]:
    """The data files of a unit (paths for a local directory, store-relative names otherwise),
    in name order: regular ``*.parquet`` files, no link, nothing starting with ``.`` or ``_``."""
    rel = f"{unit.kind}/{unit.name}"
    root = _local_root(where)
    if root is None:
        return [f"{rel}/{n}" for n in where.list(rel) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    try:
        with os.scandir(root / rel) as it:
            return sorted(e.path for e in it if e.name.endswith(".parquet") and not e.name.startswith((".", "_"))
                          and e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def read_manifest(where, unit: Unit) -> dict[int, int] | None:
    """A range's ``{batch id: rows}`` from its manifest (None: none, or unreadable)."""
    rel = f"{unit.kind}/{unit.name}/{MANIFEST}"
    try:
        root = _local_root(where)
        data = (root / rel).read_bytes() if root is not None else where.read_bytes(rel)
        doc = json.loads(data)
        return {int(b): int(n) for b, n in doc["rows"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def manifest_bytes(first: int, last: int, rows: dict[int, int]) -> bytes:
    doc = {"first": first, "last": last, "rows": {str(b): int(n) for b, n in sorted(rows.items())}}
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode("utf-8")


def unit_batches(where, unit: Unit) -> dict[int, int]:
    """``{batch id: rows}`` of one unit: a fresh batch's from its Parquet footers, a range's
    from its manifest (or, without one, from its ``batch_id`` column)."""
    if not unit.ranged:
        return {unit.first: _footer_rows(where, unit_files(where, unit))}
    rows = read_manifest(where, unit)
    if rows is not None:
        return rows
    table = read_units(where, [unit], columns=["batch_id"])
    counts: dict[int, int] = {}
    for b in table["batch_id"].to_pylist():
        counts[b] = counts.get(b, 0) + 1
    return counts


def _footer_rows(where, files: list[str]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = _local_root(where)
    total = 0
    for f in files:
        source = f if root is not None else pa.BufferReader(where.read_bytes(f))
        total += pq.ParquetFile(source).metadata.num_rows
    return total


def batch_index(where, kind: str, units: list[Unit] | None = None) -> dict[int, Unit]:
    """``{batch id: the unit that shows it}`` for every batch of ``kind`` that has rows."""
    index: dict[int, Unit] = {}
    for u in visible_units(where, kind) if units is None else units:
        if u.ranged:
            for b in unit_batches(where, u):
                index[b] = u
        else:
            index[u.first] = u
    return index


def landed_counts(store, batch_id: int, kinds: Iterable[str] | None = None) -> dict[str, int]:
    """The rows of micro-batch ``batch_id`` per kind, from Parquet footers (or a range's
    manifest): for a sink that ran in another process (Spark Connect runs foreachBatch on the
    server).  ``kinds`` defaults to ``streaming.schemas.OUTPUT_KINDS``."""
    if kinds is None:
        from streaming.schemas import OUTPUT_KINDS as kinds
    counts = {}
    for kind in kinds:
        holder = next((u for u in visible_units(store, kind) if u.covers(batch_id)), None)
        counts[kind] = 0 if holder is None else unit_batches(store, holder).get(batch_id, 0)
    return counts


def has_batches(store) -> bool:
    """Whether an output (a ``streaming.storage`` store) holds any micro-batch, fresh or compacted."""
    return any(parse_unit(kind, name) is not None for kind in store.list() for name in store.list(kind))


# -- reading rows -------------------------------------------------------------------------------

def read_units(where, units: list[Unit], columns: list[str] | None = None, filter=None):
    """The rows of ``units`` (of one kind, local) as one Arrow table with an int64 ``batch_id``
    column, in batch order (units are disjoint), each batch's rows as written.  ``columns``:
    only these (``batch_id`` always comes along); ``filter``: a ``pyarrow.dataset`` expression."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    root = _local_root(where)
    if root is None:
        raise LayoutError(f"{getattr(where, 'location', where)}: the readers take a local directory")
    units = sorted(units, key=lambda u: u.first)
    want = None if columns is None else [c for c in columns if c != "batch_id"]
    tables = []
    fresh = [u for u in units if not u.ranged]
    ranged = [u for u in units if u.ranged]
    if fresh:
        files = [f for u in fresh for f in unit_files(root, u)]
        if files:
            kind_dir = str(root / fresh[0].kind)
            part = ds.partitioning(pa.schema([("batch_id", pa.int64())]), flavor="hive")
            dataset = ds.dataset(files, format="parquet", partitioning=part, partition_base_dir=kind_dir)
            cols = None if want is None else [c for c in want if c in dataset.schema.names] + ["batch_id"]
            tables.append(dataset.to_table(columns=cols, filter=filter))
    if ranged:
        files = [f for u in ranged for f in unit_files(root, u)]
        if files:
            dataset = ds.dataset(files, format="parquet")
            cols = None if want is None else [c for c in want if c in dataset.schema.names] + ["batch_id"]
            tables.append(dataset.to_table(columns=cols, filter=filter))
    if not tables:
        return pa.table({"batch_id": pa.array([], pa.int64())})
    tables = [_batch_id_last(t) for t in tables]
    if len(tables) == 2 and ranged and fresh and ranged[0].first < fresh[0].first:
        tables.reverse()  # older ranges first, then the fresh batches: in batch order, no sort needed
    if len(tables) == 2:
        first = tables[0].schema
        try:
            tables[1] = tables[1].select(first.names).cast(first)
        except (KeyError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # let concat promote what it can
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    return sort_by_batch(table)


def _batch_id_last(table):
    import pyarrow as pa

    i = table.schema.get_field_index("batch_id")
    column = table.column(i).cast(pa.int64())
    return table.remove_column(i).append_column("batch_id", column)


def sort_by_batch(table):
    """``table`` in batch_id order, each batch's rows in the order they had (a stable sort)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows < 2:
        return table
    ids = table["batch_id"]
    if pc.all(pc.greater_equal(pc.pairwise_diff(ids.combine_chunks()), 0)).as_py() is not False:
        return table
    order = pc.array_sort_indices(pa.StructArray.from_arrays(
        [ids.combine_chunks(), pa.array(range(table.num_rows), pa.int64())], ["b", "i"]))
    return table.take(order)


def split_by_batch(table) -> dict[int, Any]:
    """A table sorted by ``batch_id`` as ``{batch id: its rows}`` (zero-copy slices)."""
    import numpy as np

    if table.num_rows == 0:
        return {}
    ids = table["batch_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    return {int(ids[s]): table.slice(int(s), int(e - s)) for s, e in zip(starts, ends)}


def read_kind(where, kind: str, columns: list[str] | None = None, filter=None, attempts: int = 3):
    """Every visible batch of ``kind`` as one Arrow table with an int64 ``batch_id`` column.

    A running job may compact while this reads (a range renamed in, then the batches it holds
    removed): a file gone under the reader means the listing is stale, so it is listed again."""
    for attempt in range(attempts):
        try:
            return read_units(where, visible_units(where, kind), columns=columns, filter=filter)
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise


def read_retention(where) -> dict[str, Any]:
    """``OUTPUT/retention.json``: ``{"retain": {kind: batches}, "dropped_before": {kind: first
    batch id kept}}``; empty when the output drops nothing."""
    root = _local_root(where)
    try:
        data = (root / RETENTION_FILE).read_bytes() if root is not None else where.read_bytes(RETENTION_FILE)
        doc = json.loads(data)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def same_parquet_content(a: Path, b: Path) -> bool:
    """Two Parquet files hold the same thing: the same schema, the same key-value metadata and the
    same rows in the same order (row groups aside).  Spark's writer (parquet-mr) does not give the
    same bytes for the same rows in another JVM — it lists a column chunk's encodings in the order
    of a hash set — so outputs written by different processes are compared by content."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    except (pa.ArrowInvalid, OSError):
        return False  # not both Parquet files: bytes decide
    if fa.schema_arrow != fb.schema_arrow or (fa.metadata.metadata or {}) != (fb.metadata.metadata or {}):
        return False
    return fa.read().equals(fb.read(), check_metadata=True)

