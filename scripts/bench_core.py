#!/usr/bin/env python3
"""Benchmark the pure core: steps/s with short and long logs, and of a random step mix.

The work of one step must not grow with the length of the logs (the streaming job steps
partitions whose logs reach millions of records), so the steady-state rates at 10^2 and
10^5 records should be within 2x of each other.

With ``--baseline REF`` it compares this working tree (the project, as it is on disk) with the
commit REF of this repository (the reference; default 736e956, the commit before the speed
work), extracted with ``git archive`` into a temporary directory and run with the same Python.
Every measurement (protocol x log size x {steady, random mix}) runs in a fresh subprocess per
tree (this script again, in its worker mode, importing ``emulator`` from that tree), reference
and project alternated (ref, project, ref, project, ... so machine noise hits both), ``--runs``
times each; the table gives per measurement the BEST steps/s of each side's runs and the ratio
project / reference, with the target:

  speed    project >= 4 x the reference's steps/s on every row (and the minimum over the rows);
  same     both trees end the same steps in the same result (sha256 of the result object): a
           row whose digests differ means the behaviour changed;
  flat     the project's steady-state rates at the different log sizes within 2x (as without
           --baseline).

Exit status 1 when the digests differ or the project's rates between log sizes are not within
2x; the speed target is reported (PASS/MISS), not in the exit status.

``--pure`` adds a third side, alternated with the others: the project on its pure-Python core
(``REPLEMU_PURE=1``), so the table also gives what the compiled build adds (project / pure; each
worker reports the build it ran).  ``--clock cpu`` times by the process's CPU time instead of the
wall clock: steadier when other work shares the cores.

    python scripts/bench_core.py [--seed 1] [--steps 30000] [--sizes 100,100000] [--protocols hw,kip320]
                                 [--baseline REF] [--runs 3] [--pure] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from baseline import DEFAULT_BASELINE, extract, git, project_head  # noqa: E402 (scripts/baseline.py)

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = (1, 2, 3)
KINDS = {"steady": "steady", "mix": "random mix"}
SPEED_TARGET, FLAT_TARGET = 4.0, 2.0


def import_core(tree: Path) -> None:
    """Put ``tree`` first on sys.path and import the core's public names from it (as this module's globals)."""
    global VARIANTS, Config, Replay, CheckpointHw, Crash, Elect, Fetch, LeaderAndIsr, Produce, Restart, ShrinkIsr, Tick
    sys.path.insert(0, str(tree))
    import emulator
    from emulator import VARIANTS, Config, Replay
    from emulator.steps import (
        CheckpointHw,
        Crash,
        Elect,
        Fetch,
        LeaderAndIsr,
        Produce,
        Restart,
        ShrinkIsr,
        Tick,
    )

    if not Path(emulator.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"bench_core: emulator was imported from {emulator.__file__}, not from {tree}")


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


class Clocks:
    """Wall and CPU seconds of a timed block (``rate`` uses the one ``--clock`` chose)."""

    use_cpu = False

    def __enter__(self) -> "Clocks":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def rate(self, steps: int) -> float:
        return steps / (self.cpu if Clocks.use_cpu else self.wall)


def steady_state(p: Replay, steps: int) -> float:
    """produce(acks=all) -> fetch(2) -> fetch(3), repeated: steps per second."""
    pattern = [Fetch(replica=2), Fetch(replica=3)]
    with Clocks() as clocks:
        for i in range(steps // 3):
            p.apply(Produce(values=(f"s{i}",), acks="all"))
            p.apply(pattern[0])
            p.apply(pattern[1])
    return clocks.rate(steps // 3 * 3)


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
    with Clocks() as clocks:
        for step in mix:
            p.apply(step)
    return clocks.rate(steps)


def today(args: argparse.Namespace) -> int:
    """The benchmark of this tree alone (without --baseline)."""
    import_core(ROOT)
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
    return 0 if worst <= FLAT_TARGET else 1


# -- --baseline: one measurement per subprocess, reference and project alternated ----------------

def worker(args: argparse.Namespace) -> int:
    """--tree DIR --one PROTOCOL,SIZE,KIND: one measurement on the core of DIR, one JSON line."""
    tree = Path(args.tree)
    import_core(tree)
    protocol, size, kind = args.one.split(",")
    p = filled_partition(protocol, int(size))
    if kind == "steady":
        rate = steady_state(p, args.steps)
    elif kind == "mix":
        rate = random_mix(p, args.steps, random.Random(f"{args.seed}-{protocol}"))
    else:
        raise SystemExit(f"bench_core: unknown kind {kind!r} (steady, mix)")
    digest = hashlib.sha256(json.dumps(p.result("bench"), sort_keys=True).encode()).hexdigest()
    import emulator

    build = getattr(emulator, "BUILD", "pure Python")  # the reference predates the compiled build
    print(json.dumps({"protocol": protocol, "size": int(size), "kind": kind, "rate": rate, "digest": digest, "build": build}),
          flush=True)
    return 0


def measure(tree: Path, args: argparse.Namespace, protocol: str, size: int, kind: str, pure: bool = False) -> dict:
    """One measurement in a fresh process; ``pure``: with REPLEMU_PURE=1 (the project's pure-Python core)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), "--one", f"{protocol},{size},{kind}",
           "--seed", str(args.seed), "--steps", str(args.steps), "--clock", args.clock]
    env = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    if pure:
        env["REPLEMU_PURE"] = "1"
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"bench_core: the worker failed on {tree} (exit {done.returncode}):\n  {' '.join(cmd)}\n"
                         f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def baseline(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    protocols = args.protocols.split(",")
    ref = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
    load = ",".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_core seed={args.seed} steps={args.steps} sizes={','.join(map(str, sizes))} protocols={','.join(protocols)} "
          f"replicas={len(REPLICAS)} runs={args.runs} (best of each side, alternated) clock={args.clock} "
          f"reference={args.baseline} = {ref} "
          f"project={ROOT} HEAD {project_head()} cores={os.cpu_count()} loadavg={load} python={sys.version.split()[0]}",
          flush=True)
    tree = extract(ref, who="bench_core")
    sides = [("reference", tree, False), ("project", ROOT, False)] + ([("pure", ROOT, True)] if args.pure else [])
    rows = []
    try:
        for protocol in protocols:
            for size in sizes:
                for kind in KINDS:
                    got = {name: [] for name, _, _ in sides}
                    for run in range(args.runs):
                        for name, where, pure in sides:
                            m = measure(where, args, protocol, size, kind, pure)
                            got[name].append(m)
                            print(f"  {protocol:7} size {size:<7} {KINDS[kind]:10} run {run + 1}/{args.runs} {name:9} "
                                  f"{m['rate']:>11,.0f} steps/s  digest {m['digest'][:12]}  {m['build']}", flush=True)
                    rows.append((protocol, size, kind, got))
    finally:
        shutil.rmtree(tree, ignore_errors=True)

    print()
    builds = "; ".join(f"{name}: {', '.join(sorted({m['build'] for _, _, _, got in rows for m in got[name]}))}" for name, _, _ in sides)
    print(f"builds: {builds}")
    pure_head = f" {'pure steps/s':>13} {'pure/ref':>8} {'project/pure':>12}" if args.pure else ""
    print(f"{'protocol':9} {'log size':>9} {'kind':11} {'reference steps/s':>18} {'project steps/s':>16} {'ratio':>7}{pure_head}  target")
    ratios, differ, gains = [], [], []
    best: dict[tuple[str, str, str], dict[int, float]] = {}
    for protocol, size, kind, got in rows:
        r, p = max(m["rate"] for m in got["reference"]), max(m["rate"] for m in got["project"])
        ratio = p / r
        pure_cols = ""
        if args.pure:
            q = max(m["rate"] for m in got["pure"])
            gains.append(p / q)
            pure_cols = f" {q:>13,.0f} {q / r:>7.2f}x {p / q:>11.2f}x"
        ratios.append((ratio, protocol, size, kind))
        best.setdefault(("reference", protocol, kind), {})[size] = r
        best.setdefault(("project", protocol, kind), {})[size] = p
        digests = {m["digest"] for ms in got.values() for m in ms}
        if len(digests) > 1:
            differ.append((protocol, size, kind, got))
        print(f"{protocol:9} {size:>9} {KINDS[kind]:11} {r:>18,.0f} {p:>16,.0f} {ratio:>6.2f}x{pure_cols}  >= {SPEED_TARGET:g}x "
              f"{verdict(ratio >= SPEED_TARGET)}" + ("  RESULTS DIFFER" if len(digests) > 1 else ""))
    worst = min(ratios)
    print(f"minimum ratio: {worst[0]:.2f}x ({worst[1]} {worst[2]} {KINDS[worst[3]]}), target >= {SPEED_TARGET:g}x: "
          f"{verdict(worst[0] >= SPEED_TARGET)}")
    if gains:
        print(f"project / pure (what the build adds on top of the pure-Python core): {min(gains):.2f}x .. {max(gains):.2f}x")
    if differ:
        print(f"results differ between the trees (or between runs) on {len(differ)} of {len(rows)} rows: behaviour changed")
        for protocol, size, kind, got in differ:
            print(f"  {protocol} {size} {KINDS[kind]}: " + "; ".join(
                f"{name} {', '.join(m['digest'][:16] for m in ms)}" for name, ms in got.items()))
    else:
        print(f"results identical: yes, on all {len(rows)} rows (sha256 of the result object after the steps)")
    spread = 0.0
    for protocol in protocols:
        p, r = best[("project", protocol, "steady")], best[("reference", protocol, "steady")]
        ratio = max(p.values()) / min(p.values())
        spread = max(spread, ratio)
        print(f"{protocol:9} steady-state ratio between log sizes (project): {ratio:.2f}x (target: within {FLAT_TARGET:g}x: "
              f"{verdict(ratio <= FLAT_TARGET)}); reference {max(r.values()) / min(r.values()):.2f}x")
    return 1 if differ or spread > FLAT_TARGET else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30000)
    ap.add_argument("--sizes", default="100,100000")
    ap.add_argument("--protocols", default="hw,kip320")
    ap.add_argument("--baseline", metavar="REF", nargs="?", const=DEFAULT_BASELINE,
                    help=f"compare with this commit (default when given without a value: {DEFAULT_BASELINE})")
    ap.add_argument("--runs", type=int, default=3, help="runs of each side per measurement with --baseline (default 3)")
    ap.add_argument("--pure", action="store_true",
                    help="with --baseline: also run the project on its pure-Python core (REPLEMU_PURE=1), as a third side")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time the steps by wall clock (default) or by the process's CPU time (steadier on a busy machine)")
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    Clocks.use_cpu = args.clock == "cpu"
    if args.one:
        return worker(args)
    if args.baseline:
        return baseline(args)
    return today(args)


if __name__ == "__main__":
    sys.exit(main())
