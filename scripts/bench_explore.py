#!/usr/bin/env python3
"""Benchmark ``replemu explore``: the Spark engine against the local engine on the same space.

Both engines search one bounded space breadth-first (``emulator.search.search_local`` in this
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

With ``--baseline REF`` it measures something else: the LOCAL engine of this working tree (the
project, as it is on disk) against the local engine of the commit REF of this repository (the
reference; default 736e956, the commit before the speed work, extracted with ``git archive``
into a temporary directory), end to end through the CLI as a user runs it:

    python -m replemu explore --protocol P --replicas R --depth D [--records ... --power-crashes ...]
                              --engine local --json --out DIR

with the working directory and PYTHONPATH set to the tree, the same Python.  Per side: wall
seconds of the whole command (interpreter start included; the BEST of --runs runs, reference and
project alternated), distinct states, states/s (distinct states / wall) and the search's own
seconds; then the target and the agreement:

  speed    project >= 5 x the reference's states/s (wall);
  same     states per depth, distinct states, transitions, the violations (invariant, depth, path,
           scenario file) and the files written under --out (scenario files, explore.svg) are
           identical byte for byte (every run writes to the same --out path, moved aside after
           the run, so the paths in the JSON compare too); anything that differs is printed and
           the exit status is 1.

One run of the default depth 6 takes minutes, so --runs defaults to 1 in this mode.  Each run
also gives the CPU seconds of the command and its worker processes (steadier than the wall clock
when other work shares the cores).  ``--pure`` adds a third side, alternated with the others: the
project on its pure-Python core (``REPLEMU_PURE=1``), and the ratios project / pure (what the
compiled build adds) by wall and CPU time.

    python scripts/bench_explore.py --baseline [REF] [--protocol kip320] [--replicas 3] [--depth 6] [--runs 1] [--pure]
    python scripts/bench_explore.py --baseline [REF] --args '--protocol kraft853 --depth 5' [--runs 1] [--pure]

(``--args``: any family's search, given by its ``replemu explore`` flags, e.g. a metadata-quorum one.
``--reference-tree DIR``: the reference is a tree of REF with its core compiled, to compare two
compiled builds; the project's core is compiled when this tree's is.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from baseline import DEFAULT_BASELINE, extract, git, project_head  # noqa: E402 (scripts/baseline.py)

if TYPE_CHECKING:
    from emulator.search import Level

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FRONTIER, GROWING_FROM, SPEED_TARGET, FLAT_TARGET = 100_000, 10_000, 1.5, 1.25
MIB = 2 ** 20
BASELINE_TARGET = 5.0


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


# -- --baseline: the local engine of this tree against a commit's, through the CLI ---------------

def tree_env(tree: Path, pure: bool = False) -> dict[str, str]:
    """The environment of a side: PYTHONPATH the tree; ``pure``: REPLEMU_PURE=1 (else unset)."""
    env = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    return dict(env, PYTHONPATH=str(tree), **({"REPLEMU_PURE": "1"} if pure else {}))


def check_imports(name: str, tree: Path, pure: bool = False) -> str:
    """The CLI of ``tree`` imports the packages of ``tree`` (not the editable install's); returns
    the build of the core it runs (``emulator.BUILD``; the reference predates it: pure Python)."""
    code = ("import emulator, replemu, streaming; print(emulator.__file__, replemu.__file__, streaming.__file__); "
            "print(getattr(emulator, 'BUILD', 'pure Python'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=tree_env(tree, pure), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench_explore: {name}: importing the packages of {tree} failed:\n{done.stderr[-2000:]}")
    files, build = done.stdout.strip().splitlines()
    if not all(Path(f).resolve().is_relative_to(tree.resolve()) for f in files.split()):
        raise SystemExit(f"bench_explore: {name}: the packages do not import from {tree}: {done.stdout}")
    return build


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for descendants (the CLI and its workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(name: str, tree: Path, argv: list[str], out: Path, keep: Path, pure: bool = False) -> tuple[float, float, bytes]:
    """``python -m replemu ARGV --out OUT`` in ``tree``: (wall seconds, CPU seconds of the command
    and its worker processes, stdout); its stderr is echoed as progress; OUT is moved to ``keep``."""
    cmd = [sys.executable, "-m", "replemu", *argv, "--out", str(out)]
    with tempfile.TemporaryFile() as stdout:
        cpu = children_cpu()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, env=tree_env(tree, pure), stdout=stdout, stderr=subprocess.PIPE, text=True)
        tail = []
        for line in proc.stderr:
            tail = (tail + [line])[-40:]
            print(f"    [{name}] {line.rstrip()}", flush=True)
        code = proc.wait()
        wall = time.perf_counter() - started
        cpu = children_cpu() - cpu
        stdout.seek(0)
        text = stdout.read()
    if code:
        raise SystemExit(f"bench_explore: {name}: exit {code} from {' '.join(cmd)} (cwd {tree}):\n{''.join(tail[-5:])}")
    if out.exists():
        out.rename(keep)
    else:
        keep.mkdir()
    return wall, cpu, text


def files_under(d: Path) -> dict[str, bytes]:
    return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*")) if f.is_file()}


def runs_of(result: dict) -> dict[str, dict]:
    """protocol -> its result object (``--protocol all`` prints them under "runs")."""
    return {r["protocol"]: r for r in result.get("runs", [result])}


COMPARED = ("states_per_depth", "distinct_states", "transitions", "depth", "complete", "exhausted", "stopped", "violations")


def compare(ref: dict, proj: dict, ref_files: dict[str, bytes], proj_files: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """(differences, notes): what differs in the compared fields and the files; other fields
    (but the seconds) that differ are notes."""
    differs, notes = [], []
    a, b = runs_of(ref), runs_of(proj)
    if sorted(a) != sorted(b):
        differs.append(f"protocols: reference {sorted(a)} vs project {sorted(b)}")
    for protocol in sorted(set(a) & set(b)):
        for key in COMPARED:
            if a[protocol].get(key) != b[protocol].get(key):
                differs.append(f"{protocol} {key}: reference {json.dumps(a[protocol].get(key))} vs project "
                               f"{json.dumps(b[protocol].get(key))}")
        for key in sorted((set(a[protocol]) | set(b[protocol])) - set(COMPARED) - {"seconds"}):
            if a[protocol].get(key) != b[protocol].get(key):
                notes.append(f"{protocol} {key}: reference {json.dumps(a[protocol].get(key))} vs project "
                             f"{json.dumps(b[protocol].get(key))}")
    for f in sorted(set(ref_files) | set(proj_files)):
        if f not in proj_files or f not in ref_files:
            differs.append(f"file {f}: written by the {'reference' if f in ref_files else 'project'} only")
        elif ref_files[f] != proj_files[f]:
            differs.append(f"file {f}: contents differ")
    return differs, notes


def baseline(args: argparse.Namespace) -> int:
    commit = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
    space = shlex.split(args.args) if args.args else [
        "--protocol", args.protocol, "--replicas", str(args.replicas), "--depth", str(args.depth), "--records",
        str(args.records), "--epochs", str(args.epochs), "--crashes", str(args.crashes), "--power-crashes",
        str(args.power_crashes)]
    argv = ["explore", *space, "--engine", "local", "--json"]
    load = ",".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_explore --baseline: local engine through the CLI, {' '.join(space)} runs={args.runs} (best wall of each "
          f"side, alternated; CPU: the command and its workers) "
          f"reference={args.baseline} = {commit} project={ROOT} HEAD {project_head()} cores={os.cpu_count()} "
          f"loadavg={load} python={sys.version.split()[0]}", flush=True)
    print(f"  command: python -m replemu {' '.join(argv)} --out DIR  (cwd and PYTHONPATH = the tree)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-explore-baseline-"))
    try:
        reference = Path(args.reference_tree) if args.reference_tree else extract(commit, work / "reference", who="bench_explore")
        sides = [("reference", reference, False), ("project", ROOT, False)]
        sides += [("pure", ROOT, True)] if args.pure else []
        builds = {name: check_imports(name, tree, pure) for name, tree, pure in sides}
        print("  builds: " + "; ".join(f"{name}: {build}" for name, build in builds.items()), flush=True)
        walls: dict[str, list[float]] = {name: [] for name, _, _ in sides}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in sides}
        outputs: dict[str, list[tuple[dict, dict[str, bytes]]]] = {name: [] for name, _, _ in sides}
        for run in range(args.runs):
            for name, tree, pure in sides:
                print(f"  run {run + 1}/{args.runs} {name} ({tree}{', REPLEMU_PURE=1' if pure else ''})", flush=True)
                keep = work / f"out-{name}-{run + 1}"
                wall, cpu, text = run_cli(name, tree, argv, work / "out", keep, pure)
                try:
                    result = json.loads(text)
                except ValueError:
                    raise SystemExit(f"bench_explore: {name}: the output is not JSON:\n{text[:2000]!r}") from None
                walls[name].append(wall)
                cpus[name].append(cpu)
                outputs[name].append((result, files_under(keep)))
                n = sum(r["distinct_states"] for r in runs_of(result).values())
                print(f"  run {run + 1}/{args.runs} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, {n:,} distinct states, "
                      f"{n / wall:,.0f} states/s, loadavg {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'side':10} {'wall s':>8} {'CPU s':>8} {'distinct states':>16} {'states/s':>10} {'states/CPU s':>13} "
          f"{'search s':>9}  {'all runs (wall s / CPU s)'}")
    rates, cpu_rates = {}, {}
    for name, _, _ in sides:
        best = min(range(args.runs), key=lambda i: walls[name][i])
        result = runs_of(outputs[name][best][0])
        n = sum(r["distinct_states"] for r in result.values())
        search = sum(r.get("seconds", 0.0) for r in result.values())
        rates[name], cpu_rates[name] = n / walls[name][best], n / min(cpus[name])
        print(f"{name:10} {walls[name][best]:>8.1f} {min(cpus[name]):>8.1f} {n:>16,} {rates[name]:>10,.0f} "
              f"{cpu_rates[name]:>13,.0f} {search:>9.1f}  {', '.join(f'{w:.1f}/{c:.1f}' for w, c in zip(walls[name], cpus[name]))}")
    ratio = rates["project"] / rates["reference"]
    print(f"ratio project / reference (states/s, best wall of each side): {ratio:.2f}x, target >= {BASELINE_TARGET:g}x: "
          f"{verdict(ratio >= BASELINE_TARGET)}; by CPU time {cpu_rates['project'] / cpu_rates['reference']:.2f}x")
    if args.pure:
        print(f"ratio pure / reference: {rates['pure'] / rates['reference']:.2f}x wall, "
              f"{cpu_rates['pure'] / cpu_rates['reference']:.2f}x CPU; project / pure (what the build adds): "
              f"{rates['project'] / rates['pure']:.2f}x wall, {cpu_rates['project'] / cpu_rates['pure']:.2f}x CPU")
    differs, notes = [], []
    ref = outputs["reference"][0]
    for name, _, _ in sides:
        for i, (result, files) in enumerate(outputs[name]):
            if (name, i) == ("reference", 0):
                continue
            d, n = compare(ref[0], result, ref[1], files)
            differs += [f"{name} run {i + 1} against reference run 1: {x}" for x in d]
            notes += [f"{name} run {i + 1} against reference run 1: {x}" for x in n]
    first = runs_of(ref[0])
    summary = "; ".join(f"{p}: states per depth {r['states_per_depth']}, transitions {r['transitions']:,}, violations "
                        f"{[v['invariant'] + ' ' + v['path'] for v in r['violations']] or 'none'}" for p, r in first.items())
    if differs:
        print(f"identical: NO ({len(differs)} differences)")
        for x in differs:
            print(f"  differs: {x}")
    else:
        print(f"identical: yes (states per depth, transitions, violations and their paths, files under --out: "
              f"{len(ref[1])}) -- {summary}")
    for x in notes:
        print(f"  note (not compared): {x}")
    return 1 if differs else 0


def add_space_arguments(ap: argparse.ArgumentParser) -> None:
    """The searched space's flags (default: kip320, 3 replicas, depth 6, the default bounds),
    shared with scripts/bench_explore_scaling.py."""
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--records", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--crashes", type=int, default=1)
    ap.add_argument("--power-crashes", type=int, default=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_space_arguments(ap)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--baseline", metavar="REF", nargs="?", const=DEFAULT_BASELINE,
                    help="instead: this tree's local engine against commit REF's, through the CLI "
                         f"(default when given without a value: {DEFAULT_BASELINE})")
    ap.add_argument("--runs", type=int, default=1, help="runs of each side with --baseline, alternated (default 1)")
    ap.add_argument("--reference-tree", metavar="DIR",
                    help="with --baseline: the reference is this tree (REF's sources with its compiled core built "
                         "beside them: setup.py build_ext --inplace) instead of REF extracted, which runs pure Python")
    ap.add_argument("--args", metavar="'FLAGS'",
                    help="with --baseline: these explore flags instead of the space's (--protocol ... --power-crashes), "
                         "e.g. a metadata-quorum search: --args '--protocol kraft853 --depth 5'")
    ap.add_argument("--pure", action="store_true",
                    help="with --baseline: also run the project on its pure-Python core (REPLEMU_PURE=1), as a third side")
    args = ap.parse_args()
    if args.baseline:
        return baseline(args)
    return spark_vs_local(args)


def spark_vs_local(args: argparse.Namespace) -> int:
    from emulator.config import Config
    from emulator.explore import Bounds, Space
    from emulator.run import effective_variant
    from emulator.search import search_local

    print(f"bench_explore protocol={args.protocol} replicas={args.replicas} depth={args.depth} records={args.records} "
          f"epochs={args.epochs} crashes={args.crashes} power_crashes={args.power_crashes} master={args.master} "
          f"cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} busy_before={machine_busy():.0%} python={sys.version.split()[0]}", flush=True)
    cfg = Config()
    space = Space(tuple(range(1, args.replicas + 1)), cfg, effective_variant(args.protocol, cfg),
                  Bounds(args.depth, args.records, args.epochs, args.crashes, args.power_crashes))

    from streaming.explore import search_spark
    from streaming.session import build_spark

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
