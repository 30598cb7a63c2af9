"""Kafka's on-disk formats for replicas: written through kafka-python's record-batch code, read
the way Kafka's log loader reads them.

Layout of an exported partition (one directory per broker, as on real brokers)::

    DIR/broker-<id>/<topic>-<partition>/00000000000000000000.log   v2 record batches
                                        leader-epoch-checkpoint     "0", count, "epoch start" lines
                                        replication-offset-checkpoint  "0", count, "topic partition hw"

A batch is one contiguous run of records of one leader epoch; its ``baseOffset`` and
``partitionLeaderEpoch`` (both outside the CRC, stamped after kafka-python builds the batch) are
the record's offset and epoch; record timestamps are the offsets (deterministic files).

Reading follows Kafka's recovery (``LogLoader.recoverLog``, ``LogSegment.recover``,
``FileLogInputStream.nextBatch``, ``DefaultRecordBatch.ensureValid``): the log is what precedes
the first invalid batch (a torn tail, a bad length, a CRC mismatch), the segments after it are
dropped, and each problem is a ``Finding``; checkpoint files are read as
``CheckpointFile.CheckpointReadBuffer`` reads them, a file Kafka cannot read being a finding that
names the file and the line.  Unlike Kafka, which recovers only the segments past the recovery
point and only after an unclean shutdown, every segment is checked.  ``read_replica_dir(d,
recover=True)`` returns the recovered replica with its findings (``replemu inspect``); the
default is strict: a finding is a ``ReplicaDirError`` (scenarios started from directories).
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.config import Config
from emulator.epoch_cache import LeaderEpochCache
from emulator.log import append
from emulator.run import Replay
from emulator.steps import Elect, LeaderAndIsr
from emulator.variants import VARIANTS

SEGMENT_SUFFIX = ".log"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
HW_CHECKPOINT = "replication-offset-checkpoint"
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
LEADER_EPOCH_POS = 12  # baseOffset int64, batchLength int32, then partitionLeaderEpoch int32


class ReplicaDirError(ValueError):
    """A replica directory that cannot be read: the message names the file (and byte offset)."""


@dataclass
class ReplicaFiles:
    broker: int
    topic: str
    partition: int
    log: list[tuple[int, int, str]]  # (offset, epoch, value)
    epoch_cache: list[tuple[int, int]]
    hw: int
    start_offset: int = 0
    path: str = ""
    batches: list[dict] = field(default_factory=list)
    findings: list["Finding"] = field(default_factory=list)  # what reading found (recover=True), worst first per file
    unreadable: list[str] = field(default_factory=list)  # checkpoint files that could not be used
    recovery_point: int | None = None  # from a recovery-point-offset-checkpoint, when there is one

    @property
    def leo(self) -> int:
        return self.start_offset + len(self.log)


def build_batch(base_offset: int, epoch: int, values: list[str]) -> bytes:
    """One v2 record batch (kafka-python builds it; offset and epoch are stamped afterwards)."""
    from kafka.record import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    for i, value in enumerate(values):
        builder.append(timestamp=base_offset + i, key=None, value=value.encode("utf-8"), headers=[])
    builder.close()
    data = bytearray(builder.buffer())
    _BASE_OFFSET.pack_into(data, 0, base_offset)
    _LEADER_EPOCH.pack_into(data, LEADER_EPOCH_POS, epoch)
    return bytes(data)


def _runs(log: list[list]) -> list[tuple[int, int, list[str]]]:
    runs: list[tuple[int, int, list[str]]] = []
    for offset, epoch, value in log:
        if runs and runs[-1][1] == epoch and runs[-1][0] + len(runs[-1][2]) == offset:
            runs[-1][2].append(value)
        else:
            runs.append((offset, epoch, [value]))
    return runs


def topic_of(result: dict) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]", "_", result["scenario"])


def export_result(result: dict[str, Any], out_dir: str | Path, partition: int = 0) -> list[Path]:
    """Write every replica of a ``replemu run --json`` result as a Kafka partition directory."""
    topic = topic_of(result)
    start = (result.get("compacted_prefix") or {}).get("offset", 0)
    written = []
    for rid, rep in result["final"]["replicas"].items():
        d = Path(out_dir) / f"broker-{rid}" / f"{topic}-{partition}"
        d.mkdir(parents=True, exist_ok=True)
        segment = b"".join(build_batch(base, epoch, values) for base, epoch, values in _runs(rep["log"]))
        (d / f"{start:020d}{SEGMENT_SUFFIX}").write_bytes(segment)
        cache = rep["epoch_cache"]
        (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n" + f"{len(cache)}\n" + "".join(f"{e} {s}\n" for e, s in cache))
        (d / HW_CHECKPOINT).write_text(f"0\n1\n{topic} {partition} {rep['hw']}\n")
        written.append(d)
    return written


# ---------------------------------------------------------------------------------------------
# Reading, as Kafka's log loader does: recovery of segments, tolerant checkpoint reading.
# ---------------------------------------------------------------------------------------------

# FileLogInputStream / DefaultRecordBatch / LegacyRecord constants (Kafka's clients module).
LOG_OVERHEAD = 12  # baseOffset int64 + length int32: what precedes the length's bytes
HEADER_SIZE_UP_TO_MAGIC = 17  # baseOffset, length, partitionLeaderEpoch, magic
RECORD_OVERHEAD_V0 = 14  # the smallest length FileLogInputStream accepts (a v0 message)
RECORD_BATCH_OVERHEAD = 61  # a v2 batch's header, the smallest batch DefaultRecordBatch.ensureValid accepts
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordsCount
_ATTRIBUTES_POS = 21  # the CRC-32C covers attributes .. end
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CONTROL_FLAG = 0x20
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"


@dataclass(frozen=True)
class Finding:
    """One problem found while reading a replica directory; ``str()`` is the sentence shown.

    ``cut`` says whether the log ends because of it: ``"recovery"`` where Kafka's log recovery
    truncates (``LogSegment.recover``), ``"replemu"`` where Kafka keeps the bytes but replemu
    cannot represent them and ends the log there, None when the log goes on.  ``offset`` is the
    log offset the recovered log ends at (a cut) or the record concerned.
    """

    file: str
    kind: str
    message: str
    offset: int | None = None
    position: int | None = None
    line: int | None = None
    cut: str | None = None

    def __str__(self) -> str:
        return self.message


class _BadRecords(Exception):
    """Records of a batch that cannot be decoded (Kafka's InvalidRecordException and kin)."""


def _varint(buf: bytes, pos: int, end: int, long: bool = False) -> tuple[int, int]:
    """``ByteUtils.readVarint`` / ``readVarlong``: zig-zag, at most 5 (10) bytes."""
    bits, limit = (64, 10) if long else (32, 5)
    raw = shift = 0
    for _ in range(limit):
        if pos >= end:
            raise _BadRecords("premature end of the batch inside a varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise _BadRecords(f"a {'varlong' if long else 'varint'} longer than {limit} bytes")


def _read_bytes(buf: bytes, pos: int, end: int, size: int, what: str) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos
    if size > end - pos:
        raise _BadRecords(f"{what} of {size} bytes, only {end - pos} left in the batch")
    return bytes(buf[pos:pos + size]), pos + size


def _decode_records(buf: bytes, count: int) -> list[tuple[int, bytes | None]]:
    """(offsetDelta, value) of ``count`` records (``DefaultRecord.readFrom``, the batch's
    ``RecordIterator``): every record's size field must match what it holds, and no byte may
    remain after the last record."""
    if count < 0:
        raise _BadRecords(f"invalid record count {count}")
    out, pos, end = [], 0, len(buf)
    while len(out) < count:
        body, pos = _varint(buf, pos, end)
        if body > end - pos:
            raise _BadRecords(f"record {len(out)} declares {body} bytes, the batch has {end - pos} left")
        start = pos
        if pos >= end:
            raise _BadRecords(f"record {len(out)}: premature end of the batch")
        pos += 1  # attributes
        _, pos = _varint(buf, pos, end, long=True)  # timestampDelta
        offset_delta, pos = _varint(buf, pos, end)
        key_size, pos = _varint(buf, pos, end)
        _, pos = _read_bytes(buf, pos, end, key_size, "a key")
        value_size, pos = _varint(buf, pos, end)
        value, pos = _read_bytes(buf, pos, end, value_size, "a value")
        headers, pos = _varint(buf, pos, end)
        if headers < 0 or headers > end - pos:
            raise _BadRecords(f"record {len(out)}: invalid number of headers {headers}")
        for _ in range(headers):
            key_size, pos = _varint(buf, pos, end)
            if key_size < 0:
                raise _BadRecords(f"record {len(out)}: negative header key size {key_size}")
            _, pos = _read_bytes(buf, pos, end, key_size, "a header key")
            value_size, pos = _varint(buf, pos, end)
            _, pos = _read_bytes(buf, pos, end, value_size, "a header value")
        if pos - start != body:
            raise _BadRecords(f"record {len(out)} declares {body} bytes but holds {pos - start}")
        out.append((offset_delta, value))
    if pos != end:
        raise _BadRecords(f"{end - pos} bytes remain after the declared {count} records")
    return out


def _decompress(codec: int, data: bytes) -> bytes:
    from kafka import codec as kc

    name = _COMPRESSION.get(codec)
    available = {"gzip": kc.has_gzip, "snappy": kc.has_snappy, "lz4": kc.has_lz4, "zstd": kc.has_zstd}
    if name is None:
        raise _BadRecords(f"unknown compression type {codec}")
    if not available[name]():
        raise _BadRecords(f"compressed with {name}, and no {name} codec is installed here")
    decode = {"gzip": kc.gzip_decode, "snappy": kc.snappy_decode, "lz4": kc.lz4_decode, "zstd": kc.zstd_decode}[name]
    try:
        return bytes(decode(data))
    except Exception as exc:  # each codec library raises its own types on a bad stream
        raise _BadRecords(f"the {name} stream cannot be decompressed ({type(exc).__name__}: {exc})") from None


def _offset_of_name(name: str) -> int | None:
    """A segment's base offset from its file name (``LogFileUtils.offsetFromFileName``: the
    digits before the first dot)."""
    m = re.fullmatch(r"([0-9]+)\..*", name)
    if not m or int(m.group(1)) > _INT64[1]:
        return None
    return int(m.group(1))


def _read_bytes_of(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ReplicaDirError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_segment(path: str | Path, expected_offset: int | None = None) -> tuple[list[dict], list[Finding]]:
    """Batches of one segment file as Kafka's log recovery reads them, and the findings.

    Returns ``([{"position", "base_offset", "epoch", "values"}, ...], [Finding, ...])``: the
    batches before the first problem, which is where the log ends (``LogSegment.recover`` reads
    batches until one is invalid and truncates the segment there).  ``expected_offset`` is the
    offset the first batch must have (default: the file name's offset, else the first batch's).
    Raises only ``ReplicaDirError``, when the file cannot be read at all.

    Kafka's checks, in its order (``FileLogInputStream.nextBatch``, then ``ensureValid``):
    fewer than 18 bytes left, or a length reaching past the end: a torn tail; a length below
    14 (``RECORD_OVERHEAD_V0``): corrupt; magic 0/1: a legacy message, CRC-32 checked; magic
    >= 2: a v2 batch of at least 61 bytes whose CRC-32C must match.  Kafka's recovery never
    decodes records nor checks offsets, so for a batch past those checks that replemu cannot
    represent (magic other than 2, records that cannot be decoded, control batches, offsets
    not following on) the finding says that Kafka keeps it and replemu ends the log there.
    """
    from kafka.record.util import calc_crc32c

    path = Path(path)
    data = _read_bytes_of(path)
    end = len(data)
    expected = expected_offset if expected_offset is not None else _offset_of_name(path.name)
    batches: list[dict] = []
    findings: list[Finding] = []
    seg = f"segment {path}"

    def stop(kind: str, message: str, position: int, cut: str = "recovery") -> None:
        findings.append(Finding(str(path), kind, message, offset=expected, position=position, cut=cut))

    pos = 0
    while pos < end:
        left = end - pos
        size = struct.unpack_from(">i", data, pos + 8)[0] if left >= LOG_OVERHEAD else None
        if left <= HEADER_SIZE_UP_TO_MAGIC or (size is not None and size >= RECORD_OVERHEAD_V0 and size > left - LOG_OVERHEAD):
            # FileLogInputStream.nextBatch returns null: the iteration ends and recovery cuts here.
            # The length is unknown (or not one Kafka reads) below 18 bytes: a v2 batch needs 61 at least.
            known = size is not None and size >= RECORD_OVERHEAD_V0
            needs = f"{pos + LOG_OVERHEAD + size}" if known else f"at least {pos + RECORD_BATCH_OVERHEAD}"
            to = "the segment start" if expected is None else f"offset {expected}"
            stop("torn-batch", f"{seg}: torn batch at byte position {pos} (needs {needs} bytes, file has {end}): "
                               f"recovery truncates the log to {to}", pos)
            break
        base, size, epoch, magic = struct.unpack_from(">qiib", data, pos)
        if expected is None:
            expected = base
        stored_base = f", stored base offset {base}" if base != expected else ""
        where = f"{seg}: batch at offset {expected} (byte position {pos}{stored_base})"
        if size < RECORD_OVERHEAD_V0:
            stop("bad-length", f"{where}: length field {size} is below the minimum {RECORD_OVERHEAD_V0}: "
                               f"recovery truncates here", pos)
            break
        batch = data[pos:pos + LOG_OVERHEAD + size]
        if magic < 2:  # LegacyRecord.ensureValid: CRC-32 over magic .. end of the message
            stored, computed = struct.unpack_from(">I", batch, LOG_OVERHEAD)[0], zlib.crc32(batch[LOG_OVERHEAD + 4:])
            if stored != computed:
                stop("crc-mismatch", f"{where}: magic {magic} message, CRC mismatch (stored {stored}, computed {computed}): "
                                     f"recovery truncates here", pos)
            else:
                stop("bad-magic", f"{where}: magic {magic} (a legacy message; Kafka's recovery keeps it, replemu reads only v2 "
                                  f"batches): replemu ends the log here", pos, cut="replemu")
            break
        if len(batch) < RECORD_BATCH_OVERHEAD:
            stop("bad-length", f"{where}: length field {size} makes a {len(batch)}-byte batch, below the minimum "
                               f"{RECORD_BATCH_OVERHEAD} of a v{magic} batch: recovery truncates here", pos)
            break
        (_, _, _, _, stored, attributes, last_delta, _, _, _, _, _, count) = _V2_HEADER.unpack_from(batch, 0)
        computed = calc_crc32c(memoryview(batch)[_ATTRIBUTES_POS:])
        if stored != computed:
            stop("crc-mismatch", f"{where}: CRC mismatch (stored {stored}, computed {computed}): recovery truncates here", pos)
            break
        if magic != 2:
            stop("bad-magic", f"{where}: magic {magic} with a valid CRC (Kafka's recovery keeps it; replemu reads only v2 "
                              f"batches): replemu ends the log here", pos, cut="replemu")
            break
        if base != expected:
            stop("offsets", f"{where}: base offset {base} where the log continues at {expected} (offsets "
                            f"{'go backwards' if base < expected else 'skip ahead'}; Kafka's recovery does not check this): "
                            f"replemu ends the log here", pos, cut="replemu")
            break
        if attributes & _CONTROL_FLAG:
            stop("control-batch", f"{where}: a control batch (transaction marker; Kafka keeps it, replemu has no such "
                                  f"records): replemu ends the log here", pos, cut="replemu")
            break
        try:
            body = batch[RECORD_BATCH_OVERHEAD:]
            if attributes & 0x07:
                body = _decompress(attributes & 0x07, body)
            records = _decode_records(body, count)
            if count == 0:
                raise _BadRecords(f"the batch holds no records (last offset delta {last_delta})")
            if last_delta != count - 1 or any(d != i for i, (d, _) in enumerate(records)):
                raise _BadRecords(f"offsets are not contiguous (count {count}, last offset delta {last_delta}, record deltas "
                                  f"{[d for d, _ in records][:8]})")
        except _BadRecords as exc:
            stop("bad-records", f"{where}: the CRC is valid but the records cannot be read: {exc} (Kafka's recovery "
                                f"does not decode records and keeps the batch): replemu ends the log here", pos, cut="replemu")
            break
        values = []
        for i, (_, value) in enumerate(records):
            try:
                values.append(value.decode("utf-8") if value is not None else "")
            except UnicodeDecodeError:
                values.append(value.decode("utf-8", errors="backslashreplace"))
                findings.append(Finding(str(path), "value-not-utf8", f"{seg}: record at offset {base + i} (batch at byte "
                                        f"position {pos}): the value is not UTF-8; read as {values[-1][:40]!r}",
                                        offset=base + i, position=pos))
        batches.append({"position": pos, "base_offset": base, "epoch": epoch, "values": values})
        expected = base + count
        pos += len(batch)
    return batches, findings


# ---------------------------------------------------------------------------------------------
# Checkpoint files: CheckpointFile.CheckpointReadBuffer and the two entry formatters.
# ---------------------------------------------------------------------------------------------

_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")  # java.util.regex \s
_JAVA_LINE_END = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt / Long.parseLong (ASCII digits)

# What a file that cannot be read means, per file (what Kafka does, what replemu reports).
_UNREADABLE = {
    LEADER_EPOCH_CHECKPOINT: "Kafka cannot load this log (LeaderEpochFileCache reads the file when the log is loaded; "
                             "the error takes the log directory offline); the epoch cache is reported unreadable (empty)",
    HW_CHECKPOINT: "Kafka cannot create the partition (the HW checkpoint read fails and takes the log directory offline); "
                   "the HW is reported unreadable (0)",
    RECOVERY_POINT_CHECKPOINT: "Kafka resets the recovery point to 0 (LogManager.loadLogs) and recovers every segment",
}
_MISSING = {
    LEADER_EPOCH_CHECKPOINT: "Kafka creates it empty (CheckpointFile) and its epoch cache holds only what recovery assigns "
                             "from the epochs of the batches it re-reads (segments past the recovery point, after an unclean "
                             "shutdown); the epoch cache is reported empty",
    HW_CHECKPOINT: "Kafka finds no checkpointed HW and starts from 0 (Partition.createLog); the HW is reported as 0",
}


def _java_lines(text: str) -> list[str]:
    lines = _JAVA_LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _java_split(line: str) -> list[str]:
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _number(text: str, bounds: tuple[int, int]) -> int | None:
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def read_checkpoint(path: str | Path, fields: tuple[tuple[str, tuple[int, int] | None], ...]
                    ) -> tuple[list[tuple] | None, list[Finding]]:
    """Rows of a Kafka checkpoint file (version ``0``, a count, then one entry a line) and the
    findings: ``(rows, [])``, or ``(None, [finding])`` when the file cannot be used.

    ``fields`` names each whitespace-separated field and its numeric bounds (None: a string).
    Follows ``CheckpointFile.CheckpointReadBuffer.read``: an empty file, or one with only the
    version line, holds no entries; any other problem (bytes that are not UTF-8, a version that
    is not 0, a malformed line, a count that does not match) makes Kafka's read fail, so the
    whole file is unusable and the first problem is the finding, naming the file and the line.
    Replemu also refuses negative numbers (Kafka's epoch cache rejects them when it loads the
    entries; a negative HW or recovery point is nonsense).  A missing file is a finding too.
    Raises ``ReplicaDirError`` only when the file exists but cannot be read (permissions).
    """
    path = Path(path)

    def bad(line: int | None, what: str) -> tuple[None, list[Finding]]:
        where = f"{path}" + (f" line {line}" if line is not None else "")
        return None, [Finding(str(path), "checkpoint", f"{where}: {what}: {_UNREADABLE.get(path.name, 'not used')}", line=line)]

    if not path.exists() and not path.is_symlink():
        return None, [Finding(str(path), "checkpoint", f"{path}: missing: {_MISSING.get(path.name, 'not used')}")]
    if path.is_dir():
        return bad(None, "a directory, not a checkpoint file")
    raw = _read_bytes_of(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        return bad(line, f"bytes that are not UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 4]!r}); Kafka's reader "
                         f"raises MalformedInputException")
    lines = _java_lines(text)
    if not lines:
        return [], []
    version = _number(lines[0], _INT32)
    if version is None:
        return bad(1, f"malformed version line {lines[0][:60]!r} (Kafka: \"Malformed line in checkpoint file\")")
    if version != 0:
        return bad(1, f"unrecognised version {version}, expected 0")
    if len(lines) == 1:
        return [], []
    count = _number(lines[1], _INT32)
    if count is None:
        return bad(2, f"malformed count line {lines[1][:60]!r} (Kafka: \"Malformed line in checkpoint file\")")
    if count < 0:
        return bad(2, f"negative count {count}")
    shape = " ".join(name for name, _ in fields)
    rows = []
    for n, line in enumerate(lines[2:], start=3):
        parts = _java_split(line)
        if len(parts) != len(fields):
            return bad(n, f"malformed line {line[:60]!r}, expected {len(fields)} fields '{shape}' (Kafka: \"Malformed line "
                          f"in checkpoint file\")")
        row = []
        for (name, bounds), part in zip(fields, parts):
            if bounds is None:
                row.append(part)
                continue
            value = _number(part, bounds)
            if value is None:
                kind = "int32" if bounds == _INT32 else "int64"
                return bad(n, f"{name} {part[:30]!r} is not a number within {kind} in line {line[:60]!r}")
            if value < 0:
                return bad(n, f"negative {name} {value} in line {line[:60]!r}")
            row.append(value)
        rows.append(tuple(row))
    if len(rows) != count:
        return bad(2, f"the count line says {count} entries, the file has {len(rows)}")
    return rows, []


_LEC_FIELDS = (("epoch", _INT32), ("startOffset", _INT64))
_OFFSET_FIELDS = (("topic", None), ("partition", _INT32), ("offset", _INT64))


def read_replica_dir(path: str | Path, recover: bool = False) -> ReplicaFiles:
    """One broker's partition directory (``broker-<id>/<topic>-<partition>``).

    ``recover=True`` reads it as Kafka's log loader would after an unclean shutdown (every
    segment is recovered, as with recovery point 0): the log is what precedes the first invalid
    batch, later segments are dropped (``LogLoader.recoverLog`` deletes the segments after a
    truncated one), and every problem is a ``Finding`` in ``.findings``.  The default is
    strict: any finding raises ``ReplicaDirError`` naming the file and the finding, so a
    scenario never starts silently from a log that recovery cut.

    Raises ``ReplicaDirError`` (either way) when the directory is not a replica directory, does
    not exist, or a file in it cannot be read.
    """
    d = Path(path)
    m = re.fullmatch(r"(.+)-(\d+)", d.name)
    b = re.fullmatch(r"broker-(\d+)", d.parent.name)
    if not d.exists():
        raise ReplicaDirError(f"{d}: no such directory")
    if not d.is_dir() or not m or not b:
        raise ReplicaDirError(f"{d}: expected a partition directory named <topic>-<partition> inside broker-<id>")
    try:
        names = sorted(os.listdir(d))
    except OSError as exc:
        raise ReplicaDirError(f"{d}: cannot read: {exc.strerror or exc}") from None
    findings: list[Finding] = []
    segments: dict[int, Path] = {}
    for name in names:
        if not name.endswith(SEGMENT_SUFFIX) or not (d / name).is_file():
            continue
        offset = _offset_of_name(name)
        if offset is None:
            findings.append(Finding(str(d / name), "segment-name", f"segment {d / name}: the name is not a base offset "
                                    f"(Kafka's log loader fails on it: LogFileUtils.offsetFromFileName); ignored"))
        elif offset in segments:
            findings.append(Finding(str(d / name), "segment-name", f"segment {d / name}: a second segment with base offset "
                                    f"{offset} (besides {segments[offset].name}); ignored"))
        else:
            segments[offset] = d / name
    if not segments and not findings:
        raise ReplicaDirError(f"{d}: no segment (*.log) file")
    order = sorted(segments)
    start = order[0] if order else 0
    log: list[tuple[int, int, str]] = []
    batches = []
    cut_by: Finding | None = None
    for base in order:
        seg = segments[base]
        expected = start + len(log)
        if cut_by is not None:
            why = ("Kafka's recovery deletes the segments after the one it truncates" if cut_by.cut == "recovery"
                   else "replemu ends the log before it")
            findings.append(Finding(str(seg), "dropped-segment", f"segment {seg}: dropped, after the truncation point at "
                                    f"offset {cut_by.offset} ({why})", offset=base, cut=cut_by.cut))
            continue
        if base != expected:
            cut_by = Finding(str(seg), "offsets", f"segment {seg}: its base offset {base} does not follow the log before it, "
                             f"which ends at {expected}: replemu ends the log at offset {expected}",
                             offset=expected, cut="replemu")
            findings.append(cut_by)
            continue
        seg_batches, seg_findings = read_segment(seg, expected)
        for batch in seg_batches:
            log.extend((batch["base_offset"] + i, batch["epoch"], v) for i, v in enumerate(batch["values"]))
            batches.append({**batch, "file": seg.name})
        findings.extend(seg_findings)
        cut_by = next((f for f in seg_findings if f.cut), None)
    unreadable: list[str] = []
    cache_rows, found = read_checkpoint(d / LEADER_EPOCH_CHECKPOINT, _LEC_FIELDS)
    findings += found
    if cache_rows is None:
        unreadable.append(LEADER_EPOCH_CHECKPOINT)
        cache_rows = []
    cache = [(e, s) for e, s in cache_rows]
    leo = start + len(log)
    if cut_by is not None and any(s >= leo for _, s in cache):
        # LogLoader.load: leaderEpochCache.truncateFromEnd(nextOffset) after recovery.
        dropped = [(e, s) for e, s in cache if s >= leo]
        cache = [(e, s) for e, s in cache if s < leo]
        who = ("Kafka's log loader drops them (truncateFromEnd)" if cut_by.cut == "recovery"
               else "replemu drops them with the log, as Kafka's truncateFromEnd does")
        findings.append(Finding(str(d / LEADER_EPOCH_CHECKPOINT), "epoch-cache-truncated",
                                f"{d / LEADER_EPOCH_CHECKPOINT}: entries {' '.join(f'({e},{s})' for e, s in dropped)} start at "
                                f"or after the recovered log end {leo}; {who}", offset=leo))
    hw_rows, found = read_checkpoint(_checkpoint_path(d, HW_CHECKPOINT), _OFFSET_FIELDS)
    findings += found
    if hw_rows is None:
        unreadable.append(HW_CHECKPOINT)
    hw = next((h for t, p, h in hw_rows or () if t == m.group(1) and p == int(m.group(2))), 0)
    recovery_point = None
    rp_path = _checkpoint_path(d, RECOVERY_POINT_CHECKPOINT)
    if rp_path.exists():
        rp_rows, found = read_checkpoint(rp_path, _OFFSET_FIELDS)
        findings += found
        if rp_rows is None:
            unreadable.append(RECOVERY_POINT_CHECKPOINT)
        recovery_point = next((r for t, p, r in rp_rows or () if t == m.group(1) and p == int(m.group(2))), 0)
    files = ReplicaFiles(broker=int(b.group(1)), topic=m.group(1), partition=int(m.group(2)), log=log, epoch_cache=cache,
                         hw=hw, start_offset=start, path=str(d), batches=batches, findings=findings, unreadable=unreadable,
                         recovery_point=recovery_point)
    if findings and not recover:
        more = f" (and {len(findings) - 1} more finding{'s' if len(findings) > 2 else ''})" if len(findings) > 1 else ""
        raise ReplicaDirError(f"{findings[0]}{more}")
    return files


def _checkpoint_path(d: Path, name: str) -> Path:
    """The partition directory's own file (replemu's layout), else the log directory's, where
    Kafka keeps the HW and recovery-point checkpoints of all its partitions."""
    own = d / name
    return own if own.exists() or not (d.parent / name).exists() else d.parent / name


def find_replica_dirs(root: str | Path) -> list[Path]:
    """``root`` itself if it is a partition directory (inside ``broker-<id>``), the partition
    directories of ``root`` if it is a ``broker-<id>`` directory, else every
    ``broker-*/<topic>-<p>`` below it."""
    root = Path(root)
    if not root.exists():
        raise ReplicaDirError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise ReplicaDirError(f"{root}: not a directory")
    try:
        os.listdir(root)
    except OSError as exc:
        raise ReplicaDirError(f"{root}: cannot read: {exc.strerror or exc}") from None
    if re.fullmatch(r"broker-\d+", root.parent.name) and re.fullmatch(r".+-\d+", root.name):
        return [root]
    try:
        if re.fullmatch(r"broker-\d+", root.name):
            found = sorted(p for p in root.iterdir() if p.is_dir())
        else:
            found = sorted(p for b in root.iterdir() if b.is_dir() and re.fullmatch(r"broker-\d+", b.name)
                           for p in b.iterdir() if p.is_dir())
    except OSError as exc:
        raise ReplicaDirError(f"{exc.filename or root}: cannot read: {exc.strerror or exc}") from None
    if not found:
        raise ReplicaDirError(f"{root}: no broker-<id>/<topic>-<partition> directories")
    return found


def divergence(a: ReplicaFiles, b: ReplicaFiles) -> dict[str, Any] | None:
    """Where two replicas' logs stop matching: the first offset below both LEOs that differs."""
    by_offset_b = {o: (e, v) for o, e, v in b.log}
    for o, e, v in a.log:
        if o >= b.leo:
            break
        if o in by_offset_b and by_offset_b[o] != (e, v):
            return {"offset": o, "epochs": [e, by_offset_b[o][0]], "values": [v, by_offset_b[o][1]]}
    return None


def truncation_outcomes(leader: ReplicaFiles, follower: ReplicaFiles) -> dict[str, int]:
    """The follower's LEO after each variant's truncation phase against ``leader`` (the core's rules)."""
    out = {}
    for name, variant in VARIANTS.items():
        replay = Replay((leader.broker, follower.broker), Config(), variant)
        seed_replay(replay, [leader, follower])
        # The controller elects ``leader`` in a new epoch; the follower hears of it afterwards.
        replay.apply(Elect(leader=leader.broker, to=(leader.broker,)))
        replay.apply(LeaderAndIsr(replica=follower.broker))
        out[name] = replay.partition.replicas[follower.broker].leo
    return out


def _seed_replica(p, files: ReplicaFiles) -> None:
    """Load one replica's files into a fresh partition through the log's write path."""
    if files.start_offset:
        raise ReplicaDirError(f"{files.path}: the log starts at offset {files.start_offset}; only logs from offset 0 can be imported")
    rep = p.replicas[files.broker]
    if files.log:
        append(p, rep, 0, [(e, v) for _, e, v in files.log])
    rep.cache = LeaderEpochCache(p.variant.cache_semantics, files.epoch_cache)
    rep.hw = rep.hw_checkpoint = min(files.hw, rep.leo)
    rep.recovery_point = rep.leo


def read_initial_state(roots: list[str | Path]) -> list[ReplicaFiles]:
    """Every replica directory below ``roots``, read and CRC-checked once."""
    return [read_replica_dir(d) for root in roots for d in find_replica_dirs(root)]


def seed_replay(replay: Replay, files: list[ReplicaFiles]) -> None:
    """Start a replay's partition from replica files: logs, epoch caches, HW checkpoints.

    Every directory's broker id must be one of the partition's replicas; the controller starts
    with no leader, every replica in the ISR and the highest epoch seen in any cache, so the next
    election gets a newer epoch.
    """
    p = replay.partition
    seen = set()
    for f in files:
        if f.broker not in p.replicas:
            raise ReplicaDirError(f"{f.path}: broker {f.broker} is not one of the partition's replicas {list(p.assignment)}")
        if f.broker in seen:
            raise ReplicaDirError(f"{f.path}: a second directory for broker {f.broker}")
        seen.add(f.broker)
        _seed_replica(p, f)
    top = max([e for f in files for e, _ in f.epoch_cache] + [e for f in files for _, e, _ in f.log] + [-1])
    p.controller.leader_epoch = p.controller.highest_epoch = top
    replay.seed(p.take_effects())


def replay_seeder(files: list[ReplicaFiles]):
    """``run_scenario``'s ``prepare``: start the replicas from these replica files."""
    return lambda replay: seed_replay(replay, files)


def seeder_for(initial_state: str | None, from_dirs: list[str] | None = None):
    """The ``prepare`` of a scenario that starts from replica directories (``--from-dirs`` or its
    ``initial_state``), read and CRC-checked once; None when it starts empty."""
    dirs = from_dirs or ([initial_state] if initial_state else None)
    return replay_seeder(read_initial_state(dirs)) if dirs else None
