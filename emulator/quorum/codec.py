"""A metadata quorum's whole state as a JSON document, and back: what the stream keeps per
metadata partition between micro-batches (``emulator.quorum.stream``), as ``emulator.state`` is
for a partition's replay.

``quorum_to_document(quorum, checker)`` holds every server (role, epoch, vote, log, epoch cache,
quorum-state file, election and leader state), every message in flight on every link (in order),
the step counter, the variant (preset name and knobs) and the checker's ghost state (leaders per
epoch, committed records).  ``quorum_from_document`` rebuilds objects that step exactly as the
originals would: a stream cut into any number of micro-batches gives the rows one batch gives.

The encoding is generic over the quorum's own dataclasses (``_CLASSES``): a dataclass is
``{"@": class name, "f": {field: value}}``; a tuple ``{"T": [...]}``, a set ``{"S": [...]}``
(sorted), a deque ``{"Q": [...]}``, a dict ``{"D": [[key, value], ...]}`` (insertion order kept),
an enum ``{"E": class name, "v": value}``, an epoch cache ``{"C": semantics, "e": pairs}``; lists,
strings, numbers, booleans and null as themselves.  Nothing is pickled.  Standard library only.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from enum import Enum
from typing import Any

from ..epoch_cache import LeaderEpochCache
from . import state as quorum_state
from .invariants import QuorumChecker
from .model import Quorum, QuorumOutcome
from .variants import QUORUM_KNOBS, QUORUM_VARIANTS

QUORUM_DOCUMENT_VERSION = 1

_CLASSES: dict[str, type] = {c.__name__: c for c in (
    quorum_state.QuorumRecord, quorum_state.ElectionState, quorum_state.VoteRequest, quorum_state.VoteResponse,
    quorum_state.BeginQuorumEpochRequest, quorum_state.BeginQuorumEpochResponse, quorum_state.EndQuorumEpochRequest,
    quorum_state.EndQuorumEpochResponse, quorum_state.FetchRequest, quorum_state.FetchResponse,
    quorum_state.UpdateVoterRequest, quorum_state.UpdateVoterResponse,
    quorum_state.ReplicaState, quorum_state.PendingVoterChange, quorum_state.LeaderState, quorum_state.Server,
    QuorumChecker,
)}
_ENUMS: dict[str, type] = {c.__name__: c for c in (quorum_state.QuorumRole, quorum_state.ControlType)}
_EFFECTS: dict[str, type] = {c.__name__: c for c in (quorum_state.BecameLeader, quorum_state.HighWatermarkAdvanced,
                                                     quorum_state.VotersAppended, quorum_state.Truncated)}


class QuorumDocumentError(ValueError):
    """A document this build cannot read (another version, or damaged)."""


def _enc(v: Any) -> Any:
    if isinstance(v, Enum):  # before str: the quorum's enums are str enums
        return {"E": type(v).__name__, "v": v.value}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, tuple):
        return {"T": [_enc(x) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {"S": sorted(_enc(x) for x in v)}
    if isinstance(v, deque):
        return {"Q": [_enc(x) for x in v]}
    if isinstance(v, dict):
        return {"D": [[_enc(k), _enc(x)] for k, x in v.items()]}
    if isinstance(v, LeaderEpochCache):
        return {"C": v.semantics, "e": v.as_pairs()}
    name = type(v).__name__
    if name in _CLASSES and dataclasses.is_dataclass(v):
        return {"@": name, "f": {f.name: _enc(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    raise QuorumDocumentError(f"cannot encode a {name}")


def _dec(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if not isinstance(v, dict) or len(v) not in (1, 2):
        raise QuorumDocumentError(f"unreadable value {str(v)[:80]}")
    if "T" in v:
        return tuple(_dec(x) for x in v["T"])
    if "S" in v:
        return {_dec(x) for x in v["S"]}
    if "Q" in v:
        return deque(_dec(x) for x in v["Q"])
    if "D" in v:
        return {_dec(k): _dec(x) for k, x in v["D"]}
    if "E" in v:
        return _ENUMS[v["E"]](v["v"])
    if "C" in v:
        return LeaderEpochCache(v["C"], v["e"])
    if "@" in v:
        cls = _CLASSES.get(v["@"])
        if cls is None:
            raise QuorumDocumentError(f"unknown class {str(v['@'])[:40]}")
        return cls(**{k: _dec(x) for k, x in v["f"].items()})
    raise QuorumDocumentError(f"unreadable value {str(v)[:80]}")


def quorum_to_document(q: Quorum, checker: QuorumChecker) -> dict[str, Any]:
    """The quorum and its checker as JSON-able data (``quorum_from_document`` reads it back)."""
    return {
        "version": QUORUM_DOCUMENT_VERSION,
        "variant": {"name": q.variant.name, "knobs": q.variant.knobs()},
        "step_number": q.step_number,
        "servers": _enc(q.servers),
        "in_flight": _enc(q.in_flight),
        "checker": _enc(checker),
        "pending": None if q.pending is None else {  # what the servers did at start, not yet reported
            "errors": q.pending.errors, "events": q.pending.events,
            "effects": [[type(e).__name__, list(e)] for e in q.pending.effects]},
    }


def quorum_from_document(doc: dict[str, Any]) -> tuple[Quorum, QuorumChecker]:
    """The ``(Quorum, QuorumChecker)`` a document holds; ``QuorumDocumentError`` when unreadable."""
    if not isinstance(doc, dict) or doc.get("version") != QUORUM_DOCUMENT_VERSION:
        raise QuorumDocumentError(f"quorum document version {doc.get('version') if isinstance(doc, dict) else None}, "
                                  f"this build reads {QUORUM_DOCUMENT_VERSION}")
    try:
        v = doc["variant"]
        variant = dataclasses.replace(QUORUM_VARIANTS[v["name"]], **{k: v["knobs"][k] for k in QUORUM_KNOBS})
        servers = _dec(doc["servers"])
        q = Quorum((min(servers),), (), variant)
        q.servers = servers
        q.in_flight = _dec(doc["in_flight"])
        q.step_number = int(doc["step_number"])
        q._out = QuorumOutcome()
        pending = doc.get("pending")
        q.pending = None if pending is None else QuorumOutcome(
            list(pending["errors"]), list(pending["events"]),
            [_EFFECTS[name](*fields) for name, fields in pending["effects"]])
        checker = _dec(doc["checker"])
    except (KeyError, TypeError, ValueError) as exc:
        raise QuorumDocumentError(f"damaged quorum document: {type(exc).__name__}: {str(exc)[:200]}") from None
    return q, checker
