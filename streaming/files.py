"""Event files to event rows, whatever a file holds: the job's only reader of input bytes.

The job reads its input directory as whole files (Spark's ``binaryFile`` source) and decodes
each one here, on the executors, so that no file can stop the stream:

* a Parquet file (it starts with ``PAR1``) must hold the event columns (``EVENT_FIELDS``, types
  castable to theirs); otherwise — a Parquet file that is not ours, a damaged one — the whole
  file goes to quarantine;
* files in subdirectories are read too (``recursiveFileLookup``; names starting with ``.`` or
  ``_`` are skipped at every level, as Spark does);
* any other file is JSON lines: bytes that are not UTF-8, a NUL byte (binary data), or no line
  that is a JSON object send the whole file to quarantine; otherwise each line that is not an
  event (not JSON, not an object, a column of the wrong type or out of its range) goes to
  quarantine alone and its neighbours run.

A file sent to quarantine whole gives one row: its path and the reason, and the first
``RAW_LIMIT`` characters of its bytes.  Its rows are never partly applied, so the stream's
results are those of a run without the file.  Rows that cannot be keyed (a bad line, a bad
file) travel under the null key and are quarantined by ``streaming.processor``.
"""

from __future__ import annotations

import io
import json
from typing import Any, Iterable, Iterator

from emulator.bounds import INT32_MAX, INT64_MAX
from emulator.steps import is_text

from .schemas import CORRUPT_COLUMN, EVENT_COLUMNS, EVENT_FIELDS, REASON_COLUMN

RAW_LIMIT = 1000  # characters of an unreadable line or file kept in its quarantine row
DECODED_COLUMNS = EVENT_COLUMNS + (CORRUPT_COLUMN, REASON_COLUMN)  # DECODED_SCHEMA's, in its order
_RANGES = {"int": (0, INT32_MAX), "long": (0, INT64_MAX)}


def _unreadable(raw: str, reason: str) -> dict[str, Any]:
    row = dict.fromkeys(DECODED_COLUMNS)
    row["_corrupt_record"], row["_reason"] = raw[:RAW_LIMIT], reason
    return row


def _preview(content: bytes) -> str:
    return content[:RAW_LIMIT].decode("utf-8", "backslashreplace")


def _field_problem(name: str, kind: str, value: Any) -> str | None:
    if value is None:
        return None
    if kind == "string":
        return None if is_text(value) else f"{name} must be a string of Unicode text" + (
            " (it holds a lone surrogate)" if isinstance(value, str) else "")
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{name} must be an integer"
    low, high = _RANGES[kind]
    return None if low <= value <= high else f"{name} {value} is out of range ({low} to {high})"


def _row_problem(row: dict[str, Any]) -> str | None:
    """The first column of an event row that is not what ``EVENT_FIELDS`` says, or its missing key."""
    for f in EVENT_FIELDS:
        problem = _field_problem(f.name, f.type, row[f.name])
        if problem:
            return problem
    return "missing topic or partition" if row["topic"] is None or row["partition"] is None else None


def event_from_line(line: str, where: str) -> dict[str, Any]:
    """One JSON line as an event row, or as an unreadable row naming ``where`` and why."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return _unreadable(line, f"unreadable row ({where}): not JSON ({str(exc)[:100]})")
    if not isinstance(obj, dict):
        return _unreadable(line, f"unreadable row ({where}): not a JSON object")
    row = dict.fromkeys(DECODED_COLUMNS)
    for f in EVENT_FIELDS:
        value = obj.get(f.name)
        if f.name == "args" and isinstance(value, (dict, list)):
            value = json.dumps(value, separators=(",", ":"))  # an args object written inline
        row[f.name] = value
    problem = _row_problem(row)
    return _unreadable(line, f"unreadable row ({where}): {problem}") if problem else row


def _json_lines(path: str, content: bytes) -> list[dict[str, Any]]:
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [_unreadable(_preview(content), f"unreadable file {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); none of its rows were applied")]
    if "\x00" in text:
        return [_unreadable(_preview(content), f"unreadable file {path}: binary data (a NUL byte at byte "
                                               f"{content.index(0)}); none of its rows were applied")]
    rows, readable = [], 0
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        row = event_from_line(line, f"{path} line {number}")
        readable += row["_reason"] is None
        rows.append(row)
    if rows and not readable:
        first = rows[0]["_reason"].split(": ", 1)[1]
        return [_unreadable(_preview(content), f"unreadable file {path}: not JSON lines of events (line 1: {first}); "
                                               f"none of its rows were applied")]
    return rows


def _parquet(path: str, content: bytes) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .schemas import event_arrow_schema

    def whole(reason: str) -> list[dict[str, Any]]:
        return [_unreadable(_preview(content), f"unreadable file {path}: {reason}; none of its rows were applied")]

    try:
        table = pq.read_table(io.BytesIO(content))
    except Exception as exc:  # pyarrow raises many kinds for a damaged file
        return whole(f"not a readable Parquet file ({type(exc).__name__}: {str(exc)[:200]})")
    schema = event_arrow_schema()
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        return whole(f"a Parquet file without the event columns (missing: {', '.join(missing)})")
    try:
        table = table.select(schema.names).cast(schema, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        return whole(f"a Parquet file whose event columns have other types ({str(exc)[:200]})")
    rows = []
    for number, row in enumerate(table.to_pylist(), start=1):
        problem = _row_problem(row)
        if problem:
            rows.append(_unreadable(json.dumps(row, default=str), f"unreadable row ({path} row {number}): {problem}"))
        else:
            rows.append({**row, "_corrupt_record": None, "_reason": None})
    return rows


def decode_event_file(path: str, content: bytes) -> list[dict[str, Any]]:
    """Every row of one input file (``DECODED_COLUMNS``); never raises."""
    try:
        if content[:4] == b"PAR1":
            return _parquet(path, content)
        return _json_lines(path, content)
    except Exception as exc:  # noqa: BLE001 - a file must never stop the stream
        return [_unreadable(_preview(content), f"unreadable file {path}: {type(exc).__name__}: {str(exc)[:200]}; none of its rows were applied")]


def decode_file_batches(batches: Iterable) -> Iterator:
    """``mapInArrow`` over the ``binaryFile`` source: Arrow batches of files -> of event rows."""
    import pyarrow as pa

    from .schemas import decoded_arrow_schema

    schema = decoded_arrow_schema()
    for batch in batches:
        paths, contents = batch.column("path").to_pylist(), batch.column("content").to_pylist()
        rows = [row for path, content in zip(paths, contents) for row in decode_event_file(path, content or b"")]
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


FAMILY_SCAN_BYTES = 256 << 20  # what ``input_family`` reads at most before it gives up


def input_family(input_dir) -> tuple[str | None, str | None]:
    """Which protocol family a local input directory's events are for: ``("quorum" | "partition",
    the file whose header row says so)`` from the first header row (seq 0) of its files in name
    order (names starting with ``.`` or ``_`` skipped, as the job does), ``(None, None)`` when no
    header is found within ``FAMILY_SCAN_BYTES`` (a restart fed only later steps): ``replemu
    stream`` refuses a protocol of the other family before Spark starts."""
    from pathlib import Path

    from .events import event_family

    root = Path(input_dir)
    budget = FAMILY_SCAN_BYTES
    paths = sorted(p for p in root.rglob("*") if p.is_file()
                   and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts))
    for path in paths:
        try:
            size = path.stat().st_size
            if size > budget:
                break
            budget -= size
            rows = decode_event_file(str(path), path.read_bytes())
        except OSError:
            continue
        family = event_family(rows)
        if family is not None:
            return family, str(path)
    return None, None
