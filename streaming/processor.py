"""The per-partition work of one micro-batch: decode, sort by sequence, step the core, encode.

``process_batch`` is what the ``applyInPandasWithState`` function calls for one group, kept free
of Spark so it can be tested and benchmarked alone.  Rows are applied strictly in ``seq`` order:
a row ahead of a gap waits in the state until the gap fills (and a gap that outlives the state
timeout is reported once in quarantine); a row that cannot be applied — duplicate or
out-of-order sequence, unknown step type, bad arguments, replica not in the partition,
unreadable line — goes to quarantine with its reason and is never silently dropped.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import orjson

from emulator.bounds import short_repr
from emulator.effects import Appended, Truncated
from emulator.quorum_variants import QUORUM_VARIANT_NAMES
from emulator.result import compacted_prefix, state_snapshot
from emulator.run import Replay, effective_variant
from emulator.scenario import ScenarioError, parse_brokers, parse_partition, step_from_mapping
from emulator.steps import describe_step

from .schemas import HEADER_TYPE, KIND_COLUMNS, OUTPUT_COLUMNS, TICK_TYPE, arrow_schema
from .state_codec import (
    _dumps,
    empty_state,
    pack_generator,
    pack_replay,
    unpack_generator,
    unpack_replay,
)


def _raw(event: dict) -> str:
    return json.dumps({k: event.get(k) for k in ("topic", "partition", "seq", "type", "args")}, default=str)


# Columns every row of a group shares: kept once per group, filled in when rows are read.
GROUP_CONSTANTS = ("topic", "partition", "scenario")
_PAYLOAD_COLUMNS = {kind: tuple(c for c in cols if c not in GROUP_CONSTANTS) for kind, cols in KIND_COLUMNS.items()}
_LOG = ("seq", "idx", "replica", "op", "offset", "epoch", "value")
# A timeline row (``OutputRows.timeline_rows``): these values, in this order.
_TIMELINE = ("seq", "idx", "event", "replica", "role", "alive", "halted", "leader_epoch",
             "leo", "hw", "remote_leo", "epoch_cache", "leader", "controller_epoch", "isr")


class OutputRows:
    """One group's output rows, kept column-wise per kind (``OUTPUT_SCHEMA`` columns).

    The group's constants (``topic``, ``partition``, ``scenario``) are held once, not per row.
    The timeline, by far the most rows, is kept as one tuple per row (``_TIMELINE`` order) and
    turned into columns only when read: one tuple per replica and step is cheaper to build than
    a value appended to each of fifteen lists.
    ``payload()`` is what the state function hands Spark (read back by ``tables_from_payloads``); ``columns()``
    gives every output column as a list (None where a kind has no such column); iterating gives
    the rows as dicts, kind by kind in emission order.
    """

    def __init__(self, topic=None, partition=None, scenario=None) -> None:
        self.topic, self.partition, self.scenario = topic, partition, scenario
        self.blocks: dict[str, dict[str, list]] = {}
        self.counts: dict[str, int] = {}
        self.timeline_rows: list[tuple] = []

    def block(self, kind: str, names: tuple[str, ...]) -> dict[str, list]:
        b = self.blocks.get(kind)
        if b is None:
            b = self.blocks[kind] = {name: [] for name in names}
            self.counts[kind] = 0
        return b

    def __len__(self) -> int:
        return sum(self.counts.values()) + len(self.timeline_rows)

    def constants(self) -> dict[str, Any]:
        """The ``GROUP_CONSTANTS`` of this group."""
        return {"topic": self.topic, "partition": self.partition, "scenario": self.scenario}

    def _kinds(self):
        """``(kind, rows, columns)`` in emission order (a kind's place: its first row)."""
        for kind, b in self.blocks.items():
            if kind == "timeline":
                rows = self.timeline_rows
                yield kind, len(rows), (dict(zip(_TIMELINE, map(list, zip(*rows)))) if rows else {c: [] for c in _TIMELINE})
            else:
                yield kind, self.counts[kind], b

    def columns(self) -> dict[str, list]:
        out: dict[str, list] = {c: [] for c in OUTPUT_COLUMNS}
        const = self.constants()
        for kind, n, b in self._kinds():
            out["kind"].extend([kind] * n)
            for c in OUTPUT_COLUMNS[1:]:
                if c in const and c in KIND_COLUMNS[kind]:
                    out[c].extend([const[c]] * n)
                else:
                    out[c].extend(b[c] if c in b else [None] * n)
        return out

    def __iter__(self):
        cols = self.columns()
        for i in range(len(self)):
            yield {c: cols[c][i] for c in OUTPUT_COLUMNS}

    def payload(self) -> bytes:
        """The group's rows as one UTF-8 JSON object: ``{"topic", "partition", "scenario",
        "kinds": {kind: {"rows": n, "columns": {column: [value, ...]}}}}``, each kind's columns
        its ``KIND_COLUMNS`` without the group constants (orjson). One C-encoded string per group is far
        cheaper to build than an Arrow table per kind; the sink turns a whole micro-batch into
        Arrow at once (``tables_from_payloads``)."""
        kinds = {}
        for kind, n, b in self._kinds():
            kinds[kind] = {"rows": n, "columns": {c: b.get(c, [None] * n) for c in _PAYLOAD_COLUMNS[kind]}}
        return orjson.dumps({**self.constants(), "kinds": kinds})


# Payloads decoded into Python lists before they become Arrow columns: a micro-batch's rows as
# Python objects are many times their Arrow size, so the sink converts every this many payloads
# and holds Arrow, not a whole batch of Python values (at 10,000 partitions, hundreds of MiB).
PAYLOADS_PER_CHUNK = 256


def tables_from_payloads(payloads: Iterable[bytes]) -> tuple[dict[str, Any], int]:
    """Many groups' payloads (``OutputRows.payload``) -> one Arrow table per kind (``arrow_schema``;
    a chunk per ``PAYLOADS_PER_CHUNK`` payloads, which the sink's sort joins), rows in payload
    order, and how many partitions had rows other than quarantine."""
    import pyarrow as pa

    cols: dict[str, dict[str, list]] = {}
    parts: dict[str, list] = {}
    touched = set()

    def convert() -> None:
        for kind, c in cols.items():
            schema = arrow_schema(kind)
            parts.setdefault(kind, []).append(pa.table([pa.array(c[f.name], f.type) for f in schema], schema=schema))
        cols.clear()

    for i, raw in enumerate(payloads, start=1):
        doc = orjson.loads(raw)
        const = {c: doc[c] for c in GROUP_CONSTANTS}
        if any(kind != "quarantine" for kind in doc["kinds"]):
            touched.add((doc["topic"], doc["partition"]))
        for kind, part in doc["kinds"].items():
            n = part["rows"]
            target = cols.get(kind)
            if target is None:
                target = cols[kind] = {c: [] for c in KIND_COLUMNS[kind]}
            for c in KIND_COLUMNS[kind]:
                target[c].extend([const[c]] * n if c in const else part["columns"][c])
        if i % PAYLOADS_PER_CHUNK == 0:
            convert()
    convert()
    tables = {kind: pa.concat_tables(chunks) if len(chunks) > 1 else chunks[0] for kind, chunks in parts.items()}
    return tables, len(touched)




class _Batch:
    """One group's outputs, in emission order within each kind."""

    def __init__(self, topic, partition, scenario):
        self.rows = OutputRows(topic, partition, scenario)
        self._idx: dict[tuple[str, int], int] = {}
        self._cache_json: dict[int, tuple[tuple, str]] = {}
        self._lists: dict[tuple, str] = {}
        self._objects: dict[tuple, str] = {}
        self._ids: list[int] | None = None

    def _next_idx(self, kind: str, seq) -> int:
        """The row's order among the rows of one kind emitted at one step."""
        key = (kind, -1 if seq is None else int(seq))
        idx = self._idx.get(key, 0)
        self._idx[key] = idx + 1
        return idx

    def emit(self, kind: str, seq, **fields) -> None:
        idx = self._next_idx(kind, seq)
        fields.update(seq=seq, idx=idx)
        b = self.rows.block(kind, tuple(fields))
        if len(b) != len(fields) or any(name not in b for name in fields):  # a kind emitted with other fields
            for name in fields:
                b.setdefault(name, [None] * self.rows.counts[kind])
            for name in b:
                if name not in fields:
                    fields[name] = None
        for name, value in fields.items():
            b[name].append(value)
        self.rows.counts[kind] += 1

    def timeline(self, p, seq: int, description: str) -> None:
        """One timeline row per replica after a step (a tuple in ``_TIMELINE`` order)."""
        if "timeline" not in self.rows.blocks:
            self.rows.block("timeline", _TIMELINE)  # its place among the kinds; rows go to timeline_rows
        c = p.controller
        leader, epoch = c.leader, c.leader_epoch
        isr = self._json(tuple(sorted(c.isr)))
        replicas = p.replicas
        append = self.rows.timeline_rows.append
        for position, rid in enumerate(self._sorted_ids(replicas)):
            r = replicas[rid]
            append((seq, position, description, rid, r.role._value_, r.alive, r.halted, r.leader_epoch, r.leo, r.hw,
                    self._remote_leo(r.leadership.remote_leo) if r.presumes_leadership else None, self._cache(r),
                    leader, epoch, isr))

    def _sorted_ids(self, replicas: dict) -> list[int]:
        """The partition's replica ids in order (the set of replicas never changes)."""
        ids = self._ids
        if ids is None or len(ids) != len(replicas):
            ids = self._ids = sorted(replicas)
        return ids

    def log_changes(self, p, seq, effects) -> None:
        """The step's log changes as rows: one per appended record, one per truncation
        (the log's history; ``replemu results`` replays it to rebuild every log)."""
        b = None
        for e in effects:
            if isinstance(e, Appended):
                b = b or self.rows.block("log", _LOG)
                log = p.replicas[e.replica].log
                # (a copy a reassignment deleted later in the step keeps only its rows up to what
                # is left: its truncate row follows)
                for o in range(e.base, min(e.end, log.end)):
                    epoch, value = log[o]
                    self._log_row(b, seq, e.replica, "append", o, epoch, value)
            elif isinstance(e, Truncated):
                b = b or self.rows.block("log", _LOG)
                self._log_row(b, seq, e.replica, "truncate", e.to, None, None)

    def cold_cache(self, seq, cold: dict[int, list[tuple[int, int]]]) -> None:
        """Epoch-cache entries compaction dropped from the state, as rows (results put them back)."""
        b = self.rows.block("log", _LOG)
        for rid, entries in sorted(cold.items()):
            for epoch, start in entries:
                self._log_row(b, seq, rid, "epoch", start, epoch, None)

    def _log_row(self, b, seq, replica, op, offset, epoch, value) -> None:
        idx = self._next_idx("log", seq)
        for name, v in (("seq", seq), ("idx", idx), ("replica", replica), ("op", op), ("offset", offset), ("epoch", epoch),
                        ("value", value)):
            b[name].append(v)
        self.rows.counts["log"] += 1

    def _json(self, value: tuple) -> str:
        """A small list of ints as JSON (``json.dumps``'s text), encoded once per batch."""
        known = self._lists.get(value)
        if known is None:
            known = self._lists[value] = _int_list_json(value)
        return known

    def _remote_leo(self, remote_leo: dict[int, int]) -> str:
        """A leader's remote LEOs as a JSON object keyed by replica id, encoded once per value."""
        key = tuple(sorted(remote_leo.items()))
        known = self._objects.get(key)
        if known is None:
            if all(type(v) is int for _, v in key):
                known = "{" + ", ".join([f'"{f}": {v}' for f, v in key]) + "}"
            else:
                known = json.dumps({str(f): v for f, v in key})
            self._objects[key] = known
        return known

    def _cache(self, r) -> str:
        """The replica's epoch cache as JSON, re-encoded only when it changed."""
        entries = r.cache.entries
        key = (len(entries), entries[0] if entries else None, entries[-1] if entries else None)
        known = self._cache_json.get(r.id)
        if known is None or known[0] != key:
            known = self._cache_json[r.id] = (key, "[" + ", ".join([f"[{e}, {o}]" for e, o in r.cache.as_pairs()]) + "]")
        return known[1]

    def quarantine(self, event: dict, reason: str) -> None:
        self.emit("quarantine", event.get("seq"), reason=reason, raw=event.get("raw") or _raw(event))


def _int_list_json(values) -> str:
    """``json.dumps(list(values))`` for ints, without the encoder's per-call cost."""
    if all(type(v) is int for v in values):
        return "[" + ", ".join(map(str, values)) + "]"
    return json.dumps(list(values))


HEADER_KEYS = ("scenario", "replicas", "brokers", "config")  # brokers: optional, as a scenario file's


def parse_header(args_json: str):
    """The partition header's ``{"scenario", "replicas", "config"}`` (and, optionally, the
    scenario's ``brokers``) -> (name, replicas, Config, the other brokers)."""
    args = json.loads(args_json)
    if not isinstance(args, dict):
        raise ScenarioError("header args must be a JSON object")
    unknown = sorted(set(args) - set(HEADER_KEYS))
    if unknown:
        raise ScenarioError(f"unknown header key {short_repr(unknown[0])}")
    name, replicas, config = parse_partition({"name": args.get("scenario"), "replicas": args.get("replicas"),
                                              "config": args.get("config")}, source="header")
    brokers = parse_brokers({"brokers": args["brokers"]} if "brokers" in args else {}, "header", replicas)
    return name, replicas, config, brokers


# Compaction runs after every step once the stable prefix holds this many records beyond the last
# compaction: the state keeps a window of at most this size plus the records in flight, inside a
# large micro-batch too. Compacting at steps, not at batch ends, makes every output row (the
# timeline's epoch caches, the ``epoch`` log rows) the same however the stream is cut into
# micro-batches. Scenario-sized partitions stay below it, so even an explicit flush to an early
# offset (clamped at a compacted prefix, BELOW_COMPACTED_PREFIX) replays as ``replemu run`` does.
COMPACT_MIN_RECORDS = 256
# A workload stream's default (``--workload``): generated steps never name an offset (no flush
# to an offset, which a compacted prefix would clamp), so an endless generated partition keeps a
# smaller window: a quarter of the state and a micro-batch cost that stops growing within a few
# batches instead of ~30 (a partition's window grows until the first compaction).
WORKLOAD_COMPACT_MIN_RECORDS = 64


def process_batch(topic, partition, events: Iterable[dict], state: dict[str, Any] | None, protocol: str,
                  timed_out: bool = False, compact_min_records: int = COMPACT_MIN_RECORDS,
                  knobs: dict[str, Any] | None = None) -> tuple[list[dict], dict[str, Any], bool]:
    """Apply one micro-batch of a partition's events (``knobs``: the job's ``--knob``s, applied
    over the preset and the header's ``config.knobs`` when the partition starts).

    Returns the output rows, the new state fields, and whether rows are still waiting for a
    missing sequence number (the caller then keeps a state timeout running).
    """
    st = dict(state) if state is not None else empty_state(protocol)
    batch = _Batch(topic, partition, st["scenario"])
    waiting: dict[int, dict] = {int(s): {"seq": int(s), "type": t, "args": a} for s, t, a in orjson.loads(st["waiting"])}

    if timed_out:
        missing = st["next_seq"]
        if waiting and st["gap_reported_seq"] != missing:
            first = min(waiting)
            batch.quarantine({"topic": topic, "partition": partition, "seq": missing, "raw": None},
                             f"gap in sequence: seq {missing} never arrived; seq {first}..{max(waiting)} wait for it")
            st["gap_reported_seq"] = missing
        return batch.rows, st, bool(waiting)

    events = list(events)
    if topic is None or partition is None:
        # Unkeyed rows arrive in whatever order Spark's shuffle gave: sorted, so the output is not.
        unkeyed = [(e.get("reason") or ("unreadable row: missing topic or partition" if not e.get("raw") else
                                        "unreadable row: not valid JSON for the event schema"), e) for e in events]
        for reason, e in sorted(unkeyed, key=lambda x: (x[0], x[1].get("raw") or _raw(x[1]))):
            batch.quarantine(e, reason)
        return batch.rows, st, bool(waiting)

    quorum = protocol in QUORUM_VARIANT_NAMES  # a metadata partition (streaming.quorum_stream): no workload ticks
    if not quorum:
        events = expand_ticks(topic, partition, events, st, batch)
    for e in sorted(events, key=lambda e: (e["seq"] is None, e["seq"] if e["seq"] is not None else 0)):
        seq = e["seq"]
        if seq is None:
            batch.quarantine(e, "missing seq")
        elif seq < st["next_seq"] or seq in waiting:
            batch.quarantine(e, f"duplicate or out-of-order sequence: seq {seq} already {'applied' if seq < st['next_seq'] else 'received'} (next expected {st['next_seq']})")
        else:
            waiting[int(seq)] = {"seq": int(seq), "type": e["type"], "args": e["args"]}

    if quorum:
        from .quorum_stream import apply_quorum_events

        apply_quorum_events(topic, partition, st, waiting, batch, protocol, knobs)
        return _finish(batch, st, waiting)
    replay: Replay | None = _live_replay(topic, partition, st) if st["header"] == "ok" else None
    applied = 0
    while st["next_seq"] in waiting:
        e = waiting.pop(st["next_seq"])
        e.update(topic=topic, partition=partition)
        st["next_seq"] += 1
        seq = e["seq"]
        if e["type"] is None or e["args"] is None:  # consumes its seq, like any bad step
            batch.quarantine(e, f"seq {seq}: missing type or args")
            continue
        if seq == 0 or e["type"] == HEADER_TYPE:
            if seq != 0 or e["type"] != HEADER_TYPE:
                batch.quarantine(e, f"seq {seq}: the partition header must be seq 0 with type {HEADER_TYPE!r}")
                if seq == 0:
                    st["header"] = "invalid"
                continue
            try:
                name, replicas, config, brokers = parse_header(e["args"])
            except (ScenarioError, ValueError, RecursionError) as exc:
                batch.quarantine(e, f"invalid partition header: {str(exc)[:300] if not isinstance(exc, RecursionError) else 'nested too deeply'}")
                st["header"] = "invalid"
                continue
            st["scenario"], st["header"] = name, "ok"
            batch.rows.scenario = name
            replay = Replay(replicas, config, effective_variant(protocol, config, knobs), brokers=brokers)
            continue
        if st["header"] != "ok":
            batch.quarantine(e, f"seq {seq}: the partition has no valid header (seq 0)")
            continue
        try:
            # every broker a step may name: the scenario's replicas and other brokers (a reassignment's)
            step, description = _parse_step(topic, partition, int(seq), e["type"], e["args"], tuple(replay.partition.replicas))
        except ScenarioError as exc:
            batch.quarantine(e, str(exc))
            continue
        except (ValueError, RecursionError) as exc:
            batch.quarantine(e, f"seq {seq}: args are not JSON: {exc if isinstance(exc, ValueError) else 'nested too deeply'}")
            continue
        _apply(replay, step, description, int(seq), batch)
        st["steps_applied"] += 1
        applied += 1
        if _may_compact(replay.partition, compact_min_records):
            compaction = replay.compact(compact_min_records)
            if compaction is not None and compaction.cold_cache:
                batch.cold_cache(int(seq), compaction.cold_cache)

    if replay is not None:
        p, g = replay.partition, replay.checker
        st.update(pack_replay(replay))
        _keep_live(_LIVE_REPLAYS, (topic, partition), st["core"], replay)
        st["controller_leader"] = p.controller.leader
        st["controller_epoch"] = p.controller.leader_epoch
        st["violated"] = ",".join(sorted(g.violated))
        if applied:
            _summary(replay, st, batch)
    return _finish(batch, st, waiting)


def _finish(batch: "_Batch", st: dict[str, Any], waiting: dict[int, dict]) -> tuple[Any, dict[str, Any], bool]:
    """The batch's rows, the state with the rows still waiting for a gap, whether any wait."""
    st["waiting"] = _dumps([[s, w["type"], w["args"]] for s, w in sorted(waiting.items())])
    if 0 <= st["gap_reported_seq"] < st["next_seq"]:
        st["gap_reported_seq"] = -1  # that gap was filled; a later one is reported afresh
    return batch.rows, st, bool(waiting)


def expand_ticks(topic, partition: int, events: list[dict], st: dict[str, Any], batch: "_Batch") -> list[dict]:
    """The workload source's ticks (``TICK_TYPE`` rows: ``{"first", "last"}``, the partition's
    first tick also ``"start": {"seed", "profile", "spec"}``) replaced by the rows they stand for:
    the header (seq 0) at the start, then generated steps ``first..last``, exactly the rows the
    source used to generate (the same ``type``, and ``args`` as compact JSON), so they go through
    the same sequence rules and give the same output rows.  The generator lives in ``st["generator"]``
    (``emulator.workload.WorkloadGenerator``): the steps of a burst past ``last`` wait there for
    the next tick, and a restart resumes from the checkpoint.  A tick that cannot be followed
    goes to quarantine with its reason; other rows pass through."""
    ticks = [e for e in events if e.get("type") == TICK_TYPE and e.get("reason") is None and e.get("raw") is None]
    if not ticks:
        return events
    from emulator.workload import WorkloadGenerator, profile_from_mapping

    out = [e for e in events if not (e.get("type") == TICK_TYPE and e.get("reason") is None and e.get("raw") is None)]
    generator = None
    if st.get("generator") is not None:
        data = bytes(st["generator"])
        live = _LIVE_GENERATORS.pop((topic, partition), None)
        # the generator this worker left in these very bytes (the same object, not yet read back)
        generator = live[1] if live is not None and live[0] == data else unpack_generator(data)
    def dumps(args: dict) -> str:
        return orjson.dumps(args).decode("utf-8")

    for e in sorted(ticks, key=lambda e: -1 if e["seq"] is None else e["seq"]):
        try:
            args = json.loads(e["args"])
            first, last, start = args["first"], args["last"], args.get("start")
            if type(first) is not int or type(last) is not int or first < 1 or last < first - 1:
                raise ValueError(f"first {first!r} and last {last!r} are not a range of steps")
            if start is not None:
                if generator is not None:
                    raise ValueError(f"the partition's workload started already (next step {generator.next_seq})")
                profile = profile_from_mapping(str(start["profile"]), start["spec"])
                generator = WorkloadGenerator(int(start["seed"]), partition, profile)
                h = generator.header
                out.append({"topic": topic, "partition": partition, "seq": 0, "type": HEADER_TYPE, "raw": None,
                            "args": dumps({"scenario": h["name"], "replicas": h["replicas"], "config": h["config"],
                                          **({"brokers": h["brokers"]} if "brokers" in h else {})})})
            if generator is None:
                raise ValueError("the partition's workload never started (no tick with start)")
            if first < generator.next_seq:
                raise ValueError(f"steps up to {generator.next_seq - 1} were generated already")
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)[:300]
            batch.quarantine(e, f"seq {e['seq']}: invalid workload tick: {detail}")
            continue
        for seq, step in enumerate(generator.steps(first, last), start=first):
            (kind, step_args), = step.items()
            out.append({"topic": topic, "partition": partition, "seq": seq, "type": kind, "args": dumps(step_args), "raw": None})
    if generator is not None:
        st["generator"] = data = pack_generator(generator)
        _keep_live(_LIVE_GENERATORS, (topic, partition), data, generator)
    return out


# Per Python worker: (topic, partition) -> (the bytes it saved, the object they hold: the
# partition's generator, its replay), so a worker that serves the partition again reads no bytes
# back when the state holds exactly those (a replayed batch or a partition served elsewhere in
# between has other bytes: read from them). An entry is taken out while its object is stepped,
# and put back only with the bytes saved after. Bounded.
_LIVE_GENERATORS: dict[tuple, tuple[bytes, Any]] = {}
_LIVE_REPLAYS: dict[tuple, tuple[bytes, Any]] = {}
_LIVE_MAX = 2048


def _keep_live(live: dict[tuple, tuple[bytes, Any]], key: tuple, data: bytes, obj: Any) -> None:
    if len(live) >= _LIVE_MAX:
        live.clear()
    live[key] = (data, obj)


def _live_replay(topic, partition, st: dict[str, Any]) -> Replay:
    """The partition's replay: the one this worker saved into exactly these bytes, else read back."""
    live = _LIVE_REPLAYS.pop((topic, partition), None)
    return live[1] if live is not None and live[0] == st["core"] else unpack_replay(st)


# Parsed steps by (type, args text, assignment): every step of a kind and arguments parses to the
# same frozen Step, and most steps repeat (a fetch by replica 2, an election) across the
# partitions and batches a worker serves. Only steps that parse are kept; bounded per process.
_STEPS: dict[tuple, tuple[Any, str]] = {}
_STEPS_MAX = 1 << 14


def _parse_step(topic, partition, seq: int, kind, args_json: str, assignment: tuple[int, ...]):
    """``(step, describe_step(step))`` of one event row; ``ScenarioError`` or ``ValueError``
    (args not JSON) / ``RecursionError`` when it cannot be applied."""
    key = (kind, args_json, assignment)
    known = _STEPS.get(key)
    if known is None:
        step = step_from_mapping(f"{topic}/{partition}", seq, {kind: json.loads(args_json)}, assignment)
        if len(_STEPS) >= _STEPS_MAX:
            _STEPS.clear()
        known = _STEPS[key] = (step, describe_step(step))
    return known


def _may_compact(p, min_records: int) -> bool:
    """Whether ``Replay.compact(min_records)`` can drop anything: the prefix it compacts lies
    below every replica's LEO, so while one replica's LEO is fewer than ``min_records`` records
    above the compacted offset it returns None, and is not asked."""
    r = next(iter(p.replicas.values()))
    return r.leo - p.compacted_offset >= max(min_records, 1)


def _apply(replay: Replay, step, description: str, seq: int, batch: _Batch) -> None:
    p, g = replay.partition, replay.checker
    losses_before = len(g.losses)
    out = replay.apply(step)
    batch.timeline(p, seq, description)
    batch.log_changes(p, seq, out.effects)
    for v in out.violations:
        batch.emit("violations", seq, at_step=v["step"], invariant=v["invariant"], detail=v["detail"])
    for loss in g.losses[losses_before:]:
        batch.emit("losses", seq, at_step=loss["step"], offset=loss["offset"], value=loss["value"], acked=loss["acked"], allowed=loss["allowed"])
    for err in out.errors:
        batch.emit("errors", seq, at_step=err["step"], error=err["error"])
    replay.forget_reported()  # already emitted; the stream keeps no output history in state


def _summary(replay: Replay, st: dict, batch: _Batch) -> None:
    p, g = replay.partition, replay.checker
    c = p.controller
    hws = [r.hw for r in p.replicas.values()]
    batch.emit(
        "summary", st["steps_applied"], protocol=p.variant.name, steps=st["steps_applied"], leader=c.leader,
        controller_epoch=c.leader_epoch, isr=json.dumps(sorted(c.isr)), min_hw=min(hws), max_hw=max(hws),
        violations_so_far=len(g.violated), violated=",".join(sorted(g.violated)),
        final_findings=json.dumps(g.final_findings(p), separators=(",", ":")),
        knobs=None if replay.knobs_in_force() is None else json.dumps(replay.knobs_in_force(), separators=(",", ":")),
        compacted_prefix=json.dumps(compacted_prefix(p)) if p.compacted_offset else None,
        final=json.dumps(state_snapshot(p, with_logs=False), separators=(",", ":")),
    )
