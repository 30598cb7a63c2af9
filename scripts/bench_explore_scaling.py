#!/usr/bin/env python3
"""Scaling of the Spark engine of ``replemu explore`` on one level, against the local engine.

One BFS level is measured (by default kip320, 3 replicas, records 2, epochs 2, crashes 1,
depth 6: level 6 expands a frontier of 111,714 states into 437,127 new ones):

1. the local engine (``emulator.search.search_local``, one process, ``workers=1``) searches to
   the depth; its last level is timed (wall and CPU seconds of the process);
2. the Spark engine searches to depth - 2 once (at ``local[2]``), and that work directory is kept;
3. per master (``--masters``, default ``local[1],local[2],local-cluster[2,1,2048]``), a fresh
   process starts a session, copies the work directory and resumes the search: level depth - 1
   runs untimed (it warms the JVMs' compilers and the Python workers, as the earlier levels of a
   whole search do), then the last level, timed by the engine's own clock (``Level.seconds``:
   the Spark job, writing the level and counting it), with the CPU seconds of the whole process
   tree (driver, JVMs, Python workers) over the level.

Each run prints the machine's load average before and after (1-minute), and the share of all
cores busy in the second before it starts.  The table: master, cores (task slots), seconds for the
level, new states/s, ratio against the local engine, per-core efficiency (states/s per core over
the local engine's states/s on its one core), CPU seconds of the level and CPU seconds per 10^6
new states.  Targets, printed with their numbers whether reached or not:

  speed     Spark at local[2] >= 1.5 x the local engine's states/s on the level;
  agree     every run's states per depth, transitions and violations (with their paths) equal the
            local engine's.

    python scripts/bench_explore_scaling.py [--masters local[1],local[2],local-cluster[2,1,2048]]
           [--runs 1] [--protocol kip320] [--replicas 3] [--depth 6] [--records 2] [--epochs 2] [--crashes 1]

``--runs N`` repeats every side N times, alternated (local, then each master, then again); the
table shows the best (shortest) run of each side and all runs' seconds.  When other work shares the
cores, the wall-clock ratio says little; the line "bound on idle cores" gives the ratio the CPU
seconds allow (cores x the local engine's CPU seconds / the level's CPU seconds).  ``--master-url URL``
adds a cluster master (``spark://HOST:7077``) with ``--cores`` its task slots, when it is not
``local...`` (for the table only).  The local engine can be skipped with ``--local-seconds S``
(its level time from an earlier run, so the ratio is still printed; agreement is then not checked).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_explore import add_space_arguments, machine_busy  # noqa: E402  (the space's flags, the load probe)

SPEED_TARGET = 1.5
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system, with reaped children) of ``root`` (default this process) and
    every live descendant: the driver, its JVM, executor JVMs and Python workers."""
    root = os.getpid() if root is None else root
    kids: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            stats[int(d.name)] = fields
            kids.setdefault(int(fields[1]), []).append(int(d.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        f = stats.get(pid)
        if f is not None:
            total += sum(int(x) for x in f[11:15])  # utime stime cutime cstime
        todo += kids.get(pid, [])
    return total / TICK


def cores_of(master: str, spark=None) -> int:
    m = re.fullmatch(r"local\[(\d+|\*)\]", master)
    if m:
        return os.cpu_count() if m.group(1) == "*" else int(m.group(1))
    m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*(\d+)\]", master)
    if m:
        return int(m.group(1)) * int(m.group(2))
    if master == "local":
        return 1
    return spark.sparkContext.defaultParallelism if spark is not None else 0


def load() -> float:
    return os.getloadavg()[0]


def space_of(args: argparse.Namespace, depth: int):
    from emulator.config import Config
    from emulator.explore import Bounds, Space
    from emulator.run import effective_variant

    cfg = Config()
    return Space(tuple(range(1, args.replicas + 1)), cfg, effective_variant(args.protocol, cfg),
                 Bounds(depth, args.records, args.epochs, args.crashes, args.power_crashes))


def outcome_json(out) -> dict:
    return {"states_per_depth": out.states_per_depth, "transitions": out.transitions,
            "violations": {k: list(v) for k, v in sorted(out.violations.items())}}


# -- one side, in a process of its own ------------------------------------------------------------

def side_local(args: argparse.Namespace) -> dict:
    from emulator.search import search_local

    marks: list[tuple[float, float]] = []
    levels = []

    def on_level(level) -> None:
        levels.append(level)
        marks.append((time.process_time(), load()))

    before = (time.process_time(), load())
    out = search_local(space_of(args, args.depth), on_level=on_level, clock=time.perf_counter, workers=1)
    last = levels[-1]
    cpu = marks[-1][0] - (marks[-2][0] if len(marks) > 1 else before[0])
    return {"side": "local", "cores": 1, "seconds": last.seconds, "cpu": cpu, "new_states": last.new_states,
            "transitions_level": last.transitions, "load_after": marks[-1][1], **outcome_json(out)}


def side_spark(args: argparse.Namespace) -> dict:
    from streaming.explore import search_spark
    from streaming.session import build_spark

    started = time.perf_counter()
    spark = build_spark(args.side, app_name="replemu-bench-explore-scaling")
    boot = time.perf_counter() - started
    try:
        work = Path(args.work)
        if args.prepare:
            out = search_spark(spark, space_of(args, args.depth - 2), work)
            return {"side": "prepare", **outcome_json(out)}
        cpu_at: list[float] = []
        levels = []

        def should_stop(_n: int) -> None:  # called just before a level starts
            cpu_at.append(tree_cpu())

        def on_level(level) -> None:
            if not level.resumed:
                cpu_at.append(tree_cpu())
                levels.append(level)

        spark.sparkContext.parallelize(range(cores_of(args.side, spark) * 2), cores_of(args.side, spark) * 2).count()
        out = search_spark(spark, space_of(args, args.depth), work, on_level=on_level, should_stop=should_stop,
                           clock=time.perf_counter)
        last = levels[-1]
        conf = spark.sparkContext.getConf()
        settings = {k: conf.get(k, None) for k in ("spark.sql.execution.arrow.maxRecordsPerBatch",
                                                    "spark.python.worker.reuse", "spark.sql.shuffle.partitions")}
        return {"side": args.side, "cores": cores_of(args.side, spark), "seconds": last.seconds,
                "cpu": cpu_at[-1] - cpu_at[-2], "new_states": last.new_states, "transitions_level": last.transitions,
                "boot": boot, "load_after": load(), "settings": settings, **outcome_json(out)}
    finally:
        spark.stop()


def run_side(args: argparse.Namespace, side: str, work: Path, prepare: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--side", side, "--work", str(work), "--protocol", args.protocol,
           "--replicas", str(args.replicas), "--depth", str(args.depth), "--records", str(args.records),
           "--epochs", str(args.epochs), "--crashes", str(args.crashes), "--power-crashes", str(args.power_crashes)]
    if prepare:
        cmd.append("--prepare")
    busy, before = machine_busy(), load()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"bench_explore_scaling: {side}: exit {done.returncode} from {' '.join(cmd)}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(busy_before=busy, load_before=before)
    return result


# -- the table ------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_space_arguments(ap)
    ap.add_argument("--masters", default="local[1],local[2],local-cluster[2,1,2048]",
                    help="comma-separated Spark masters (local-cluster[...] holds commas: written as is)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--local-seconds", type=float, default=None,
                    help="skip the local engine: its level seconds from an earlier run")
    ap.add_argument("--prepared", type=Path, default=None,
                    help="keep the Spark work directory searched to depth - 2 here, and reuse it when it exists")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(side_local(args) if args.side == "local" else side_spark(args)), flush=True)
        return 0

    masters = re.findall(r"local-cluster\[[^\]]*\]|[^,]+", args.masters)
    print(f"bench_explore_scaling protocol={args.protocol} replicas={args.replicas} depth={args.depth} "
          f"records={args.records} epochs={args.epochs} crashes={args.crashes} power_crashes={args.power_crashes} "
          f"masters={masters} runs={args.runs} cores={os.cpu_count()} loadavg={','.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"busy_before={machine_busy():.0%} python={sys.version.split()[0]} date={time.strftime('%Y-%m-%d %H:%M')}",
          flush=True)
    import emulator
    print(f"  core build: {emulator.BUILD}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="replemu-bench-scaling-"))
    runs: dict[str, list[dict]] = {}
    try:
        prepared = args.prepared or tmp / "prepared"
        t = time.perf_counter()
        reused = prepared.exists()
        prep = run_side(args, "local[2]", prepared, prepare=True)
        print(f"  {'reused' if reused else 'prepared'} the Spark work directory {prepared} to depth {args.depth - 2} in "
              f"{time.perf_counter() - t:.0f} s: {prep['states_per_depth']}", flush=True)
        sides = ([] if args.local_seconds is not None else ["local"]) + masters
        for run in range(args.runs):
            for side in sides:
                work = tmp / "work"
                shutil.rmtree(work, ignore_errors=True)
                if side != "local":
                    shutil.copytree(prepared, work)
                r = run_side(args, side, work)
                runs.setdefault(side, []).append(r)
                print(f"  run {run + 1}/{args.runs} {side}: level {args.depth}: {r['new_states']:,} new states in "
                      f"{r['seconds']:.1f} s ({r['new_states'] / r['seconds']:,.0f}/s), CPU {r['cpu']:.1f} s, "
                      f"load {r['load_before']:.2f} -> {r['load_after']:.2f}, busy before {r['busy_before']:.0%}"
                      + (f", session start {r['boot']:.1f} s (not counted)" if "boot" in r else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    best = {side: min(rs, key=lambda r: r["seconds"]) for side, rs in runs.items()}
    local_s = best["local"]["seconds"] if "local" in best else args.local_seconds
    n = next(iter(best.values()))["new_states"]
    local_rate = n / local_s
    frontier = best[next(iter(best))]["states_per_depth"][-2]
    print()
    print(f"level {args.depth}: frontier {frontier:,} states -> {n:,} new states "
          f"({next(iter(best.values()))['transitions_level']:,} transitions)")
    print(f"{'master':26} {'cores':>5} {'level s':>8} {'states/s':>9} {'vs local':>8} {'per core':>8} {'CPU s':>7} "
          f"{'CPU s/1e6':>9} {'load':>11}  all runs (s)")
    rows = ([("local engine (workers=1)", "local")] if "local" in best else []) + [(m, m) for m in masters]
    for label, side in rows:
        r = best[side]
        rate = n / r["seconds"]
        print(f"{label:26} {r['cores']:>5} {r['seconds']:>8.1f} {rate:>9,.0f} {rate / local_rate:>7.2f}x "
              f"{rate / local_rate / r['cores']:>7.0%} {r['cpu']:>7.1f} {r['cpu'] / n * 1e6:>9,.0f} "
              f"{r['load_before']:>5.2f}-{r['load_after']:<5.2f}  {', '.join('%.1f' % x['seconds'] for x in runs[side])}")
    if "local" not in best:
        print(f"(local engine: {local_s:.1f} s given by --local-seconds, not measured now)")
    local_cpu = best["local"]["cpu"] if "local" in best else None
    if local_cpu:
        print("bound on idle cores (CPU-bound: cores x local CPU s / CPU s of the level; what the ratio would be "
              "with every core free and no serial part): "
              + ", ".join(f"{m} {r['cores'] * local_cpu / r['cpu']:.2f}x" for m, r in ((m, best[m]) for m in masters)))
    for m in masters:
        if cores_of(m) == 2 and m.startswith("local["):
            ratio = local_s / best[m]["seconds"]
            print(f"speed: {m} / local engine = {ratio:.2f}x (target >= {SPEED_TARGET}x: "
                  f"{'PASS' if ratio >= SPEED_TARGET else 'MISS'})")
    if "local" in best:
        ref = {k: best["local"][k] for k in ("states_per_depth", "transitions", "violations")}
        bad = [(side, i) for side, rs in runs.items() for i, r in enumerate(rs)
               if {k: r[k] for k in ref} != ref]
        print(f"agree: {'yes' if not bad else 'NO'} (states per depth {ref['states_per_depth']}, transitions "
              f"{ref['transitions']:,}, violations {len(ref['violations'])}: "
              f"{', '.join(f'{k} d{v[0]}' for k, v in ref['violations'].items()) or 'none'})"
              + "".join(f"\n  differs: {side} run {i + 1}" for side, i in bad))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
