#!/usr/bin/env python3
"""Benchmark the stream's scale-out (issue 32): where its CPU and memory go, by process role.

Each run is ``replemu stream --workload clean`` as a user runs it (a subprocess of this script,
``--master 'local-cluster[2,1,2048]'`` by default: two executor JVMs with their own Python
workers), sampled from /proc every ``--interval`` seconds until it and every process it started
have ended.  A process's role (``tests/processes.py`` ``roles``: by command line and parentage):

  driver side    driver Python (the ``replemu`` process), driver JVM, source planner (the Python
                 source's ``python_streaming_source_runner``), source generators (what the
                 planner forks), driver Python workers (other Python processes of the driver's JVM)
  executor side  executor JVMs (``CoarseGrainedExecutorBackend``), executor Python (their
                 ``pyspark.daemon`` and its workers)

CPU seconds are utime + stime of every process of the run, read from /proc/<pid>/stat at each
sample.  A process that ends between two samples is still counted: this script makes itself a
child subreaper (orphans of the run become its children, reaped with their rusage), and a
process never sampled (a short-lived Python worker) is counted through its parent's
cutime + cstime, minus what the parent's sampled children account for, under the role of what
that parent starts (a JVM's children are Python workers).  One exception: ``pyspark.daemon``
ignores SIGCHLD, so the Python workers it forks are reaped by the kernel and their CPU reaches no
parent's cutime and no rusage; they are counted from their samples only (their time after the
last sample, and a worker that lives less than one interval, are lost; with Spark's default
worker reuse they live long).  That is why the CPU counted exceeds what this script reaped.  The micro-batch a sample belongs to
is the number of lines of ``OUTPUT/progress.jsonl`` at that moment (the driver's listener writes
one per micro-batch): the sample is taken while that micro-batch runs.

Modes (targets from issue 32; printed, not asserted):

  long   ``--partitions 10000 --steps-per-batch 20`` for ``--batches`` (64) micro-batches: each role's
         peak RSS per micro-batch; the mean over batches 40-50 and over the last 10, and the ratio
         (target: every role's last 10 within 5% of batches 40-50; the per-partition window fills
         in ~50 batches at 20 steps a batch).
  cpu    ``--steps-per-batch 20 --max-steps 80`` (4 micro-batches) at 1,000 and 8,000 partitions
         (``--sizes 1000`` alone: one size, e.g. ``--master 'local[2]' --baseline 857ebf1`` for the
         per-micro-batch wall time against that commit):
         CPU seconds driver side vs executor side (and per role), the driver side's share of the
         CPU the extra partitions add (target <= 5%; 24% measured on 857ebf1), and the driver's
         peak RSS per role at both sizes (target: within +-10%).

``--baseline REF`` runs the same against commit REF of this repository (``git archive`` into a
temporary directory, ``scripts/baseline.py``; the same virtual environment, the command run
with that tree as working directory and PYTHONPATH), the two sides alternated ``--runs`` times,
and prints each side and the ratio project / reference.  The extracted tree has no compiled
core, so with ``--baseline`` both sides run the pure-Python core (``REPLEMU_PURE=1``) unless
``--compiled`` (then the project side alone runs its compiled core).

``--quick`` is a smoke run of the same code (long: 200 partitions, 4 micro-batches, windows
batches 1-2 and the last 2; cpu: 100 and 200 partitions).

    nice -n 10 python scripts/bench_scaleout.py --mode long|cpu|all [--quick] [--baseline REF] [--runs 1]
        [--master 'local-cluster[2,1,2048]'] [--partitions N] [--batches B] [--sizes 1000,8000] [--seed 1]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # processes.py: the job's processes and their roles
sys.path.insert(0, str(Path(__file__).resolve().parent))  # baseline.py

from baseline import extract, git, project_head  # noqa: E402
from processes import (  # noqa: E402
    DRIVER_ROLES,
    EXECUTOR_ROLES,
    ROLES,
    job_processes,
    kill_job,
    roles,
    stat_fields,
)

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 2 ** 20
MASTER = "local-cluster[2,1,2048]"
SPARK_HOME = Path(__import__("pyspark").__file__).parent
# the role the never-sampled children of a process have (their CPU reaches it as cutime)
CHILD_ROLE = {"driver Python": "driver JVM", "driver JVM": "driver Python workers", "driver Python workers": "driver Python workers",
              "source planner": "source generators", "source generators": "source generators",
              "executor JVMs": "executor Python", "executor Python": "executor Python"}


def become_subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER): the run's orphans (the driver's JVM outlives the driver's
    Python for a moment; executors can outlive it) become this process's children, so their CPU
    comes back to it with their exit status instead of being lost to init."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:
        raise SystemExit(f"bench_scaleout: prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")


def read_stat(pid: int) -> tuple[int, int, int, int, int] | None:
    """(ppid, start time, own CPU ticks, reaped children's CPU ticks, RSS bytes) of ``pid``."""
    rest = stat_fields(pid)
    if rest is None:
        return None
    return int(rest[1]), int(rest[19]), int(rest[11]) + int(rest[12]), int(rest[13]) + int(rest[14]), int(rest[21]) * PAGE


@dataclass
class Seen:
    """What the last sample of one process (pid, start time) read."""
    pid: int
    role: str
    parent: tuple[int, int] | None  # the parent's key when the parent is a process of the run
    own: int = 0  # ticks
    children: int = 0  # ticks
    exact: float | None = None  # seconds, from our own wait4 when this script reaped it
    cmd: str = ""


@dataclass
class RunResult:
    label: str
    partitions: int
    returncode: int
    wall_s: float
    batches: int
    batch_s: list[float]  # each micro-batch's triggerExecution (progress.jsonl)
    rss: list[dict[str, int]]  # per micro-batch: each role's peak RSS (bytes, summed over its processes)
    peak: dict[str, int]  # each role's peak RSS over the run
    cpu: dict[str, float]  # seconds per role
    unsampled: dict[str, float]  # of which: processes never sampled, counted through their parent
    reaped_s: float  # CPU of everything this script reaped itself (<= sum(cpu): pyspark.daemon's workers reach no rusage)
    processes: dict[str, int] = field(default_factory=dict)  # processes sampled per role

    def census(self) -> str:
        return ", ".join(f"{n} {role}" for role, n in self.processes.items() if n)

    def side(self, names) -> float:
        return sum(self.cpu.get(r, 0.0) for r in names)


def landed(progress: Path) -> int:
    try:
        with open(progress, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


class Sampler:
    """Samples the processes of the command ``proc`` (started with ``start_new_session=True``)
    from /proc every ``interval`` seconds until it and every process it started ended: each
    process's last CPU counters and role (``seen``), the CPU of what this script reaped itself
    (``reaped``), each role's peak RSS per step of ``step()`` (``per_batch``) and over the run."""

    def __init__(self, proc: subprocess.Popen, step, interval: float) -> None:
        self.proc, self.step, self.interval = proc, step, interval
        self.sessions = {proc.pid}
        self.seen: dict[tuple[int, int], Seen] = {}
        self.reaped: dict[int, float] = {}  # pid -> CPU seconds (rusage: itself and all it reaped)
        self.per_batch: list[dict[str, int]] = []
        self.peak = dict.fromkeys(ROLES, 0)
        self.returncode: int | None = None

    def _reap(self, flags: int) -> bool:
        """Reap one child (the command, or an orphan of it: subreaper); False when none is ready."""
        try:
            pid, status, usage = os.wait4(-1, flags)
        except ChildProcessError:
            return False
        if pid == 0:
            return False
        self.reaped[pid] = usage.ru_utime + usage.ru_stime
        if pid == self.proc.pid:
            self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)
        return True

    def sample(self) -> list:
        procs = job_processes(self.sessions)
        role_of = roles(procs, self.proc.pid)
        batch = self.step()
        stats = {pid: st for pid, _, _ in procs if (st := read_stat(pid)) is not None}
        keys = {pid: (pid, st[1]) for pid, st in stats.items()}
        cmds = {pid: cmd for pid, _, cmd in procs}
        sums = dict.fromkeys(ROLES, 0)
        for pid, (ppid, _, own, children, rss) in stats.items():
            entry = self.seen.get(keys[pid])
            if entry is None:
                entry = self.seen[keys[pid]] = Seen(pid, role_of[pid], None)
            if cmds[pid] != entry.cmd:  # first seen, or exec'd: a process sampled between its fork and its exec
                entry.role, entry.cmd = role_of[pid], cmds[pid]  # has its parent's command line; an orphan keeps its role
            entry.parent = keys.get(ppid)
            entry.own, entry.children = own, children
            sums[entry.role] += rss
        while len(self.per_batch) <= batch:
            self.per_batch.append(dict.fromkeys(ROLES, 0))
        for role, rss in sums.items():
            self.per_batch[batch][role] = max(self.per_batch[batch][role], rss)
            self.peak[role] = max(self.peak[role], rss)
        return procs

    def run(self, on_step=None) -> None:
        shown = 0
        try:
            while True:
                procs = self.sample()
                if on_step is not None and len(self.per_batch) - 1 > shown:
                    shown = len(self.per_batch) - 1
                    on_step(shown)
                while self._reap(os.WNOHANG):
                    pass
                if self.returncode is not None and not procs:
                    break
                time.sleep(self.interval)
            while self._reap(0):  # every process of the run ended; the last orphans (zombies) with their CPU
                pass
        except BaseException:
            kill_job(self.sessions)
            raise


def run_stream(label: str, tree: Path, work: Path, partitions: int, batches: int, args, pure: bool) -> RunResult:
    """One ``replemu stream`` run from ``tree``, sampled until every process of it ended."""
    out, ck = work / "out", work / "ck"
    cmd = [sys.executable, "-m", "replemu", "stream", "--workload", "clean", "--partitions", str(partitions),
           "--seed", str(args.seed), "--steps-per-batch", str(args.steps_per_batch),
           "--max-steps", str(args.steps_per_batch * batches), "--protocol", args.protocol, "--master", args.master,
           "--no-spark-ui", "--output", str(out), "--checkpoint", str(ck)]
    env = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if pure:
        env["REPLEMU_PURE"] = "1"
    work.mkdir(parents=True)
    log = open(work / "stdout", "w")
    print(f"  [{label}] {partitions:,} partitions x {args.steps_per_batch} steps, {batches} micro-batches, {args.master}",
          flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    sampler = Sampler(proc, lambda: landed(out / "progress.jsonl"), args.interval)
    try:
        sampler.run(lambda batch: print(f"    {batch} micro-batches landed ({time.monotonic() - start:,.0f} s)", flush=True)
                    if batch % 10 == 0 else None)
    finally:
        log.close()
    seen, reaped, per_batch, peak, returncode = sampler.seen, sampler.reaped, sampler.per_batch, sampler.peak, sampler.returncode
    wall = time.monotonic() - start
    cpu, unsampled = attribute(seen, reaped)
    if os.environ.get("BENCH_SCALEOUT_DUMP"):  # every process's last sample, for checking the accounting
        with open(os.environ["BENCH_SCALEOUT_DUMP"], "a") as f:
            f.write(json.dumps({"label": label, "partitions": partitions, "reaped": reaped,
                                "seen": [[*k, s.role, s.parent, s.own, s.children, s.exact] for k, s in seen.items()]}) + "\n")
    progress = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()] \
        if (out / "progress.jsonl").exists() else []
    text = (work / "stdout").read_text()
    if (app := re.search(r"Spark application (app-\S+),", text)):  # local-cluster keeps executor logs there
        shutil.rmtree(SPARK_HOME / "work" / app.group(1), ignore_errors=True)
    result = RunResult(label, partitions, returncode or 0, wall, len(progress),
                       [p["durationMs"]["triggerExecution"] / 1000 for p in progress],
                       per_batch[:len(progress)] or per_batch, peak, cpu, unsampled, sum(reaped.values()),
                       {role: sum(1 for x in seen.values() if x.role == role) for role in ROLES})
    if returncode:
        raise SystemExit(f"bench_scaleout: the run failed (exit {returncode}):\n  {' '.join(cmd)}\n{text[-3000:]}")
    return result


def attribute(seen: dict[tuple[int, int], Seen], reaped: dict[int, float]) -> tuple[dict[str, float], dict[str, float]]:
    """CPU seconds per role from the last sample of every process, without counting twice what
    a parent's cutime holds of children that were sampled themselves.

    A process's total = its own time + the unsampled remainder of its cutime + the totals of
    the children it reaped (those this script did not reap); when this script reaped it, its
    rusage is exact, and what that adds to the sampled total (its last moments) is its own."""
    kids: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key, s in seen.items():
        if s.parent is not None:
            kids.setdefault(s.parent, []).append(key)
    # the last process sampled under each pid is the one a wait4 of that pid reaped
    latest = {}
    for key in sorted(seen, key=lambda k: k[1]):
        latest[key[0]] = key
    for pid, seconds in reaped.items():
        if pid in latest:
            seen[latest[pid]].exact = seconds
    cpu, unsampled = dict.fromkeys(ROLES, 0.0), dict.fromkeys(ROLES, 0.0)
    totals: dict[tuple[int, int], float] = {}

    def total(key: tuple[int, int]) -> float:
        if key in totals:
            return totals[key]
        s = seen[key]
        theirs = sum(total(k) for k in kids.get(key, []) if seen[k].exact is None)  # reaped by this process
        for k in kids.get(key, []):
            if seen[k].exact is not None:
                total(k)  # reaped by this script: counted, not part of this process's cutime
        rest = max(0.0, s.children / TICK - theirs)
        cpu[s.role] += s.own / TICK
        cpu[CHILD_ROLE[s.role]] += rest
        unsampled[CHILD_ROLE[s.role]] += rest
        sampled = s.own / TICK + rest + theirs
        if s.exact is not None and s.exact > sampled:
            cpu[s.role] += s.exact - sampled  # its last moments after the last sample
            sampled = s.exact
        totals[key] = sampled
        return sampled

    for key in seen:
        total(key)
    return cpu, unsampled


# -- the modes -------------------------------------------------------------------------------

def mean_window(rows: list[dict[str, int]], first: int, last: int) -> dict[str, float]:
    window = rows[first:last + 1]
    return {r: statistics.mean(row[r] for row in window) for r in ROLES} if window else dict.fromkeys(ROLES, 0.0)


def long_windows(args, batches: int) -> tuple[tuple[int, int], tuple[int, int]]:
    if args.quick:
        return (1, 2), (batches - 2, batches - 1)
    return (40, 50), (batches - 10, batches - 1)


def report_long(r: RunResult, args) -> dict[str, float]:
    (a0, a1), (b0, b1) = long_windows(args, r.batches)
    early, late = mean_window(r.rss, a0, a1), mean_window(r.rss, b0, b1)
    print(f"  {r.label}: {r.batches} micro-batches in {r.wall_s:,.0f} s (micro-batch p50 {statistics.median(r.batch_s):.1f} s, "
          f"max {max(r.batch_s):.1f} s); processes sampled: {r.census()}", flush=True)
    print(f"    {'role':22} {'batches ' + str(a0) + '-' + str(a1):>16} {'last ' + str(b1 - b0 + 1) + ' (' + str(b0) + '-' + str(b1) + ')':>18}"
          f" {'ratio':>7}  (each role's peak RSS per micro-batch, MiB, mean over the window; target ratio <= 1.05)")
    ratios = {}
    for role in ROLES:
        if not early[role] and not late[role]:
            continue
        ratio = late[role] / early[role] if early[role] else float("inf")
        ratios[role] = ratio
        print(f"    {role:22} {early[role] / MIB:16,.0f} {late[role] / MIB:18,.0f} {ratio:7.3f}  "
              f"{'ok' if ratio <= 1.05 else 'GROWING'}", flush=True)
    shown = [role for role in ROLES if any(row[role] for row in r.rss)]
    print("    per micro-batch (MiB, " + " / ".join(shown) + "):", flush=True)
    for i, row in enumerate(r.rss):
        print(f"      {i:3} {r.batch_s[i] if i < len(r.batch_s) else float('nan'):6.1f} s  "
              + " / ".join(f"{row[role] / MIB:,.0f}" for role in shown), flush=True)
    return ratios


def report_cpu(results: list[RunResult]) -> dict[str, float]:
    print(f"    {'partitions':>10} | {'driver side':>11} | {'executors':>9} | {'driver share':>12} | "
          f"driver Python / JVM / source planner / generators / driver Python workers (CPU s) | "
          f"driver peak RSS Python / JVM / source planner (MiB) | CPU counted", flush=True)
    for r in results:
        d, e = r.side(DRIVER_ROLES), r.side(EXECUTOR_ROLES)
        print(f"    {r.partitions:>10,} | {d:11.1f} | {e:9.1f} | {d / (d + e):12.0%} | "
              + " / ".join(f"{r.cpu[role]:.1f}" for role in DRIVER_ROLES)
              + f" | {r.peak['driver Python'] / MIB:,.0f} / {r.peak['driver JVM'] / MIB:,.0f} / {r.peak['source planner'] / MIB:,.0f}"
              + f" | {sum(r.cpu.values()):.1f} s ({r.reaped_s:.1f} reaped here; never sampled {sum(r.unsampled.values()):.1f})", flush=True)
        print(f"    {'':>10}   {r.partitions:,} partitions: {r.batches} micro-batches in {r.wall_s:,.0f} s; processes sampled: {r.census()}",
              flush=True)
    small, large = results[0], results[-1]
    if small is large:  # one size (--sizes 1000): what each role costs there, no share of an increase
        return {}
    dd = large.side(DRIVER_ROLES) - small.side(DRIVER_ROLES)
    de = large.side(EXECUTOR_ROLES) - small.side(EXECUTOR_ROLES)
    share = dd / (dd + de) if dd + de else float("nan")
    print(f"    of the CPU the extra {large.partitions - small.partitions:,} partitions add ({dd + de:.1f} s): driver side "
          f"{dd:.1f} s = {share:.1%} (target <= 5%; 857ebf1: 24%): {'ok' if share <= 0.05 else 'MISS'}", flush=True)
    out = {"driver share of the added CPU": share}
    for role in ("driver Python", "driver JVM", "source planner"):
        if small.peak[role]:
            ratio = large.peak[role] / small.peak[role]
            out[f"driver peak RSS {role}, {large.partitions:,} / {small.partitions:,}"] = ratio
            print(f"    {role} peak RSS {small.peak[role] / MIB:,.0f} -> {large.peak[role] / MIB:,.0f} MiB: x{ratio:.2f} "
                  f"(target within +-10%): {'ok' if abs(ratio - 1) <= 0.10 else 'MISS'}", flush=True)
    return out


def mode_long(side: str, tree: Path, work: Path, args, pure: bool) -> dict[str, float]:
    partitions = 200 if args.quick else args.partitions
    batches = 4 if args.quick else args.batches
    r = run_stream(side, tree, work / "long", partitions, batches, args, pure)
    return {f"RSS last/40-50 {role}": v for role, v in report_long(r, args).items()}


def mode_cpu(side: str, tree: Path, work: Path, args, pure: bool) -> dict[str, float]:
    sizes = (100, 200) if args.quick else tuple(int(s) for s in args.sizes.split(","))
    results = []
    for p in sizes:
        results.append(run_stream(side, tree, work / f"cpu-{p}", p, 4, args, pure))
        shutil.rmtree(work / f"cpu-{p}", ignore_errors=True)
    print(f"  {side}: clean, 20 steps x 4 micro-batches, {args.master}", flush=True)
    metrics = report_cpu(results)
    for r in results:
        metrics[f"micro-batch p50 wall s at {r.partitions:,}"] = statistics.median(r.batch_s)
        metrics[f"driver side CPU s at {r.partitions:,}"] = r.side(DRIVER_ROLES)
        metrics[f"executor side CPU s at {r.partitions:,}"] = r.side(EXECUTOR_ROLES)
    return metrics


def build_of(tree: Path, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    env["PYTHONPATH"] = str(tree)
    if pure:
        env["REPLEMU_PURE"] = "1"
    done = subprocess.run([sys.executable, "-c", "import emulator; print(getattr(emulator, 'BUILD', 'pure Python'))"],
                          cwd=tree, env=env, capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="all", choices=("long", "cpu", "all"))
    ap.add_argument("--quick", action="store_true", help="a small smoke run of the same code")
    ap.add_argument("--master", default=MASTER)
    ap.add_argument("--partitions", type=int, default=10_000, help="long: partitions")
    ap.add_argument("--batches", type=int, default=64, help="long: micro-batches (>= 60)")
    ap.add_argument("--sizes", default="1000,8000", help="cpu: the two partition counts")
    ap.add_argument("--steps-per-batch", type=int, default=20)
    ap.add_argument("--protocol", default="kip320")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between two /proc samples")
    ap.add_argument("--baseline", metavar="REF", help="also run commit REF (git archive), alternated")
    ap.add_argument("--runs", type=int, default=1, help="with --baseline: alternated runs of each side")
    ap.add_argument("--compiled", action="store_true", help="with --baseline: the project side on its compiled core")
    args = ap.parse_args()
    if not args.quick and args.mode in ("long", "all") and args.batches < 52:
        ap.error("--batches: at least 52 (batches 40-50 and the last 10 are compared)")
    become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = ("cpu", "long") if args.mode == "all" else (args.mode,)
    work = Path(tempfile.mkdtemp(prefix="replemu-bench-scaleout-"))
    sides: list[tuple[str, Path, bool]] = [("project", ROOT, bool(args.baseline) and not args.compiled)]
    try:
        if args.baseline:
            ref = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
            sides.insert(0, ("reference", extract(ref, work / "reference-tree", who="bench_scaleout"), True))
            print(f"bench_scaleout: project = {project_head()}, reference = {args.baseline} = {ref}", flush=True)
        else:
            print(f"bench_scaleout: project = {project_head()}", flush=True)
        for side, tree, pure in sides:
            print(f"  {side}: {tree} ({build_of(tree, pure)} core)", flush=True)
        for mode in modes:
            print(f"[{mode}]{' (quick)' if args.quick else ''}", flush=True)
            metrics: dict[str, dict[str, list[float]]] = {}
            for run in range(args.runs if args.baseline else 1):
                for side, tree, pure in sides:
                    got = globals()[f"mode_{mode}"](side, tree, work / f"{mode}-{side}-{run}", args, pure)
                    shutil.rmtree(work / f"{mode}-{side}-{run}", ignore_errors=True)
                    for name, value in got.items():
                        metrics.setdefault(name, {}).setdefault(side, []).append(value)
            if args.baseline:
                print(f"  project / reference (median of {args.runs} run(s) each):", flush=True)
                for name, by_side in metrics.items():
                    p, r = statistics.median(by_side["project"]), statistics.median(by_side["reference"])
                    print(f"    {name:55} project {p:10.3f}  reference {r:10.3f}  ratio {p / r if r else float('nan'):.3f}",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
