"""The event table: one row per scenario step, keyed by (topic, partition), ordered by ``seq``.

The columns are ``streaming.schemas.EVENT_FIELDS`` (JSON lines or Parquet).
``write_event_files`` writes rows as event files, optionally split into N files (file k holds
the k-th contiguous slice of every partition's rows) so that a stream reading one file per
trigger sees many micro-batches.  Files are published atomically (written under a hidden name,
then renamed), as a file source requires, with modification times 1 ms apart in file order, the
order in which the file source takes them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from emulator import families
from emulator.config import config_to_dict
from emulator.scenario import Scenario
from emulator.steps import STEP_TABLE

from .schemas import HEADER_TYPE, QUORUM_HEADER_TYPE, QUORUM_TOPIC, event_arrow_schema


def partition_key(s: Scenario) -> tuple[str, int]:
    return (s.topic if s.topic_named else s.name, s.partition)


def header_row(s: Scenario) -> dict:
    topic, partition = partition_key(s)
    args = {"scenario": s.name, "replicas": list(s.replicas), "config": config_to_dict(s.config),
            **({"brokers": list(s.broker_ids)} if s.brokers else {})}
    return {"topic": topic, "partition": partition, "seq": 0, "type": HEADER_TYPE, "args": json.dumps(args)}


def scenario_rows(s: Scenario) -> list[dict]:
    topic, partition = partition_key(s)
    rows = [header_row(s)]
    for seq, step in enumerate(s.steps, start=1):
        (kind, args), = STEP_TABLE.to_dict(step).items()
        rows.append({"topic": topic, "partition": partition, "seq": seq, "type": kind, "args": json.dumps(args)})
    return rows


def quorum_scenario_rows(s, partition: int = 0) -> list[dict]:
    """A metadata-quorum scenario (``emulator.quorum.run.QuorumScenario``) as the event rows of the
    metadata partition ``__cluster_metadata``/``partition``: the header (seq 0, type ``quorum``,
    args ``{"scenario", "voters", "observers", "knobs"}``), then its steps 1..N as in the file."""
    from emulator.quorum.steps import QUORUM_STEP_TABLE

    args = {"scenario": s.name, "voters": list(s.voters), "observers": list(s.observers), "knobs": dict(sorted(s.knobs.items()))}
    rows = [{"topic": QUORUM_TOPIC, "partition": partition, "seq": 0, "type": QUORUM_HEADER_TYPE, "args": json.dumps(args)}]
    for seq, step in enumerate(s.steps, start=1):
        (kind, step_args), = QUORUM_STEP_TABLE.to_dict(step).items()
        rows.append({"topic": QUORUM_TOPIC, "partition": partition, "seq": seq, "type": kind, "args": json.dumps(step_args)})
    return rows


def event_family(rows) -> str | None:
    """The protocol family (its ``Family.name``: ``"quorum"``, ``"partition"``) whose header row
    (``Family.stream_header_type``) is the first at seq 0 among ``rows`` (dicts with ``seq`` and
    ``type``), None when none is a header."""
    by_header = {f.stream_header_type: f.name for f in families.FAMILIES.values()}  # (a registered family too)
    for r in rows:
        if r.get("seq") == 0 and r.get("type") in by_header:
            return by_header[r["type"]]
    return None


def duplicate_keys(scenarios: list[Scenario]) -> str | None:
    """The first scenario whose partition key another one already has, as a message."""
    seen: dict[tuple[str, int], str] = {}
    for s in scenarios:
        key = partition_key(s)
        if key in seen:
            return f"{s.source}: partition key {key[0]}/{key[1]} is also the key of {seen[key]}"
        seen[key] = s.source
    return None


def _slices(rows: list[dict], n: int) -> list[list[dict]]:
    size, extra = divmod(len(rows), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(rows[start:end])
        start = end
    return out


def _publish(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_event_files(rows_per_partition: list[list[dict]], out_dir: str | Path, split: int = 1, fmt: str = "jsonl",
                      prefix: str = "events") -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per_file: list[list[dict]] = [[] for _ in range(split)]
    for rows in rows_per_partition:
        for k, chunk in enumerate(_slices(rows, split)):
            per_file[k].extend(chunk)
    paths = []
    base_ns = time.time_ns() // 1_000_000 * 1_000_000
    for k, rows in enumerate(per_file):
        if not rows:
            continue
        path = out / f"{prefix}-{k:05d}.{'parquet' if fmt == 'parquet' else 'jsonl'}"
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pylist(rows, schema=event_arrow_schema())
            _publish(path, lambda tmp, table=table: pq.write_table(table, tmp))
        else:
            text = "".join(json.dumps(r) + "\n" for r in rows)
            _publish(path, lambda tmp, text=text: tmp.write_text(text))
        # The file source takes files in modification-time order: make it the file order.
        os.utime(path, ns=(base_ns + k * 1_000_000, base_ns + k * 1_000_000))
        paths.append(path)
    return paths
