"""The metadata quorum in the stream (docs/quorum.md "Streaming"): one metadata partition
(``__cluster_metadata``/N, one per compiled quorum scenario) is one more keyed state.

``apply_quorum_events`` is ``streaming.processor.process_batch``'s work for a quorum protocol
(kraft595 / kraft853 / kraft996), after the rows were put in ``seq`` order (the same sequence,
gap and duplicate rules as a partition's): the header (seq 0, type ``quorum``) builds the
``Quorum`` and its ``QuorumChecker``; each step row is parsed (``QUORUM_STEP_TABLE``), applied and
judged, and gives rows of the partition family's output kinds:

* ``timeline`` — one per step and server: ``role`` (the quorum role), ``alive``, ``leader_epoch``
  (the server's epoch), ``leo``, ``hw``, ``remote_leo`` (a leader's replicas' fetched offsets),
  ``epoch_cache`` (the server's epoch cache), ``leader`` / ``controller_epoch`` (the live leader of
  the newest epoch and its epoch, else null and the highest epoch), ``isr`` (the server's own voter
  set: the ids of the last VotersRecord in its log, else its bootstrap voters), ``halted`` null;
* ``log`` — each server's log changes (a truncation, then the records appended; a control record's
  ``value`` is ``LeaderChange`` or ``VotersRecord[ids]``);
* ``violations`` — the first step each quorum invariant broke (``replemu run``'s verdicts);
* ``errors`` — each error answer, ``error`` the JSON of ``replemu run``'s error object without its step;
* ``summary`` — one per metadata partition and micro-batch that applied a step; ``final`` is
  ``replemu run --json``'s ``final`` without the logs, ``isr`` the newest leader's voter set;
* ``quarantine`` — a row that cannot be applied, with its reason (a step the protocol refuses
  included: it consumes its ``seq`` and changes nothing).

The state row is the partition's schema (``STATE_SCHEMA``): ``core`` holds
``emulator.quorum_codec``'s document, ``controller_leader`` / ``controller_epoch`` the newest
leader and its epoch, ``violated`` the invariants broken so far.
"""

from __future__ import annotations

import json
from typing import Any

from emulator.quorum import Quorum
from emulator.quorum_codec import QuorumDocumentError, quorum_from_document, quorum_to_document
from emulator.quorum_invariants import QuorumChecker
from emulator.quorum_run import parse_quorum_header, quorum_snapshot, record_cell
from emulator.quorum_steps import describe_quorum_step, parse_quorum_step
from emulator.quorum_variants import QUORUM_VARIANT_NAMES, QUORUM_VARIANTS, quorum_variant_named
from emulator.scenario import ScenarioError, StepRefused
from emulator.steps import StepError
from emulator.variants import KnobError

from .schemas import HEADER_TYPE, QUORUM_HEADER_TYPE
from .state_codec import document_from_fields, pack_document

HEADER_KEYS = ("scenario", "voters", "observers", "knobs")


def is_quorum_protocol(protocol: str) -> bool:
    return protocol in QUORUM_VARIANT_NAMES


def parse_quorum_header_row(args_json: str):
    """The quorum header's args -> ``(name, voters, observers, knobs)``; ``ScenarioError`` / ``ValueError``."""
    args = json.loads(args_json)
    if not isinstance(args, dict):
        raise ScenarioError("header args must be a JSON object")
    unknown = sorted(str(k) for k in args if k not in HEADER_KEYS)
    if unknown:
        raise ScenarioError(f"unknown quorum header key {unknown[0][:40]!r} (allowed: {', '.join(HEADER_KEYS)})")
    name, voters, observers, knobs, _ = parse_quorum_header(
        {"name": args.get("scenario"), "voters": args.get("voters"), "observers": args.get("observers"),
         "knobs": args.get("knobs")}, source="header")
    return name, voters, observers, knobs


def newest_leader(q: Quorum) -> tuple[int | None, int]:
    """The live leader of the newest epoch and its epoch, else (None, the highest epoch)."""
    leaders = sorted(q.leaders(), key=lambda s: (s.epoch, s.id))
    if leaders:
        return leaders[-1].id, leaders[-1].epoch
    return None, max(s.epoch for s in q.servers.values())


def apply_quorum_events(topic, partition, st: dict[str, Any], waiting: dict[int, dict], batch, protocol: str,
                        knobs: dict[str, Any] | None) -> None:
    """Apply the rows of ``waiting`` that are next in sequence to the metadata partition's quorum
    (``st``: the state fields, updated in place; ``batch``: ``streaming.processor._Batch``)."""
    from .processor import _TIMELINE

    q: Quorum | None = None
    checker: QuorumChecker | None = None
    if st["header"] == "ok":
        q, checker = quorum_from_document(document_from_fields(st["core"]))
    seen = {n for n in (st["violated"] or "").split(",") if n}
    applied = 0
    while st["next_seq"] in waiting:
        e = waiting.pop(st["next_seq"])
        e.update(topic=topic, partition=partition)
        st["next_seq"] += 1
        seq = e["seq"]
        kind = e["type"]
        if kind is None or e["args"] is None:
            batch.quarantine(e, f"seq {seq}: missing type or args")
            continue
        if seq == 0 or kind in (QUORUM_HEADER_TYPE, HEADER_TYPE):
            if kind == HEADER_TYPE:
                batch.quarantine(e, f"seq {seq}: a partition header ({HEADER_TYPE!r}) in a stream of the metadata-quorum "
                                    f"protocol {protocol}: partition events stream under a partition protocol")
                if seq == 0:
                    st["header"] = "invalid"
                continue
            if seq != 0 or kind != QUORUM_HEADER_TYPE:
                batch.quarantine(e, f"seq {seq}: the metadata partition's header must be seq 0 with type {QUORUM_HEADER_TYPE!r}")
                if seq == 0:
                    st["header"] = "invalid"
                continue
            try:
                name, voters, observers, file_knobs = parse_quorum_header_row(e["args"])
                variant = quorum_variant_named(protocol, {**file_knobs, **(knobs or {})})
            except (ScenarioError, KnobError, ValueError, RecursionError) as exc:
                batch.quarantine(e, f"invalid quorum header: {str(exc)[:300] if not isinstance(exc, RecursionError) else 'nested too deeply'}")
                st["header"] = "invalid"
                continue
            q, checker = Quorum(voters, observers, variant), QuorumChecker()
            st["scenario"], st["header"] = name, "ok"
            batch.rows.scenario = name
            continue
        if st["header"] != "ok" or q is None or checker is None:
            batch.quarantine(e, f"seq {seq}: the metadata partition has no valid header (seq 0)")
            continue
        try:
            step = parse_quorum_step(kind, json.loads(e["args"]), tuple(sorted(q.servers)))
        except StepError as exc:
            batch.quarantine(e, f"seq {seq} ({str(kind)[:40]}): {exc}")
            continue
        except (ValueError, RecursionError) as exc:
            batch.quarantine(e, f"seq {seq}: args are not JSON: {exc if isinstance(exc, ValueError) else 'nested too deeply'}")
            continue
        description = describe_quorum_step(step)
        logs_before = {sid: list(s.log) for sid, s in q.servers.items()}
        number = q.step_number
        try:
            outcome = q.apply(step)
        except StepRefused as exc:
            q.step_number = number  # a refused step changed nothing else
            batch.quarantine(e, f"seq {seq} ({description}): refused under {protocol}: {exc}")
            continue
        found = checker.observe(q, outcome)
        _timeline(q, int(seq), description, batch, _TIMELINE)
        _log_changes(q, int(seq), logs_before, batch)
        for err in outcome.errors:
            batch.emit("errors", seq, at_step=seq, error=json.dumps(err, separators=(",", ":"), default=str))
        for name, detail in found:
            if name not in seen:
                seen.add(name)
                batch.emit("violations", seq, at_step=seq, invariant=name, detail=detail)
        st["steps_applied"] += 1
        applied += 1
    if q is not None and checker is not None and st["header"] == "ok":
        st["core"] = pack_document(quorum_to_document(q, checker))
        st["controller_leader"], st["controller_epoch"] = newest_leader(q)
        st["violated"] = ",".join(sorted(seen))
        if applied:
            _summary(q, st, batch, protocol)


def _timeline(q: Quorum, seq: int, description: str, batch, columns: tuple[str, ...]) -> None:
    if "timeline" not in batch.rows.blocks:
        batch.rows.block("timeline", columns)
    leader, epoch = newest_leader(q)
    append = batch.rows.timeline_rows.append
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


def _log_changes(q: Quorum, seq: int, before: dict[int, list], batch) -> None:
    """Each server's log change at this step: cut to the first offset that differs (a ``truncate``
    row, when records were there), then every record from there (``append`` rows)."""
    from .processor import _LOG

    for sid, s in sorted(q.servers.items()):
        old, new = before.get(sid, []), s.log
        if old == new:
            continue
        common = 0
        for a, b in zip(old, new):
            if a != b:
                break
            common += 1
        b_ = batch.rows.block("log", _LOG)
        if common < len(old):
            batch._log_row(b_, seq, sid, "truncate", common, None, None)
        for offset in range(common, len(new)):
            batch._log_row(b_, seq, sid, "append", offset, new[offset].epoch, record_cell(new[offset]))


def _summary(q: Quorum, st: dict, batch, protocol: str) -> None:
    leader, epoch = newest_leader(q)
    hws = [s.hw for s in q.servers.values()]
    voters = q.servers[leader].voter_ids() if leader is not None else ()
    preset = QUORUM_VARIANTS[protocol]
    overrides = {k: v for k, v in q.variant.knobs().items() if getattr(preset, k) != v}
    violated = st["violated"]
    batch.emit(
        "summary", st["steps_applied"], protocol=protocol, steps=st["steps_applied"], leader=leader,
        controller_epoch=epoch, isr=json.dumps(list(voters)), min_hw=min(hws), max_hw=max(hws),
        violations_so_far=len([n for n in violated.split(",") if n]), violated=violated, final_findings="[]",
        knobs=json.dumps(overrides, separators=(",", ":")) if overrides else None, compacted_prefix=None,
        final=json.dumps(quorum_snapshot(q, with_logs=False), separators=(",", ":")),
    )


__all__ = ["apply_quorum_events", "is_quorum_protocol", "parse_quorum_header_row", "QuorumDocumentError"]
