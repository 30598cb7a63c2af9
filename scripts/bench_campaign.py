#!/usr/bin/env python3
"""Benchmark ``replemu campaign --engine local`` end to end against a reference commit.

The project (this working tree, as it is on disk) and the reference (the commit REF of this
repository, default 736e956, the commit before the speed work, extracted with ``git archive``
into a temporary directory) each run, through the CLI as a user runs it,

    python -m replemu campaign --profile clean --partitions 5000 --seed 1 --protocol kip320
                               --engine local --json --out DIR

with the working directory and PYTHONPATH set to the tree and the same Python; reference and
project alternated (ref, project, ref, project, ...) --runs times.  It prints the wall seconds of
each side (the BEST of its runs; interpreter start included), the ratio reference wall / project
wall (= project speed / reference speed) with the target, and whether the outputs are identical:

  speed    project >= 3 x the reference's speed (wall);
  same     the JSON printed on stdout identical byte for byte, and the example scenario files the
           campaign writes for its first findings (under --out: DIR/campaign-SEED-PROFILE-pK.yaml)
           identical byte for byte (every run writes to the same --out path, moved aside after the
           run, so the scenario_file paths in the JSON compare too).  Anything that differs is
           printed and the exit status is 1.

    python scripts/bench_campaign.py [--baseline REF] [--runs 1] [--partitions 5000] [--seed 1] [--profile clean]
                                     [--protocol kip320]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baseline import DEFAULT_BASELINE, extract, git, project_head  # noqa: E402 (scripts/baseline.py)

ROOT = Path(__file__).resolve().parent.parent
SPEED_TARGET = 3.0


def tree_env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree))


def check_imports(name: str, tree: Path) -> None:
    """The CLI of ``tree`` imports the packages of ``tree`` (not the editable install's)."""
    code = "import emulator, replemu, scenario_io; print(emulator.__file__, replemu.__file__, scenario_io.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=tree_env(tree), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench_campaign: {name}: importing the packages of {tree} failed:\n{done.stderr[-2000:]}")
    if not all(Path(f).resolve().is_relative_to(tree.resolve()) for f in done.stdout.split()):
        raise SystemExit(f"bench_campaign: {name}: the packages do not import from {tree}: {done.stdout}")


def run_cli(name: str, tree: Path, argv: list[str], out: Path, keep: Path) -> tuple[float, bytes, str]:
    """``python -m replemu ARGV --out OUT`` in ``tree``: (wall seconds, stdout, stderr); OUT is
    moved to ``keep`` after the run."""
    cmd = [sys.executable, "-m", "replemu", *argv, "--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, env=tree_env(tree), capture_output=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"bench_campaign: {name}: exit {done.returncode} from {' '.join(cmd)} (cwd {tree}):\n"
                         f"{done.stderr.decode(errors='replace')[-3000:]}")
    if out.exists():
        out.rename(keep)
    else:
        keep.mkdir()
    return wall, done.stdout, done.stderr.decode(errors="replace")


def files_under(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def compare(ref: tuple[bytes, dict[str, bytes]], other: tuple[bytes, dict[str, bytes]]) -> list[str]:
    differs = []
    if ref[0] != other[0]:
        a, b = ref[0].decode(errors="replace").splitlines(), other[0].decode(errors="replace").splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        x, y = (a[first] if first < len(a) else "(end)"), (b[first] if first < len(b) else "(end)")
        differs.append(f"JSON stdout differs ({len(ref[0])} vs {len(other[0])} bytes), first at line {first + 1}: "
                       f"reference {x!r} vs this run {y!r}")
    for f in sorted(set(ref[1]) | set(other[1])):
        if f not in ref[1] or f not in other[1]:
            differs.append(f"file {f}: written by one side only ({'reference' if f in ref[1] else 'this run'})")
        elif ref[1][f] != other[1][f]:
            differs.append(f"file {f}: contents differ")
    return differs


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="REF", default=DEFAULT_BASELINE,
                    help=f"the reference commit (default {DEFAULT_BASELINE})")
    ap.add_argument("--runs", type=int, default=1, help="runs of each side, alternated (default 1)")
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", default="clean")
    ap.add_argument("--protocol", default="kip320")
    args = ap.parse_args()
    commit = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
    argv = ["campaign", "--profile", args.profile, "--partitions", str(args.partitions), "--seed", str(args.seed),
            "--protocol", args.protocol, "--engine", "local", "--json"]
    load = ",".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_campaign profile={args.profile} partitions={args.partitions} seed={args.seed} protocol={args.protocol} "
          f"engine=local runs={args.runs} (best wall of each side, alternated) reference={args.baseline} = {commit} "
          f"project={ROOT} HEAD {project_head()} cores={os.cpu_count()} loadavg={load} python={sys.version.split()[0]}",
          flush=True)
    print(f"  command: python -m replemu {' '.join(argv)} --out DIR  (cwd and PYTHONPATH = the tree)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-campaign-"))
    try:
        sides = (("reference", extract(commit, work / "reference", who="bench_campaign")), ("project", ROOT))
        for name, tree in sides:
            check_imports(name, tree)
        walls: dict[str, list[float]] = {name: [] for name, _ in sides}
        outputs: dict[str, list[tuple[bytes, dict[str, bytes]]]] = {name: [] for name, _ in sides}
        header = None
        for run in range(args.runs):
            for name, tree in sides:
                print(f"  run {run + 1}/{args.runs} {name} ({tree}) ...", flush=True)
                keep = work / f"out-{name}-{run + 1}"
                wall, stdout, stderr = run_cli(name, tree, argv, work / "out", keep)
                header = header or stderr
                walls[name].append(wall)
                outputs[name].append((stdout, files_under(keep)))
                print(f"  run {run + 1}/{args.runs} {name}: {wall:.2f} s wall, {len(stdout):,} bytes of JSON, "
                      f"{len(outputs[name][-1][1])} example files", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("  the campaign's own header (stderr of the first run):")
    for line in (header or "").splitlines():
        print(f"    {line}")
    print()
    print(f"{'side':10} {'best wall s':>12}  all runs (wall s)")
    best = {}
    for name, _ in sides:
        best[name] = min(walls[name])
        print(f"{name:10} {best[name]:>12.2f}  {', '.join(f'{w:.2f}' for w in walls[name])}")
    ratio = best["reference"] / best["project"]
    print(f"ratio project / reference (speed = reference wall / project wall): {ratio:.2f}x, target >= {SPEED_TARGET:g}x: "
          f"{verdict(ratio >= SPEED_TARGET)}")
    ref = outputs["reference"][0]
    differs = []
    for name, _ in sides:
        for i, got in enumerate(outputs[name]):
            if (name, i) != ("reference", 0):
                differs += [f"{name} run {i + 1} against reference run 1: {x}" for x in compare(ref, got)]
    if differs:
        print(f"identical: NO ({len(differs)} differences)")
        for x in differs:
            print(f"  differs: {x}")
    else:
        print(f"identical: yes (JSON stdout, {len(ref[0]):,} bytes, and {len(ref[1])} example scenario files, byte for byte)")
    print("the JSON (reference run 1):")
    print(ref[0].decode(errors="replace").rstrip())
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
