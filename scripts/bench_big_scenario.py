#!/usr/bin/env python3
"""Benchmark one very long scenario file through ``replemu run --summary`` (issue 46, item 3).

It writes a scenario of ``--steps`` steps (default 1,000,000; ~27 MB of YAML): the first steps of
the clean workload profile's partition 0 (``emulator.workload.first_steps_document``'s sequence),
then runs ``replemu run FILE --summary`` (and, with ``--json``, ``replemu run FILE --json``) in a
child process of this tree and reports the wall time and the child's peak RSS.

Targets: the run ends within ``--max-seconds`` (default 120) and ``--max-rss-mib`` (default 2048,
2 GiB), or is refused at once naming the limit.  Exit status 1 when a target is missed.

The core the child runs is this tree's (pure Python unless a mypyc build sits beside the sources);
the report names the build it imported.

    python scripts/bench_big_scenario.py [--steps 1000000] [--seed 1] [--protocol kip320]
                                         [--keep FILE] [--json] [--max-seconds 120] [--max-rss-mib 2048]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_scenario(path: Path, steps: int, seed: int) -> int:
    """The scenario file of the first ``steps`` steps of the clean profile's partition 0, written
    in chunks (never the whole step list in memory); returns its size in bytes."""
    import yaml

    from emulator.workload import WorkloadGenerator, partition_header
    from scenario_io.profiles import load_profiles

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    profile = load_profiles()["clean"]
    head = partition_header(seed, 0, profile)
    head.pop("length")
    head["name"] = f"big-{steps}"
    generator = WorkloadGenerator(seed, 0, profile)
    chunk = 10_000
    with path.open("w", encoding="utf-8") as f:
        f.write(yaml.dump(head, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120))
        f.write("steps:\n")
        for first in range(1, steps + 1, chunk):
            last = min(steps, first + chunk - 1)
            f.write(yaml.dump(generator.steps(first, last), Dumper=dumper, sort_keys=False,
                              default_flow_style=None, width=120))
    return path.stat().st_size


def measure(argv: list[str]) -> tuple[int, float, float, float, str, str]:
    """Run ``argv`` in a child; (exit status, wall seconds, CPU seconds, peak RSS MiB, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # ru_maxrss of the children is the largest child's so far (KiB): this child's unless an earlier one was larger
    return proc.returncode, seconds, cpu, after.ru_maxrss / 1024, proc.stdout, proc.stderr


def core_build() -> str:
    out = subprocess.run([sys.executable, "-c", "import emulator.partition as m; print(m.__file__)"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True).stdout.strip()
    return "compiled (mypyc)" if out.endswith((".so", ".pyd")) else "pure Python"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--keep", type=Path, help="write the scenario here and keep it (default: a temporary file)")
    ap.add_argument("--reuse", action="store_true", help="with --keep: replay the file already there instead of writing it")
    ap.add_argument("--json", action="store_true", help="also measure `replemu run FILE --json`")
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--max-rss-mib", type=float, default=2048.0)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))

    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / f"big-{args.steps}.yaml"
        if args.reuse and args.keep and path.is_file():
            print(f"replaying {path} as it is: {path.stat().st_size / 1e6:.1f} MB", flush=True)
        else:
            t0 = time.perf_counter()
            size = write_scenario(path, args.steps, args.seed)
            print(f"wrote {path}: {args.steps:,} steps, {size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s", flush=True)
        print(f"core: {core_build()}; python {sys.version.split()[0]}", flush=True)
        modes = [["--summary"]] + ([["--json"]] if args.json else [])
        ok = True
        for mode in modes:
            argv = [sys.executable, "-m", "replemu", "run", str(path), "--protocol", args.protocol, *mode]
            status, seconds, cpu, rss, out, err = measure(argv)
            met = seconds <= args.max_seconds and rss <= args.max_rss_mib
            ok = ok and met and status in (0, 1)
            shown = out.strip().splitlines()[-1][:200] if out.strip() else ""
            print(f"replemu run {' '.join(mode)}: exit {status}, {seconds:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:,.0f} MiB "
                  f"[{'PASS' if met else 'MISS'}: <= {args.max_seconds:.0f} s, <= {args.max_rss_mib:,.0f} MiB]", flush=True)
            if mode == ["--summary"]:
                print(f"  stdout: {out.strip()[:400]}")
            else:
                print(f"  stdout: {len(out):,} bytes, last line {shown!r}")
            last_err = [line for line in err.strip().splitlines() if line][-2:]
            if last_err:
                print(f"  stderr (last lines): {' | '.join(last_err)[:300]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
