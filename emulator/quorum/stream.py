"""The metadata quorum in the stream (``emulator.quorum.family.QUORUM``'s stream hooks;
docs/quorum.md "Streaming"): one metadata partition (``__cluster_metadata``/N, one per compiled
quorum scenario) is one more keyed state of the stream.

``streaming.processor.process_batch`` puts its rows in ``seq`` order (the same sequence, gap and
duplicate rules as a partition's) and calls these: the header (seq 0, type ``quorum``) builds the
``Quorum`` and its ``QuorumChecker``; each step row is parsed (``QUORUM_STEP_TABLE``), applied and
judged, and gives rows of the partition family's output kinds (``emulator.family.StreamRows``):

* ``timeline`` -- one per step and server: ``role`` (the quorum role), ``alive``, ``leader_epoch``
  (the server's epoch), ``leo``, ``hw``, ``remote_leo`` (a leader's replicas' fetched offsets),
  ``epoch_cache`` (the server's epoch cache), ``leader`` / ``controller_epoch`` (the live leader of
  the newest epoch and its epoch, else null and the highest epoch), ``isr`` (the server's own voter
  set: the ids of the last VotersRecord in its log, else its bootstrap voters), ``halted`` null;
* ``log`` -- each server's log changes (a truncation, then the records appended; a control record's
  ``value`` is ``LeaderChange`` or ``VotersRecord[ids]``);
* ``violations`` -- the first step each quorum invariant broke (``replemu run``'s verdicts);
* ``errors`` -- each error answer, ``error`` the JSON of ``replemu run``'s error object without its step;
* ``summary`` -- one per metadata partition and micro-batch that applied a step; ``final`` is
  ``replemu run --json``'s ``final`` without the logs, ``isr`` the newest leader's voter set;
* a step the protocol refuses is quarantined (``StreamRowError``): it consumes its ``seq`` and
  changes nothing.

The state row is the partition's schema: ``core`` holds ``emulator.quorum.codec``'s document,
``controller_leader`` / ``controller_epoch`` the newest leader and its epoch, ``violated`` the
invariants broken so far.
"""

from __future__ import annotations

import json
from typing import Any

from ..family import StreamRowError, StreamRows
from ..partition_stream import PARTITION_HEADER_TYPE
from ..scenario import ScenarioError, StepRefused
from ..steps import StepError
from .codec import quorum_from_document, quorum_to_document
from .invariants import QuorumChecker
from .model import Quorum
from .run import parse_quorum_header, quorum_snapshot, record_cell
from .steps import QUORUM_STEP_TABLE
from .variants import QUORUM_VARIANT_TABLE

QUORUM_HEADER_TYPE = "quorum"  # the ``type`` of a metadata partition's header row (seq 0)
HEADER_KEYS = ("scenario", "voters", "observers", "knobs")


class QuorumStream:
    """A metadata partition of the stream: the quorum, its checker, and the invariants reported."""

    def __init__(self, q: Quorum, checker: QuorumChecker, seen: set[str]) -> None:
        self.q = q
        self.checker = checker
        self.seen = seen


def misplaced_header(seq: int, kind: Any, protocol: str) -> str:
    if kind == PARTITION_HEADER_TYPE:
        return (f"seq {seq}: a partition header ({PARTITION_HEADER_TYPE!r}) in a stream of the metadata-quorum "
                f"protocol {protocol}: partition events stream under a partition protocol")
    return f"seq {seq}: the metadata partition's header must be seq 0 with type {QUORUM_HEADER_TYPE!r}"


def parse_header(args_json: str) -> tuple[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]]:
    """The quorum header's args -> ``(name, (voters, observers, knobs))``; ``ScenarioError`` / ``ValueError``."""
    args = json.loads(args_json)
    if not isinstance(args, dict):
        raise ScenarioError("header args must be a JSON object")
    unknown = sorted(str(k) for k in args if k not in HEADER_KEYS)
    if unknown:
        raise ScenarioError(f"unknown quorum header key {unknown[0][:40]!r} (allowed: {', '.join(HEADER_KEYS)})")
    name, voters, observers, knobs, _ = parse_quorum_header(
        {"name": args.get("scenario"), "voters": args.get("voters"), "observers": args.get("observers"),
         "knobs": args.get("knobs")}, source="header")
    return name, (voters, observers, knobs)


def start_quorum(header: tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]], variant: Any,
                 knobs: dict[str, Any] | None) -> QuorumStream:
    """The metadata partition's quorum: ``variant`` with the header's knobs and the stream's
    ``knobs`` (which win) set at once."""
    voters, observers, file_knobs = header
    return QuorumStream(Quorum(voters, observers, variant.with_knobs({**file_knobs, **(knobs or {})})),
                        QuorumChecker(), set())


def parse_step_row(seq: int, kind: Any, args_json: str, ids: tuple[int, ...]) -> tuple[Any, str]:
    args = json.loads(args_json)
    try:
        step = QUORUM_STEP_TABLE.parse(kind, args, ids)
    except StepError as exc:
        raise StreamRowError(f"seq {seq} ({str(kind)[:40]}): {exc}") from None
    return step, QUORUM_STEP_TABLE.describe(step)


def newest_leader(q: Quorum) -> tuple[int | None, int]:
    """The live leader of the newest epoch and its epoch, else (None, the highest epoch)."""
    leaders = sorted(q.leaders(), key=lambda s: (s.epoch, s.id))
    if leaders:
        return leaders[-1].id, leaders[-1].epoch
    return None, max(s.epoch for s in q.servers.values())


def apply_step(m: QuorumStream, step: Any, seq: int, description: str, rows: StreamRows) -> None:
    q = m.q
    logs_before = {sid: list(s.log) for sid, s in q.servers.items()}
    number = q.step_number
    try:
        outcome = q.apply(step)
    except StepRefused as exc:
        q.step_number = number  # a refused step changed nothing else
        raise StreamRowError(f"seq {seq} ({description}): refused under {q.variant.name}: {exc}") from None
    found = m.checker.observe(q, outcome)
    _timeline(q, seq, description, rows)
    _log_changes(q, logs_before, rows)
    for err in outcome.errors:
        rows.errors.append((seq, json.dumps(err, separators=(",", ":"), default=str)))
    for name, detail in found:
        if name not in m.seen:
            m.seen.add(name)
            rows.violations.append((seq, name, detail))


def _timeline(q: Quorum, seq: int, description: str, rows: StreamRows) -> None:
    leader, epoch = newest_leader(q)
    append = rows.timeline.append
    for position, (sid, s) in enumerate(sorted(q.servers.items())):
        remote = None
        if s.leader_state is not None:
            # each server's current incarnation (its key now: a voter back with a new disk shows its new copy)
            states = s.leader_state.replicas
            remote = json.dumps({str(r): states[k].end_offset for r, k in
                                 ((r, s.replica_state_key(q.servers[r].key)) for r in sorted(q.servers))
                                 if k in states and states[k].end_offset is not None})
        append((seq, position, description, sid, s.role.value, s.alive, None, s.epoch, s.leo, s.hw, remote,
                json.dumps(s.cache.as_pairs()), leader, epoch, json.dumps(list(s.voter_ids()))))


def _log_changes(q: Quorum, before: dict[int, list], rows: StreamRows) -> None:
    """Each server's log change at this step: cut to the first offset that differs (a ``truncate``
    row, when records were there), then every record from there (``append`` rows)."""
    for sid, s in sorted(q.servers.items()):
        old, new = before.get(sid, []), s.log
        if old == new:
            continue
        common = 0
        for a, b in zip(old, new):
            if a != b:
                break
            common += 1
        if common < len(old):
            rows.log.append((sid, "truncate", common, None, None))
        for offset in range(common, len(new)):
            rows.log.append((sid, "append", offset, new[offset].epoch, record_cell(new[offset])))


def verdicts(m: QuorumStream) -> tuple[int | None, int, tuple[str, ...]]:
    leader, epoch = newest_leader(m.q)
    return leader, epoch, tuple(sorted(m.seen))


def summary(m: QuorumStream, steps: int) -> dict[str, Any]:
    q = m.q
    leader, epoch = newest_leader(q)
    hws = [s.hw for s in q.servers.values()]
    voters = q.servers[leader].voter_ids() if leader is not None else ()
    preset = QUORUM_VARIANT_TABLE.named(q.variant.name)
    overrides = {k: v for k, v in q.variant.knobs().items() if getattr(preset, k) != v}
    violated = ",".join(sorted(m.seen))
    return {
        "protocol": q.variant.name, "steps": steps, "leader": leader, "controller_epoch": epoch,
        "isr": json.dumps(list(voters)), "min_hw": min(hws), "max_hw": max(hws),
        "violations_so_far": len([n for n in violated.split(",") if n]), "violated": violated, "final_findings": "[]",
        "knobs": json.dumps(overrides, separators=(",", ":")) if overrides else None, "compacted_prefix": None,
        "final": json.dumps(quorum_snapshot(q, with_logs=False), separators=(",", ":")),
    }


def document(m: QuorumStream) -> dict[str, Any]:
    return quorum_to_document(m.q, m.checker)


def restore(doc: Any, violated: str) -> QuorumStream:
    q, checker = quorum_from_document(doc)
    return QuorumStream(q, checker, {n for n in (violated or "").split(",") if n})
