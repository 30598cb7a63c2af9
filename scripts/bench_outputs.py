#!/usr/bin/env python3
"""How fast the readers answer on a long run's output (issue 32, item 6): an output of 10,000
micro-batches, as the sink leaves it and compacted (``streaming.compaction``).

    python scripts/bench_outputs.py [--batches 10000] [--source OUT] [--workdir DIR] [--spark] [--keep]

1. A real small run (``replemu stream --workload hard --partitions 10 --seed 1
   --steps-per-batch 5 --max-steps 50 --protocol hw``: 10 micro-batches), or ``--source OUT``,
   an existing stream output.
2. Its micro-batches replicated with pyarrow into ``--batches`` micro-batches: batch N holds the
   rows of source batch N mod k, every topic renamed ``TOPIC~c`` for the c-th round (c = N // k),
   so each partition's history stays whole (``replemu results`` rebuilds every log) and the row
   volume per batch is the real one; a progress line per batch.  One file per kind and batch.
3. Timed on that output, then again after compacting it (``maybe_compact`` with the default
   policy, pyarrow; ``--spark``: as the stream does it, a Spark job on ``local[2]``):
   ``replemu results --json`` (the CLI, a new process), the dashboard's job view
   (``RunReader.overview`` + ``batches``, what ``replemu serve``'s ``/api/runs/RUN`` and
   ``/api/runs/RUN/batches`` return), one partition's page (``RunReader.partition``), and
   ``/metrics`` (``replemu.metrics.exposition``), each cold (a new reader: a server's first
   request) and warm (the same reader again: ``replemu serve`` keeps its readers).

Prints seconds and the output's file and directory counts.  Not a test: timings vary with the
machine's load; compare the two layouts of one run.

Measured (2026-11-27, 2 cores at a load average of ~33 from other jobs, so wall times are ~5x
the CPU times; ``--source`` a real run of the hard profile, 6 partitions, 8 micro-batches of 4
steps, replicated to 10,000 micro-batches and 7,500 partitions; seconds, wall / CPU)::

    | layout                  | files  | dirs   | results --json | job view cold | job view warm | partition cold | partition warm | /metrics cold | /metrics warm |
    | as the sink writes them | 43,750 | 43,750 | 134.1 / 26.0   | 299.4 / 79.7  | 15.8 / 3.1    | 77.2 / 19.6    | 4.4 / 0.9      | 163.9 / 64.9  | 18.7 / 3.6    |
    | compacted               | 1,079  | 977    | 34.9 / 6.1     | 32.8 / 6.3    | 6.5 / 1.0     | 2.2 / 0.6      | 3.2 / 0.6      | 35.0 / 6.5    | 6.9 / 1.2     |

``replemu results --json`` identical before and after.  Compacting the 10,000 batches at once
with pyarrow (a one-off: a stream compacts 100 batches at a time as it goes): 676 s wall,
155 CPU s.  The job view's cold read has since dropped to 5.0 CPU s (pieces built from row
dicts).  Where the compacted cold read goes: per-batch Python (10,000 batches x 6 kinds of
pieces, ~3 s) and the ~200 fresh batch directories per kind the policy keeps (~1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SOURCE_RUN = ["--workload", "hard", "--partitions", "10", "--seed", "1", "--steps-per-batch", "5", "--max-steps", "50",
              "--protocol", "hw"]


def replemu(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replemu", *args], cwd=ROOT, capture_output=True, text=True, **kw)


def source_output(workdir: Path) -> Path:
    out = workdir / "source"
    if (out / "run.json").is_file():
        return out
    print(f"source: replemu stream {' '.join(SOURCE_RUN)} ...", flush=True)
    t0 = time.perf_counter()
    run = replemu("stream", *SOURCE_RUN, "--output", str(out), "--checkpoint", str(workdir / "source-ck"),
                  "--master", "local[2]", "--shuffle-partitions", "2")
    if run.returncode != 0:
        sys.exit(f"the source run failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    print(f"source: {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def build(source: Path, out: Path, batches: int) -> None:
    """``batches`` micro-batches from ``source``'s (see the module's docstring), one file each."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from streaming import output_layout as layout
    from streaming.compaction import ALL_KINDS

    tables: dict[int, dict[str, pa.Table]] = {}
    for kind in ALL_KINDS:
        for b, t in layout.split_by_batch(layout.read_kind(source, kind)).items():
            tables.setdefault(b, {})[kind] = t.drop_columns(["batch_id"])
    ids = sorted(tables)
    progress = {}
    for line in (source / "progress.jsonl").read_text().splitlines():
        p = json.loads(line)
        progress[p["batchId"]] = p
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(source / "run.json", out / "run.json")
    lines = []
    t0 = time.perf_counter()
    for n in range(batches):
        rnd, src = divmod(n, len(ids))
        for kind, t in tables[ids[src]].items():
            if "topic" in t.column_names:
                i = t.schema.get_field_index("topic")
                t = t.set_column(i, "topic", pc.binary_join_element_wise(t["topic"], pa.scalar(f"~{rnd}"), ""))
            d = out / kind / layout.batch_dir_name(n)
            d.mkdir(parents=True)
            pq.write_table(t, d / "part-00000.parquet")
        p = dict(progress.get(ids[src], {}), batchId=n)
        lines.append(json.dumps(p))
        if n and n % 2000 == 0:
            print(f"  built {n:,} micro-batches ({time.perf_counter() - t0:.0f} s)", flush=True)
    (out / "progress.jsonl").write_text("\n".join(lines) + "\n")


def timed(fn):
    """``(wall seconds, CPU seconds, value)``: CPU of this process (all its threads) and of the
    children that ended meanwhile (``replemu results`` runs as one)."""
    import resource

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    value = fn()
    return time.perf_counter() - t0, cpu() - c0, value


def measure(out: Path) -> tuple[dict[str, tuple[float, float]], int, int]:
    """Each reader's (wall, CPU) seconds; the partitions; a digest of ``replemu results --json``."""
    from replemu.dashboard import RunReader
    from replemu.metrics import exposition

    row: dict[str, tuple[float, float]] = {}

    def put(name, fn):
        wall, cpu, value = timed(fn)
        row[name] = (wall, cpu)
        return value

    run = put("results --json", lambda: replemu("results", str(out), "--json"))
    if run.returncode != 0:
        sys.exit(f"replemu results failed: {run.stderr[-1000:]}")

    def job_view(reader):
        return reader.overview(), reader.batches()

    reader = RunReader(out, "r0", lambda rel: rel)
    overview, _ = put("job view cold", lambda: job_view(reader))
    put("job view warm", lambda: job_view(reader))
    chosen = max(overview["partitions"], key=lambda p: (p["steps"], p["key"]))
    put("partition cold", lambda: reader.partition(chosen["topic"], chosen["partition"]))
    put("partition warm", lambda: reader.partition(chosen["topic"], chosen["partition"]))
    fresh = RunReader(out, "r1", lambda rel: rel)
    put("/metrics cold", lambda: exposition(lambda: [fresh]))
    put("/metrics warm", lambda: exposition(lambda: [fresh]))
    return row, len(json.loads(run.stdout)), hash(run.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=10_000)
    ap.add_argument("--source", type=Path, help="an existing stream output to replicate (default: a small real run)")
    ap.add_argument("--workdir", type=Path, help="default: a temporary directory (removed unless --keep)")
    ap.add_argument("--spark", action="store_true", help="compact with Spark (local[2]) as the stream does, not pyarrow")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from streaming.compaction import CompactionPolicy, compaction_text, file_count, maybe_compact
    from streaming.storage import LocalStore

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-outputs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        source = args.source or source_output(workdir)
        out = workdir / "out"
        wall, _, _ = timed(lambda: build(source, out, args.batches))
        print(f"built {args.batches:,} micro-batches in {wall:.0f} s from {source}", flush=True)
        rows = [("as the sink writes them", file_count(out), *measure(out))]
        spark = None
        if args.spark:
            from streaming.session import build_spark

            spark = build_spark("local[2]")
        policy = CompactionPolicy()
        wall, cpu, report = timed(lambda: maybe_compact(LocalStore(out), spark, args.batches - 1, policy))
        print(f"compacted ({'Spark' if spark else 'pyarrow'}, keep_recent {policy.keep_recent}, {policy.batches_per_range} "
              f"batches a range, fan-in {policy.fan_in}) in {wall:.0f} s ({cpu:.0f} CPU s here): {compaction_text(report)}",
              flush=True)
        rows.append(("compacted", file_count(out), *measure(out)))
        same = rows[0][4] == rows[1][4]
        print(f"replemu results --json identical before and after compaction: {'yes' if same else 'NO'}")
        keys = list(rows[0][2])
        print(f"\n{args.batches:,} micro-batches, {rows[0][3]:,} partitions; seconds, wall / CPU "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"| layout | files | dirs | {' | '.join(keys)} |")
        print("|---|---|---|" + "---|" * len(keys))
        for name, c, row, _, _ in rows:
            print(f"| {name} | {c['files']:,} | {c['dirs']:,} | " + " | ".join(f"{row[k][0]:.2f} / {row[k][1]:.2f}" for k in keys) + " |")
        if spark is not None:
            spark.stop()
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep:
            print(f"kept {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
