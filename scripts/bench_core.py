#!/usr/bin/env python3
"""Benchmark the pure core: steps/s with short and long logs, and of a random step mix.

The work of one step must not grow with the length of the logs (the streaming job steps
partitions whose logs reach millions of records), so the steady-state rates at 10^2 and
10^5 records should be within 2x of each other.

    python scripts/bench_core.py [--seed 1] [--steps 30000] [--sizes 100,100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator import VARIANTS, Config, Replay  # noqa: E402
from emulator.steps import (  # noqa: E402
    CheckpointHw, Crash, Elect, Fetch, LeaderAndIsr, Produce, Restart, ShrinkIsr, Tick,
)

REPLICAS = (1, 2, 3)


def filled_partition(protocol: str, size: int) -> Replay:
    """Three replicas in sync, every log ``size`` records long, HW = LEO."""
    p = Replay(REPLICAS, Config(acks="1"), VARIANTS[protocol])
    p.apply(Elect())
    produced = 0
    while produced < size:
        batch = min(1000, size - produced)
        p.apply(Produce(values=tuple(f"f{produced + i}" for i in range(batch))))
        produced += batch
        for f in (2, 3, 2, 3):
            p.apply(Fetch(replica=f))
    return p


def steady_state(p: Replay, steps: int) -> float:
    """produce(acks=all) -> fetch(2) -> fetch(3), repeated: steps per second."""
    pattern = [Fetch(replica=2), Fetch(replica=3)]
    start = time.perf_counter()
    for i in range(steps // 3):
        p.apply(Produce(values=(f"s{i}",), acks="all"))
        p.apply(pattern[0])
        p.apply(pattern[1])
    return (steps // 3 * 3) / (time.perf_counter() - start)


def random_mix(p: Replay, steps: int, rng: random.Random) -> float:
    """Produces and fetches with crashes, restarts, elections, ISR shrinks and ticks."""
    mix = []
    for i in range(steps):
        r = rng.choice(REPLICAS)
        x = rng.random()
        if x < 0.40:
            mix.append(Fetch(replica=r, response="lost" if rng.random() < 0.1 else "delivered"))
        elif x < 0.70:
            mix.append(Produce(values=(f"r{i}",), acks=rng.choice(["all", "1"])))
        elif x < 0.75:
            mix.append(Elect())
        elif x < 0.83:
            mix.append(LeaderAndIsr(replica=r))
        elif x < 0.87:
            mix.append(Crash(replica=r))
        elif x < 0.93:
            mix.append(Restart(replica=r))
        elif x < 0.96:
            mix.append(ShrinkIsr(replica=r))
        elif x < 0.98:
            mix.append(CheckpointHw())
        else:
            mix.append(Tick(ms=rng.choice([100, 20000])))
    start = time.perf_counter()
    for step in mix:
        p.apply(step)
    return steps / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30000)
    ap.add_argument("--sizes", default="100,100000")
    ap.add_argument("--protocols", default="hw,kip320")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"seed {args.seed}  steps per measurement {args.steps}  log sizes {sizes}  replicas {len(REPLICAS)}")
    print(f"{'protocol':9} {'log size':>9} {'steady steps/s':>15} {'random-mix steps/s':>19}")
    worst = 0.0
    for protocol in args.protocols.split(","):
        rates = {}
        for size in sizes:
            steady = steady_state(filled_partition(protocol, size), args.steps)
            mixed = random_mix(filled_partition(protocol, size), args.steps, random.Random(f"{args.seed}-{protocol}"))
            rates[size] = steady
            print(f"{protocol:9} {size:>9} {steady:>15,.0f} {mixed:>19,.0f}", flush=True)
        ratio = max(rates.values()) / min(rates.values())
        worst = max(worst, ratio)
        print(f"{protocol:9} steady-state ratio between log sizes: {ratio:.2f}x (target: within 2x)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
