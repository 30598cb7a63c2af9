"""Packing a partition's state into the flat Spark state row, and back.

Layout of the binary fields (state schema version ``STATE_SCHEMA_VERSION``):

* ``core`` — UTF-8 JSON of ``emulator.state.to_document(replay)``: the whole partition document,
  logs included. The logs hold only the window above the compacted prefix (compaction runs
  after every micro-batch), so this blob is bounded by the records in flight, not by history;
  one C-encoded JSON string is cheaper to write and read than separate columnar tables.
* ``waiting`` — UTF-8 JSON list of ``[seq, type, args]`` rows that arrived ahead of a gap.
* ``generator`` — a workload partition's step generator (``emulator.workload.WorkloadGenerator``,
  layout ``GENERATOR_LAYOUT``: the three Mersenne Twister states as 7,500 bytes of uint32 words,
  then zlib'd JSON of the shadow partition, counters and the steps generated but not yet applied),
  null for a partition of event files.  The workload source sends only ticks (``TICK_TYPE``: which
  steps a partition advances to), and the state function generates the steps from this field, so
  they are generated where the partition lives and, after a restart, resume from the checkpoint.

``decode_state_row`` turns a row read back with ``spark.read.format("statestore")`` (or the
tuple ``GroupState.get`` returns) into the document, so any partition's state can be shown.
Nothing is pickled.
"""

from __future__ import annotations

import json
from typing import Any

from emulator.run import Replay
from emulator.state import from_document, to_document

from .schemas import STATE_SCHEMA, STATE_SCHEMA_VERSION

STATE_FIELDS = tuple(f.name for f in STATE_SCHEMA.fields)
BINARY_FIELDS = ("core", "waiting", "generator")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pack_replay(replay: Replay) -> dict[str, Any]:
    """The binary state field ``core`` of a partition's replay."""
    return {"core": _dumps(to_document(replay))}


def document_from_fields(core: bytes) -> dict[str, Any]:
    return json.loads(bytes(core).decode("utf-8"))


def unpack_replay(fields: dict[str, Any]) -> Replay:
    return from_document(document_from_fields(fields["core"]))


def empty_state(protocol: str) -> dict[str, Any]:
    return {
        "state_version": STATE_SCHEMA_VERSION, "protocol": protocol, "scenario": None, "header": "waiting",
        "next_seq": 0, "steps_applied": 0, "controller_leader": None, "controller_epoch": -1, "violated": "",
        "gap_reported_seq": -1, "waiting": _dumps([]), "core": None, "generator": None,
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
    out["waiting"] = json.loads(bytes(row["waiting"]).decode("utf-8")) if row.get("waiting") is not None else []
    if row.get("core") is not None:
        out["document"] = document_from_fields(row["core"])
    if row.get("generator") is not None:
        out["generator"] = describe_generator(row["generator"])
    return out


def describe_generator(data: bytes) -> dict[str, Any]:
    """What a ``generator`` field holds, readably: where the partition's workload stands."""
    from emulator.workload import WorkloadGenerator

    g = WorkloadGenerator.from_bytes(data)
    return {"seed": g.seed, "partition": g.partition, "next_seq": g.next_seq, "generated": g.emitted,
            "pending": len(g.pending), "values_produced": g.produced, "bytes": len(bytes(data))}
