"""Packing a partition's state into the flat Spark state row, and back.

Layout of the binary fields (state schema version ``STATE_SCHEMA_VERSION``):

* ``core`` — an LZ4 block (python-lz4's ``store_size`` form: the uncompressed size as a
  little-endian uint32, then the block) of UTF-8 JSON of ``emulator.state.to_document(replay)``
  (``pack_document``): the whole partition document, logs included. The logs hold only the
  window above the compacted prefix, so this blob is bounded by the records in flight, not by
  history; one C-encoded JSON string (orjson: compact, UTF-8, keys in document order) is cheaper
  to write and read than separate columnar tables, and the replicas' logs, the checker's
  committed and acknowledged records repeat each other: LZ4 keeps a quarter of the bytes at
  ~30 µs a partition (zlib: a fifth, at six times the cost).  A metadata partition keeps
  ``emulator.quorum.codec``'s document here, in the same form.
* ``waiting`` — UTF-8 JSON list of ``[seq, type, args]`` rows that arrived ahead of a gap.
* ``generator`` — a workload partition's step generator (``emulator.workload.WorkloadGenerator``):
  the magic ``GENERATOR_LAYOUT``, then the LZ4 block of the JSON of ``WorkloadGenerator.to_document``:
  the shadow partition, counters and the steps generated but not yet applied; its draws are
  counter-based, so no random state is kept), null for a partition of event files.  The workload source sends only ticks (``TICK_TYPE``: which
  steps a partition advances to), and the state function generates the steps from this field, so
  they are generated where the partition lives and, after a restart, resume from the checkpoint.

``decode_state_row`` turns a row read back with ``spark.read.format("statestore")`` (or the
tuple ``GroupState.get`` returns) into the document, so any partition's state can be shown.
Nothing is pickled.
"""

from __future__ import annotations

from typing import Any

import lz4.block
import orjson

from emulator.run import Replay
from emulator.state import from_document, to_document
from emulator.workload import GENERATOR_LAYOUT, WorkloadGenerator

from .schemas import STATE_SCHEMA, STATE_SCHEMA_VERSION

STATE_FIELDS = tuple(f.name for f in STATE_SCHEMA.fields)
BINARY_FIELDS = ("core", "waiting", "generator")


def state_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON (what ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False)``
    writes, for the documents kept here: string keys, no NaN) at a tenth of its cost."""
    return orjson.dumps(obj)


def pack_document(doc: dict[str, Any]) -> bytes:
    """A document as the state keeps it (``core``, the generator's): LZ4 of its compact JSON."""
    return lz4.block.compress(orjson.dumps(doc), store_size=True)


def unpack_document(data: bytes) -> Any:
    return orjson.loads(lz4.block.decompress(data))


def pack_replay(replay: Replay) -> dict[str, Any]:
    """The binary state field ``core`` of a partition's replay."""
    return {"core": pack_document(to_document(replay))}


def document_from_fields(core: bytes) -> dict[str, Any]:
    """The document in a ``core`` field."""
    return unpack_document(core)


_GENERATOR_MAGIC = GENERATOR_LAYOUT.encode("ascii")


def pack_generator(generator: WorkloadGenerator) -> bytes:
    """The ``generator`` field of a workload partition's state."""
    return _GENERATOR_MAGIC + pack_document(generator.to_document())


def unpack_generator(data: bytes) -> WorkloadGenerator:
    """The generator in a ``generator`` field; ``ValueError`` for another layout (an older
    generator's state, which this build cannot continue)."""
    data = bytes(data)
    if not data.startswith(_GENERATOR_MAGIC):
        raise ValueError(f"not a workload generator of layout {GENERATOR_LAYOUT!r} ({len(data)} bytes starting {data[:4]!r})")
    return WorkloadGenerator.from_document(unpack_document(data[len(_GENERATOR_MAGIC):]))


def unpack_replay(fields: dict[str, Any]) -> Replay:
    return from_document(document_from_fields(fields["core"]))


def empty_state(protocol: str) -> dict[str, Any]:
    return {
        "state_version": STATE_SCHEMA_VERSION, "protocol": protocol, "scenario": None, "header": "waiting",
        "next_seq": 0, "steps_applied": 0, "controller_leader": None, "controller_epoch": -1, "violated": "",
        "gap_reported_seq": -1, "waiting": state_json([]), "core": None, "generator": None,
    }


def to_tuple(fields: dict[str, Any]) -> tuple:
    return tuple(fields[name] for name in STATE_FIELDS)


class StateSchemaError(ValueError):
    """A state row written by another version of the job: refused, never misread."""


def from_tuple(values: tuple) -> dict[str, Any]:
    fields = dict(zip(STATE_FIELDS, values))
    if fields["state_version"] != STATE_SCHEMA_VERSION:
        raise StateSchemaError(f"state schema version {fields['state_version']}, this build reads {STATE_SCHEMA_VERSION}")
    return fields


def decode_state_row(row: dict[str, Any]) -> dict[str, Any]:
    """A readable view of one partition's state (e.g. a ``statestore`` row's ``value``)."""
    out = {k: row[k] for k in STATE_FIELDS if k not in BINARY_FIELDS}
    out["waiting"] = orjson.loads(row["waiting"]) if row.get("waiting") is not None else []
    if row.get("core") is not None:
        out["document"] = document_from_fields(row["core"])
    if row.get("generator") is not None:
        out["generator"] = describe_generator(row["generator"])
    return out


def describe_generator(data: bytes) -> dict[str, Any]:
    """What a ``generator`` field holds, readably: where the partition's workload stands."""
    g = unpack_generator(data)
    return {"seed": g.seed, "partition": g.partition, "next_seq": g.next_seq, "generated": g.emitted,
            "pending": len(g.pending), "values_produced": g.produced, "bytes": len(bytes(data))}
