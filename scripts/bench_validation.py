#!/usr/bin/env python3
"""Validation overhead per micro-batch: the GX suites on one batch's outputs, at 1 and 1,000 partitions.

    python scripts/bench_validation.py [--partitions 1,1000] [--events 20] [--repeat 5]

Each measurement builds one micro-batch's output rows with the streaming processor (a seeded
workload, 3 replicas), then times frames_from_outputs + BatchValidator.validate (the work the
sink adds to every batch), after one warm-up run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402

from bench_stream import workload  # noqa: E402
from emulator import parse_scenario  # noqa: E402
from expectations.suites import BatchValidator, frames_from_outputs  # noqa: E402
from streaming.events import scenario_rows  # noqa: E402
from streaming.processor import process_batch  # noqa: E402


def batch_outputs(partitions: int, events: int, seed: int) -> dict[str, pd.DataFrame]:
    """One micro-batch's outputs as the sink hands them to the observer: kind -> pandas frame."""
    rng = random.Random(seed)
    rows = []
    for k in range(partitions):
        s = parse_scenario(workload(k, events, rng))
        ev = scenario_rows(s)
        out, _, _ = process_batch(ev[0]["topic"], 0, ev, None, "kip320")
        rows.extend(out)
    pdf = pd.DataFrame(rows)
    return {kind: part.reset_index(drop=True) for kind, part in pdf.groupby("kind")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", default="1,1000")
    ap.add_argument("--events", type=int, default=20, help="events per partition in the batch")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"seed {args.seed}  events/partition/batch {args.events}  repeats {args.repeat}", flush=True)
    t0 = time.perf_counter()
    validator = BatchValidator(None)
    print(f"GX context and suites built in {time.perf_counter() - t0:.2f} s (once per run)", flush=True)
    print(f"{'partitions':>10} {'output rows':>12} {'validation ms p50':>18} {'min':>8} {'max':>8}")
    for n in (int(x) for x in args.partitions.split(",")):
        pdf = batch_outputs(n, args.events, args.seed)
        validator.validate(frames_from_outputs(pdf), 0)  # warm-up
        times = []
        for i in range(args.repeat):
            start = time.perf_counter()
            validator.validate(frames_from_outputs(pdf), i + 1)
            times.append((time.perf_counter() - start) * 1000)
        print(f"{n:>10} {sum(len(f) for f in pdf.values()):>12} {statistics.median(times):>18.0f} {min(times):>8.0f} {max(times):>8.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
