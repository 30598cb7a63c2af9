"""Is a checkpoint whole, and if not, back to the last micro-batch that is (``replemu checkpoint``).

``inspect_checkpoint`` reads a checkpoint without changing it and reports replemu's run identity,
the last committed micro-batch and every problem in Spark's files, each with the micro-batch it
belongs to; ``plan_repair`` turns the report into a roll-back to the last micro-batch whose
offsets, commit and state files are all whole, and ``apply_repair`` carries it out by moving the
files it takes away into ``CK.repair-<UTC stamp>/`` beside the checkpoint (the same relative
paths; nothing is deleted).  The job's outputs are keyed by batch id and replaced when a batch
runs again, so the batches after the roll-back give the bytes of an uninterrupted run.

A local path is read with the standard library alone (no Spark, no JVM); a Hadoop URI through
``streaming.storage``'s Hadoop store (the driver's JVM).

The checkpoint of a query, as Spark 4 writes it (``checkpointing.HDFSMetadataLog`` and its logs,
``state.HDFSBackedStateStoreProvider``, ``state.RocksDBFileManager``), and what "whole" means:

``metadata`` (``StreamMetadata``)
    One JSON object with the query's ``id``.  Whole: it parses and ``id`` is a string.  Written
    at the query's first start only; moved aside by a repair, Spark writes a new one (a new query
    id, nothing else changes).
``offsets/N`` (``OffsetSeqLog``; written before batch N runs)
    ``v1`` (or ``v2``), a line of ``OffsetSeqMetadata`` JSON (watermark, batch timestamp, the
    session conf that the checkpoint fixes), then one line per source: its offset JSON or ``-``
    (v2: ``SOURCE_ID:offset``).  Whole: the version is 1 or 2 (``MetadataVersionUtil``), the
    metadata line is a JSON object, there is at least one source line (as many as in the other
    offsets files) and each is ``-`` or JSON.  Spark reads the latest offsets file and the one
    before it on every start, so an emptied last ``offsets/N`` stops every restart with
    ``Failed to read log file …/offsets/N. Incomplete log file``.
``commits/N`` (``CommitLog``; written once batch N's sink finished)
    ``v1``/``v2`` and a JSON line (``{"nextBatchWatermarkMs":0}``).  Whole: both lines, the JSON
    an object.  A missing ``commits/N`` for the newest ``offsets/N`` is **not** a problem: that
    batch was in flight and Spark runs it again on the next start.  A commit whose
    ``offsets/N`` is missing is one (an orphan commit); so is a missing commit below a later one.
``sources/I/N`` and ``sources/I/N.compact`` (``FileStreamSourceLog``, the ``binaryFile`` source)
    ``v1`` and one ``FileEntry`` JSON per line.  Whole: version 1, every line a JSON object.
    ``N`` is the source's own log offset (the offsets line ``{"logOffset":N}``); a restart reads
    the latest compact file and the entries after it up to the committed offset.  The Python
    workload source has no log (its offsets are ``{"batch": N}``).
``state/OP/_metadata/metadata`` (``OperatorStateMetadataV1``)
    ``v1`` and a JSON object.  ``state/OP/P/_metadata/schema`` (``SchemaHelper``, v1/v2):
    ``writeUTF`` version, then the key and value schemas (v2: an int chunk count and ``writeUTF``
    chunks each), both JSON.  Both are written by the query's first batch; moved aside by a
    repair, Spark writes them again.
``state/OP/P/V.delta`` and ``V.snapshot`` (HDFS-backed provider; batch N writes version N+1)
    Compressed with ``spark.sql.streaming.stateStore.compression.codec`` (recorded in every
    offsets file; lz4 by default): lz4-java's ``LZ4BlockOutputStream`` as Spark's
    ``LZ4CompressionCodec`` makes it — blocks of ``LZ4Block``, a token (0x10 raw or 0x20 LZ4,
    plus the level), little-endian compressed and original lengths and the XXHash32 (seed
    0x9747b28c, masked to 28 bits) of the original bytes — and an empty block as the end mark.
    Inside: records ``int keySize, key, int valueSize, value`` (big-endian; ``valueSize -1``: a
    removal, deltas only) closed by ``keySize -1``.  Whole: every block header, length and
    checksum right, every block decompresses to its length, the records end with -1 and the
    stream with its end mark.  Version V is loaded from the newest whole snapshot at or below V
    and the deltas after it (version 0 is empty).  With another codec (zstd, snappy, lzf) only
    presence, size and Hadoop's checksum are checked (a note says so).
``state/OP/P/V.zip`` (+ ``V.changelog``), ``SSTs/``, ``logs/`` (RocksDB provider)
    ``V.zip`` holds RocksDB's own files and ``metadata`` (``v1`` + ``RocksDBCheckpointMetadata``
    JSON naming the shared SST and log files with their sizes).  Whole: a zip whose members
    pass their CRC-32, whose ``metadata`` parses, and every named ``SSTs/…`` / ``logs/…`` file
    exists with its recorded size (an SST also ends with a RocksDB table magic number).
    Changelogs (changelog checkpointing: off for ``applyInPandasWithState``, on for
    ``transformWithState``) are LZ4 streams as above.  Version 1 (``StateStoreChangelogWriterV1``)
    holds the delta format's records; versions 2-4 start with ``writeUTF("vN")`` (3 and 4 then a
    ``writeUTF`` lineage); 2 and 4 (what ``transformWithState``'s column families write) give every
    record a type byte first (0x01 put, 0x11 merge: key and value; 0x10 delete: key and -1) and
    end with the type 0x00; 3 ends its version-1 records with -1.  SST contents are not decoded.
``.NAME.crc`` (Hadoop's ``ChecksumFileSystem``, local filesystems only)
    ``crc\\0``, bytes per checksum, then a CRC-32 per chunk; a file whose CRC does not match was
    changed after it was written (torn) — Hadoop refuses to read it.  Spark's own
    ``NAME.crc`` checksum files (``ChecksumCheckpointFileManager``, off by default) must record
    the file's size.

Every offsets, commit, source-log and metadata file is decoded; of the state files those that a
restart reads (the chains of the last committed version and of the roll-back candidates) are
decoded and every other one has only its presence, size and Hadoop checksum checked (``full=True``
decodes them all).  Files of a batch after the last committed one (in flight) are not judged:
Spark writes them again.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

import lz4.block
import xxhash

KINDS = ("missing", "empty", "torn", "undecodable", "orphan", "unreadable")
REPAIR_MANIFEST = "repair.json"
IDENTITY_FILE = "replemu-identity.json"  # streaming.checkpoint.IDENTITY_FILE (not imported: no pyspark here)
LOCK_FILE = "replemu.lock"


@dataclass(frozen=True)
class Problem:
    """One broken file: ``batch`` is the micro-batch it belongs to (None: the whole checkpoint),
    ``path`` relative to the checkpoint, ``kind`` one of ``KINDS``."""

    batch: int | None
    path: str
    kind: str
    detail: str


@dataclass(frozen=True)
class CheckpointFile:
    """A file of the checkpoint: ``role`` offsets | commits | source | state | metadata |
    operator-metadata | state-schema | rocksdb-shared | crc | identity; ``batch`` the micro-batch
    it belongs to (state version V: batch V-1; None: none in particular)."""

    path: str
    role: str
    batch: int | None


@dataclass(frozen=True)
class Report:
    location: str
    identity: dict | None                 # replemu-identity.json's document (format, identity, history)
    query_id: str | None                  # metadata's id (also when it is torn but still holds the whole id)
    last_committed: int | None            # the highest N with commits/N
    latest_offsets: int | None            # the highest N with offsets/N
    in_flight: int | None                 # offsets without a commit: Spark runs it again anyway
    last_whole: int | None                # the last batch a restart can continue from (None: none)
    state_store: str | None               # hdfs | rocksdb | None (stateless or unknown)
    partitions: int | None                # spark.sql.shuffle.partitions recorded in the offsets
    problems: tuple[Problem, ...]
    files: tuple[CheckpointFile, ...]
    needed: tuple[str, ...]               # the files a restart from last_whole reads
    notes: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class RepairPlan:
    location: str
    keep_through: int | None              # the last micro-batch kept (None: none; the query starts over)
    moves: tuple[str, ...]                # files moved aside, relative to the checkpoint
    rerun: tuple[int, ...]                # micro-batches that run (again) on the next start
    unrepaired: tuple[Problem, ...]       # problems a roll-back cannot mend
    problems: tuple[Problem, ...] = ()    # what the report found
    query_id: str | None = None           # a new ``metadata`` file with this id is written (it was broken or missing)

    @property
    def changes(self) -> bool:
        return bool(self.moves) or self.query_id is not None


class _Bad(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.detail = kind, detail


# -- codecs: Hadoop's .crc, XXHash32, LZ4 blocks ---------------------------------------------
# XXHash32 and the LZ4 block decoder are the ``xxhash`` and ``lz4`` packages (C); the framing
# around them (``lz4_block_stream``) is lz4-java's and is read here.

def _hadoop_crc_matches(data: bytes, crc: bytes) -> bool | None:
    """Whether ``data`` matches a Hadoop ``.crc`` file (None: not a checksum file this reads)."""
    if len(crc) < 8 or crc[:4] != b"crc\0":
        return None
    per = struct.unpack(">I", crc[4:8])[0]
    if per <= 0:
        return None
    sums = crc[8:]
    expected = [struct.unpack(">I", sums[i:i + 4])[0] for i in range(0, len(sums) - len(sums) % 4, 4)]
    actual = [zlib.crc32(data[i:i + per]) for i in range(0, len(data), per)]
    return expected == actual


LZ4_MAGIC = b"LZ4Block"
LZ4_SEED = 0x9747B28C
_LZ4_HEADER = 21
_LZ4_LEVEL_BASE = 10  # lz4-java's COMPRESSION_LEVEL_BASE: a block holds at most 1 << (10 + token & 0x0F) bytes


def lz4_block_decompress(src: bytes, size: int) -> bytes:
    """One raw LZ4 block (no frame, no size prefix) to its ``size`` original bytes; ValueError when
    it is not one.  ``lz4.block.decompress`` takes ``uncompressed_size`` as the room it gives the
    output and returns a shorter result without complaint, so the length is checked here."""
    try:
        block = lz4.block.decompress(src, uncompressed_size=size)
    except lz4.block.LZ4BlockError as exc:
        raise ValueError(str(exc)) from None
    if len(block) != size:
        raise ValueError(f"{len(block)} bytes, not the recorded {size}")
    return block


def lz4_block_stream(data: bytes) -> bytes:
    """The original bytes of an ``LZ4BlockOutputStream``; raises ``_Bad`` (torn / undecodable).

    The format is lz4-java's own framing (what Spark's ``LZ4CompressionCodec`` writes), NOT the
    standard LZ4 frame format (magic 0x184D2204, which ``lz4.frame`` reads): each block is a 21-byte
    header (``LZ4Block``, a token byte, little-endian int32 compressed length, int32 original length,
    uint32 checksum) and then a raw LZ4 block without the 4-byte size prefix that
    ``lz4.block.compress`` adds by default (``store_size``), hence ``uncompressed_size=`` from the
    header.  The checksum is XXHash32 with lz4-java's seed 0x9747b28c over the ORIGINAL bytes,
    masked to its low 28 bits (``StreamingXXHash32.getValue() & 0xFFFFFFF``).  A header with an
    original length of 0 is the end mark; another stream may follow it."""
    out, i, ended = bytearray(), 0, False
    while i < len(data):
        if len(data) - i < _LZ4_HEADER:
            raise _Bad("torn", f"a block header at byte {i} is cut short ({len(data) - i} of {_LZ4_HEADER} bytes)")
        if data[i:i + 8] != LZ4_MAGIC:
            raise _Bad("undecodable", f"no LZ4Block magic at byte {i}")
        method = data[i + 8] & 0xF0
        clen, olen, check = struct.unpack_from("<iiI", data, i + 9)
        if (method not in (0x10, 0x20) or clen < 0 or olen < 0 or (method == 0x10 and clen != olen)
                or olen > 1 << (_LZ4_LEVEL_BASE + (data[i + 8] & 0x0F))):  # as LZ4BlockInputStream refuses it
            raise _Bad("undecodable", f"a malformed block header at byte {i}")
        at, i = i, i + _LZ4_HEADER
        if olen == 0:
            ended = True  # the end mark (another stream may follow: LZ4BlockInputStream reads on)
            continue
        ended = False
        if i + clen > len(data):
            raise _Bad("torn", f"the block at byte {at} is cut short ({len(data) - i} of {clen} bytes)")
        raw = data[i:i + clen]
        i += clen
        try:
            block = raw if method == 0x10 else lz4_block_decompress(raw, olen)
        except ValueError as exc:
            raise _Bad("undecodable", f"the LZ4 block at byte {at} does not decompress ({exc})") from None
        if xxhash.xxh32_intdigest(block, seed=LZ4_SEED) & 0xFFFFFFF != check:
            raise _Bad("undecodable", f"the block at byte {at} fails its XXHash32 checksum")
        out += block
    if not ended:
        raise _Bad("torn", "no end mark: the stream stops after its last block (the writer did not finish)")
    return bytes(out)


def _kv_record(data: bytes, j: int, count: int, key: int, removal: str) -> int:
    """The rest of record ``count`` whose key size ``key`` was read (``j``: just after it): the key,
    ``int valueSize`` and the value; returns where the next record starts; raises ``_Bad``.
    ``removal``: "no" (a value follows), "may" (``valueSize -1``: a removal), "only" (a delete)."""
    n = len(data)
    if key < 0:
        raise _Bad("undecodable", f"record {count}: key size {key}")
    j += key
    if j + 4 > n:
        raise _Bad("torn", f"record {count} is cut short")
    value = struct.unpack_from(">i", data, j)[0]
    j += 4
    if value == -1 and removal != "no":
        return j
    if value < 0 or removal == "only":
        raise _Bad("undecodable", f"record {count}: {'a delete with ' if removal == 'only' else ''}value size {value}")
    j += value
    if j > n:
        raise _Bad("torn", f"record {count} is cut short")
    return j


def kv_records(data: bytes, removals: bool) -> int:
    """Records of a delta / snapshot / changelog (decompressed); returns how many; raises ``_Bad``."""
    j, n, count = 0, len(data), 0
    while True:
        if j + 4 > n:
            raise _Bad("torn", f"the records stop after {count} without the end marker (-1)")
        key = struct.unpack_from(">i", data, j)[0]
        if key == -1:
            return count
        j = _kv_record(data, j + 4, count, key, "may" if removals else "no")
        count += 1


_RECORD_TYPES = {0x01: "no", 0x11: "no", 0x10: "only"}  # changelog v2/v4: put, merge (a value follows), delete


def changelog_records(data: bytes) -> int:
    """Records of a RocksDB changelog (decompressed; versions 1-4, module docstring); raises ``_Bad``."""
    version, j = 1, 0
    if len(data) >= 2:
        size = struct.unpack_from(">H", data, 0)[0]
        head = data[2:2 + size]
        if len(head) == size and head[:1] == b"v" and head[1:].isdigit():
            version, j = int(head[1:]), 2 + size
    if version not in (1, 2, 3, 4):
        raise _Bad("undecodable", f"changelog version {version} (this checker reads 1-4)")
    if version in (3, 4):  # the lineage line
        if j + 2 > len(data) or j + 2 + struct.unpack_from(">H", data, j)[0] > len(data):
            raise _Bad("torn", "the changelog stops inside its lineage")
        j += 2 + struct.unpack_from(">H", data, j)[0]
    if version in (1, 3):
        return kv_records(data[j:], True)
    n, count = len(data), 0
    while True:
        if j >= n:
            raise _Bad("torn", f"the records stop after {count} without the end record")
        kind = data[j]
        if kind == 0x00:
            return count
        if kind not in _RECORD_TYPES:
            raise _Bad("undecodable", f"record {count}: record type {kind:#04x}")
        if j + 5 > n:
            raise _Bad("torn", f"record {count} is cut short")
        j = _kv_record(data, j + 5, count, struct.unpack_from(">i", data, j + 1)[0], _RECORD_TYPES[kind])
        count += 1


# -- the text formats ----------------------------------------------------------------------

def _json_cut(text: str) -> bool:
    """Whether ``text`` stops inside a JSON value (an open string, object or array)."""
    depth, in_string, escape = 0, False, False
    for ch in text:
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0 or text.rstrip().endswith((":", ","))


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        if not text.strip() or _json_cut(text):
            raise _Bad("torn", f"{what} is cut short: {text[-40:]!r}") from None
        raise _Bad("undecodable", f"{what} is not JSON ({exc.msg} at char {exc.pos})") from None


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad("undecodable", f"not UTF-8 text (byte {exc.start})") from None


def _lines(text: str) -> list[str]:
    """Lines as Scala's ``getLines`` gives them (``\\n`` or ``\\r\\n``; no empty last line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


_VERSION = re.compile(r"v(\d+)")


def _version(line: str | None, max_version: int, what: str) -> int:
    if line is None or line in ("", "v"):
        raise _Bad("torn", f"{what} has no version line (Spark: \"Incomplete log file\")")
    m = _VERSION.fullmatch(line.strip())
    if not m or int(m.group(1)) <= 0:
        raise _Bad("undecodable", f"{what}: {line[:40]!r} is not a version line (v1..v{max_version})")
    if int(m.group(1)) > max_version:
        raise _Bad("undecodable", f"{what}: log version {m.group(1)} is newer than this Spark reads (v{max_version})")
    return int(m.group(1))


def parse_offsets(data: bytes) -> tuple[dict, list[str]]:
    """``offsets/N`` (``OffsetSeqLog``): its metadata and its source offset lines; raises ``_Bad``."""
    lines = _lines(_text(data))
    version = _version(lines[0] if lines else None, 2, "the offsets file")
    if len(lines) < 2:
        raise _Bad("torn", "ends after its version line (no metadata line, no source offset)")
    metadata = _json(lines[1], "the metadata line") if lines[1].strip() else {}
    if not isinstance(metadata, dict):
        raise _Bad("undecodable", "the metadata line is not a JSON object")
    sources = lines[2:]
    if not sources:
        raise _Bad("torn", "ends after its metadata line (no source offset)")
    for k, line in enumerate(sources):
        value = line.split(":", 1)[1] if version == 2 and ":" in line else line
        if version == 2 and ":" not in line:
            raise _Bad("undecodable", f"source line {k}: {line[:40]!r} is not SOURCE_ID:offset")
        if value != "-":
            _json(value, f"source {k}'s offset")
    return metadata, sources


def parse_commit(data: bytes) -> dict:
    return _versioned_object(_lines(_text(data)), 2, "the commit", "the commit metadata",
                             "ends after its version line (Spark would read it as watermark 0; it always writes the JSON)")


def _versioned_object(lines: list[str], max_version: int, what: str, body: str, no_json: str) -> dict:
    """A version line (``v1`` … ``v<max_version>``) then a JSON object on the next line."""
    _version(lines[0] if lines else None, max_version, what)
    if len(lines) < 2:
        raise _Bad("torn", no_json)
    doc = _json(lines[1], body)
    if not isinstance(doc, dict):
        raise _Bad("undecodable", f"{body} is not a JSON object")
    return doc


def parse_stream_metadata(data: bytes) -> str:
    doc = _json(_text(data), "the stream metadata")
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise _Bad("undecodable", "not a StreamMetadata document (no \"id\")")
    return doc["id"]


def parse_versioned_json(data: bytes, max_version: int, what: str) -> list:
    """``v1`` + JSON lines (operator metadata, the file source's log)."""
    lines = _lines(_text(data))
    _version(lines[0] if lines else None, max_version, what)
    docs = [_json(line, f"{what} line {k + 2}") for k, line in enumerate(lines[1:])]
    if any(not isinstance(d, dict) for d in docs):
        raise _Bad("undecodable", f"{what}: a line is not a JSON object")
    return docs


def parse_state_schema(data: bytes) -> None:
    """``state/OP/P/_metadata/schema`` (``SchemaHelper`` v1 / v2, DataOutputStream's writeUTF)."""
    pos = 0

    def utf() -> str:
        nonlocal pos
        if pos + 2 > len(data):
            raise _Bad("torn", "cut short")
        n = struct.unpack_from(">H", data, pos)[0]
        if pos + 2 + n > len(data):
            raise _Bad("torn", "cut short inside a string")
        text = data[pos + 2:pos + 2 + n].decode("utf-8", "replace")
        pos += 2 + n
        return text

    def int32() -> int:
        nonlocal pos
        if pos + 4 > len(data):
            raise _Bad("torn", "cut short")
        pos += 4
        return struct.unpack_from(">i", data, pos - 4)[0]

    version = _version(utf(), 2, "the state schema")
    for side in ("key", "value"):
        text = utf() if version == 1 else "".join(utf() for _ in range(max(0, int32())))
        _json(text, f"the {side} schema")
    if pos != len(data):
        raise _Bad("undecodable", f"{len(data) - pos} bytes after the value schema")


_SST_MAGIC = {0x88E241B785F4CFF7, 0xDB4775248B80FB57, 0x8242229663BF9564}  # block-based, legacy, plain table


def parse_rocksdb_zip(data: bytes) -> dict:
    """``V.zip`` of the RocksDB provider: its ``metadata`` document; raises ``_Bad``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        if data[:4] == b"PK\x03\x04":
            raise _Bad("torn", "not a whole zip archive (its central directory is missing: cut short)") from None
        raise _Bad("undecodable", "not a zip archive") from None
    try:
        bad = archive.testzip()
        if bad is not None:
            raise _Bad("undecodable", f"member {bad} fails its CRC-32")
        if "metadata" not in archive.namelist():
            raise _Bad("undecodable", "no metadata member")
        lines = _lines(_text(archive.read("metadata")))
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        raise _Bad("torn", f"a member cannot be read ({exc})") from None
    what = "the RocksDB checkpoint metadata"
    return _versioned_object(lines, 1, what, what, f"{what} has no JSON")


# -- reading a store -----------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_STATE_FILE = re.compile(r"(\d+)\.(delta|snapshot|zip|changelog)")
_FULL = {"snapshot", "zip"}


@dataclass
class _Dir:
    """One state store directory (``state/OP/P``): its versioned files."""

    rel: str
    full: dict[int, str] = field(default_factory=dict)   # version -> snapshot / zip
    incr: dict[int, str] = field(default_factory=dict)   # version -> delta / changelog
    rocksdb: bool = False


class _Inspector:
    def __init__(self, store, full: bool) -> None:
        self.store, self.full = store, full
        self.local = hasattr(store, "root")
        self.names: dict[str, list[str]] = {}
        self.results: dict[str, tuple[str, str] | None] = {}
        self.problems: dict[tuple[str, str], Problem] = {}
        self.files: dict[str, CheckpointFile] = {}
        self.notes: list[str] = []
        self.codec = "lz4"

    # listing and reading
    def ls(self, rel: str) -> list[str]:
        if rel not in self.names:
            try:
                self.names[rel] = list(self.store.list(rel))
            except OSError:
                self.names[rel] = []
        return self.names[rel]

    def has(self, rel: str) -> bool:
        head, _, name = rel.rpartition("/")
        return name in self.ls(head)

    def add_file(self, rel: str, role: str, batch: int | None) -> None:
        self.files[rel] = CheckpointFile(rel, role, batch)
        head, _, name = rel.rpartition("/")
        prefix = f"{head}/" if head else ""
        for crc in (f".{name}.crc", f"{name}.crc"):
            if crc in self.ls(head):
                self.files[prefix + crc] = CheckpointFile(prefix + crc, "crc", batch)

    def problem(self, batch: int | None, rel: str, kind: str, detail: str) -> None:
        self.problems.setdefault((rel, kind), Problem(batch, rel, kind, detail))

    def read(self, rel: str) -> tuple[bytes, str | None]:
        """The bytes of ``rel`` and what its checksum file says against them (None: nothing);
        raises ``_Bad`` when it cannot be read or is empty."""
        try:
            data = self.store.read_bytes(rel)
        except FileNotFoundError:
            raise _Bad("missing", "does not exist") from None
        except OSError as exc:
            text = str(exc)
            raise _Bad("torn" if "checksum" in text.lower() else "unreadable", text[:300]) from None
        if not data:
            raise _Bad("empty", "0 bytes")
        head, _, name = rel.rpartition("/")
        prefix = f"{head}/" if head else ""
        if self.local and f".{name}.crc" in self.ls(head):
            try:
                matches = _hadoop_crc_matches(data, self.store.read_bytes(prefix + f".{name}.crc"))
            except OSError:
                matches = None
            if matches is False:
                return data, (f"its Hadoop checksum .{name}.crc does not match: the file changed after it was written "
                              f"(Hadoop's local filesystem refuses to read it)")
        if f"{name}.crc" in self.ls(head) and not name.endswith(".crc"):
            try:
                doc = json.loads(self.store.read_bytes(prefix + f"{name}.crc"))
                size = doc.get("mainFileSize") if isinstance(doc, dict) else None
            except (OSError, ValueError):
                size = None
            if isinstance(size, int) and size != len(data):
                return data, f"{len(data)} bytes, its checksum file {name}.crc records {size}"
        return data, None

    def check(self, rel: str, batch: int | None, parse, *, cheap: bool = False) -> Any:
        """Read and decode ``rel`` once (``cheap``: only read it, its size and checksum); a
        problem is recorded; returns the parsed value (True for a cheap check) or None."""
        full_key = f"{rel}#full"
        key = f"{rel}#cheap" if cheap else full_key
        if key in self.results or (cheap and full_key in self.results):
            return self.results.get(key, self.results.get(full_key))
        value = None
        try:
            data, against = self.read(rel)
            try:
                value = True if cheap else parse(data)
            except _Bad as bad:
                raise _Bad(bad.kind, bad.detail + (f"; and {against}" if against else "")) from None
            if against:
                raise _Bad("torn", against)
            if value is None:
                value = True
        except _Bad as bad:
            said = _SPARK_SAYS.get((rel.split("/")[0], bad.kind))
            self.problem(batch, rel, bad.kind, said.format(rel=rel) if said else bad.detail)
            value = None
        self.results[key] = value
        return value


_SPARK_SAYS = {
    ("offsets", "empty"): "0 bytes (Spark: \"Failed to read log file …/{rel}. Incomplete log file\")",
    ("commits", "empty"): "0 bytes (Spark: \"Failed to read log file …/{rel}. Incomplete log file in the offset commit log\")",
    ("metadata", "empty"): "0 bytes (Spark cannot read the query id: \"No content to map due to end-of-input\")",
}


def _ids(names: list[str]) -> list[int]:
    return sorted(int(n) for n in names if n.isdigit())


def inspect_checkpoint(checkpoint, spark=None, *, full: bool = False) -> Report:
    """Read ``checkpoint`` (a path, a Hadoop URI — which needs ``spark`` — or a
    ``streaming.storage`` store) and report on it; changes nothing."""
    store = checkpoint if hasattr(checkpoint, "location") and hasattr(checkpoint, "list") else _open(checkpoint, spark)
    if not store.exists():
        from .storage import StoreError

        raise StoreError(f"{store.location}: no such checkpoint")
    ins = _Inspector(store, full)

    identity = None
    if ins.has(IDENTITY_FILE):
        ins.add_file(IDENTITY_FILE, "identity", None)
        identity = ins.check(IDENTITY_FILE, None, _parse_identity)

    query_id = None
    if ins.has("metadata"):
        ins.add_file("metadata", "metadata", None)
        query_id = ins.check("metadata", None, parse_stream_metadata)
        if query_id is None:  # a torn file may still hold the whole id
            try:
                found = _UUID.search(store.read_bytes("metadata").decode("utf-8", "replace"))
            except OSError:
                found = None
            query_id = found.group(0) if found else None
    elif ins.ls("offsets") or ins.ls("commits"):
        ins.problem(None, "metadata", "missing", "the query id is gone (Spark: STREAMING_CHECKPOINT_MISSING_METADATA_FILE, "
                                                 "\"Please restore the metadata file\")")

    offsets_ids, commit_ids = _ids(ins.ls("offsets")), _ids(ins.ls("commits"))
    for n in offsets_ids:
        ins.add_file(f"offsets/{n}", "offsets", n)
    for n in commit_ids:
        ins.add_file(f"commits/{n}", "commits", n)
    latest = offsets_ids[-1] if offsets_ids else None
    committed = commit_ids[-1] if commit_ids else None
    in_flight = latest if latest is not None and (committed is None or latest > committed) else None

    offsets: dict[int, tuple[dict, list[str]]] = {}
    for n in offsets_ids:
        parsed = ins.check(f"offsets/{n}", n, parse_offsets)
        if parsed is not None:
            offsets[n] = parsed
    widest = max((len(s) for _, s in offsets.values()), default=0)
    for n, (_, sources) in sorted(offsets.items()):
        if len(sources) < widest:
            ins.problem(n, f"offsets/{n}", "torn", f"{len(sources)} source offset line(s), the other offsets files "
                                                 f"have {widest}: its last lines are missing")
            ins.results[f"offsets/{n}#full"] = None
    conf = next((offsets[n][0].get("conf") or {} for n in sorted(offsets, reverse=True)), {})
    codec = str(conf.get("spark.sql.streaming.stateStore.compression.codec", "lz4")).lower()
    ins.codec = "lz4" if codec in ("lz4", "org.apache.spark.io.lz4compressioncodec") else codec
    provider = str(conf.get("spark.sql.streaming.stateStore.providerClass", ""))
    partitions = int(conf["spark.sql.shuffle.partitions"]) if str(conf.get("spark.sql.shuffle.partitions", "")).isdigit() \
        else None

    if offsets_ids:
        for n in range(offsets_ids[0], latest + 1):
            if n not in offsets_ids:
                ins.problem(n, f"offsets/{n}", "missing", f"offsets/{offsets_ids[0]}..{latest} has a gap here")
    for n in commit_ids:
        if n not in offsets_ids:
            ins.problem(n, f"commits/{n}", "orphan", f"a commit without its offsets (offsets/{n} is missing)")
        ins.check(f"commits/{n}", n, parse_commit)
    if commit_ids:
        for n in range(commit_ids[0], committed + 1):
            if n not in commit_ids and n in offsets_ids:
                ins.problem(n, f"commits/{n}", "missing", f"batch {n} has no commit, though batch {committed} has one")

    for log in ("offsets", "commits"):
        _orphan_checksums(ins, log)

    sources = _inspect_sources(ins, offsets, committed)
    dirs = _inspect_state_layout(ins, committed, partitions)
    rocksdb = any(d.rocksdb for d in dirs) or provider.endswith("RocksDBStateStoreProvider")
    if dirs and ins.codec != "lz4" and any(not d.rocksdb or d.incr for d in dirs):
        ins.notes.append(f"state files are compressed with {ins.codec}: only their presence, size and Hadoop "
                         f"checksums are checked")

    # The last batch a restart can continue from, and the files it reads.
    needed: set[str] = set()
    whole = None
    top = committed if committed is not None else -1
    for b in range(top, -1, -1):
        need = _needed_for(ins, b, offsets_ids, commit_ids, dirs, sources)
        if need is not None:
            whole, needed = b, need
            break
    # What the last committed version's chains lack (reported even when an older batch is whole).
    if committed is not None:
        for d in dirs:
            _chain(ins, d, committed + 1, report=True)
    if ins.full:
        for d in dirs:
            for v, rel in sorted(list(d.incr.items()) + list(d.full.items())):
                if committed is None or v <= committed + 1:
                    _check_state_file(ins, d, rel, v)
    for d in dirs:
        for v, rel in sorted(list(d.incr.items()) + list(d.full.items())):
            if committed is not None and v <= committed + 1:
                ins.check(rel, v - 1, None, cheap=True)

    problems = tuple(sorted(ins.problems.values(), key=lambda p: (-1 if p.batch is None else p.batch, p.path, p.kind)))
    files = tuple(sorted(ins.files.values(), key=lambda f: f.path))
    return Report(location=store.location, identity=identity if isinstance(identity, dict) else None, query_id=query_id,
                  last_committed=committed, latest_offsets=latest, in_flight=in_flight, last_whole=whole,
                  state_store=("rocksdb" if rocksdb else "hdfs") if dirs else None, partitions=partitions,
                  problems=problems, files=files, needed=tuple(sorted(needed)), notes=tuple(ins.notes))


def _orphan_checksums(ins: _Inspector, log: str) -> None:
    """Hadoop's checksum files in ``log`` (offsets/, commits/) whose file is gone: ``.N.crc`` left
    behind when ``N`` was removed by hand (a common tip to make Spark run a micro-batch again).
    Spark writes ``N`` again through a temporary file renamed into place with its checksum, and
    the rename fails on the one left behind (``FileAlreadyExistsException: Rename destination
    file:…/.N.crc already exists``), on every start."""
    names = ins.ls(log)
    present = set(names)
    for name in names:
        if name.startswith(".") and name.endswith(".crc") and name[1:-4].isdigit() and name[1:-4] not in present:
            n = int(name[1:-4])
            ins.files[f"{log}/{name}"] = CheckpointFile(f"{log}/{name}", "orphan-crc", n)
            ins.problem(n, f"{log}/{name}", "orphan", f"a checksum file without its file ({log}/{n} was removed): Spark's "
                                                      f"next write of {log}/{n} fails on it (FileAlreadyExistsException)")


def _open(location, spark):
    from .storage import LocalStore, is_uri, open_store

    return open_store(location, spark) if is_uri(location) else LocalStore(location)


def _parse_identity(data: bytes) -> dict:
    doc = _json(_text(data), IDENTITY_FILE)
    if not isinstance(doc, dict) or doc.get("format") != 1 or not isinstance(doc.get("identity"), dict):
        raise _Bad("undecodable", "not a replemu run identity (format 1)")
    return doc


# -- the file source's log ------------------------------------------------------------------

@dataclass
class _SourceLog:
    rel: str                                   # sources/I
    entries: dict[int, str]                    # log offset -> file (N or N.compact)
    offsets: dict[int, int]                    # query batch -> its logOffset


def _inspect_sources(ins: _Inspector, offsets: dict[int, tuple[dict, list[str]]], committed: int | None) -> list[_SourceLog]:
    logs = []
    for name in sorted(ins.ls("sources")):
        if not name.isdigit():
            continue
        rel, i = f"sources/{name}", int(name)
        entries = {}
        for entry in ins.ls(rel):
            m = re.fullmatch(r"(\d+)(\.compact)?", entry)
            if m:
                entries[int(m.group(1))] = f"{rel}/{entry}"
        by_batch = {}
        for b, (_, lines) in offsets.items():
            try:
                doc = json.loads(lines[i]) if i < len(lines) and lines[i] != "-" else None
            except ValueError:
                doc = None
            if isinstance(doc, dict) and isinstance(doc.get("logOffset"), int):
                by_batch[b] = doc["logOffset"]
        log = _SourceLog(rel, entries, by_batch)
        logs.append(log)
        after = (max(offsets) + 1) if offsets else 0
        for n, path in entries.items():
            ins.add_file(path, "source", min((b for b, x in by_batch.items() if x >= n), default=after))
        top = by_batch.get(committed) if committed is not None else None
        for n, path in sorted(entries.items()):
            if top is not None and n <= top:
                ins.check(path, _log_batch(log, n, after), lambda d: parse_versioned_json(d, 1, "the file source log"))
    return logs


def _log_batch(log: _SourceLog, n: int, after: int) -> int:
    return min((b for b, x in log.offsets.items() if x >= n), default=after)


def _source_needs(ins: _Inspector, log: _SourceLog, b: int) -> set[str] | None:
    """The source log files a restart from batch ``b`` reads (None: one is broken or missing)."""
    x = log.offsets.get(b)
    if x is None:
        return set()
    compacts = [n for n, p in log.entries.items() if p.endswith(".compact") and n <= x]
    start = max(compacts) if compacts else 0
    need = set()
    for n in range(start, x + 1):
        path = log.entries.get(n)
        if path is None:
            ins.problem(_log_batch(log, n, b), f"{log.rel}/{n}", "missing", f"the file source's log entry {n} is gone")
            return None
        if ins.check(path, _log_batch(log, n, b), lambda d: parse_versioned_json(d, 1, "the file source log")) is None:
            return None
        need.add(path)
    return need


# -- state stores ---------------------------------------------------------------------------

def _inspect_state_layout(ins: _Inspector, committed: int | None, partitions: int | None) -> list[_Dir]:
    dirs = []
    for op in sorted(ins.ls("state"), key=lambda s: (not s.isdigit(), s)):
        if not op.isdigit():
            continue
        op_rel = f"state/{op}"
        if "_metadata" in ins.ls(op_rel) and "metadata" in ins.ls(f"{op_rel}/_metadata"):
            rel = f"{op_rel}/_metadata/metadata"
            ins.add_file(rel, "operator-metadata", None)
            ins.check(rel, None, lambda d: parse_versioned_json(d, 1, "the operator metadata"))
        if "_metadata" in ins.ls(op_rel) and "v2" in ins.ls(f"{op_rel}/_metadata"):
            for name in ins.ls(f"{op_rel}/_metadata/v2"):  # transformWithState's, one per batch: not decoded,
                if name.isdigit():                          # rolled back with their batch
                    ins.add_file(f"{op_rel}/_metadata/v2/{name}", "operator-metadata-v2", int(name))
        parts = sorted(int(p) for p in ins.ls(op_rel) if p.isdigit())
        expected = range(partitions) if partitions else parts
        for p in expected:
            if p not in parts and committed is not None:
                ins.problem(committed, f"{op_rel}/{p}", "missing",
                            f"state partition {p} has no files (version {committed + 1} is needed)")
        for p in parts:
            d = _Dir(f"{op_rel}/{p}")
            for name in ins.ls(d.rel):
                m = _STATE_FILE.fullmatch(name)
                if m:
                    v, ext = int(m.group(1)), m.group(2)
                    (d.full if ext in _FULL else d.incr)[v] = f"{d.rel}/{name}"
                    d.rocksdb |= ext in ("zip", "changelog")
                    ins.add_file(f"{d.rel}/{name}", "state", v - 1)
                elif name == "_metadata" and "schema" in ins.ls(f"{d.rel}/_metadata"):
                    rel = f"{d.rel}/_metadata/schema"
                    ins.add_file(rel, "state-schema", None)
                    ins.check(rel, None, parse_state_schema)
            for shared in ("SSTs", "logs"):
                for name in ins.ls(f"{d.rel}/{shared}"):
                    if not name.startswith(".") and not name.endswith(".crc"):
                        ins.add_file(f"{d.rel}/{shared}/{name}", "rocksdb-shared", None)
            dirs.append(d)
    return dirs


def _check_state_file(ins: _Inspector, d: _Dir, rel: str, version: int) -> bool:
    """Decode one versioned state file (and, for a zip, the shared files it names)."""
    batch = version - 1
    if rel.endswith(".zip"):
        doc = ins.check(rel, batch, parse_rocksdb_zip)
        if doc is None:
            return False
        ok = True
        for folder, key, entries in (("SSTs", "dfsSstFileName", doc.get("sstFiles")),
                                     ("logs", "dfsLogFileName", doc.get("logFiles"))):
            for entry in entries or ():
                name = entry.get(key) if isinstance(entry, dict) else None
                if not isinstance(name, str):
                    ins.problem(batch, rel, "undecodable", f"its metadata names a {folder} file without {key}")
                    ok = False
                    continue
                ok &= _check_shared(ins, f"{d.rel}/{folder}/{name}", entry.get("sizeBytes"), batch, rel)
        return ok
    if ins.codec != "lz4":
        return ins.check(rel, batch, None, cheap=True) is not None
    if rel.endswith(".changelog"):
        return ins.check(rel, batch, lambda data: changelog_records(lz4_block_stream(data)) + 1) is not None
    removals = not rel.endswith(".snapshot")
    return ins.check(rel, batch, lambda data: kv_records(lz4_block_stream(data), removals) + 1) is not None


def _check_shared(ins: _Inspector, rel: str, size, batch: int, zip_rel: str) -> bool:
    key = f"{rel}#shared"
    if key in ins.results:
        return ins.results[key] is not None
    ok = None
    try:
        if not ins.has(rel):
            raise _Bad("missing", f"named by {zip_rel} but gone")
        data, against = ins.read(rel)
        if against:
            raise _Bad("torn", against)
        if isinstance(size, int) and len(data) != size:
            raise _Bad("torn", f"{len(data)} bytes, {zip_rel} records {size}")
        if rel.endswith(".sst") and (len(data) < 8 or struct.unpack("<Q", data[-8:])[0] not in _SST_MAGIC):
            raise _Bad("torn", "does not end with a RocksDB table magic number")
        ok = True
    except _Bad as bad:
        ins.problem(batch, rel, bad.kind, bad.detail)
    ins.results[key] = ok
    return ok is not None


def _chain(ins: _Inspector, d: _Dir, version: int, report: bool = False) -> list[str] | None:
    """The files Spark reads to load ``version`` of one store: the newest whole full file at or
    below it (a snapshot or zip; none: version 0, empty) and the incremental files after it.
    None when no such chain is whole; ``report``: record what the newest candidate lacks."""
    if version <= 0:
        return []
    candidates = sorted((v for v in d.full if v <= version), reverse=True) + [0]
    for s in candidates:
        if s and not _check_state_file(ins, d, d.full[s], s):
            if report:
                return None  # Spark reads the newest one and fails on it: that is the problem
            continue
        chain = [d.full[s]] if s else []
        ok = True
        for v in range(s + 1, version + 1):
            rel = d.incr.get(v)
            if rel is None:
                if report:
                    ext = ("changelog" if d.incr else "zip") if d.rocksdb else "delta"
                    ins.problem(v - 1, f"{d.rel}/{v}.{ext}", "missing",
                                f"state version {v} (batch {v - 1}) of {d.rel} is gone: no {v}."
                                f"{'zip' if d.rocksdb else 'snapshot'} and no {v}.{'changelog' if d.rocksdb else 'delta'}")
                ok = False
                break
            if not _check_state_file(ins, d, rel, v):
                ok = False
                break
            chain.append(rel)
        if ok:
            return chain
        if report:
            return None
    return None


def _needed_for(ins: _Inspector, b: int, offsets_ids, commit_ids, dirs: list[_Dir], sources: list[_SourceLog]) -> set[str] | None:
    """The files a restart after batch ``b`` reads, when all are whole (else None)."""
    need = set()
    for n in (b, b - 1):
        if n < 0:
            continue
        if n in offsets_ids:
            if ins.results.get(f"offsets/{n}#full") is None:
                return None
            need.add(f"offsets/{n}")
        elif n == b or n >= offsets_ids[0]:
            return None  # (b - 1 below the oldest offsets file was purged by Spark: not read)
    if b not in commit_ids or ins.check(f"commits/{b}", b, parse_commit) is None:
        return None
    need.add(f"commits/{b}")
    for d in dirs:
        chain = _chain(ins, d, b + 1)
        if chain is None:
            return None
        need.update(chain)
        for rel in chain:
            if rel.endswith(".zip"):
                doc = ins.results.get(f"{rel}#full")
                for folder, key, entries in (("SSTs", "dfsSstFileName", doc.get("sstFiles") if doc else None),
                                             ("logs", "dfsLogFileName", doc.get("logFiles") if doc else None)):
                    need.update(f"{d.rel}/{folder}/{e[key]}" for e in entries or () if isinstance(e, dict) and key in e)
    for log in sources:
        more = _source_needs(ins, log, b)
        if more is None:
            return None
        need |= more
    return need


# -- repair ---------------------------------------------------------------------------------

_ROLLED_BACK = ("offsets", "commits", "state", "source", "operator-metadata-v2")


def plan_repair(report: Report) -> RepairPlan:
    """The roll-back that makes the checkpoint whole again: keep every micro-batch up to
    ``report.last_whole`` and move aside the files of later ones, and every broken file a
    restart from there does not read.  Pure: reads nothing."""
    unrepaired = tuple(p for p in report.problems if p.path == IDENTITY_FILE)
    if report.whole:
        return RepairPlan(report.location, report.last_committed, (), (), unrepaired, report.problems)
    keep = report.last_whole
    after = -1 if keep is None else keep
    needed = set(report.needed)
    by_path = {f.path: f for f in report.files}
    moves = set()
    for f in report.files:
        if f.role in _ROLLED_BACK and f.batch is not None and f.batch > after:
            moves.add(f.path)
    if keep is None and any(f.path.startswith("state/") for f in report.files):
        # The query starts over, and Spark wants no state directory at batch 0
        # (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY): the whole of it moves.
        moves = {m for m in moves if not m.startswith("state/")} | {"state"}
    for p in report.problems:
        if p.path in by_path and p.path not in needed and p.path != IDENTITY_FILE and by_path[p.path].role != "crc" \
                and not (keep is None and p.path.startswith("state/")):
            moves.add(p.path)
    for path in list(moves):
        head, _, name = path.rpartition("/")
        prefix = f"{head}/" if head else ""
        for crc in (f"{prefix}.{name}.crc", f"{prefix}{name}.crc"):
            if crc in by_path:
                moves.add(crc)
    last = max(x for x in (report.latest_offsets, report.last_committed, -1) if x is not None)
    query_id = None
    if any(p.path == "metadata" for p in report.problems):
        # Spark refuses offsets without a metadata file (STREAMING_CHECKPOINT_MISSING_METADATA_FILE): the
        # id is kept when the torn file still holds it, else a new one (stable for this location).
        query_id = report.query_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"replemu-checkpoint-repair:{report.location}"))
    return RepairPlan(report.location, keep, tuple(sorted(moves)), tuple(range(after + 1, last + 1)), unrepaired,
                      report.problems, query_id)


def utc_stamp(now=None) -> str:
    """``YYYYmmddTHHMMSSZ`` of ``now`` (default: the wall clock, UTC): the repair folder's name."""
    import datetime

    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def repair_folder(location: str, stamp: str) -> str:
    """Where a repair moves files: ``CK.repair-STAMP`` beside the checkpoint."""
    return f"{str(location).rstrip('/')}.repair-{stamp}"


def apply_repair(plan: RepairPlan, store, stamp: str) -> str:
    """Move ``plan.moves`` from ``store`` (the checkpoint) into ``repair_folder(…, stamp)``,
    keeping their relative paths, with a ``repair.json`` that records the plan; returns that
    folder.  Holds the checkpoint's lock meanwhile (a running job refuses it: CheckpointError)."""
    from .checkpoint import CheckpointError

    if store.location.rstrip("/") != plan.location.rstrip("/"):
        raise CheckpointError(f"the plan is for {plan.location}, not {store.location}")
    target = repair_folder(store.location, stamp)
    if not plan.changes:
        return target
    with _claimed(store):
        absent = [rel for rel in plan.moves if not _exists(store, rel)]
        if absent:
            raise CheckpointError(f"{store.location} changed since it was checked ({absent[0]} is gone): check it again")
        if _exists_location(store, target):
            raise CheckpointError(f"{target} exists already: give another stamp")
        manifest = {"checkpoint": store.location, "stamp": stamp, "kept_through_batch": plan.keep_through,
                    "rerun_batches": list(plan.rerun), "moved": list(plan.moves), "new_metadata_id": plan.query_id,
                    "problems": [p.__dict__ for p in plan.problems]}
        _write_beside(store, target, REPAIR_MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
        for rel in plan.moves:
            _move(store, rel, target)
        if plan.query_id is not None:  # StreamMetadata's own form
            store.write_bytes("metadata", json.dumps({"id": plan.query_id}, separators=(",", ":")).encode("utf-8"))
    return target


class _claimed:
    """The checkpoint's ``replemu.lock`` (``streaming.checkpoint``), held while files move."""

    def __init__(self, store) -> None:
        self.store = store

    def __enter__(self):
        from .checkpoint import Claim, Lease, _lock

        self.claim = Claim()
        try:
            if hasattr(self.store, "root"):
                _lock(self.store.root, "checkpoint", self.claim)
            else:
                self.claim.leases.append(Lease(self.store, "checkpoint", self.claim))
        except BaseException:
            self.claim.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.claim.release()


def _exists(store, rel: str) -> bool:
    return os.path.lexists(store.root / rel) if hasattr(store, "root") else store.exists(rel)


def _exists_location(store, location: str) -> bool:
    if hasattr(store, "root"):
        return os.path.lexists(location)
    return bool(store.fs.exists(store._Path(location)))


def _write_beside(store, folder: str, name: str, data: bytes) -> None:
    if hasattr(store, "root"):
        os.makedirs(folder, exist_ok=False)
        with open(os.path.join(folder, name), "xb") as f:
            f.write(data)
        return
    out = store.fs.create(store._Path(f"{folder}/{name}"), False)
    try:
        out.write(bytearray(data))
    finally:
        out.close()


def _move(store, rel: str, folder: str) -> None:
    if hasattr(store, "root"):
        import shutil

        dest = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.move(str(store.root / rel), dest)  # a rename on the same filesystem
        return
    src, dest = store._Path(f"{store.location}/{rel}"), store._Path(f"{folder}/{rel}")
    store.fs.mkdirs(dest.getParent())
    if not store.fs.rename(src, dest):
        from .storage import StoreError

        raise StoreError(f"{store.location}: could not move {rel} to {folder}")


# -- words for people -----------------------------------------------------------------------

def _batches(ids) -> str:
    ids = list(ids)
    if not ids:
        return "none"
    runs, start, prev = [], ids[0], ids[0]
    for n in ids[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}..{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(runs)


def format_report(report: Report) -> str:
    """What ``replemu checkpoint check`` prints."""
    out = [f"checkpoint {report.location}"]
    if report.identity:
        ident = report.identity["identity"]
        out.append("identity (" + IDENTITY_FILE + "):")
        out += [f"  {k}: {json.dumps(ident[k], sort_keys=True)}" for k in ident]
        if report.identity.get("history"):
            out.append(f"  changed {len(report.identity['history'])} time(s) since created (--allow-change)")
    elif not any(p.path == IDENTITY_FILE for p in report.problems):
        out.append(f"identity: none ({IDENTITY_FILE} is missing: not written by replemu)")
    out.append(f"last committed micro-batch: {report.last_committed if report.last_committed is not None else 'none'}")
    if report.in_flight is not None:
        out.append(f"in flight: batch {report.in_flight} (offsets without a commit: Spark runs it again on the next "
                   f"start; not a problem)")
    if report.state_store:
        out.append(f"state store: {report.state_store}, {report.partitions or '?'} partitions")
    out += [f"note: {n}" for n in report.notes]
    if report.whole:
        out.append("whole: no problems")
        return "\n".join(out) + "\n"
    out.append(f"problems ({len(report.problems)}):")
    for p in report.problems:
        where = "checkpoint" if p.batch is None else f"batch {p.batch}"
        out.append(f"  {where}: {p.path}: {p.kind}: {p.detail}")
    plan = plan_repair(report)
    if plan.unrepaired and not plan.changes:
        out.append(f"not whole, and a roll-back cannot mend it: {', '.join(p.path for p in plan.unrepaired)}")
    elif plan.keep_through is None:
        out.append(f"not whole: `replemu checkpoint repair` moves every micro-batch aside (none is whole); the query "
                   f"starts over and runs {_batches(plan.rerun)} again")
    elif plan.rerun:
        out.append(f"not whole: `replemu checkpoint repair` rolls back to micro-batch {plan.keep_through} and runs "
                   f"{_batches(plan.rerun)} again")
    else:
        out.append("not whole: `replemu checkpoint repair` moves the broken files aside (Spark writes them again); no "
                   "micro-batch runs again")
    return "\n".join(out) + "\n"


def format_plan(plan: RepairPlan, folder: str | None = None, done: bool = False) -> str:
    """What ``replemu checkpoint repair`` prints (``done``: after ``apply_repair``)."""
    if not plan.changes:
        text = f"checkpoint {plan.location} is whole: nothing to repair\n"
        if plan.unrepaired:
            text = f"checkpoint {plan.location}: a roll-back cannot mend this:\n"
        return text + "".join(f"  {p.path}: {p.kind}: {p.detail}\n" for p in plan.unrepaired)
    if plan.keep_through is None:
        keep = "no micro-batch is whole: the query starts over from batch 0"
    elif plan.rerun:
        keep = (f"{'rolled' if done else 'rolls'} back to micro-batch {plan.keep_through}, the last whose offsets, commit "
                f"and state are whole")
    else:
        keep = f"{'kept' if done else 'keeps'} every micro-batch (through {plan.keep_through}); Spark writes the moved files again"
    out = [f"checkpoint {plan.location}: {keep}",
           f"{'moved' if done else 'moves'} {len(plan.moves)} file(s) into {folder or repair_folder(plan.location, 'STAMP')}"
           f" (same relative paths; nothing deleted):"]
    out += [f"  {rel}{'/ (all of it)' if rel == 'state' else ''}" for rel in plan.moves]
    if plan.query_id is not None:
        out.append(f"{'wrote' if done else 'writes'} a new metadata file with query id {plan.query_id} (Spark refuses "
                   f"offsets without one)")
    out.append(f"micro-batches that run again on the next start: {_batches(plan.rerun)} (outputs are keyed by batch id "
               f"and replaced, so the results equal an uninterrupted run's)")
    out += [f"not mended: {p.path}: {p.kind}: {p.detail}" for p in plan.unrepaired]
    return "\n".join(out) + "\n"


def report_dict(report: Report) -> dict:
    """The report as JSON values (``replemu checkpoint check --json``); every file is left out."""
    return {"checkpoint": report.location, "whole": report.whole,
            "identity": report.identity["identity"] if report.identity else None, "query_id": report.query_id,
            "last_committed": report.last_committed, "latest_offsets": report.latest_offsets,
            "in_flight": report.in_flight, "last_whole": report.last_whole, "state_store": report.state_store,
            "partitions": report.partitions, "problems": [p.__dict__ for p in report.problems],
            "notes": list(report.notes)}
