#!/usr/bin/env python3
"""Benchmark the streaming job against the core alone and against Spark's own floor.

Every mode prints the project's number next to its reference and the ratio, with the target:

  throughput  P partitions x E events (seeded produce/fetch/election/crash mix, 3 replicas) in B
              micro-batches: events/s of (a) the core alone, (b) the streaming job, (c) a no-op
              applyInPandasWithState over the same events (Spark's floor); b/c >= 0.5, b/a >= 0.3;
              micro-batch p50 of (b) <= 2 s (20 events per partition per batch). --tws adds (d) the
              same job on transformWithStateInPandas (RocksDB) for comparison.
  workload    the throughput targets from a clean workload stream (no input files) of P partitions x
              K steps per batch over B (30) micro-batches: (a) the core alone over the same generated
              steps, (b) the streaming job, (c) a no-op applyInPandasWithState over the same source;
              b/c >= 0.5, b/a >= 0.3, p50 <= 2 s; also flat (last 5 / batches 2-6 <= 1.25) and
              the state per partition.  With --operators applyInPandasWithState,transformWithState
              (the default: every operator) the same for each stateful operator of replemu stream
              --operator, in one table: the job on it, the no-op on it (transformWithState's: a Row
              processor counting rows in a ValueState, RocksDB with changelog checkpointing), their
              ratio, and the job's p50 against the default operator's.
  flat        a clean workload stream (no input files) of P partitions x K steps per batch over B
              batches: mean of the last 5 batches / mean of batches 2-6 <= 1.25; state per
              partition at the end, read with Spark's statestore reader.
  long        flat over --long-batches (300) micro-batches of --long-partitions (100).
  state       a clean workload of a few partitions in large batches until 10^4 and 10^6 records
              were produced per partition: state bytes per partition (statestore reader),
              <= 50 KB each, ratio <= 1.5.
  rows        the throughput events through replemu stream as it runs (payloads unpacked in its sink)
              and through the public replemu.replicate (one JVM row per output row, the same sink):
              CPU seconds per micro-batch of each, split driver / JVM / Python, runs alternated
              (--runs), and the ratio; no target: it measures what the row form costs.
  scale       the same events per partition at 1,000 and 10,000 partitions, state in RocksDB:
              events/s ratio (>= 1/1.5) and the peak RSS of the Spark JVM and Python workers per
              batch (flat over 10 batches).

    python scripts/bench_stream.py [--mode throughput|workload|flat|long|state|scale|all] [--partitions N] ...
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator import VARIANTS, Replay, parse_scenario  # noqa: E402
from streaming.events import scenario_rows, write_event_files  # noqa: E402
from streaming.operators import DEFAULT_OPERATOR, OPERATOR_NAMES  # noqa: E402


def workload(partition: int, events: int, rng: random.Random) -> dict:
    steps = [{"elect": {}}]
    down: set[int] = set()
    while len(steps) < events:
        x = rng.random()
        r = rng.choice([1, 2, 3])
        if x < 0.30:
            steps.append({"produce": {"value": f"p{partition}-{len(steps)}", "acks": rng.choice(["all", 1])}})
        elif x < 0.85:
            steps.append({"fetch": {"replica": r}})
        elif x < 0.90:
            steps.append({"elect": {}})
        elif x < 0.95 and r not in down and len(down) < 2:
            steps.append({"crash": {"replica": r}})
            down.add(r)
        elif down:
            back = sorted(down)[0]
            steps.append({"restart": {"replica": back}})
            steps.append({"leader_and_isr": {"replica": back}})
            down.discard(back)
    return {"name": f"bench-{partition}", "replicas": [1, 2, 3], "steps": steps[:events]}


def core_alone(scenarios, protocol: str) -> float:
    start = time.perf_counter()
    n = 0
    for s in scenarios:
        p = Replay(s.replicas, s.config, VARIANTS[protocol])
        for step in s.steps:
            p.apply(step)
            n += 1
    return n / (time.perf_counter() - start)


def noop_apply(events):
    """``events`` through a no-op ``applyInPandasWithState`` (a row count per group in its state):
    Spark's floor for that shape, as a DataFrame with no rows."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def noop(key, pdfs, state):
        n = sum(len(pdf) for pdf in pdfs)
        state.update(((state.get[0] if state.exists else 0) + n,))
        return iter(())

    return events.groupBy("topic", "partition").applyInPandasWithState(
        noop, "n long", "n long", "append", GroupStateTimeout.NoTimeout)


def noop_tws(events):
    """``events`` through a no-op ``transformWithState`` (the Row API; a row count per group in a
    ``ValueState``): the floor of replemu stream --operator transformWithState. Runs on the settings
    ``tws_conf`` gives."""
    from pyspark.sql.streaming import StatefulProcessor

    class Count(StatefulProcessor):
        def init(self, handle) -> None:
            self.n = handle.getValueState("n", "n long")

        def handleInputRows(self, key, rows, timerValues):
            n = sum(1 for _ in rows)
            self.n.update(((self.n.get()[0] if self.n.exists() else 0) + n,))
            return iter(())

        def close(self) -> None:
            pass

    return events.groupBy("topic", "partition").transformWithState(Count(), "n long", "Append", "None")


def tws_conf() -> dict[str, str]:
    """The state store and settings ``replemu stream --operator transformWithState`` runs with."""
    from streaming.job import STATE_STORE_CONF, STATE_STORES
    from streaming.operators import operator_named

    return {STATE_STORE_CONF: STATE_STORES["rocksdb"], **dict(operator_named("transformWithState").query_conf)}


def noop_over(events, checkpoint: Path) -> list[dict]:
    """A no-op ``applyInPandasWithState`` over ``events`` (Spark's floor for that shape): the
    progress of every micro-batch that read rows."""
    out = noop_apply(events)
    query = (out.writeStream.foreachBatch(lambda df, _id: df.write.format("noop").mode("overwrite").save())
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def noop_tws_over(spark, events, checkpoint: Path) -> list[dict]:
    """A no-op ``transformWithState`` (the Row API) over ``events``: the floor of replemu stream
    --operator transformWithState, on the state store and settings that operator runs with."""
    conf = tws_conf()
    previous = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        out = noop_tws(events)
        query = (out.writeStream.foreachBatch(lambda df, _id: df.write.format("noop").mode("overwrite").save())
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    finally:
        for k, v in previous.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    query.awaitTermination()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def noop_stream(spark, events_dir: Path, checkpoint: Path) -> list[dict]:
    from streaming.schemas import EVENT_SCHEMA

    return noop_over(spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(events_dir)), checkpoint)


def cpu_seconds() -> float:
    """CPU seconds used so far by this process, the Spark JVM and its Python processes (those that
    ended counted through their parent's children times): a query's cost that other programs
    on the machine do not inflate, unlike its wall time."""
    return sum(cpu_split())


def cpu_split() -> tuple[float, float, float]:
    """``cpu_seconds`` as (this driver process, the JVM's own threads, the Python processes)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                children.setdefault(int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    driver = jvm = python = 0
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            name, rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])  # utime+stime, cutime+cstime
        if pid == os.getpid():
            driver += own + reaped
        elif name.endswith("(java"):
            jvm, python = jvm + own, python + reaped  # its children are the Python processes
        else:
            python += own + reaped
        todo.extend(children.get(pid, []))
    return driver / tick, jvm / tick, python / tick


def durations(progress: list[dict]) -> list[float]:
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress]


def _p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def state_per_partition(spark, checkpoint: Path, operator: str | None = None) -> float:
    """Mean bytes of one partition's state row, read with Spark's statestore reader."""
    from pyspark.sql import functions as F

    from streaming.job import state_frame

    df = state_frame(spark, checkpoint, operator)
    cols = [F.coalesce(F.length(F.col(c)), F.lit(0)) for c in ("core", "waiting")]
    row = df.select(sum(cols[1:], cols[0]).alias("bytes")).agg(F.avg("bytes").alias("mean")).collect()[0]
    return float(row["mean"] or 0)


# -- modes ----------------------------------------------------------------------------------------


def tws_stream(spark, events_dir: Path, work: Path, protocol: str) -> list[float]:
    """The same job with ``transformWithStateInPandas`` (a ``ValueState`` holding the same state
    row; RocksDB, which the API requires): the micro-batch seconds."""
    from pyspark.sql.streaming import StatefulProcessor

    from streaming.job import STATE_STORE_CONF, STATE_STORES
    from streaming.pipeline import events_from_frames, group_key, output_frame, payloads_to_rows
    from streaming.schemas import (
        CORRUPT_COLUMN,
        EVENT_SCHEMA_WITH_CORRUPT,
        GROUP_OUTPUT_SCHEMA,
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
    )
    from streaming.sink import ParquetSink

    class PartitionProcessor(StatefulProcessor):
        def init(self, handle) -> None:
            from streaming.processor import stream_protocol

            self.state = handle.getValueState("partition", STATE_SCHEMA)
            self.protocol = stream_protocol(protocol)

        def handleInputRows(self, key, rows, timerValues):
            from streaming.processor import process_batch
            from streaming.state_codec import from_tuple, to_tuple

            topic, partition = group_key(key)
            current = from_tuple(self.state.get()) if self.state.exists() else None
            out, new_state, _ = process_batch(topic, partition, events_from_frames(topic, partition, rows), current, self.protocol)
            self.state.update(to_tuple(new_state))
            if len(out):
                yield output_frame(topic, partition, out)

        def close(self) -> None:
            pass

    events = (spark.readStream.schema(EVENT_SCHEMA_WITH_CORRUPT).option("maxFilesPerTrigger", 1)
              .option("columnNameOfCorruptRecord", CORRUPT_COLUMN).json(str(events_dir)))
    spark.conf.set(STATE_STORE_CONF, STATE_STORES["rocksdb"])
    try:
        out = events.groupBy("topic", "partition").transformWithStateInPandas(
            PartitionProcessor(), GROUP_OUTPUT_SCHEMA, "Append", "None").mapInArrow(payloads_to_rows, OUTPUT_SCHEMA)
        query = (out.writeStream.foreachBatch(ParquetSink(work / "out-tws")).option("checkpointLocation", str(work / "ckpt-tws"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        spark.conf.unset(STATE_STORE_CONF)
    return durations([p for p in query.recentProgress if p["numInputRows"] > 0])


def _event_files(args, work: Path, mode: str, extra: str = "") -> list:
    """The seeded scenarios of ``--partitions`` x ``--events``, written as ``--batches`` event files."""
    print(f"[{mode}] seed {args.seed}  partitions {args.partitions}  events/partition {args.events}  "
          f"total {args.partitions * args.events}  micro-batches {args.batches}  protocol {args.protocol}{extra}", flush=True)
    rng = random.Random(args.seed)
    scenarios = [parse_scenario(workload(k, args.events, rng)) for k in range(args.partitions)]
    write_event_files([scenario_rows(s) for s in scenarios], work / "events", split=args.batches)
    return scenarios


def mode_throughput(spark, args, work: Path) -> None:
    total = args.partitions * args.events
    scenarios = _event_files(args, work, "throughput")
    a = core_alone(scenarios, args.protocol)
    from streaming.job import run_stream

    # Warm the JVM with a throwaway no-op run first, so neither measured query pays for it.
    noop_stream(spark, work / "events", work / "ckpt-warm-up")
    cpu0 = cpu_split()
    stats_b = run_stream(work / "events", work / "out", work / "ckpt", args.protocol, max_files_per_trigger=1, spark=spark,
                         quiet=True)
    cpu1 = cpu_split()
    progress_c = noop_stream(spark, work / "events", work / "ckpt-noop")
    cpu2 = cpu_split()
    db, dc = [s.duration_s for s in stats_b if s.input_rows], durations(progress_c)
    b, c = total / sum(db), total / sum(dc)
    print(f"{'':40} {'events/s':>10} {'batch p50 s':>12} {'batch p95 s':>12}")
    print(f"{'(a) core alone':40} {a:>10,.0f}")
    print(f"{'(b) streaming job':40} {b:>10,.0f} {statistics.median(db):>12.2f} {_p95(db):>12.2f}")
    print(f"{'(c) no-op applyInPandasWithState':40} {c:>10,.0f} {statistics.median(dc):>12.2f} {_p95(dc):>12.2f}")
    if args.tws:
        dd = tws_stream(spark, work / "events", work, args.protocol)
        print(f"{'(d) the job on transformWithStateInPandas':40} {total / sum(dd):>10,.0f} {statistics.median(dd):>12.2f} "
              f"{_p95(dd):>12.2f}")
    print(f"b/c = {b / c:.2f} (target >= 0.5: {verdict(b / c >= 0.5)})   b/a = {b / a:.2f} (target >= 0.3: {verdict(b / a >= 0.3)})   "
          f"p50 {statistics.median(db):.2f} s at {args.events // args.batches} events/partition/batch "
          f"(target <= 2 s: {verdict(statistics.median(db) <= 2)}); first batch (b) {db[0]:.2f} s, (c) {dc[0]:.2f} s", flush=True)
    _cpu_line(cpu0, cpu1, cpu2, len(db), len(dc))


def mode_rows(spark, args, work: Path) -> None:
    _event_files(args, work, "rows", f"  runs {args.runs} alternated")
    from streaming.job import run_stream

    noop_stream(spark, work / "events", work / "ckpt-warm-up")
    cpu: dict[bool, list[tuple]] = {False: [], True: []}
    wall: dict[bool, list[float]] = {False: [], True: []}
    for run in range(args.runs):
        for rows in (False, True):
            before = cpu_split()
            stats = run_stream(work / "events", work / f"out-{run}-{rows}", work / f"ckpt-{run}-{rows}", args.protocol,
                               max_files_per_trigger=1, spark=spark, quiet=True, rows=rows)
            after = cpu_split()
            n = len([s for s in stats if s.input_rows])
            cpu[rows].append(tuple((y - x) / n for x, y in zip(before, after)))
            wall[rows].append(statistics.median(s.duration_s for s in stats if s.input_rows))
    print(f"{'CPU s per micro-batch (median of runs)':44} {'total':>7} {'driver':>7} {'JVM':>7} {'Python':>7} {'p50 wall s':>11}")
    med = {}
    for rows, label in ((False, "replemu stream (payloads, unpacked in sink)"), (True, "replemu.replicate rows, same sink")):
        parts = [statistics.median(c[i] for c in cpu[rows]) for i in range(3)]
        med[rows] = sum(parts)
        print(f"{label:44} {sum(parts):>7.2f} {parts[0]:>7.2f} {parts[1]:>7.2f} {parts[2]:>7.2f} {statistics.median(wall[rows]):>11.2f}")
    print(f"rows / payloads CPU = {med[True] / med[False]:.2f}  (the cost of one JVM row per output row)", flush=True)


def _cpu_line(cpu0: tuple, cpu1: tuple, cpu2: tuple, nb: int, nc: int) -> None:
    """CPU seconds per micro-batch of (b) and (c), whole and split (driver / JVM / Python processes)."""
    import os

    b = [(y - x) / nb for x, y in zip(cpu0, cpu1)]
    c = [(y - x) / nc for x, y in zip(cpu1, cpu2)]
    print(f"CPU seconds per batch, driver + JVM + Python processes (not inflated by other programs): "
          f"(b) {sum(b):.2f} = {b[0]:.2f} + {b[1]:.2f} + {b[2]:.2f}, (c) {sum(c):.2f} = {c[0]:.2f} + {c[1]:.2f} + {c[2]:.2f}: "
          f"c/b = {sum(c) / sum(b):.2f}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def _workload_stream(spark, work: Path, partitions: int, steps_per_batch: int, batches: int, protocol: str,
                     seed: int, state_store: str | None = None, observer=None, operator: str | None = None):
    from scenario_io.profiles import load_profiles
    from streaming.job import run_stream
    from streaming.workload_source import WorkloadSpec

    workload = WorkloadSpec.of(load_profiles()["clean"], seed, partitions, steps_per_batch, max_steps=steps_per_batch * batches)
    return run_stream(None, work / "out", work / "ckpt", protocol, spark=spark, quiet=True, workload=workload,
                      state_store=state_store, observer=observer, operator=operator)


def noop_workload_stream(spark, spec, checkpoint: Path, operator: str | None = None) -> list[dict]:
    """A no-op ``operator`` (None: applyInPandasWithState) over the workload source of ``spec`` (a
    ``WorkloadSpec``; Spark's floor for that shape)."""
    from streaming.workload_source import register

    register(spark)
    events = spark.readStream.format("replemu_workload").options(**spec.to_options()).load()
    return noop_tws_over(spark, events, checkpoint) if operator == "transformWithState" else noop_over(events, checkpoint)


def workload_core_alone(profile, seed: int, partitions: int, steps: int, protocol: str) -> float:
    """Events/s of the core alone over the first ``steps`` generated steps of every partition."""
    from emulator.scenario import parse_scenario as parse
    from emulator.workload import first_steps_document

    return core_alone([parse(first_steps_document(seed, k, profile, steps)) for k in range(partitions)], protocol)


def mode_workload(spark, args, work: Path) -> None:
    """The throughput targets from a clean workload stream: job vs the no-op over the same source,
    for every operator of ``--operators``."""
    import json

    from scenario_io.profiles import load_profiles
    from streaming.operators import operator_named
    from streaming.workload_source import WorkloadSpec

    operators = [operator_named(o).name for o in args.operators.split(",")]
    p, k, n = args.partitions, args.steps_per_batch, args.flat_batches
    print(f"[workload] clean workload, seed {args.seed}, {p} partitions x {k} steps per batch, {n} batches, {args.protocol}, "
          f"operators {', '.join(operators)}", flush=True)
    profile = load_profiles()["clean"]
    a = workload_core_alone(profile, args.seed, p, k * 5, args.protocol)
    workload = WorkloadSpec.of(profile, args.seed, p, k, max_steps=k * n)
    # Warm the JVM with a short no-op run first, so no measured query pays for it.
    noop_workload_stream(spark, replace(workload, max_steps=k), work / "ckpt-warm-up")
    total = p * k * n
    runs = {}
    for operator in operators:
        sub = work / operator
        cpu0 = cpu_split()
        stats = _workload_stream(spark, sub, p, k, n, args.protocol, args.seed, operator=operator)
        cpu1 = cpu_split()
        db = [s.duration_s for s in stats]
        progress_c = noop_workload_stream(spark, workload, sub / "ckpt-noop", operator)
        cpu2 = cpu_split()
        runs[operator] = (sub, db, durations(progress_c), progress_c, (cpu0, cpu1, cpu2))
    print(f"{'':48} {'events/s':>10} {'batch p50 s':>12} {'batch p95 s':>12} {'job/no-op':>10} {'p50 / default':>14}")
    print(f"{'(a) core alone':48} {a:>10,.0f}")
    base = statistics.median(runs[DEFAULT_OPERATOR if DEFAULT_OPERATOR in runs else operators[0]][1][1:])
    for operator in operators:
        _, db, dc, _, _ = runs[operator]
        b, c = total / sum(db), total / sum(dc)
        pb, pc = statistics.median(db[1:]), statistics.median(dc[1:])
        print(f"{'(b) streaming job, ' + operator:48} {b:>10,.0f} {pb:>12.2f} {_p95(db[1:]):>12.2f} {b / c:>10.2f} "
              f"{pb / base:>14.2f}")
        print(f"{'(c) no-op ' + operator:48} {c:>10,.0f} {pc:>12.2f} {_p95(dc[1:]):>12.2f}")
    for operator in operators:
        sub, db, dc, progress_c, (cpu0, cpu1, cpu2) = runs[operator]
        b, c = total / sum(db), total / sum(dc)
        pb = statistics.median(db[1:])
        print(f"-- {operator}", flush=True)
        early, late = statistics.mean(db[1:6]), statistics.mean(db[-5:])
        print(f"b/c = {b / c:.2f} (target >= 0.5: {verdict(b / c >= 0.5)})   b/a = {b / a:.2f} (target >= 0.3: {verdict(b / a >= 0.3)})   "
              f"p50 {pb:.2f} s (target <= 2 s: {verdict(pb <= 2)}); first batch (b) {db[0]:.2f} s, (c) {dc[0]:.2f} s", flush=True)
        print(f"(b) late/early = {late / early:.2f} (target <= 1.25: {verdict(late / early <= 1.25)}); state "
              f"{state_per_partition(spark, sub / 'ckpt', operator) / 1024:.1f} KiB per partition (statestore reader)", flush=True)
        _cpu_line(cpu0, cpu1, cpu2, len(db), len(dc))
        print("(b) per-batch seconds: " + " ".join(f"{x:.1f}" for x in db), flush=True)
        print("(c) per-batch seconds: " + " ".join(f"{x:.1f}" for x in dc), flush=True)
        progress_b = [json.loads(line) for line in (sub / "out" / "progress.jsonl").read_text().splitlines()]
        for label, progress in (("(b)", [x for x in progress_b if x.get("numInputRows")]), ("(c)", progress_c)):
            parts = {}
            for x in progress[1:]:
                x = x if isinstance(x, dict) else json.loads(x.json)
                for key, ms in x.get("durationMs", {}).items():
                    parts.setdefault(key, []).append(ms / 1000)
            print(f"{label} mean seconds per batch (batches 2-): " + ", ".join(
                f"{key} {statistics.mean(v):.2f}" for key, v in sorted(parts.items(), key=lambda kv: -statistics.mean(kv[1]))),
                flush=True)


def _flat(spark, args, work: Path, p: int, n: int, label: str) -> None:
    k = args.steps_per_batch
    print(f"[{label}] clean workload, seed {args.seed}, {p} partitions x {k} steps per batch, {n} batches, {args.protocol}", flush=True)
    t0 = time.perf_counter()
    stats = _workload_stream(spark, work, p, k, n, args.protocol, args.seed)
    d = [s.duration_s for s in stats]
    early, late = statistics.mean(d[1:6]), statistics.mean(d[-5:])
    print(f"batch seconds: first {d[0]:.2f}, batches 2-6 mean {early:.2f}, last 5 mean {late:.2f}, p50 {statistics.median(d[1:]):.2f}")
    print(f"late/early = {late / early:.2f} (target <= 1.25: {verdict(late / early <= 1.25)}); {p * k * n / (time.perf_counter() - t0):,.0f} "
          f"events/s wall; state {state_per_partition(spark, work / 'ckpt') / 1024:.1f} KiB per partition (statestore reader)", flush=True)
    if n <= 30:
        print("per-batch seconds: " + " ".join(f"{x:.1f}" for x in d), flush=True)
    else:  # the mean of every tenth of the run
        tenth = n // 10
        print("per-batch seconds, mean of each tenth of the run: "
              + " ".join(f"{statistics.mean(d[i:i + tenth]):.2f}" for i in range(0, tenth * 10, tenth)), flush=True)


def mode_flat(spark, args, work: Path) -> None:
    _flat(spark, args, work, args.partitions, args.flat_batches, "flat")


def mode_long(spark, args, work: Path) -> None:
    """The flat criterion over a long run: --long-batches (300) of --long-partitions (100)."""
    _flat(spark, args, work, args.long_partitions, args.long_batches, "long")


def mode_state(spark, args, work: Path) -> None:
    """Few partitions, large batches: state after 10^4 and 10^6 produced records per partition."""
    from emulator.workload import step_bursts
    from scenario_io.profiles import load_profiles

    print(f"[state] clean workload, {args.state_partitions} partitions, kip320", flush=True)
    prof = load_profiles()["clean"]
    results = {}
    for target in (10_000, 1_000_000):
        # Steps needed for ``target`` records in partition 0 (the generator is deterministic).
        produced, steps = 0, 0
        gen = step_bursts(args.seed, 0, prof)
        while produced < target:
            for step in next(gen):
                steps += 1
                if "produce" in step:
                    produced += len(step["produce"].get("values", [None]))
        per_batch = max(1000, steps // 100)  # bounded payloads: a micro-batch of ~15k steps at 10^6
        batches = -(-steps // per_batch)
        sub = work / f"state-{target}"
        t0 = time.perf_counter()
        _workload_stream(spark, sub, args.state_partitions, per_batch, batches, "kip320", args.seed)
        results[target] = state_per_partition(spark, sub / "ckpt")
        print(f"  {target:>9,} records ({steps:,} steps, {batches} batches of {per_batch:,}): state "
              f"{results[target] / 1024:.1f} KiB per partition ({time.perf_counter() - t0:.0f} s)", flush=True)
        shutil.rmtree(sub, ignore_errors=True)
    s4, s6 = results[10_000], results[1_000_000]
    print(f"state per partition: {s4 / 1000:.1f} KB after 10^4, {s6 / 1000:.1f} KB after 10^6 records; "
          f"target <= 50 KB: {verdict(max(s4, s6) <= 50_000)}; ratio {s6 / s4:.2f} (target <= 1.5: {verdict(s6 / s4 <= 1.5)})", flush=True)


class RssSampler:
    """Peak resident memory of the Spark JVM and its Python workers (children of this process)."""

    def __init__(self) -> None:
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pids(self) -> list[int]:
        import os

        out, todo = [], [os.getpid()]
        children: dict[int, list[int]] = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(d.name))
                except (OSError, ValueError, IndexError):
                    pass
        while todo:
            pid = todo.pop()
            for c in children.get(pid, []):
                out.append(c)
                todo.append(c)
        return out

    @staticmethod
    def _rss(pid: int) -> tuple[str, int]:
        """(process name, RSS bytes); ("", 0) for a process that is gone."""
        try:
            name, rss = "", 0
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Name:"):
                    name = line.split()[1]
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
            return name, rss
        except OSError:
            return "", 0

    def sample(self) -> int:
        return sum(self._rss(pid)[1] for pid in self._pids())

    @staticmethod
    def _is_source(pid: int) -> bool:
        """Whether ``pid`` is a query's Python streaming source process (the workload generator)."""
        try:
            return b"python_streaming_source_runner" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    def split(self) -> tuple[int, int, int, int]:
        """RSS now of the JVM, of the Python workers (its descendants but the source), of the
        streaming source's process and of this process."""
        import os

        jvm = workers = source = 0
        for pid in self._pids():
            name, rss = self._rss(pid)
            if name == "java":
                jvm += rss
            elif self._is_source(pid):
                source += rss
            else:
                workers += rss
        return jvm, workers, source, self._rss(os.getpid())[1]

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self.sample()
            self.samples.append((time.perf_counter(), rss))
            self.peak = max(self.peak, rss)
            self._stop.wait(0.5)

    def start(self) -> "RssSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()


class MemoryPerBatch:
    """A batch observer: after each micro-batch, the JVM's live heap after a full GC (the leak
    test: RSS of a JVM only grows towards -Xmx), and the RSS of the JVM, of its Python workers
    and of this driver process."""

    def __init__(self, spark, sampler: RssSampler) -> None:
        self.spark, self.sampler, self.rows = spark, sampler, []

    def on_spark_batch(self, kinds, batch_id: int, output_dir: Path, counts=None) -> None:
        jvm = self.spark.sparkContext._jvm
        jvm.System.gc()
        runtime = jvm.java.lang.Runtime.getRuntime()
        live = runtime.totalMemory() - runtime.freeMemory()
        self.rows.append((batch_id, live, *self.sampler.split()))

    def finish(self, output_dir: Path) -> None:
        pass

    def flat(self, column: int) -> tuple[float, float, bool]:
        """Mean of batches 2-6 vs the last 5 (batch 1 carries start-up): (early, late, within 5%?)."""
        xs = [r[column] for r in self.rows]
        early, late = statistics.mean(xs[1:6]), statistics.mean(xs[-5:])
        return early, late, late <= 1.05 * early


def mode_scale(spark, args, work: Path) -> None:
    k, n = args.steps_per_batch, 10
    print(f"[scale] clean workload, {k} steps per partition per batch, {n} batches, RocksDB state store, {args.protocol}", flush=True)
    rates = {}
    mib = 2 ** 20
    for partitions in (1_000, 10_000):
        sampler = RssSampler().start()
        memory = MemoryPerBatch(spark, sampler)
        stats = _workload_stream(spark, work / f"scale-{partitions}", partitions, k, n, args.protocol, args.seed,
                                 state_store="rocksdb", observer=memory)
        sampler.stop()
        durations_ = [s.duration_s for s in stats][1:]  # the first batch carries start-up
        rates[partitions] = partitions * k * len(durations_) / sum(durations_)
        print(f"  {partitions:>6,} partitions: {rates[partitions]:,.0f} events/s (batches 2-{n}), batch p50 "
              f"{statistics.median(durations_):.2f} s, peak RSS JVM + Python workers {sampler.peak / mib:,.0f} MiB", flush=True)
        for column, name in ((1, "JVM live heap after GC"), (2, "JVM RSS"), (3, "Python workers RSS"),
                             (4, "source process RSS"), (5, "driver Python RSS")):
            early, late, ok = memory.flat(column)
            print(f"      {name:24} batches 2-6 mean {early / mib:7,.0f} MiB, last 5 mean {late / mib:7,.0f} MiB: "
                  f"{'flat' if ok else 'GROWING'} (target: last 5 <= 1.05 x batches 2-6)", flush=True)
        print("      per batch (MiB, live heap / JVM / workers / source / driver): " + "  ".join(
            f"{r[1] // mib}/{r[2] // mib}/{r[3] // mib}/{r[4] // mib}/{r[5] // mib}" for r in memory.rows), flush=True)
    ratio = rates[1_000] / rates[10_000]
    print(f"10,000 vs 1,000 partitions: events/s {rates[10_000]:,.0f} vs {rates[1_000]:,.0f} (1,000/10,000 = {ratio:.2f}, "
          f"target <= 1.5: {verdict(ratio <= 1.5)})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="throughput", choices=("throughput", "workload", "flat", "long", "state", "scale", "rows", "all"))
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=100, help="throughput: events per partition")
    ap.add_argument("--batches", type=int, default=5, help="throughput: event files = micro-batches")
    ap.add_argument("--steps-per-batch", type=int, default=20, help="workload/flat/scale: steps per partition per batch")
    ap.add_argument("--flat-batches", type=int, default=30, help="workload/flat: micro-batches")
    ap.add_argument("--long-batches", type=int, default=300, help="long: micro-batches")
    ap.add_argument("--long-partitions", type=int, default=100, help="long: partitions")
    ap.add_argument("--state-partitions", type=int, default=2)
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2, help="rows: alternated runs of each form")
    ap.add_argument("--operators", default=",".join(OPERATOR_NAMES), metavar="A,B",
                    help="workload: the stateful operators of replemu stream --operator to measure, comma-separated "
                         f"(default: {','.join(OPERATOR_NAMES)}, run in this order; p50s compare with the default's, "
                         f"else the first's)")
    ap.add_argument("--tws", action="store_true", help="throughput: also run the job on transformWithStateInPandas")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark SQL setting for every query of the run (repeatable), e.g. "
                         "spark.sql.execution.arrow.maxRecordsPerBatch=100000")
    args = ap.parse_args()
    from streaming.session import build_spark

    spark = build_spark()
    for setting in args.conf:
        key, _, value = setting.partition("=")
        spark.conf.set(key, value)
        print(f"--conf {key}={value}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-"))
    try:
        modes = ("throughput", "workload", "flat", "long", "state", "scale") if args.mode == "all" else (args.mode,)
        for mode in modes:
            globals()[f"mode_{mode}"](spark, args, work / mode)
            print(flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
