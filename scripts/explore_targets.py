#!/usr/bin/env python3
"""Run the targets of ``replemu explore`` (docs/explore.md, "Targets") and print them as a table.

  two      every variant, 2 replicas, depth 12 (default bounds): complete? the shortest StrongIsr
  three    hw, kip101, kip279 with 3 replicas: the shortest StrongIsr (--until StrongIsr)
  zombie   kip320 with 3 replicas: the shortest StrongIsr (the zombie re-election, 8 steps by hand)
  fixed    kip320 + reset_remote_leo_on_reelection (the TLA+ rule 3), 3 replicas, no power loss:
           as deep as --budget minutes allow (the last level is left incomplete); no StrongIsr,
           NoCommittedDataLoss or EventualConvergence expected
  fixed-e3 the same at --epochs 3
  fixed-2  the same with 2 replicas, depth 12
  power    kip320 with one power loss and explicit flushes (KIP-966's case), 2 replicas

    python scripts/explore_targets.py [--only two,zombie,...] [--engine local|spark] [--budget MIN] [--out DIR]

Every run writes its violations' scenario files under --out and prints the command that replays
them; the table at the end is what docs/explore.md and the closing note quote.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.config import Config  # noqa: E402
from emulator.explore import DEFAULT_ALPHABET, Bounds  # noqa: E402
from replemu.explore import explore, partition_request  # noqa: E402

VERDICTS = ("StrongIsr", "NoCommittedDataLoss", "EventualConvergence")
RESET = {"reset_remote_leo_on_reelection": True}


def run(label, protocol, replicas, bounds, out, engine, spark=None, knobs=None, config=Config(), until=frozenset(),  # noqa: B008 (a frozen Config)
        max_seconds=None):
    req = partition_request([protocol], replicas, bounds, config, knobs or {}, DEFAULT_ALPHABET, engine, Path(out) / label,
                            until=frozenset(until), max_seconds=max_seconds)
    [result] = explore(req, out=sys.stdout, spark=spark)
    result["label"] = label
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="two,three,zombie,fixed,fixed-e3,fixed-2,power")
    ap.add_argument("--engine", choices=("local", "spark"), default="local")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--budget", type=float, default=20, help="minutes for each of fixed and fixed-e3 (default 20)")
    ap.add_argument("--max-depth", type=int, default=12)
    ap.add_argument("--three", default="hw,kip101,kip279", help="protocols of the 'three' target (default hw,kip101,kip279)")
    ap.add_argument("--out", default="out/explore-targets")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"explore targets: {sorted(only)}, engine {args.engine}, budget {args.budget} min for fixed and fixed-e3, out {args.out}")
    spark = None
    if args.engine == "spark":
        from streaming.session import build_spark

        spark = build_spark(args.master, app_name="replemu-explore-targets")
    results = []
    try:
        d = Bounds(12)
        if "two" in only:
            for p in ("hw", "kip101", "kip279", "kip320"):
                results.append(run("two", p, 2, d, args.out, args.engine, spark))
        if "three" in only:
            for p in args.three.split(","):
                results.append(run("three", p, 3, Bounds(args.max_depth), args.out, args.engine, spark, until={"StrongIsr"}))
        if "zombie" in only:
            results.append(run("zombie", "kip320", 3, Bounds(args.max_depth), args.out, args.engine, spark, until={"StrongIsr"}))
        budget = args.budget * 60
        if "fixed" in only:
            results.append(run("fixed", "kip320", 3, Bounds(args.max_depth), args.out, args.engine, spark, RESET, max_seconds=budget))
        if "fixed-e3" in only:
            results.append(run("fixed-e3", "kip320", 3, Bounds(args.max_depth, epochs=3), args.out, args.engine, spark, RESET,
                               max_seconds=budget))
        if "fixed-2" in only:
            results.append(run("fixed-2", "kip320", 2, d, args.out, args.engine, spark, RESET))
        if "power" in only:
            results.append(run("power", "kip320", 2, Bounds(10, power_crashes=1, crashes=0), args.out, args.engine, spark,
                               config=Config(log_flush="explicit")))
    finally:
        if spark is not None:
            spark.stop()
    print()
    print(f"{'target':9} {'protocol':8} {'rep':>3} {'bounds (d/rec/ep/cr/pw)':>24} {'complete':>8} {'depth':>5} "
          f"{'states':>11} {'seconds':>8}  shortest violations (depth)")
    for r in results:
        b = r["bounds"]
        bounds = f"{b['depth']}/{b['records']}/{b['epochs']}/{b['crashes']}/{b['power_crashes']}"
        v = ", ".join(f"{x['invariant']} {x['depth']}" for x in r["violations"] if x["invariant"] in VERDICTS + ("WeakIsr",)) or "none"
        knob = "+reset" if r["knobs"] else ""
        print(f"{r['label']:9} {r['protocol'] + knob:8} {r['replicas']:>3} {bounds:>24} {str(r['complete']):>8} {r['depth']:>5} "
              f"{r['distinct_states']:>11,} {r['seconds']:>8.0f}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
