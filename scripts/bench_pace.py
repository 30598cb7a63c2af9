#!/usr/bin/env python3
"""Benchmark the stream's pace (issue 45): a micro-batch against Spark's stateful floor, the
stream's steps per CPU second against its own core, and the project against an older commit.

Every run is a process as a user starts it, sampled from /proc until it and every process it
started ended (``bench_scaleout.Sampler``: CPU of every process, the driver's JVM and Python
workers included), on ``--master`` (``local[2]``):

  floor      a no-op ``applyInPandasWithState`` over the same workload source (the ticks of
             ``--partitions`` x ``--steps-per-batch``), in a session built as ``replemu stream``
             builds its own (``streaming.session.build_spark``, conf/spark.conf): what Spark
             costs for this shape before any work; ``--operators`` adds the no-op of each other
             operator (``transformWithState``: the Row API, RocksDB)
  stream     ``replemu stream --workload clean --partitions P --seed S --steps-per-batch K
             --max-steps K*B --protocol kip320`` (the GX suites validating every micro-batch,
             as the command runs), once per ``--operators`` entry
  reference  with ``--baseline REF``: the same command at commit REF (``git archive``; its core
             compiled with mypyc like the project's when ``--compiled``), runs alternated
             ``--runs`` times

Printed per run: micro-batch p50 over batches 2..B (the first pays for the JVM's warm-up), the
floor ratio (floor p50 / stream p50: 1 is Spark's floor itself), late/early (mean of the last 5
batches / batches 2-6), state per partition (Spark's ``memoryUsedBytes`` / ``numRowsTotal`` of
the state operator, last batch; and the bytes of a state row's binary fields, read back with the
``statestore`` reader), CPU seconds of all processes, and steps per CPU second over batches
2..B (the CPU counted at the end of batch 1 subtracted: the start-up is not a step).  The core's
own rate is the same steps stepped by ``emulator.run.Replay`` alone (process CPU time).

``--pace 20,200,1000`` also runs the stream at each of those steps per batch (``--pace-batches``
micro-batches each, ``--pace-partitions`` partitions) and prints, for each, its steps per CPU second
and, from the second on, its marginal rate against the previous one: the steps a batch gains over
the CPU a batch gains, so what every micro-batch costs anyway (Spark's scheduling, the commit, the
validation's fixed jobs) is left out, and what one more step costs is left.

``--decompose`` runs the job stage by stage, each a process of its own over the same workload source
(``--partitions`` x ``--steps-per-batch``), and prints where a micro-batch's CPU goes (by process
role) and its p50, each stage adding one part of ``replemu stream`` to the one before:

  no-op         the floor (above)
  state-only    the no-op carrying a state row of the job's size (its ~4 KB), no payload out:
                the bound of a design whose state function writes its rows itself
  io            the no-op carrying the job's state and a payload of its size out per group
  step          the job's state function (``streaming.pipeline.payloads``), payloads to a no-op sink
  rows          + the payloads unpacked into ``OUTPUT_SCHEMA`` rows (``payloads_to_rows``), no-op sink
  writes        + ``streaming.sink.ParquetSink`` (rows cached, counted, each kind written, committed)
  stream        + the GX suites on every batch (``expectations.suites.ExpectationsObserver``): the job

    nice -n 10 python scripts/bench_pace.py [--partitions 1000] [--steps-per-batch 20] [--batches 30]
        [--baseline 896fc71 --compiled --runs 1] [--operators applyInPandasWithState,transformWithState]
        [--pace 20,200,1000] [--decompose] [--master 'local[2]']
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import extract, project_head  # noqa: E402
from bench_scaleout import TICK, Sampler, attribute, become_subreaper, landed  # noqa: E402
from bench_stream import noop_apply, noop_tws, tws_conf  # noqa: E402

DEFAULT_OPERATOR = "applyInPandasWithState"
IO_FLOOR = "applyInPandasWithState-io"  # the floor with the job's state and output sizes (--io-floor)
STATE_FLOOR = "applyInPandasWithState-state"  # the floor with the job's state size, no payload out
# --decompose: (label, the floor_main stage), each adding one part of the job to the one before
STAGES = (("no-op applyInPandasWithState (the floor)", DEFAULT_OPERATOR),
          ("+ a state row of the job's size (no output)", STATE_FLOOR),
          ("+ a payload of the job's size out per group", IO_FLOOR),
          ("the job's state function, payloads to a no-op sink", "step"),
          ("+ the payloads unpacked into rows", "rows"),
          ("+ ParquetSink: rows cached, each kind written", "writes"),
          ("+ the GX suites on every batch (the job)", "stream"))


@dataclass
class Run:
    label: str
    batch_s: list[float]
    cpu_s: float  # every process of the run
    cpu_after_first_s: float  # of which after the first micro-batch landed
    steps_after_first: int  # steps applied after the first micro-batch
    state_memory_per_partition: float | None  # bytes, Spark's memoryUsedBytes / numRowsTotal (last batch)
    checkpoint: Path
    roles: dict[str, float] = field(default_factory=dict)  # CPU seconds of the whole run per process role

    @property
    def cpu_per_batch(self) -> float:
        """CPU seconds of every process per micro-batch after the first."""
        return self.cpu_after_first_s / (len(self.batch_s) - 1) if len(self.batch_s) > 1 else float("nan")

    @property
    def p50(self) -> float:
        return statistics.median(self.batch_s[1:]) if len(self.batch_s) > 1 else float("nan")

    @property
    def late_early(self) -> float:
        d = self.batch_s
        return statistics.mean(d[-5:]) / statistics.mean(d[1:6]) if len(d) >= 7 else float("nan")

    @property
    def steps_per_cpu_s(self) -> float:
        return self.steps_after_first / self.cpu_after_first_s if self.cpu_after_first_s else float("nan")


class CpuSampler(Sampler):
    """``bench_scaleout.Sampler`` that also keeps the CPU counted so far when each micro-batch landed."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.cpu_at_batch: dict[int, float] = {}

    def sample(self) -> list:
        procs = super().sample()
        batch = self.step()
        if batch not in self.cpu_at_batch:
            # everything sampled so far (own + reaped children) and what this script reaped itself
            seen = sum(s.own + s.children for s in self.seen.values()) / TICK
            self.cpu_at_batch[batch] = seen + sum(self.reaped.values())
        return procs


def sampled_run(label: str, cmd: list[str], cwd: Path, env: dict[str, str], work: Path, progress: Path,
                steps_per_batch: int, partitions: int, interval: float) -> Run:
    """Run ``cmd`` until every process it started ended; its micro-batches from ``progress``."""
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(work / f"{label}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        sampler = CpuSampler(proc, lambda: landed(progress), interval)
        sampler.run(lambda batch: print(f"    [{label}] {batch} micro-batches ({time.monotonic() - start:,.0f} s)", flush=True)
                    if batch % 10 == 0 else None)
    if sampler.returncode:
        raise SystemExit(f"bench_pace: {label} failed (exit {sampler.returncode}):\n  {' '.join(cmd)}\n"
                         + (work / f"{label}.log").read_text()[-3000:])
    cpu, _ = attribute(sampler.seen, sampler.reaped)
    total = sum(cpu.values())
    rows = [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []
    rows = [r for r in rows if r.get("numInputRows")]
    state = None
    if rows and rows[-1].get("stateOperators"):
        op = rows[-1]["stateOperators"][0]
        state = op["memoryUsedBytes"] / op["numRowsTotal"] if op.get("numRowsTotal") else None
    # CPU when the first micro-batch had landed: the sample that first saw one line of progress
    first = sampler.cpu_at_batch.get(1, total)
    return Run(label, [r["durationMs"]["triggerExecution"] / 1000 for r in rows], total, max(0.0, total - first),
               steps_per_batch * partitions * max(0, len(rows) - 1), state, work / label / "ck", cpu)


def stream_run(label: str, tree: Path, work: Path, args, steps_per_batch: int, batches: int, operator: str | None,
               pure: bool) -> Run:
    out, ck = work / label / "out", work / label / "ck"
    shutil.rmtree(work / label, ignore_errors=True)
    cmd = [sys.executable, "-m", "replemu", "stream", "--workload", "clean", "--partitions", str(args.partitions),
           "--seed", str(args.seed), "--steps-per-batch", str(steps_per_batch), "--max-steps", str(steps_per_batch * batches),
           "--protocol", args.protocol, "--master", args.master, "--no-spark-ui", "--output", str(out), "--checkpoint", str(ck)]
    if operator is not None and operator != DEFAULT_OPERATOR:
        cmd += ["--operator", operator]
    env = _env(tree, pure)
    print(f"  [{label}] replemu stream, {args.partitions:,} partitions x {steps_per_batch} steps, {batches} micro-batches", flush=True)
    return sampled_run(label, cmd, tree, env, work, out / "progress.jsonl", steps_per_batch, args.partitions, args.interval)


def floor_run(label: str, work: Path, args, operator: str, batches: int) -> Run:
    """``operator``'s no-op over the workload source, or one stage of ``--decompose`` (``STAGES``)."""
    shutil.rmtree(work / label, ignore_errors=True)
    (work / label).mkdir(parents=True)
    progress = work / label / "progress.jsonl"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--floor-of", operator, "--partitions", str(args.partitions),
           "--seed", str(args.seed), "--steps-per-batch", str(args.steps_per_batch), "--batches", str(batches),
           "--master", args.master, "--floor-dir", str(work / label)]
    print(f"  [{label}] {operator} over the same source", flush=True)
    return sampled_run(label, cmd, ROOT, _env(ROOT, False), work, progress, args.steps_per_batch, args.partitions, args.interval)


def _env(tree: Path, pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REPLEMU_PURE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env["REPLEMU_PURE"] = "1"
    return env


# -- the floor, in its own process ------------------------------------------------------------------

def floor_main(args) -> int:
    """A no-op stateful operator over the workload source; one progress line per micro-batch."""
    from scenario_io.profiles import load_profiles
    from streaming.session import build_spark
    from streaming.workload_source import WorkloadSpec, register

    spark = build_spark(args.master, ui=False)
    register(spark)
    workload = WorkloadSpec.of(load_profiles()["clean"], args.seed, args.partitions, args.steps_per_batch,
                               max_steps=args.steps_per_batch * args.batches)
    events = spark.readStream.format("replemu_workload").options(**workload.to_options()).load()
    work = Path(args.floor_dir)
    query = None  # set by a stage that starts the job's own query
    if args.floor_of == DEFAULT_OPERATOR:
        out = noop_apply(events)
    elif args.floor_of in (IO_FLOOR, STATE_FLOOR):
        # The job's shape without its work: the same state schema holding fixed bytes of the job's
        # sizes, and (IO_FLOOR) one payload row of a group's size out per group: what the API costs
        # to carry them.
        from pyspark.sql.streaming.state import GroupStateTimeout

        from streaming.pipeline import output_frame
        from streaming.schemas import GROUP_OUTPUT_SCHEMA, STATE_SCHEMA
        from streaming.state_codec import empty_state, to_tuple

        state_row = to_tuple({**empty_state(args.protocol), "core": b"c" * 3500, "generator": b"g" * 700})
        payload = b"p" * 12_000 if args.floor_of == IO_FLOOR else b""

        class Rows:
            def payload(self) -> bytes:
                return payload

        def io(key, pdfs, state):
            for pdf in pdfs:
                pdf["packed"].tolist()
            _ = state.get if state.exists else None
            state.update(state_row)
            yield output_frame(key[0], key[1], Rows())

        from pyspark.sql.functions import struct, to_json

        packed = events.select("topic", "partition", to_json(struct("seq", "type", "args")).alias("packed"))
        out = packed.groupBy("topic", "partition").applyInPandasWithState(io, GROUP_OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                                                          GroupStateTimeout.NoTimeout)
        out = out.select(out.payload)
    elif args.floor_of == "transformWithState":
        for key, value in tws_conf().items():  # a session of its own: set for good
            spark.conf.set(key, value)
        out = noop_tws(events)
    elif args.floor_of in ("step", "rows"):
        # The job's own state function, its payloads to a no-op sink ("rows": unpacked first).
        from pyspark.sql.functions import lit

        from streaming.pipeline import payloads, replicate
        from streaming.processor import WORKLOAD_COMPACT_MIN_RECORDS
        from streaming.schemas import CORRUPT_COLUMN, REASON_COLUMN

        no_corrupt = lit(None).cast("string")
        events = events.withColumn(CORRUPT_COLUMN, no_corrupt).withColumn(REASON_COLUMN, no_corrupt)
        out = (payloads if args.floor_of == "step" else replicate)(events, args.protocol, None, None,
                                                                    WORKLOAD_COMPACT_MIN_RECORDS)
    elif args.floor_of in ("writes", "stream"):
        # The job as replemu stream starts it (streaming.job.start_stream), without ("writes") or
        # with ("stream") the GX suites: the same sink, compaction and checkpoint.
        from streaming.job import start_stream

        observer = None
        if args.floor_of == "stream":
            from expectations.suites import ExpectationsObserver

            observer = ExpectationsObserver(family="partition")
        query, _ = start_stream(spark, "", work / "out", work / "ck", args.protocol, workload=workload, observer=observer)
    else:
        raise SystemExit(f"bench_pace: no floor for operator {args.floor_of!r}")
    with open(work / "progress.jsonl", "w") as f:
        if query is None:
            query = (out.writeStream.foreachBatch(lambda df, _id: df.write.format("noop").mode("overwrite").save()).option("checkpointLocation", str(work / "ck"))
                     .trigger(availableNow=True).start())
        seen = 0
        while query.isActive or seen < len(query.recentProgress):
            for p in query.recentProgress[seen:]:
                f.write(_progress_json(p) + "\n")
                f.flush()
            seen = len(query.recentProgress)
            if not query.isActive:
                break
            time.sleep(0.2)
        query.awaitTermination()
        for p in query.recentProgress[seen:]:
            f.write(_progress_json(p) + "\n")
    spark.stop()
    return 0


def _progress_json(p) -> str:
    """A progress (pyspark's ``StreamingQueryProgress`` or a dict) as one line of JSON."""
    return p.json if hasattr(p, "json") and isinstance(p.json, str) else json.dumps(p, default=str)


def state_bytes_main(args) -> int:
    """The mean bytes of a state row's binary fields in each checkpoint (statestore reader)."""
    from pyspark.sql import functions as F

    from streaming.job import state_frame
    from streaming.session import build_spark

    spark = build_spark(args.master, ui=False)
    for ck in args.state_bytes:
        try:
            df = state_frame(spark, ck)
        except Exception as exc:  # noqa: BLE001 - a checkpoint this build cannot read (another layout): no number
            print(json.dumps({"checkpoint": ck, "bytes": None, "why": str(exc)[:200]}), flush=True)
            continue
        names = [f.name for f in df.schema.fields if f.dataType.typeName() == "binary"]
        cols = [F.coalesce(F.length(F.col(c)), F.lit(0)) for c in names]
        mean = df.select(sum(cols[1:], cols[0]).alias("b")).agg(F.avg("b")).collect()[0][0] if cols else None
        print(json.dumps({"checkpoint": ck, "bytes": mean}), flush=True)
    spark.stop()
    return 0


def state_bytes(checkpoints: list[Path], master: str) -> dict[str, float | None]:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--master", master, "--state-bytes",
                           *map(str, checkpoints)], env=_env(ROOT, False), capture_output=True, text=True)
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["checkpoint"]] = d["bytes"]
    return out


# -- the core's own rate -------------------------------------------------------------------------------

def core_rate(args, partitions: int = 100, steps: int = 600) -> float:
    """Steps per CPU second of ``Replay.apply`` alone over the workload's first ``steps`` steps of
    ``partitions`` partitions (in this process: the project's core, compiled when built)."""
    code = f"""
import time
from emulator import BUILD, VARIANTS, Replay
from emulator.scenario import parse_scenario
from emulator.workload import first_steps_document
from scenario_io.profiles import load_profiles
profile = load_profiles()["clean"]
scenarios = [parse_scenario(first_steps_document({args.seed}, k, profile, {steps})) for k in range({partitions})]
t = time.process_time()
n = 0
for s in scenarios:
    r = Replay(s.replicas, s.config, VARIANTS["{args.protocol}"])
    for step in s.steps:
        r.apply(step)
        n += 1
print(n / (time.process_time() - t), BUILD)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(ROOT, False), capture_output=True, text=True,
                          check=True)
    rate, build = done.stdout.strip().split(" ", 1)
    print(f"  the project's core runs {build}", flush=True)
    return float(rate)


# -- the table --------------------------------------------------------------------------------------

def row(label: str, r: Run, floor_p50: float | None, state_rows: dict, core: float) -> str:
    ratio = floor_p50 / r.p50 if floor_p50 else float("nan")
    sb = state_rows.get(str(r.checkpoint))
    return (f"  {label:44} {r.p50:8.2f} {ratio:8.2f} {r.late_early:8.2f} "
            f"{(r.state_memory_per_partition or float('nan')) / 1024:9.1f} {(sb if sb is not None else float('nan')) / 1024:9.1f} "
            f"{r.cpu_s:8.1f} {r.steps_per_cpu_s:10,.0f} {r.steps_per_cpu_s / core:7.1%}")


HEADER = (f"  {'':44} {'p50 s':>8} {'floor/x':>8} {'late/ea':>8} {'KiB mem':>9} {'KiB row':>9} {'CPU s':>8} "
          f"{'steps/CPUs':>10} {'of core':>7}")


def decompose(work: Path, args, core: float) -> None:
    """Run ``STAGES`` one after another and table each: p50, the floor's p50 / its p50, CPU per batch
    after the first, what it adds to the stage before, and the CPU by process role per batch."""
    runs = [(label, floor_run(f"stage-{stage}", work, args, stage, args.batches)) for label, stage in STAGES]
    floor = runs[0][1]
    steps = args.partitions * args.steps_per_batch
    print(f"\nwhere a micro-batch goes, {args.partitions:,} partitions x {args.steps_per_batch} steps, {args.batches} "
          f"micro-batches (CPU: every process, per batch after the first; roles: shares of the whole run's CPU)")
    print(f"  {'':50} {'p50 s':>7} {'floor/x':>8} {'CPU s':>7} {'+CPU s':>7} {'steps/CPUs':>10}  roles")
    before = None
    for label, r in runs:
        total = sum(r.roles.values()) or float("nan")
        roles = ", ".join(f"{role} {seconds / total:.0%}" for role, seconds in r.roles.items() if seconds / total >= 0.005)
        added = r.cpu_per_batch - before if before is not None else float("nan")
        print(f"  {label:50} {r.p50:7.2f} {floor.p50 / r.p50:8.2f} {r.cpu_per_batch:7.2f} {added:7.2f} "
              f"{steps / r.cpu_per_batch:10,.0f}  {roles}", flush=True)
        before = r.cpu_per_batch
    print(f"  (the core alone: {steps / core:.2f} CPU s for a batch's {steps:,} steps)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--steps-per-batch", type=int, default=20)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--operators", default=DEFAULT_OPERATOR, help="comma-separated: the stream and its floor on each")
    ap.add_argument("--io-floor", action="store_true", help="also the no-op that carries the job's state and payload sizes")
    ap.add_argument("--baseline", metavar="REF", help="also run commit REF (git archive), alternated")
    ap.add_argument("--compiled", action="store_true", help="with --baseline: compile REF's core with mypyc as the project's")
    ap.add_argument("--runs", type=int, default=1, help="alternated runs of each side")
    ap.add_argument("--pace", default="", help="steps per batch to run the stream at (e.g. 20,200,1000)")
    ap.add_argument("--pace-batches", type=int, default=6)
    ap.add_argument("--pace-partitions", type=int, help="partitions of the --pace runs (default: --partitions)")
    ap.add_argument("--decompose", action="store_true", help="also run the job stage by stage (STAGES) and table "
                    "where a micro-batch's CPU goes")
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--work", help="keep the runs here (default: a temporary directory, removed)")
    ap.add_argument("--floor-of", help=argparse.SUPPRESS)
    ap.add_argument("--floor-dir", help=argparse.SUPPRESS)
    ap.add_argument("--state-bytes", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_of:
        return floor_main(args)
    if args.state_bytes:
        return state_bytes_main(args)
    become_subreaper()
    operators = [o for o in args.operators.split(",") if o]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="replemu-bench-pace-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bench_pace: project {project_head()}, {args.partitions:,} partitions x {args.steps_per_batch} steps a batch, "
          f"{args.batches} micro-batches, {args.protocol}, {args.master}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    ref_tree = None
    try:
        if args.baseline:
            ref_tree = extract(args.baseline, work / "ref-tree", who="bench_pace")
            if args.compiled:
                print(f"  compiling {args.baseline}'s core with mypyc (setup.py build_ext --inplace)", flush=True)
                subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=ref_tree, env=_env(ref_tree, False),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        core = core_rate(args)
        print(f"  the core alone: {core:,.0f} steps per CPU second", flush=True)
        results: dict[str, list[Run]] = {}
        for i in range(args.runs):
            if args.io_floor:
                results.setdefault(f"floor: no-op {IO_FLOOR}", []).append(floor_run(f"floor-io-{i}", work, args, IO_FLOOR, args.batches))
            for op in operators:
                results.setdefault(f"floor: no-op {op}", []).append(floor_run(f"floor-{op}-{i}", work, args, op, args.batches))
                results.setdefault(f"replemu stream ({op})", []).append(
                    stream_run(f"stream-{op}-{i}", ROOT, work, args, args.steps_per_batch, args.batches, op, False))
            if ref_tree is not None:
                results.setdefault(f"replemu stream at {args.baseline}", []).append(
                    stream_run(f"ref-{i}", ref_tree, work, args, args.steps_per_batch, args.batches, None, not args.compiled))
        states = state_bytes([r.checkpoint for runs in results.values() for r in runs if not r.label.startswith("floor")],
                             args.master)
        print(f"\n{args.partitions:,} partitions x {args.steps_per_batch} steps, {args.batches} micro-batches "
              f"(p50 over batches 2-{args.batches}; floor/x: the floor's p50 / this p50)")
        print(HEADER)
        for label, runs in results.items():
            op = next((o for o in operators if f"({o})" in label or f"no-op {o}" in label), DEFAULT_OPERATOR)
            floors = results.get(f"floor: no-op {op}") or results.get(f"floor: no-op {DEFAULT_OPERATOR}")
            for i, r in enumerate(runs):
                floor_p50 = floors[i].p50 if floors else None
                print(row(f"{label}" + (f" #{i + 1}" if len(runs) > 1 else ""), r, floor_p50, states, core))
        project = results.get(f"replemu stream ({DEFAULT_OPERATOR})")
        apply_floor = results.get(f"floor: no-op {DEFAULT_OPERATOR}")
        if project and apply_floor:
            for label, runs in results.items():
                if label.startswith("replemu stream"):
                    ratio = statistics.median(f.p50 for f in apply_floor) / statistics.median(r.p50 for r in runs)
                    print(f"  {label}: no-op applyInPandasWithState's p50 / its p50 = {ratio:.2f} (target >= 0.8)")
        if ref_tree is not None and project:
            ref = results[f"replemu stream at {args.baseline}"]
            for label, runs in results.items():
                if label.startswith("replemu stream ("):
                    ratio = statistics.median(r.p50 for r in runs) / statistics.median(r.p50 for r in ref)
                    cpu = statistics.median(r.cpu_after_first_s for r in runs) / statistics.median(r.cpu_after_first_s for r in ref)
                    print(f"  {label} / {args.baseline}: micro-batch p50 x{ratio:.2f} (target <= 0.5), CPU after batch 1 x{cpu:.2f}")
        pace = argparse.Namespace(**{**vars(args), "partitions": args.pace_partitions or args.partitions})
        previous: tuple[int, Run] | None = None
        for k in [int(x) for x in args.pace.split(",") if x]:
            r = stream_run(f"pace-{k}", ROOT, work, pace, k, args.pace_batches, None, False)
            line = (f"  pace at {k:,} steps a batch ({pace.partitions:,} partitions): p50 {r.p50:.2f} s, {r.cpu_per_batch:.2f} CPU s a "
                    f"batch, {r.steps_per_cpu_s:,.0f} steps per CPU second after batch 1 = {r.steps_per_cpu_s / core:.1%} of the core's "
                    f"{core:,.0f}")
            if previous is not None:
                k0, r0 = previous
                marginal = pace.partitions * (k - k0) / (r.cpu_per_batch - r0.cpu_per_batch)
                line += (f"; marginal from {k0:,}: {marginal:,.0f} steps per CPU second = {marginal / core:.1%} of the core's"
                         + (" (target >= 10%)" if k == 200 else ""))
            print(line, flush=True)
            previous = (k, r)
        if args.decompose:
            decompose(work, args, core)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
