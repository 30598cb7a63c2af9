"""Kafka's on-disk formats for replicas, through kafka-python's record-batch code.

Layout of an exported partition (one directory per broker, as on real brokers)::

    DIR/broker-<id>/<topic>-<partition>/00000000000000000000.log   v2 record batches
                                        leader-epoch-checkpoint     "0", count, "epoch start" lines
                                        replication-offset-checkpoint  "0", count, "topic partition hw"

A batch is one contiguous run of records of one leader epoch; its ``baseOffset`` and
``partitionLeaderEpoch`` (both outside the CRC, stamped after kafka-python builds the batch) are
the record's offset and epoch; record timestamps are the offsets (deterministic files).  Reading
validates every batch's CRC and reports a corrupt or truncated segment with its file and byte offset.
"""

from __future__ import annotations

import re
import struct
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


def _read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ReplicaDirError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        raise ReplicaDirError(f"{path}: expected a version line '0' and a count line")
    count = int(lines[1])
    rows = [line.split() for line in lines[2:] if line.strip()]
    if len(rows) != count or any(len(r) != fields for r in rows):
        raise ReplicaDirError(f"{path}: expected {count} lines of {fields} fields")
    return rows


def read_segment(path: Path) -> list[dict]:
    """Batches of one segment file, CRC-checked: ``{"position", "base_offset", "epoch", "values"}``."""
    from kafka.errors import CorruptRecordException
    from kafka.record import MemoryRecords

    data = path.read_bytes()
    records = MemoryRecords(data)
    if records.valid_bytes() != len(data):
        raise ReplicaDirError(f"{path}: truncated batch at byte {records.valid_bytes()} (file has {len(data)} bytes)")
    batches, position = [], 0
    while records.has_next():
        try:
            batch = records.next_batch()
            if batch is None:
                break
            if batch.magic != 2:
                raise ReplicaDirError(f"{path}: batch at byte {position} has magic {batch.magic}, only v2 is read")
            if not batch.validate_crc():
                raise ReplicaDirError(f"{path}: CRC mismatch in the batch at byte {position}")
            values = [r.value.decode("utf-8") if r.value is not None else "" for r in batch]
        except CorruptRecordException as exc:
            raise ReplicaDirError(f"{path}: corrupt batch at byte {position}: {exc}") from None
        except UnicodeDecodeError:
            raise ReplicaDirError(f"{path}: batch at byte {position}: a record value is not UTF-8") from None
        batches.append({"position": position, "base_offset": batch.base_offset, "epoch": batch.leader_epoch, "values": values})
        position += batch.size_in_bytes
    return batches


def read_replica_dir(path: str | Path) -> ReplicaFiles:
    """One broker's partition directory (``broker-<id>/<topic>-<partition>``)."""
    d = Path(path)
    m = re.fullmatch(r"(.+)-(\d+)", d.name)
    b = re.fullmatch(r"broker-(\d+)", d.parent.name)
    if not d.is_dir() or not m or not b:
        raise ReplicaDirError(f"{d}: expected a partition directory named <topic>-<partition> inside broker-<id>")
    segments = sorted(d.glob(f"*{SEGMENT_SUFFIX}"))
    if not segments:
        raise ReplicaDirError(f"{d}: no segment (*.log) file")
    log: list[tuple[int, int, str]] = []
    start = int(segments[0].stem)
    batches = []
    for seg in segments:
        for batch in read_segment(seg):
            expected = start + len(log)
            if batch["base_offset"] != expected:
                raise ReplicaDirError(f"{seg}: batch at byte {batch['position']} starts at offset {batch['base_offset']}, expected {expected}")
            log.extend((batch["base_offset"] + i, batch["epoch"], v) for i, v in enumerate(batch["values"]))
            batches.append({**batch, "file": seg.name})
    cache = [(int(e), int(s)) for e, s in _read_checkpoint(d / LEADER_EPOCH_CHECKPOINT, 2)]
    hw_rows = _read_checkpoint(d / HW_CHECKPOINT, 3)
    hw = next((int(h) for t, p, h in hw_rows if t == m.group(1) and int(p) == int(m.group(2))), 0)
    return ReplicaFiles(broker=int(b.group(1)), topic=m.group(1), partition=int(m.group(2)), log=log, epoch_cache=cache,
                        hw=hw, start_offset=start, path=str(d), batches=batches)


def find_replica_dirs(root: str | Path) -> list[Path]:
    """``root`` itself if it is a partition directory, else every broker-*/<topic>-<p> below it."""
    root = Path(root)
    if re.fullmatch(r"broker-\d+", root.parent.name) and root.is_dir() and list(root.glob(f"*{SEGMENT_SUFFIX}")):
        return [root]
    found = sorted(p for p in root.glob("broker-*/*") if p.is_dir())
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
