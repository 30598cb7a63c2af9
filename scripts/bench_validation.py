#!/usr/bin/env python3
"""Validation per micro-batch: the GX suites on one batch's outputs, in the driver (pandas) or where the data is (Spark).

    python scripts/bench_validation.py [--partitions 1000,8000] [--steps 20] [--repeat 3]
                                       [--engines pandas,spark] [--master 'local-cluster[2,1,2048]']

One micro-batch's outputs per size: ``--steps`` steps of every partition (the seeded workload of
``bench_stream``, 3 replicas, ``--protocol``) run through the streaming processor, as the sink writes them
(kind -> sorted Arrow table), written once to Parquet. The distinct partitions are at most
``--distinct`` (1,000); more are copies under other topics (the pure-Python core would take
minutes to step 8,000), which the suites cannot tell apart from distinct ones.

Each engine and size is measured in a process of its own (its peak RSS is its own), after one
warm-up batch, as the sink runs it:

* pandas: ``ExpectationsObserver.on_batch`` on the kinds as pandas frames (today's sink: every row
  in the driver): ``frames_from_outputs`` + GX's pandas datasource.
* spark: ``ExpectationsObserver.on_spark_batch`` on the kinds as Spark DataFrames read from the
  Parquet files and cached (as the sink holds a micro-batch): ``validation_frames_spark`` +
  GX's Spark datasource; the frames cached, counted, validated, unpersisted.

CPU seconds per batch are read from /proc: the driver's Python, the driver's JVM (and any Python
worker it started), and the executors (``local-cluster``: the executor JVMs and their Python
workers; under ``local[N]`` the executors' threads are in the driver's JVM). Peak RSS: VmHWM of
the driver's Python and JVM. The target (issue 32): the driver's work per batch does not grow
with the partition count. No timed assertions: the ratios are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


# --- the data ----------------------------------------------------------------------------------

def build_outputs(partitions: int, steps: int, seed: int, distinct: int, out: Path, protocol: str = "kip320") -> dict[str, int]:
    """One micro-batch's outputs of ``partitions`` partitions, kind -> ``out/<kind>.parquet``
    (sorted as the sink writes them); returns the row count of each kind."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bench_stream import workload
    from emulator import parse_scenario
    from streaming.events import scenario_rows
    from streaming.processor import process_batch, stream_protocol
    from streaming.schemas import output_arrow_schema, tables_by_kind
    from streaming.sink import sorted_kind_table

    rng = random.Random(seed)
    rows = []
    for k in range(min(partitions, distinct)):
        events = scenario_rows(parse_scenario(workload(k, steps, rng)))
        rows.extend(process_batch(events[0]["topic"], 0, events, None, stream_protocol(protocol))[0])
    base = tables_by_kind(pa.Table.from_pylist(rows, schema=output_arrow_schema()))
    counts = {}
    for kind, table in base.items():
        copies = []
        for c in range(-(-partitions // distinct)):
            first = c * distinct
            keep = table.filter(pc.less(pc.cast(pc.utf8_slice_codeunits(table["topic"], 6), pa.int64()), partitions - first)) \
                if first + distinct > partitions else table
            topic = keep["topic"] if c == 0 else pc.binary_join_element_wise(keep["topic"], pa.scalar(f"c{c}"), "-")
            copies.append(keep.set_column(keep.schema.get_field_index("topic"), "topic", topic))
        t = sorted_kind_table(kind, pa.concat_tables(copies))
        pq.write_table(t, out / f"{kind}.parquet")
        counts[kind] = t.num_rows
    return counts


# --- CPU and memory from /proc -----------------------------------------------------------------

def _procs() -> dict[int, tuple[int, str, str, float]]:
    """pid -> (parent, name, command line, CPU seconds of the process and its reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            name, rest = (d / "stat").read_text().rsplit(")", 1)
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        f = rest.split()
        out[int(d.name)] = (int(f[1]), name.split("(", 1)[1], cmd, sum(int(x) for x in f[11:15]) / tick)
    return out


def cpu_roles() -> dict[str, float]:
    """CPU seconds so far: the driver's Python (this process), the driver's JVM and its own
    Python workers, the executors (executor JVMs and their descendants)."""
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (parent, *_rest) in procs.items():
        children.setdefault(parent, []).append(pid)
    roles = {"driver_python": time.process_time(), "driver_jvm": 0.0, "executors": 0.0}

    def walk(pid: int, role: str) -> None:
        _, name, cmd, cpu = procs[pid]
        if "CoarseGrainedExecutorBackend" in cmd:
            role = "executors"
        roles[role] += cpu
        for c in children.get(pid, []):
            walk(c, role)

    for c in children.get(os.getpid(), []):
        walk(c, "driver_jvm")
    return roles


def peak_rss_mib() -> dict[str, float]:
    """VmHWM of this process and of the driver's JVM (a java child of this process), MiB."""
    def hwm(pid: int) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    out = {"driver_python": hwm(os.getpid()), "driver_jvm": 0.0}
    for pid, (parent, name, cmd, _) in _procs().items():
        if parent == os.getpid() and "java" in (name + cmd) and "CoarseGrainedExecutorBackend" not in cmd:
            out["driver_jvm"] = max(out["driver_jvm"], hwm(pid))
    return out


# --- one engine at one size, in its own process ------------------------------------------------

def measure(engine: str, data: Path, repeat: int, master: str) -> dict:
    from expectations.suites import ExpectationsObserver

    out = Path(tempfile.mkdtemp(prefix="bench-validation-out-"))
    observer = ExpectationsObserver(docs_every=0)
    kinds = sorted(p.stem for p in data.glob("*.parquet"))
    if engine == "pandas":
        import pyarrow.parquet as pq

        frames = {k: pq.read_table(data / f"{k}.parquet").to_pandas() for k in kinds}
        run = lambda batch_id: observer.on_batch(frames, batch_id, out)  # noqa: E731
    else:
        from streaming.session import build_spark

        spark = build_spark(master, app_name="bench-validation")
        frames = {k: spark.read.parquet(str(data / f"{k}.parquet")).persist() for k in kinds}
        for f in frames.values():
            f.count()  # the micro-batch as the sink holds it: cached on the executors
        run = lambda batch_id: observer.on_spark_batch(frames, batch_id, out)  # noqa: E731
    t0 = time.perf_counter()
    run(0)
    first = time.perf_counter() - t0
    walls, cpus = [], []
    for i in range(repeat):
        c0, t0 = cpu_roles(), time.perf_counter()
        run(i + 1)
        c1, t1 = cpu_roles(), time.perf_counter()
        walls.append(t1 - t0)
        cpus.append({k: c1[k] - c0[k] for k in c0})
    from streaming.results import read_output

    v = read_output(out, "validations")
    shutil.rmtree(out, ignore_errors=True)
    return {"engine": engine, "first_s": first, "wall_s": statistics.median(walls),
            "cpu": {k: statistics.median(c[k] for c in cpus) for k in cpus[0]}, "rss": peak_rss_mib(),
            "failed": int((~v["success"]).sum() // (repeat + 1)),
            "errors": sorted(set(v.loc[v["expectation"] == "validation_error", "docs"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", default="1000,8000")
    ap.add_argument("--steps", type=int, default=20, help="steps per partition in the batch")
    ap.add_argument("--distinct", type=int, default=1000, help="distinct partitions generated; more are copies")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engines", default="pandas,spark")
    ap.add_argument("--protocol", default="kip320", help="hw fails expectations (the SUMMARY pass runs)")
    ap.add_argument("--master", default="local-cluster[2,1,2048]")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # ENGINE: the child process's role
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print("RESULT " + json.dumps(measure(args.measure, Path(args.data), args.repeat, args.master)), flush=True)
        return 0

    engines = args.engines.split(",")
    print(f"{args.protocol}  seed {args.seed}  steps/partition/batch {args.steps}  repeats {args.repeat} (+1 warm-up)  master {args.master}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-validation-"))
    results: dict[tuple[str, int], dict] = {}
    try:
        for n in (int(x) for x in args.partitions.split(",")):
            data = work / str(n)
            data.mkdir()
            t0 = time.perf_counter()
            counts = build_outputs(n, args.steps, args.seed, args.distinct, data, args.protocol)
            print(f"{n:,} partitions: {sum(counts.values()):,} output rows ({', '.join(f'{k} {v:,}' for k, v in counts.items())}), "
                  f"built in {time.perf_counter() - t0:.0f} s", flush=True)
            for engine in engines:
                cmd = [sys.executable, __file__, "--measure", engine, "--data", str(data), "--repeat", str(args.repeat),
                       "--master", args.master]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
                if line is None:
                    print(f"  {engine}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", flush=True)
                    continue
                r = results[(engine, n)] = json.loads(line[7:])
                c, m = r["cpu"], r["rss"]
                print(f"  {engine:<7} wall {r['wall_s']:7.2f} s (first {r['first_s']:.2f})  CPU driver Python {c['driver_python']:6.2f}  "
                      f"driver JVM {c['driver_jvm']:6.2f}  executors {c['executors']:6.2f}  peak RSS Python {m['driver_python']:,.0f} MiB"
                      f"  JVM {m['driver_jvm']:,.0f} MiB  failed expectations {r['failed']}"
                      + (f"  ERRORS {r['errors']}" if r["errors"] else ""), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    sizes = sorted({n for _, n in results})
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        print(f"\nper batch, {hi:,} partitions / {lo:,} partitions:")
        for engine in engines:
            if (engine, lo) in results and (engine, hi) in results:
                a, b = results[(engine, lo)], results[(engine, hi)]
                drv = lambda r: r["cpu"]["driver_python"] + r["cpu"]["driver_jvm"]  # noqa: E731
                print(f"  {engine:<7} wall x{b['wall_s'] / a['wall_s']:.2f}  driver CPU x{drv(b) / max(drv(a), 1e-9):.2f} "
                      f"({drv(a):.2f} -> {drv(b):.2f} s)  executors CPU {a['cpu']['executors']:.2f} -> {b['cpu']['executors']:.2f} s  "
                      f"driver Python peak RSS {a['rss']['driver_python']:,.0f} -> {b['rss']['driver_python']:,.0f} MiB")
    for n in sizes:
        if ("pandas", n) in results and ("spark", n) in results:
            p, s = results[("pandas", n)], results[("spark", n)]
            print(f"  {n:,} partitions: spark/pandas wall x{s['wall_s'] / p['wall_s']:.2f}, driver Python CPU "
                  f"x{s['cpu']['driver_python'] / max(p['cpu']['driver_python'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
