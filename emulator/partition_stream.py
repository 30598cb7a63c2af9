"""The partition family in the stream (``emulator.partition_family.PARTITION``'s stream hooks;
docs/streaming.md): a stream partition's header row, its ``Replay``, and the rows each step gives.

``streaming.processor.process_batch`` puts a partition's event rows in ``seq`` order and calls
these; they hand the rows over as plain tuples (``emulator.family.StreamRows``):

* ``timeline`` -- one per step and replica: its role, liveness, epoch, LEO, HW, a leader's remote
  LEOs, its epoch cache, and the controller's leader, epoch and ISR;
* ``log`` -- one per record a replica appended, one per truncation, and the epoch-cache entries
  compaction dropped (``epoch``): the logs' history, from which ``replemu results`` rebuilds them;
* ``violations`` / ``losses`` / ``errors`` -- the checker's verdicts and the step's error answers;
* ``summary`` -- ``replemu run --json``'s verdicts and ``final`` (without the logs) after a batch.
"""

from __future__ import annotations

import json
from typing import Any

from .bounds import short_repr
from .effects import Appended, Truncated
from .family import StreamRowError, StreamRows
from .partition import Partition
from .replica import Replica
from .result import compacted_prefix, state_snapshot
from .run import Replay
from .scenario import ScenarioError, parse_brokers, parse_partition, step_from_mapping
from .state import from_document, to_document
from .steps import STEP_TABLE

PARTITION_HEADER_TYPE = "partition"  # the ``type`` of a partition's header row (seq 0)
HEADER_KEYS = ("scenario", "replicas", "brokers", "config")  # brokers: optional, as a scenario file's


def parse_header(args_json: str) -> tuple[str, tuple[tuple[int, ...], Any, tuple[int, ...]]]:
    """The partition header's ``{"scenario", "replicas", "config"}`` (and, optionally, the
    scenario's ``brokers``) -> (name, (replicas, Config, the other brokers))."""
    args = json.loads(args_json)
    if not isinstance(args, dict):
        raise ScenarioError("header args must be a JSON object")
    unknown = sorted(set(args) - set(HEADER_KEYS))
    if unknown:
        raise ScenarioError(f"unknown header key {short_repr(unknown[0])}")
    name, replicas, config = parse_partition({"name": args.get("scenario"), "replicas": args.get("replicas"),
                                              "config": args.get("config")}, source="header")
    brokers = parse_brokers({"brokers": args["brokers"]} if "brokers" in args else {}, "header", replicas)
    return name, (replicas, config, brokers)


def start_replay(header: tuple[tuple[int, ...], Any, tuple[int, ...]], variant: Any,
                 knobs: dict[str, Any] | None) -> Replay:
    """The partition's replay: ``variant``, then the header's ``config.knobs``, then ``knobs``
    (the stream's ``--knob``s, which win)."""
    replicas, config, brokers = header
    return Replay(replicas, config, variant.with_knobs(dict(config.knobs)).with_knobs(knobs or {}), brokers=brokers)


def parse_step_row(where: str, seq: int, kind: Any, args_json: str, ids: tuple[int, ...]) -> tuple[Any, str]:
    """``(step, STEP_TABLE.describe(step))`` of one event row; ``StreamRowError`` (the scenario's
    message) for a step the table refuses, ``ValueError`` / ``RecursionError`` for args not JSON."""
    args = json.loads(args_json)
    try:
        step = step_from_mapping(where, seq, {kind: args}, ids)
    except ScenarioError as exc:
        raise StreamRowError(str(exc)) from None
    return step, STEP_TABLE.describe(step)


def _int_list_json(values: tuple[int, ...]) -> str:
    """``json.dumps(list(values))`` for ints, without the encoder's per-call cost."""
    if all(type(v) is int for v in values):
        return "[" + ", ".join(map(str, values)) + "]"
    return json.dumps(list(values))


class PartitionStreamRows(StreamRows):
    """A partition's ``StreamRows`` with the encodings of one micro-batch kept: the replica ids in
    order, the ISR's and the remote LEOs' JSON by value, each replica's epoch cache as JSON
    (re-encoded only when its length or ends changed)."""

    def __init__(self, timeline: list[tuple]) -> None:
        super().__init__(timeline)
        self.ids: list[int] = []
        self.lists: dict[tuple[int, ...], str] = {}
        self.objects: dict[tuple[tuple[int, Any], ...], str] = {}
        self.cache_json: dict[int, tuple[tuple[int, Any, Any], str]] = {}

    def timeline_rows(self, p: Partition, seq: int, description: str) -> None:
        """One timeline tuple per replica after a step."""
        c = p.controller
        leader, epoch = c.leader, c.leader_epoch
        isr = self.list_json(tuple(sorted(c.isr)))
        replicas = p.replicas
        ids = self.ids
        if len(ids) != len(replicas):  # the set of replicas never changes
            ids = self.ids = sorted(replicas)
        append = self.timeline.append
        for position, rid in enumerate(ids):
            r = replicas[rid]
            leadership = r.leadership if r.presumes_leadership else None
            append((seq, position, description, rid, r.role._value_, r.alive, r.halted, r.leader_epoch, r.leo, r.hw,
                    None if leadership is None else self.remote_leo_json(leadership.remote_leo), self.cache_of(r),
                    leader, epoch, isr))

    def list_json(self, value: tuple[int, ...]) -> str:
        """A small list of ints as JSON (``json.dumps``'s text), encoded once per batch."""
        known = self.lists.get(value)
        if known is None:
            known = self.lists[value] = _int_list_json(value)
        return known

    def remote_leo_json(self, remote_leo: dict[int, Any]) -> str:
        """A leader's remote LEOs as a JSON object keyed by replica id, encoded once per value."""
        key = tuple(sorted(remote_leo.items()))
        known = self.objects.get(key)
        if known is None:
            if all(type(v) is int for _, v in key):
                known = "{" + ", ".join([f'"{f}": {v}' for f, v in key]) + "}"
            else:
                known = json.dumps({str(f): v for f, v in key})
            self.objects[key] = known
        return known

    def cache_of(self, r: Replica) -> str:
        """The replica's epoch cache as JSON, re-encoded only when it changed."""
        entries = r.cache.entries
        key = (len(entries), entries[0] if entries else None, entries[-1] if entries else None)
        known = self.cache_json.get(r.id)
        if known is None or known[0] != key:
            known = self.cache_json[r.id] = (key, "[" + ", ".join([f"[{e}, {o}]" for e, o in r.cache.as_pairs()]) + "]")
        return known[1]

    def log_changes(self, p: Partition, effects: list[Any]) -> None:
        """The step's log changes: one row per appended record, one per truncation."""
        log_rows = self.log
        for e in effects:
            if isinstance(e, Appended):
                log = p.replicas[e.replica].log
                # (a copy a reassignment deleted later in the step keeps only its rows up to what
                # is left: its truncate row follows)
                for o in range(e.base, min(e.end, log.end)):
                    epoch, value = log[o]
                    log_rows.append((e.replica, "append", o, epoch, value))
            elif isinstance(e, Truncated):
                log_rows.append((e.replica, "truncate", e.to, None, None))


def apply_step(replay: Replay, step: Any, seq: int, description: str, rows: StreamRows) -> None:
    """Step the replay; its timeline, log changes, verdicts and errors into ``rows``.  The stream
    keeps no output history: what was handed over is forgotten (``Replay.forget_reported``)."""
    assert isinstance(rows, PartitionStreamRows)
    p, g = replay.partition, replay.checker
    losses_before = len(g.losses)
    out = replay.apply(step)
    rows.timeline_rows(p, seq, description)
    rows.log_changes(p, out.effects)
    for v in out.violations:
        rows.violations.append((v["step"], v["invariant"], v["detail"]))
    for loss in g.losses[losses_before:]:
        rows.losses.append((loss["step"], loss["offset"], loss["value"], loss["acked"], loss["allowed"]))
    for err in out.errors:
        rows.errors.append((err["step"], err["error"]))
    replay.forget_reported()


def compact(replay: Replay, min_records: int, rows: StreamRows) -> None:
    """``Replay.compact(min_records)``, asked only when it can drop anything (the prefix it
    compacts lies below every replica's LEO); the epoch-cache entries it drops become ``epoch``
    log rows (``replemu results`` puts them back)."""
    p = replay.partition
    r = next(iter(p.replicas.values()))
    if r.leo - p.compacted_offset < max(min_records, 1):
        return
    compaction = replay.compact(min_records)
    if compaction is not None and compaction.cold_cache:
        for rid, entries in sorted(compaction.cold_cache.items()):
            for epoch, start in entries:
                rows.log.append((rid, "epoch", start, epoch, None))


def verdicts(replay: Replay) -> tuple[int | None, int, tuple[str, ...]]:
    c = replay.partition.controller
    return c.leader, c.leader_epoch, tuple(sorted(replay.checker.violated))


def summary(replay: Replay, steps: int) -> dict[str, Any]:
    p, g = replay.partition, replay.checker
    c = p.controller
    hws = [r.hw for r in p.replicas.values()]
    knobs = replay.knobs_in_force()
    return {
        "protocol": p.variant.name, "steps": steps, "leader": c.leader, "controller_epoch": c.leader_epoch,
        "isr": json.dumps(sorted(c.isr)), "min_hw": min(hws), "max_hw": max(hws),
        "violations_so_far": len(g.violated), "violated": ",".join(sorted(g.violated)),
        "final_findings": json.dumps(g.final_findings(p), separators=(",", ":")),
        "knobs": None if knobs is None else json.dumps(knobs, separators=(",", ":")),
        "compacted_prefix": json.dumps(compacted_prefix(p)) if p.compacted_offset else None,
        "final": json.dumps(state_snapshot(p, with_logs=False), separators=(",", ":")),
    }


def document(replay: Replay) -> dict[str, Any]:
    return to_document(replay)


def restore(doc: Any) -> Replay:
    return from_document(doc)
