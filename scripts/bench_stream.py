#!/usr/bin/env python3
"""Benchmark the streaming job against the core alone and against Spark's own floor.

For P partitions x E events (a seeded mix of produces, fetches, elections, crashes and
restarts on 3 replicas), prints side by side the events/s of
  (a) the core alone in one process,
  (b) the streaming job (applyInPandasWithState stepping the core, Parquet sinks),
  (c) a no-op applyInPandasWithState over the same events (Spark's floor),
with the ratios b/a and b/c, the micro-batch latency p50/p95 of (b) and (c), and the state
bytes of one partition after 10^4 and 10^6 produced records (compaction keeps it bounded).

    python scripts/bench_stream.py [--partitions 1000] [--events 100] [--batches 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator import VARIANTS, Config, Replay, parse_scenario  # noqa: E402
from emulator.steps import Elect, Fetch, Produce  # noqa: E402
from streaming.events import scenario_rows, write_event_files  # noqa: E402


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


def noop_stream(spark, events_dir: Path, checkpoint: Path) -> list[dict]:
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.schemas import EVENT_SCHEMA

    def noop(key, pdfs, state):
        n = sum(len(pdf) for pdf in pdfs)
        state.update(((state.get[0] if state.exists else 0) + n,))
        return iter(())

    events = spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(events_dir))
    out = events.groupBy("topic", "partition").applyInPandasWithState(
        noop, "n long", "n long", "append", GroupStateTimeout.NoTimeout)
    query = (out.writeStream.foreachBatch(lambda df, _id: df.write.format("noop").mode("overwrite").save())
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def durations(progress: list[dict]) -> list[float]:
    return [p["durationMs"]["triggerExecution"] / 1000 for p in progress]


def state_bytes(records: int) -> int:
    from streaming.processor import COMPACT_MIN_RECORDS
    from streaming.state_codec import pack_replay

    p = Replay((1, 2, 3), Config(acks="1"), VARIANTS["kip320"])
    p.apply(Elect())
    batch = 1000
    for i in range(records // batch):
        p.apply(Produce(values=tuple(f"v{i}-{k}" for k in range(batch))))
        for f in (2, 3, 2, 3):
            p.apply(Fetch(replica=f))
        p.compact(COMPACT_MIN_RECORDS)
    return sum(len(v) for v in pack_replay(p).values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=100, help="events per partition")
    ap.add_argument("--batches", type=int, default=5, help="event files = micro-batches")
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-state", action="store_true", help="skip the 10^6-record state measurement")
    args = ap.parse_args()
    total = args.partitions * args.events
    print(f"seed {args.seed}  partitions {args.partitions}  events/partition {args.events}  total events {total}  "
          f"micro-batches {args.batches}  protocol {args.protocol}", flush=True)

    rng = random.Random(args.seed)
    scenarios = [parse_scenario(workload(k, args.events, rng)) for k in range(args.partitions)]
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-"))
    try:
        write_event_files([scenario_rows(s) for s in scenarios], work / "events", split=args.batches)
        print("generated events; (a) core alone ...", flush=True)
        a = core_alone(scenarios, args.protocol)

        from streaming.job import build_spark, run_stream

        spark = build_spark()
        print("(b) streaming job ...", flush=True)
        t0 = time.perf_counter()
        stats_b = run_stream(work / "events", work / "out", work / "ckpt", args.protocol, max_files_per_trigger=1,
                             spark=spark, quiet=True)
        wall_b = time.perf_counter() - t0
        print("(c) no-op applyInPandasWithState ...", flush=True)
        progress_c = noop_stream(spark, work / "events", work / "ckpt-noop")
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    db, dc = [s.duration_s for s in stats_b if s.input_rows], durations(progress_c)
    b, c = total / sum(db), total / sum(dc)
    print()
    print(f"{'':32} {'events/s':>10} {'batch p50 s':>12} {'batch p95 s':>12}")
    print(f"{'(a) core alone':32} {a:>10,.0f}")
    print(f"{'(b) streaming job':32} {b:>10,.0f} {statistics.median(db):>12.2f} {_p95(db):>12.2f}")
    print(f"{'(c) no-op applyInPandasWithState':32} {c:>10,.0f} {statistics.median(dc):>12.2f} {_p95(dc):>12.2f}")
    print(f"b/a = {b / a:.2f}   b/c = {b / c:.2f}   (b) wall time incl. start-up {wall_b:.1f} s; "
          f"first batch (b) {db[0]:.2f} s, (c) {dc[0]:.2f} s")
    if not args.skip_state:
        s4, s6 = state_bytes(10_000), state_bytes(1_000_000)
        print(f"state bytes per partition: {s4:,} after 10^4 records, {s6:,} after 10^6 records ({s6 / s4:.2f}x; bounded: within 2x)")
    return 0


def _p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


if __name__ == "__main__":
    sys.exit(main())
