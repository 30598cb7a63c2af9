"""The per-partition work of one micro-batch: decode, sort by sequence, step the core, encode.

``process_batch`` is what the ``applyInPandasWithState`` function calls for one group, kept free
of Spark so it can be tested and benchmarked alone: one loop for every protocol family, which
drives the family's stream hooks (``emulator.family.Family``, "stream") and lays out the rows
they hand over.  Rows are applied strictly in ``seq`` order:
a row ahead of a gap waits in the state until the gap fills (and a gap that outlives the state
timeout is reported once in quarantine); a row that cannot be applied — duplicate or
out-of-order sequence, unknown step type, bad arguments, replica not in the partition,
unreadable line — goes to quarantine with its reason and is never silently dropped.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, NamedTuple

import orjson

from emulator.families import PARTITION, family_of_protocol
from emulator.family import STREAM_LOG, STREAM_TIMELINE, Family, StreamRowError, StreamRows

from .schemas import KIND_COLUMNS, OUTPUT_COLUMNS, TICK_TYPE, arrow_schema
from .state_codec import (
    empty_state,
    pack_document,
    pack_generator,
    state_json,
    unpack_document,
    unpack_generator,
)


class StreamProtocol(NamedTuple):
    """What ``--protocol`` and ``--knob`` resolve to, once per stream (``stream_protocol``): the
    protocol family, its variant (the preset with the stream's knobs), and the stream's knobs,
    which every partition's model applies again over its header's own (they win)."""

    family: Family
    variant: Any
    knobs: dict[str, Any] | None

    @property
    def name(self) -> str:
        return self.variant.name


def stream_protocol(protocol: "str | StreamProtocol", knobs: dict[str, Any] | None = None) -> StreamProtocol:
    """``protocol`` (a preset of any family) with ``knobs`` as the stream runs it; ``ValueError``
    (``KnobError``) naming an unknown protocol, knob or value.  A ``StreamProtocol`` is itself."""
    if isinstance(protocol, StreamProtocol):
        return protocol
    family = family_of_protocol(protocol) or PARTITION  # (no family has it: refused as the partition family refuses it)
    knobs = dict(knobs) if knobs else None
    return StreamProtocol(family, family.variant(protocol, dict(knobs or {})), knobs)


def _raw(event: dict) -> str:
    return json.dumps({k: event.get(k) for k in ("topic", "partition", "seq", "type", "args")}, default=str)


# Columns every row of a group shares: kept once per group, filled in when rows are read.
GROUP_CONSTANTS = ("topic", "partition", "scenario")
_PAYLOAD_COLUMNS = {kind: tuple(c for c in cols if c not in GROUP_CONSTANTS) for kind, cols in KIND_COLUMNS.items()}
_LOG = ("seq", "idx") + STREAM_LOG
# A timeline row (``OutputRows.timeline_rows``): these values, in this order (a family's
# ``StreamRows.timeline`` tuples).
_TIMELINE = STREAM_TIMELINE


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

    def take(self, seq: int, rows: StreamRows) -> None:
        """A step's rows from a family's ``StreamRows`` (``seq``: the step's row), laid out as the
        kinds' columns; ``rows``' per-step lists are emptied.  The timeline's tuples are appended
        to ``OutputRows.timeline_rows`` by the family itself."""
        if "timeline" not in self.rows.blocks and self.rows.timeline_rows:
            self.rows.block("timeline", _TIMELINE)  # its place among the kinds; rows go to timeline_rows
        if rows.log:
            self.log_rows(seq, rows.log)
            rows.log.clear()
        if rows.violations:
            for at_step, invariant, detail in rows.violations:
                self.emit("violations", seq, at_step=at_step, invariant=invariant, detail=detail)
            rows.violations.clear()
        if rows.losses:
            for at_step, offset, value, acked, allowed in rows.losses:
                self.emit("losses", seq, at_step=at_step, offset=offset, value=value, acked=acked, allowed=allowed)
            rows.losses.clear()
        if rows.errors:
            for at_step, error in rows.errors:
                self.emit("errors", seq, at_step=at_step, error=error)
            rows.errors.clear()

    def log_rows(self, seq: int, log: list[tuple]) -> None:
        """``(replica, op, offset, epoch, value)`` tuples as ``log`` rows of step ``seq``."""
        b = self.rows.block("log", _LOG)
        key = ("log", seq)
        idx = self._idx.get(key, 0)
        seqs, idxs, replicas, ops, offsets, epochs, values = (b[c] for c in _LOG)
        for replica, op, offset, epoch, value in log:
            seqs.append(seq)
            idxs.append(idx)
            replicas.append(replica)
            ops.append(op)
            offsets.append(offset)
            epochs.append(epoch)
            values.append(value)
            idx += 1
        self._idx[key] = idx
        self.rows.counts["log"] += len(log)

    def quarantine(self, event: dict, reason: str) -> None:
        self.emit("quarantine", event.get("seq"), reason=reason, raw=event.get("raw") or _raw(event))


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


def process_batch(topic, partition, events: Iterable[dict], state: dict[str, Any] | None, protocol: StreamProtocol,
                  timed_out: bool = False, compact_min_records: int = COMPACT_MIN_RECORDS) -> tuple[Any, dict[str, Any], bool]:
    """Apply one micro-batch of a stream partition's events under ``protocol`` (``stream_protocol``:
    the family, its variant and the stream's knobs, applied over each partition header's own).

    One loop for every protocol family: rows in ``seq`` order, gaps, duplicates, the header (seq 0)
    and the steps; the family (``emulator.family.Family``'s stream hooks) reads the header, builds,
    steps, judges and encodes the model and hands its rows over.

    Returns the output rows, the new state fields, and whether rows are still waiting for a
    missing sequence number (the caller then keeps a state timeout running).
    """
    family = protocol.family
    st = dict(state) if state is not None else empty_state(protocol.name)
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

    if family.stream_ticks:
        events = expand_ticks(topic, partition, events, st, batch)
    for e in sorted(events, key=lambda e: (e["seq"] is None, e["seq"] if e["seq"] is not None else 0)):
        seq = e["seq"]
        if seq is None:
            batch.quarantine(e, "missing seq")
        elif seq < st["next_seq"] or seq in waiting:
            batch.quarantine(e, f"duplicate or out-of-order sequence: seq {seq} already {'applied' if seq < st['next_seq'] else 'received'} (next expected {st['next_seq']})")
        else:
            waiting[int(seq)] = {"seq": int(seq), "type": e["type"], "args": e["args"]}

    header_type, header_types = family.stream_header_type, family.stream_header_types()
    model = _live_model(topic, partition, st, family) if st["header"] == "ok" else None
    rows = family.stream_rows(batch.rows.timeline_rows)
    applied = 0
    while st["next_seq"] in waiting:
        e = waiting.pop(st["next_seq"])
        e.update(topic=topic, partition=partition)
        st["next_seq"] += 1
        seq, kind = e["seq"], e["type"]
        if kind is None or e["args"] is None:  # consumes its seq, like any bad step
            batch.quarantine(e, f"seq {seq}: missing type or args")
            continue
        if seq == 0 or kind in header_types:
            if seq != 0 or kind != header_type:
                batch.quarantine(e, family.stream_misplaced_header(seq, kind, protocol.name))
                if seq == 0:
                    st["header"] = "invalid"
                continue
            try:
                name, header = family.parse_stream_header(e["args"])
                model = family.stream_model(header, protocol.variant, protocol.knobs)
            except (ValueError, RecursionError) as exc:
                batch.quarantine(e, f"invalid {header_type} header: {str(exc)[:300] if not isinstance(exc, RecursionError) else 'nested too deeply'}")
                st["header"] = "invalid"
                continue
            st["scenario"], st["header"] = name, "ok"
            batch.rows.scenario = name
            continue
        if st["header"] != "ok" or model is None:
            batch.quarantine(e, family.stream_headerless(seq))
            continue
        try:
            step, description = _parse_step(family, topic, partition, int(seq), kind, e["args"], family.stream_step_ids(model))
        except StreamRowError as exc:
            batch.quarantine(e, str(exc))
            continue
        except (ValueError, RecursionError) as exc:
            batch.quarantine(e, f"seq {seq}: args are not JSON: {exc if isinstance(exc, ValueError) else 'nested too deeply'}")
            continue
        try:
            family.stream_apply(model, step, int(seq), description, rows)
        except StreamRowError as exc:
            batch.quarantine(e, str(exc))
            continue
        batch.take(int(seq), rows)
        st["steps_applied"] += 1
        applied += 1
        family.stream_compact(model, compact_min_records, rows)
        if rows.log:  # what compaction dropped that the outputs keep
            batch.log_rows(int(seq), rows.log)
            rows.log.clear()

    if model is not None:
        st["core"] = pack_document(family.stream_document(model))
        _keep_live(_LIVE_MODELS, (topic, partition), st["core"], model)
        st["controller_leader"], st["controller_epoch"], violated = family.stream_verdicts(model)
        st["violated"] = ",".join(violated)
        if applied:
            batch.emit("summary", st["steps_applied"], **family.stream_summary(model, st["steps_applied"]))
    return _finish(batch, st, waiting)


def _finish(batch: "_Batch", st: dict[str, Any], waiting: dict[int, dict]) -> tuple[Any, dict[str, Any], bool]:
    """The batch's rows, the state with the rows still waiting for a gap, whether any wait."""
    st["waiting"] = state_json([[s, w["type"], w["args"]] for s, w in sorted(waiting.items())])
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
                out.append({"topic": topic, "partition": partition, "seq": 0, "type": PARTITION.stream_header_type, "raw": None,
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
# partition's generator, its model), so a worker that serves the partition again reads no bytes
# back when the state holds exactly those (a replayed batch or a partition served elsewhere in
# between has other bytes: read from them). An entry is taken out while its object is stepped,
# and put back only with the bytes saved after. Bounded.
_LIVE_GENERATORS: dict[tuple, tuple[bytes, Any]] = {}
_LIVE_MODELS: dict[tuple, tuple[bytes, Any]] = {}
_LIVE_MAX = 2048


def _keep_live(live: dict[tuple, tuple[bytes, Any]], key: tuple, data: bytes, obj: Any) -> None:
    if len(live) >= _LIVE_MAX:
        live.clear()
    live[key] = (data, obj)


def _live_model(topic, partition, st: dict[str, Any], family: Family) -> Any:
    """The partition's model: the one this worker saved into exactly these bytes, else read back."""
    live = _LIVE_MODELS.pop((topic, partition), None)
    if live is not None and live[0] == st["core"]:
        return live[1]
    return family.stream_restore(unpack_document(st["core"]), st["violated"])


# Parsed steps by (family, type, args text, ids): every step of a kind and arguments parses to the
# same frozen step, and most steps repeat (a fetch by replica 2, an election) across the
# partitions and batches a worker serves. Only steps that parse are kept; bounded per process.
_STEPS: dict[tuple, tuple[Any, str]] = {}
_STEPS_MAX = 1 << 14


def _parse_step(family: Family, topic, partition, seq: int, kind, args_json: str, ids: tuple[int, ...]):
    """``(step, its description)`` of one event row; ``StreamRowError`` (the reason) or
    ``ValueError`` (args not JSON) / ``RecursionError`` when it cannot be applied."""
    key = (family.name, kind, args_json, ids)
    known = _STEPS.get(key)
    if known is None:
        known = family.parse_stream_step(f"{topic}/{partition}", seq, kind, args_json, ids)
        if len(_STEPS) >= _STEPS_MAX:
            _STEPS.clear()
        _STEPS[key] = known
    return known
