"""Packing a partition's state into the flat Spark state row, and back.

Layout of the binary fields (state version 1; ``emulator.state`` defines the document):

* ``core`` — UTF-8 JSON of ``emulator.state.to_document(replay)`` with three large arrays removed:
  every replica's ``log``, the oracle's ``committed`` and ``acked``.
* ``logs`` — an Arrow IPC stream, one table with columns ``replica: int32``,
  ``epoch: int32``, ``value: utf8``: each replica's records in offset order, replicas in
  assignment order (a replica's offsets are implied by its position).
* ``committed`` — Arrow IPC: ``epoch: int32``, ``value: utf8``, one row per committed offset.
* ``acked`` — Arrow IPC: ``offset: int64``, ``epoch: int32``, ``value: utf8``, ``step: int64``,
  ``holders: list<int32>``, ``lost_by_power: int32``.
* ``waiting`` — UTF-8 JSON list of ``[seq, type, args]`` rows that arrived ahead of a gap.

``decode_state_row`` turns a row read back with ``spark.read.format("statestore")`` (or the
tuple ``GroupState.get`` returns) into the document, so any partition's state can be shown.
Nothing is pickled.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from emulator.run import Replay
from emulator.state import from_document, to_document

from .schemas import STATE_SCHEMA, STATE_SCHEMA_VERSION

STATE_FIELDS = tuple(f.name for f in STATE_SCHEMA.fields)

_LOGS = pa.schema([("replica", pa.int32()), ("epoch", pa.int32()), ("value", pa.string())])
_COMMITTED = pa.schema([("epoch", pa.int32()), ("value", pa.string())])
_ACKED = pa.schema([
    ("offset", pa.int64()), ("epoch", pa.int32()), ("value", pa.string()), ("step", pa.int64()),
    ("holders", pa.list_(pa.int32())), ("lost_by_power", pa.int32()),
])


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _read_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def pack_replay(replay: Replay) -> dict[str, Any]:
    """The binary state fields (``core``, ``logs``, ``committed``, ``acked``) of a partition's replay."""
    doc = to_document(replay)
    replicas, values, epochs = [], [], []
    for r in doc["replicas"]:
        log = r.pop("log")
        replicas.extend([r["id"]] * len(log))
        epochs.extend(e for e, _ in log)
        values.extend(v for _, v in log)
    logs = pa.table([pa.array(replicas, pa.int32()), pa.array(epochs, pa.int32()), pa.array(values, pa.string())], schema=_LOGS)
    oracle = doc["oracle"]
    committed = oracle.pop("committed")
    acked = oracle.pop("acked")
    committed_t = pa.table([pa.array([e for e, _ in committed], pa.int32()), pa.array([v for _, v in committed], pa.string())], schema=_COMMITTED)
    cols = list(zip(*acked)) if acked else [[] for _ in range(6)]
    acked_t = pa.table([pa.array(list(c), t.type) for c, t in zip(cols, _ACKED)], schema=_ACKED)
    return {"core": _dumps(doc), "logs": _ipc(logs), "committed": _ipc(committed_t), "acked": _ipc(acked_t)}


def document_from_fields(core: bytes, logs: bytes, committed: bytes, acked: bytes) -> dict[str, Any]:
    doc = json.loads(bytes(core).decode("utf-8"))
    table = _read_ipc(bytes(logs)).to_pydict()
    by_replica: dict[int, list] = {r["id"]: [] for r in doc["replicas"]}
    for rid, e, v in zip(table["replica"], table["epoch"], table["value"]):
        by_replica[rid].append([e, v])
    for r in doc["replicas"]:
        r["log"] = by_replica[r["id"]]
    c = _read_ipc(bytes(committed)).to_pydict()
    doc["oracle"]["committed"] = [[e, v] for e, v in zip(c["epoch"], c["value"])]
    a = _read_ipc(bytes(acked)).to_pydict()
    doc["oracle"]["acked"] = [list(row) for row in zip(a["offset"], a["epoch"], a["value"], a["step"], a["holders"], a["lost_by_power"])]
    return doc


def unpack_replay(fields: dict[str, Any]) -> Replay:
    return from_document(document_from_fields(fields["core"], fields["logs"], fields["committed"], fields["acked"]))


def empty_state(protocol: str) -> dict[str, Any]:
    return {
        "state_version": STATE_SCHEMA_VERSION, "protocol": protocol, "scenario": None, "header": "waiting",
        "next_seq": 0, "steps_applied": 0, "controller_leader": None, "controller_epoch": -1, "violated": "",
        "gap_reported_seq": -1, "waiting": _dumps([]), "core": None, "logs": None, "committed": None, "acked": None,
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
    out = {k: row[k] for k in STATE_FIELDS if k not in ("waiting", "core", "logs", "committed", "acked")}
    out["waiting"] = json.loads(bytes(row["waiting"]).decode("utf-8")) if row.get("waiting") is not None else []
    if row.get("core") is not None:
        out["document"] = document_from_fields(row["core"], row["logs"], row["committed"], row["acked"])
    return out
