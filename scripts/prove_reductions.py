#!/usr/bin/env python3
"""The reductions of ``replemu explore --reduce`` keep every verdict: the proof on the issue's spaces.

For every variant: 2 replicas with the default bounds (records 2, epochs 2, one process crash),
searched to exhaustion, and 3 replicas to depth 5; each with ``--reduce none``, ``sleep``,
``symmetry`` and ``all`` (local engine, one process, in this process).  Per search it prints the
distinct states, transitions and seconds, and checks against ``none``:

  same      the same invariants broken, at the same depths, with shortest paths of the same
            length (in fact the very same paths), and the same "exhausted" verdict;
  sleep     with sleep sets alone, also the same states per depth (only transitions saved).

Exit status 1 when any check fails.  CI runs the same checks on smaller spaces
(``tests/test_explore_reduce.py``); this script takes about 15 minutes on 2 cores.

    python scripts/prove_reductions.py [--variants hw,kip101,...] [--depth3 5] [--depth2 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emulator.config import Config  # noqa: E402
from emulator.explore import Bounds, Reduction, Space  # noqa: E402
from emulator.run import effective_variant  # noqa: E402
from emulator.search import search_local  # noqa: E402

VARIANTS = ("hw", "kip101", "kip279", "kip320", "kip903", "kip966")
REDUCTIONS = ("none", "sleep", "symmetry", "all")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--depth2", type=int, default=60, help="depth bound of the 2-replica searches (they exhaust first)")
    ap.add_argument("--depth3", type=int, default=5)
    args = ap.parse_args()
    print(f"prove_reductions: variants {args.variants}; 2 replicas to depth {args.depth2} (exhaustion), 3 replicas to "
          f"depth {args.depth3}; default bounds; load {os.getloadavg()[0]:.2f}", flush=True)
    failures = 0
    for protocol in args.variants.split(","):
        for replicas, depth in ((2, args.depth2), (3, args.depth3)):
            cfg = Config()
            base = None
            for name in REDUCTIONS:
                sp = Space(tuple(range(1, replicas + 1)), cfg, effective_variant(protocol, cfg), Bounds(depth),
                           reduce=Reduction.parse(name))
                began = time.perf_counter()
                out = search_local(sp)
                seconds = time.perf_counter() - began
                verdicts = {k: (d, len(p.split()) if p else 0, p) for k, (d, p) in out.violations.items()}
                line = (f"{protocol:7} {replicas} replicas  {name:8} ({','.join(sp.reductions()) or 'none'}): "
                        f"{out.distinct_states:>9,} states {out.transitions:>10,} transitions {seconds:7.1f} s  "
                        f"{'exhausted, diameter ' + str(out.diameter) if out.exhausted else 'complete to ' + str(out.depth)}")
                if base is None:
                    base = (out, verdicts)
                    line += f"  violations: {', '.join(f'{k} {d}' for k, (d, _n, _p) in sorted(verdicts.items())) or 'none'}"
                else:
                    ref, ref_verdicts = base
                    ok = verdicts == ref_verdicts and out.exhausted == ref.exhausted and out.depth == ref.depth
                    if name == "sleep":
                        ok = ok and out.states_per_depth == ref.states_per_depth
                    line += (f"  x{ref.distinct_states / out.distinct_states:.2f} states, "
                             f"x{ref.transitions / max(1, out.transitions):.2f} transitions: {'same verdicts' if ok else 'DIFFERENT'}")
                    failures += not ok
                print(line, flush=True)
    print("all reductions keep every verdict" if not failures else f"{failures} searches disagree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
