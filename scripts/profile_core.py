#!/usr/bin/env python3
"""Where a core step and a search state spend their time: cProfile, grouped by concern.

Two workloads, each profiled in this process against the ``emulator`` of ``--tree`` (default:
this repository; give an extracted older commit to see "before"):

  step    kip320, 3 replicas, 30,000 steady-state steps (produce acks=all, fetch 2, fetch 3)
  search  replemu explore's local engine, kip320, 3 replicas, depth 5, one process

Own time (tottime) is summed per group: the protocol (partition, controller, leader, follower,
recovery, log, epoch cache), the checker (checker, invariants), the search's state key
(canonical tuples / state documents, marshal, hashing), copying states (clone), the frontier's
compression (zlib), the search loop itself, and the rest.  Profiling needs the pure-Python
build (``REPLEMU_PURE=1`` when the compiled core is installed): compiled functions are invisible
to cProfile.

    python scripts/profile_core.py [--tree DIR] [--only step|search]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
from pathlib import Path

# Function-name needles first (the state key, copies, compression), then files.
BY_NAME = (
    ("state key", ("canonical", "_canonical_document", "_rank_partition_epochs", "_partition_epoch_ranks",
                   "state_document", "marshal.dumps", "blake2b", "digest", "encode", "_str_keys", "_leadership",
                   "_request", "as_tuple", "records_tuple", "as_pairs", "retained")),
    ("clone", ("clone", "copy", "_shallow", "_replica")),
    ("zlib", ("zlib.",)),
)
BY_FILE = (
    ("checker", ("emulator/checker.py", "emulator/invariants.py")),
    ("protocol", ("emulator/partition.py", "emulator/controller.py", "emulator/leader.py", "emulator/follower.py",
                  "emulator/recovery.py", "emulator/replica_manager.py", "emulator/log.py",
                  "emulator/epoch_cache.py", "emulator/replica.py", "emulator/steps.py", "emulator/effects.py",
                  "emulator/run.py")),
    ("search loop", ("emulator/search.py", "emulator/explore.py", "emulator/explore_state.py",
                     "emulator/explore_reduce.py")),
)


def group_of(filename: str, name: str) -> str:
    for group, needles in BY_NAME:
        if any(n in name for n in needles):
            return group
    for group, needles in BY_FILE:
        if any(n in filename for n in needles):
            return group
    return "built-ins" if filename == "~" else "other"


def report(title: str, prof: cProfile.Profile) -> None:
    stats = pstats.Stats(prof)
    totals: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        g = group_of(filename, name)
        totals[g] = totals.get(g, 0.0) + tottime
    whole = sum(totals.values())
    print(f"{title}: {whole:.2f} s profiled")
    for g, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {g:12} {100 * t / whole:5.1f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--only", choices=("step", "search"))
    args = ap.parse_args()
    sys.path.insert(0, args.tree)
    os.environ.setdefault("REPLEMU_PURE", "1")
    from emulator import VARIANTS, Config, Replay
    from emulator.steps import Elect, Fetch, Produce

    print(f"profile_core tree={args.tree} emulator={Path(sys.modules['emulator'].__file__).parent}")
    if args.only in (None, "step"):
        replay = Replay((1, 2, 3), Config(acks="1"), VARIANTS["kip320"])
        replay.apply(Elect())
        steps = []
        for i in range(10_000):
            steps += [Produce(values=(f"s{i}",), acks="all"), Fetch(replica=2), Fetch(replica=3)]
        prof = cProfile.Profile()
        prof.enable()
        for step in steps:
            replay.apply(step)
        prof.disable()
        report("step (kip320, 3 replicas, 30,000 steady-state steps)", prof)
    if args.only in (None, "search"):
        from emulator.explore import Bounds, Space
        from emulator.run import effective_variant
        from emulator.search import search_local

        cfg = Config()
        space = Space((1, 2, 3), cfg, effective_variant("kip320", cfg), Bounds(5))
        prof = cProfile.Profile()
        prof.enable()
        outcome = search_local(space)
        prof.disable()
        report(f"search state (kip320, 3 replicas, depth 5: {outcome.distinct_states:,} states, "
               f"{outcome.transitions:,} transitions)", prof)
    return 0


if __name__ == "__main__":
    sys.exit(main())
