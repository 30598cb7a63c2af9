#!/usr/bin/env python3
"""Benchmark ``replemu explore``: the Spark engine against the local engine on the same space.

Both engines search one bounded space breadth-first (``emulator.explore.search_local`` in this
process, ``streaming.explore.search_spark`` at --master, in a fresh work directory).  Per depth
it prints, side by side: new states, transitions, seconds, states/s (new states per second),
transitions/s and the RSS at the end of the level; then the totals, and the targets:

  speed    Spark >= 1.5 x the local engine's states/s on every level whose frontier (the level
           expanded: the previous depth's new states) has >= 10^5 states, and over those levels;
  memory   the Spark driver flat as the visited set grows: RSS at the last level < 1.25 x RSS at
           the first level with >= 10^4 new states, for this Python process, the driver JVM (a
           child process) and the JVM's live heap after a full GC (RSS of a JVM only grows towards
           its -Xmx; the live heap is what it holds); the local engine's RSS, whose visited set and
           frontier live in this process, is printed next to it for contrast (no target);
  agree    both engines give the same states per depth, transitions and violations.

The default depth, 6 (kip320, 3 replicas, records 2, epochs 2, crashes 1): the levels hold
1 / 23 / 352 / 3,420 / 22,417 / 111,714 / 437,127 new states, so depth 6 expands a frontier of
111,714 (> 10^5) into 437,127 new states; the local engine takes ~4 min on a 2-core machine
(depth 7 would take several times longer).  Spark runs first and is stopped before the local
engine starts: CPython keeps the memory a finished local search freed, which would hide the
Spark driver's growth under a high floor in the other order.  The first line gives every
parameter and how busy the machine was just before (Spark at local[2] needs both cores; the
local engine one).  A target you did not reach is reported with its number.

    python scripts/bench_explore.py [--protocol kip320] [--replicas 3] [--depth 6] [--master local[2]] ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.config import Config  # noqa: E402
from emulator.explore import Bounds, Level, Space, search_local  # noqa: E402
from emulator.run import effective_variant  # noqa: E402

FRONTIER, GROWING_FROM, SPEED_TARGET, FLAT_TARGET = 100_000, 10_000, 1.5, 1.25
MIB = 2 ** 20


def rss(pid: int | str = "self") -> int:
    """VmRSS of a process in bytes (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                out.setdefault(ppid, []).append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def jvm_and_workers() -> tuple[int, int]:
    """RSS of the driver JVM (children of this process whose command line names java) and of
    everything below it (the Python workers)."""
    tree, jvm, workers = children(), 0, 0
    for pid in tree.get(os.getpid(), []):
        try:
            if b"java" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
        except OSError:
            continue
        jvm += rss(pid)
        todo = list(tree.get(pid, []))
        while todo:
            p = todo.pop()
            workers += rss(p)
            todo += tree.get(p, [])
    return jvm, workers


class Recorder:
    """on_level: the level, and the memory at its end."""

    def __init__(self, name: str, spark=None) -> None:
        self.name, self.spark, self.levels, self.memory = name, spark, [], []

    def __call__(self, level: Level) -> None:
        self.levels.append(level)
        heap = 0
        if self.spark is not None:  # the JVM's live heap after a full GC: what it holds, not what it took
            jvm = self.spark.sparkContext._jvm
            jvm.System.gc()
            heap = jvm.java.lang.Runtime.getRuntime().totalMemory() - jvm.java.lang.Runtime.getRuntime().freeMemory()
        self.memory.append((rss(), *(jvm_and_workers() if self.spark else (0, 0)), heap))
        m = self.memory[-1]
        print(f"  [{self.name}] depth {level.depth}: {level.new_states:,} new states, {level.transitions:,} transitions, "
              f"{level.seconds:.1f} s, RSS {m[0] / MIB:,.0f} MiB" + (f", JVM {m[1] / MIB:,.0f} MiB (live heap {m[3] / MIB:,.0f} MiB)" if self.spark else ""),
              flush=True)


def machine_busy(seconds: float = 1.0) -> float:
    """Share of all cores busy over ``seconds`` (/proc/stat), before this benchmark starts."""
    def sample() -> tuple[int, int]:
        x = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(x), x[3] + x[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1 - (i1 - i0) / max(1, t1 - t0)


def rate(n: int, s: float) -> float:
    return n / s if s > 0 else float("inf")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def flat(memory: list[int], levels: list[Level]) -> tuple[int, float] | None:
    """(depth it is measured from, last / first) from the first level with >= 10^4 new states."""
    first = next((i for i, lv in enumerate(levels) if lv.new_states >= GROWING_FROM), None)
    if first is None or first == len(levels) - 1 or not memory[first]:
        return None
    return levels[first].depth, memory[-1] / memory[first]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--records", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--crashes", type=int, default=1)
    ap.add_argument("--power-crashes", type=int, default=0)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    print(f"bench_explore protocol={args.protocol} replicas={args.replicas} depth={args.depth} records={args.records} "
          f"epochs={args.epochs} crashes={args.crashes} power_crashes={args.power_crashes} master={args.master} "
          f"cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} busy_before={machine_busy():.0%} python={sys.version.split()[0]}", flush=True)
    cfg = Config()
    space = Space(tuple(range(1, args.replicas + 1)), cfg, effective_variant(args.protocol, cfg),
                  Bounds(args.depth, args.records, args.epochs, args.crashes, args.power_crashes))

    from streaming.explore import search_spark
    from streaming.job import build_spark

    started = time.perf_counter()
    spark = build_spark(args.master, app_name="replemu-bench-explore")
    boot = time.perf_counter() - started
    rec_s, rec_l = Recorder("spark", spark), Recorder("local")
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-explore-"))
    try:
        started = time.perf_counter()
        out_s = search_spark(spark, space, work / "spark", on_level=rec_s, clock=time.perf_counter)
        wall_s = time.perf_counter() - started
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"  [spark] session start {boot:.1f} s (not counted), search {wall_s:.1f} s wall", flush=True)
    started = time.perf_counter()
    out_l = search_local(space, on_level=rec_l, clock=time.perf_counter)
    wall_l = time.perf_counter() - started
    print(f"  [local] search {wall_l:.1f} s wall", flush=True)

    print()
    print(f"{'':37}{' local ':-^36}   {' spark at ' + args.master + ' ':-^55}")
    print(f"{'depth':>5} {'frontier':>9} {'new':>9} {'trans':>10} {'s':>7} {'states/s':>9} {'trans/s':>9} {'RSS MiB':>8}   "
          f"{'s':>7} {'states/s':>9} {'trans/s':>9} {'RSS MiB':>8} {'JVM MiB':>8} {'wkr MiB':>8}  {'spark/local':>11}")
    rows = []
    for ll, ls, ml, ms in zip(rec_l.levels, rec_s.levels, rec_l.memory, rec_s.memory):
        frontier = out_l.states_per_depth[ll.depth - 1]
        rl, rs = rate(ll.new_states, ll.seconds), rate(ls.new_states, ls.seconds)
        rows.append((frontier, rl, rs, ll, ls))
        print(f"{ll.depth:>5} {frontier:>9,} {ll.new_states:>9,} {ll.transitions:>10,} {ll.seconds:>7.1f} {rl:>9,.0f} "
              f"{rate(ll.transitions, ll.seconds):>9,.0f} {ml[0] / MIB:>8,.0f}   {ls.seconds:>7.1f} {rs:>9,.0f} "
              f"{rate(ls.transitions, ls.seconds):>9,.0f} {ms[0] / MIB:>8,.0f} {ms[1] / MIB:>8,.0f} {ms[2] / MIB:>8,.0f}  "
              f"{rs / rl:>10.2f}x")
    tl, ts = sum(lv.seconds for lv in rec_l.levels), sum(lv.seconds for lv in rec_s.levels)
    n, t = out_l.distinct_states - 1, out_l.transitions
    print(f"{'all':>5} {'':>9} {n:>9,} {t:>10,} {tl:>7.1f} {rate(n, tl):>9,.0f} {rate(t, tl):>9,.0f} {'':>8}   "
          f"{ts:>7.1f} {rate(n, ts):>9,.0f} {rate(t, ts):>9,.0f} {'':>8} {'':>8} {'':>8}  {tl / ts:>10.2f}x")
    print("(new and trans are the local engine's; the spark engine's are checked equal below.  JVM: the driver JVM, "
          "wkr: its Python workers)")
    print()
    same = [(name, a, b) for name, a, b in (("states per depth", out_l.states_per_depth, out_s.states_per_depth),
                                           ("transitions", out_l.transitions, out_s.transitions),
                                           ("violations", out_l.violations, out_s.violations)) if a != b]
    agree = not same
    print(f"engines agree: {'yes' if agree else 'no'} (states per depth {out_l.states_per_depth}, transitions "
          f"{out_l.transitions:,}, violations {sorted(out_l.violations) or 'none'})"
          + "".join(f"\n  differs in {name}: local {a} vs spark {b}" for name, a, b in same))
    big = [r for r in rows if r[0] >= FRONTIER]
    if not big:
        print(f"speed: no level expands a frontier of >= {FRONTIER:,} states at depth {args.depth}: raise --depth")
    for frontier, rl, rs, ll, _ls in big:
        print(f"speed: depth {ll.depth} (frontier {frontier:,}): spark {rs:,.0f} vs local {rl:,.0f} states/s = {rs / rl:.2f}x "
              f"(target >= {SPEED_TARGET}: {verdict(rs / rl >= SPEED_TARGET)})")
    if big:
        nl, sl, ss = sum(r[3].new_states for r in big), sum(r[3].seconds for r in big), sum(r[4].seconds for r in big)
        ratio = rate(nl, ss) / rate(nl, sl)
        print(f"speed: levels with frontier >= {FRONTIER:,} together: spark {rate(nl, ss):,.0f} vs local {rate(nl, sl):,.0f} "
              f"states/s = {ratio:.2f}x (target >= {SPEED_TARGET}: {verdict(ratio >= SPEED_TARGET)})")
    print(f"speed: whole search (levels only): spark {rate(n, ts):,.0f} vs local {rate(n, tl):,.0f} states/s = {tl / ts:.2f}x; "
          f"wall {wall_s:.1f} s vs {wall_l:.1f} s")
    for label, memory, levels, target in (("spark driver (Python)", [m[0] for m in rec_s.memory], rec_s.levels, True),
                                          ("spark driver JVM", [m[1] for m in rec_s.memory], rec_s.levels, True),
                                          ("spark JVM live heap", [m[3] for m in rec_s.memory], rec_s.levels, True),
                                          ("local engine (Python)", [m[0] for m in rec_l.memory], rec_l.levels, False)):
        f = flat(memory, levels)
        if f is None:
            print(f"memory: {label}: no two levels from one with >= {GROWING_FROM:,} new states to compare")
            continue
        first = next(i for i, lv in enumerate(levels) if lv.depth == f[0])
        print(f"memory: {label}: {memory[first] / MIB:,.0f} MiB at depth {f[0]} -> {memory[-1] / MIB:,.0f} MiB at depth "
              f"{levels[-1].depth} = {f[1]:.2f}x" + (f" (target < {FLAT_TARGET}: {verdict(f[1] < FLAT_TARGET)})" if target
                                                   else " (no target: the visited set lives here)"))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
