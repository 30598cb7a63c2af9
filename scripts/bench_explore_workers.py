#!/usr/bin/env python3
"""Benchmark the local engine of ``replemu explore`` on 1 process against N processes.

The same search (default: kip320, 3 replicas, depth 6, default bounds, ``--reduce all``) runs
with ``--workers 1`` and ``--workers N``, alternated, ``--runs`` times each, through the CLI as
a user runs it (a fresh ``--out`` per run); it prints per side the best wall time and states/s,
checks the two give the same states per depth, transitions and violations, and the target:

  speed    N processes >= 1.7 x one process (wall, best against best).

The first line gives the parameters and the load average (the target needs idle cores).

    python scripts/bench_explore_workers.py [--protocol kip320] [--replicas 3] [--depth 6] [--workers 2] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args: argparse.Namespace, workers: int, out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "replemu", "explore", "--protocol", args.protocol, "--replicas", str(args.replicas),
           "--depth", str(args.depth), "--reduce", args.reduce, "--engine", "local", "--workers", str(workers),
           "--out", str(out), "--json", *args.extra]
    began = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--reduce", default="all")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("extra", nargs="*", help="more explore arguments (after --)")
    args = ap.parse_args()
    print(f"bench_explore_workers: {args.protocol}, {args.replicas} replicas, depth {args.depth}, reduce {args.reduce}, "
          f"1 vs {args.workers} processes, {args.runs} runs each; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
          flush=True)
    best: dict[int, float] = {}
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for w in (1, args.workers):
                wall, result = run(args, w, Path(tmp) / f"w{w}-{i}")
                best[w] = min(best.get(w, wall), wall)
                results[w] = result
                print(f"  run {i + 1}, {w} process{'es' if w > 1 else ''}: {wall:.1f} s, {result['distinct_states']:,} states "
                      f"({result['distinct_states'] / wall:,.0f}/s)", flush=True)
    one, many = results[1], results[args.workers]
    same = all(one[k] == many[k] for k in ("states_per_depth", "transitions")) and \
        [(v["invariant"], v["depth"], v["path"]) for v in one["violations"]] == \
        [(v["invariant"], v["depth"], v["path"]) for v in many["violations"]]
    ratio = best[1] / best[args.workers]
    print(f"speed: {args.workers} processes {ratio:.2f}x one process (best {best[args.workers]:.1f} s vs {best[1]:.1f} s); "
          f"target >= 1.7x: {'met' if ratio >= 1.7 else 'NOT met'}")
    print(f"same results (states per depth, transitions, violations): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
