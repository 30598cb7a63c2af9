#!/usr/bin/env python3
"""Chaos test of ``replemu stream``: kill -9 the whole job at seeded random points, restart it from
its checkpoint every time, and check that its outputs are byte-identical to an uninterrupted run.

    python scripts/chaos.py --partitions 1000 --kills 20 [--seed S] [--steps-per-batch K]
                            [--max-steps M] [--protocol kip320] [--workdir DIR] [--keep]

One seed decides everything (in the manner of TigerBeetle's simulator: ``random.Random(seed)``):
the workload (``--workload clean --seed S``, unless ``--workload-seed``), the order and kind of
the kills, the micro-batch each one aims at and where inside its window it strikes.  The seed is
printed first; the same command with ``--seed S`` replays the same plan (the wall-clock moments
differ from run to run, the points in the job's life are the same).

1. The reference: ``replemu stream`` (the CLI, as users run it; ``run_chaos(..., spark=)`` runs it
   in-process instead, as ``tests/test_chaos.py`` does) to the end, watched to learn how long
   start-up and each micro-batch take and which outputs each micro-batch writes.
2. The killed run: the same command, started in its own session; at the kill point the whole
   process group gets SIGKILL (driver, JVM, source runner) and every process left in the
   session (the ``pyspark.daemon`` processes put themselves in their own group) is SIGKILLed
   by pid; then the same command is started again.  After ``--kills`` kills it runs to the end.
3. Every file of the killed run's output tree is compared, names and bytes, with the
   reference's, except the files that legitimately differ (``EXCLUDED``): every ``*.parquet``
   (the six output kinds and ``validations``, the GX results: the observer writes no GX JSON,
   its GX context is ephemeral), ``run.json`` and ``gaps.json``.  The GX Data Docs (HTML with
   timestamps and random ids) are compared separately with those masked, and reported.

Kill kinds (``KINDS``) and how each point is detected (``OUT`` = --output, ``CK`` = --checkpoint;
a file "lands" when it appears, or is replaced, after the attempt started):

* ``startup`` — during Spark/JVM start-up: a seeded delay (a fraction of the reference's
  start-up) after the CLI started, or at the latest when the query starts (Spark's Python
  streaming source runner appears, or a new offset or ``CK/metadata`` lands).
* ``state``   — inside micro-batch b's state function, between commits: after b-1's commit (and
  progress line), before b's first output file.  The window opens when ``CK/offsets/b`` lands
  (or, for a batch replayed after a restart, when a forked ``pyspark.worker`` appears); the kill
  comes a seeded fraction of b's expected window later (the shorter of the reference's and the
  median of the killed run's last three), if no output of b landed by then.
* ``sink``    — inside the foreachBatch sink: the seeded one of b's outputs
  (``OUT/<kind>/batch_id=b``, in the order the sink writes them, ``validations`` last) landed
  and ``CK/commits/b`` did not.
* ``commit``  — right after b's commit: ``CK/commits/b`` landed, plus a seeded 0-250 ms (before
  or after the progress line, sometimes in b+1's planning).

Micro-batch kills aim at strictly increasing (batch, phase) points, so the run moves on between
them; a kill whose window was missed (polling is not instantaneous, batches vary) aims at the next
batch, a state kill with half its fraction.
Every kill is classified again after it, from the files that landed, and printed with where it
struck.  A kill that came too late for its kind (on a loaded machine a sink kill can land after
the commit) is tried again (``--retries``, 3 in all) when no kill of that kind was made and none
is left in the plan.  Exit status 0 only when a kill of every planned kind was made, the last
start ran to the end, and every compared file is identical: where a kill struck never fails a
run by itself, a lost or changed output byte does.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from processes import job_processes, kill_job  # noqa: E402
from streaming.operators import DEFAULT_OPERATOR, OPERATOR_NAMES  # noqa: E402
from streaming.output_layout import batch_dir_name, same_parquet_content  # noqa: E402

KINDS = ("startup", "state", "sink", "commit")
PHASE = {"state": 0, "sink": 1, "commit": 2}  # order of the micro-batch kinds inside one batch
WEIGHTS = {"startup": 0.2, "state": 0.3, "sink": 0.3, "commit": 0.2}
COMMIT_DELAY_S = 0.25  # a commit kill strikes up to this long after the commit file landed
POLL_S = 0.005  # exact-path stats: cheap
SCAN_S = 0.1  # /proc scans of the job's session
DEFAULT_STARTUP_S = 12.0  # start-up of the CLI when the reference ran in-process
STALL_S = 1800.0  # an attempt that reaches no kill point (or no end) in this long is an error
FINAL_S = 3600.0

# Files of the output tree left out of the byte comparison, and why.
EXCLUDED = {
    "progress.jsonl": "Spark's StreamingQueryProgress per micro-batch: run ids, wall-clock timestamps and durations; "
                      "a killed attempt also leaves lines of batches that ran again (and may lose the line of a "
                      "batch committed just before the kill)",
    "replemu.lock": "the job's lock on its output directory, not an output: it names the holder while held and is "
                    "emptied on release; an in-process reference (run_stream) takes no lock",
    "data_docs/": "GX Data Docs (HTML): the build time, the validation time and GX's random ids are in every page "
                  "(and the validation time in a batch's page path); compared separately below with those masked",
    "logs/": "the job's log (OUTPUT/logs/replemu.log: what the JVM and its Python workers printed, the traces of a "
             "failure): timestamps, and the lines of every attempt; not an output",
    "gx_results/": "GX's validation results (JSON, read by the Data Docs build): they carry GX's load time and random "
                   "ids; what they say is in validations/*.parquet, which is compared byte for byte",
}
_MASK = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{8}T\d{6}\.\d{6}Z"
                   r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")


def output_kinds() -> tuple[str, ...]:
    """The kinds in the order the sink writes them (validations, by the observer, last)."""
    try:
        from streaming.schemas import OUTPUT_KINDS

        return tuple(OUTPUT_KINDS) + ("validations",)
    except Exception:  # noqa: BLE001 - only the order of a sink kill's target depends on it
        return ("timeline", "log", "summary", "violations", "losses", "errors", "quarantine", "validations")


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Planned:
    kind: str
    batch: int | None  # None for startup
    u: float  # startup/state: fraction of the window; sink: which output; commit: fraction of COMMIT_DELAY_S

    def point(self) -> tuple[int, int]:
        return (self.batch, PHASE[self.kind])


def batches_of(max_steps: int, steps_per_batch: int) -> int:
    return -(-max_steps // steps_per_batch)


def plan_kills(seed: int, kills: int, batches: int, weights: dict[str, float] | None = None) -> list[Planned]:
    """The kills, from the seed alone: each kind at least once (when kills >= 4), the rest drawn
    by ``weights``; micro-batch kills at distinct batches per kind, in (batch, phase) order;
    start-up kills at seeded places in between."""
    rng = random.Random(seed)
    weights = weights or WEIGHTS
    kinds = list(KINDS[:kills]) if kills < len(KINDS) else list(KINDS)
    kinds += rng.choices(KINDS, weights=[weights[k] for k in KINDS], k=max(0, kills - len(kinds)))
    counts = Counter(kinds)
    for kind in ("state", "sink", "commit"):  # at most one kill of a kind per batch
        while counts[kind] > batches:
            counts[kind] -= 1
            counts["startup"] += 1
    batch_kills = []
    for kind in ("state", "sink", "commit"):
        for b in rng.sample(range(batches), counts[kind]):
            batch_kills.append(Planned(kind, b, rng.uniform(0.05, 0.85) if kind == "state" else rng.random()))
    batch_kills.sort(key=Planned.point)
    startup_at = set(rng.sample(range(kills), counts["startup"]))
    out, it = [], iter(batch_kills)
    for i in range(kills):
        out.append(Planned("startup", None, rng.uniform(0.05, 0.95)) if i in startup_at else next(it))
    return out


def successor(kind: str, batch: int, batches: int) -> tuple[str, int] | None:
    """Where a missed (or overtaken) micro-batch kill aims next."""
    if batch + 1 < batches:
        return kind, batch + 1
    later = {"state": "sink", "sink": "commit"}.get(kind)
    return (later, batch) if later else None


# ---------------------------------------------------------------------------------------------
# Processes and files


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``roots``: path -> (inode, mtime)."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[p] = (st.st_ino, st.st_mtime_ns)
    return out


@dataclass
class Layout:
    out: Path
    ck: Path

    def offsets(self, b: int) -> Path:
        return self.ck / "offsets" / str(b)

    def commit(self, b: int) -> Path:
        return self.ck / "commits" / str(b)

    def output(self, kind: str, b: int) -> Path:
        return self.out / kind / batch_dir_name(b)

    def deltas(self, b: int) -> list[Path]:
        """The state-store files of batch b (version b+1), one per shuffle partition."""
        root = self.ck / "state" / "0"
        parts = sorted((d for d in root.iterdir() if d.name.isdigit()), key=lambda d: int(d.name)) if root.is_dir() else []
        return [d / f"{b + 1}.delta" for d in parts]

    def committed(self) -> int:
        """Micro-batches committed: the next batch to run."""
        d = self.ck / "commits"
        ids = [int(p.name) for p in d.iterdir() if p.name.isdigit()] if d.is_dir() else []
        return max(ids) + 1 if ids else 0


class Job:
    """One start of ``replemu stream``, in its own session; knows what landed since it started."""

    def __init__(self, cmd: list[str], layout: Layout, log_path: Path):
        self.layout = layout
        self.baseline = snapshot(layout.out, layout.ck)
        self.next_batch = layout.committed()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.t0 = time.monotonic()
        self._scan_at = 0.0
        self._procs: list[tuple[int, int, str]] = []
        self.sessions = {self.proc.pid}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def landed(self, path: Path) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return False
        return self.baseline.get(str(path)) != (st.st_ino, st.st_mtime_ns)

    def existed(self, path: Path) -> bool:
        return str(path) in self.baseline

    def processes(self, fresh: bool = False) -> list[tuple[int, int, str]]:
        """The job's processes (its session and the JVM's), rescanned at most every SCAN_S."""
        now = time.monotonic()
        if fresh or now - self._scan_at >= SCAN_S:
            self._procs, self._scan_at = job_processes(self.sessions), now
        return self._procs

    def has(self, needle: str, forked: bool = False) -> bool:
        procs = self.processes()
        pids = {pid for pid, _, cmd in procs if needle in cmd}
        return any(ppid in pids for _, ppid, _ in procs) if forked else bool(pids)

    def kill(self) -> None:
        """SIGKILL every process of the job's session and of the JVM's, at once."""
        kill_job(self.sessions)
        self.proc.wait()
        self._log.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        elif not self._log.closed:
            self._log.close()

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# The runs


@dataclass
class Config:
    partitions: int = 1000
    kills: int = 20
    seed: int | None = None
    workload_seed: int | None = None
    steps_per_batch: int = 2
    max_steps: int = 60
    protocol: str = "kip320"
    workload: str = "clean"
    workdir: Path | None = None
    keep: bool = False
    weights: dict[str, float] = field(default_factory=lambda: dict(WEIGHTS))
    retries: int = 3  # further kills, in all, for kinds whose kills came too late (run_killed)
    operator: str = DEFAULT_OPERATOR  # replemu stream --operator (streaming.operators)

    @property
    def batches(self) -> int:
        return batches_of(self.max_steps, self.steps_per_batch)

    def command(self, out: Path, ck: Path) -> list[str]:
        return [sys.executable, "-m", "replemu", "stream", "--workload", self.workload,
                "--partitions", str(self.partitions), "--seed", str(self.workload_seed),
                "--steps-per-batch", str(self.steps_per_batch), "--max-steps", str(self.max_steps),
                "--protocol", self.protocol, "--output", str(out), "--checkpoint", str(ck), "--no-spark-ui",
                "--operator", self.operator]


@dataclass
class Reference:
    """What the uninterrupted run showed: its outputs, start-up time and micro-batch windows."""

    layout: Layout
    seconds: float
    startup_s: float
    windows: dict[int, float]  # batch -> seconds from its offsets to its first output
    outputs: dict[int, list[str]]  # batch -> output kinds, in the order the sink writes them

    def window(self, b: int) -> float:
        if b in self.windows:
            return self.windows[b]
        known = sorted(self.windows.values())
        return known[len(known) // 2] if known else 2.0


class ChaosError(RuntimeError):
    pass


def _say(out, text: str) -> None:
    print(text, file=out, flush=True)


def _lock_or_identity(text: str) -> str:
    lines = [l for l in text.splitlines() if re.search(r"\block\b|replemu\.lock|identity|in use by|different run", l, re.I)]
    return ("; the log mentions the lock or the identity: " + " | ".join(lines[-3:])) if lines else ""


class Watch:
    """Polls a run's checkpoint and outputs: when each batch's offsets, first output and commit
    were first seen (seconds since the watch started)."""

    def __init__(self, layout: Layout, batches: int):
        self.layout, self.batches, self.kinds = layout, batches, output_kinds()
        self.t0 = time.monotonic()
        self.seen: dict[str, float] = {}

    def poll(self) -> None:
        now, L = time.monotonic() - self.t0, self.layout
        for b in range(self.batches):
            for key, path in (("o", L.offsets(b)), ("c", L.commit(b))):
                if f"{key}{b}" not in self.seen and path.exists():
                    self.seen[f"{key}{b}"] = now
            if f"w{b}" not in self.seen and f"o{b}" in self.seen and any(L.output(k, b).exists() for k in self.kinds):
                self.seen[f"w{b}"] = now

    def windows(self) -> dict[int, float]:
        s = self.seen
        return {b: s[f"w{b}"] - s[f"o{b}"] for b in range(self.batches) if f"w{b}" in s and f"o{b}" in s}


def run_reference(cfg: Config, workdir: Path, out=sys.stdout, spark=None) -> Reference:
    """The uninterrupted run: the CLI, or with ``spark`` in this process (``run_stream`` with the
    ``ExpectationsObserver``, as ``replemu stream`` runs it), watched for its timings."""
    layout = Layout(workdir / "reference" / "output", workdir / "reference" / "checkpoint")
    watch = Watch(layout, cfg.batches)
    startup = None
    if spark is None:
        job = Job(cfg.command(layout.out, layout.ck), layout, workdir / "logs" / "reference.log")
        try:
            while job.proc.poll() is None:
                if startup is None and (job.has("python_streaming_source_runner") or layout.offsets(0).exists()):
                    startup = job.elapsed()
                watch.poll()
                if job.elapsed() > STALL_S + FINAL_S:
                    raise ChaosError("the reference run did not end")
                time.sleep(0.02)
        finally:
            job.close()
        if job.proc.returncode != 0:
            raise ChaosError(f"the reference run failed (exit {job.proc.returncode}){_lock_or_identity(job.log_tail())}:"
                             f"\n{job.log_tail()}")
        seconds = job.elapsed()
    else:
        import threading

        from expectations.suites import ExpectationsObserver
        from scenario_io.profiles import load_profiles
        from streaming.job import run_stream
        from streaming.workload_source import WorkloadSpec

        workload = WorkloadSpec.of(load_profiles()[cfg.workload], cfg.workload_seed, cfg.partitions,
                                   cfg.steps_per_batch, max_steps=cfg.max_steps)
        done = threading.Event()

        def poll() -> None:
            while not done.is_set():
                watch.poll()
                time.sleep(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            run_stream(None, layout.out, layout.ck, cfg.protocol, spark=spark, quiet=True, workload=workload,
                       observer=ExpectationsObserver(), operator=cfg.operator)
        finally:
            done.set()
            poller.join()
        seconds = time.monotonic() - watch.t0
    committed = layout.committed()
    if committed != cfg.batches:
        raise ChaosError(f"the reference committed {committed} micro-batches, expected {cfg.batches}")
    outputs = {b: [k for k in watch.kinds if layout.output(k, b).is_dir()] for b in range(cfg.batches)}
    return Reference(layout, seconds, startup or DEFAULT_STARTUP_S, watch.windows(), outputs)


class Tracker:
    """The killed run's own micro-batch windows (its offsets landed -> its first output landed):
    state kills aim inside the shorter of the reference's window and the recent ones, so a
    machine that got faster since the reference does not make them miss."""

    def __init__(self, ref: Reference):
        self.ref = ref
        self.windows: dict[int, float] = {}
        self.job: Job | None = None

    def start(self, job: Job) -> None:
        self.job, self.cur, self.t_off = job, job.next_batch, None

    def poll(self) -> None:
        job, now = self.job, time.monotonic()
        L = job.layout
        if self.t_off is None and job.landed(L.offsets(self.cur)):
            self.t_off = now
        if any(job.landed(L.output(k, self.cur)) for k in self.ref.outputs.get(self.cur, [])):
            if self.t_off is not None:  # not for a replayed batch: its offsets were logged before
                self.windows[self.cur] = now - self.t_off
            self.cur, self.t_off = self.cur + 1, None

    def window(self, b: int) -> float:
        recent = [self.windows[k] for k in sorted(self.windows)[-3:]]
        return min(self.ref.window(b), sorted(recent)[len(recent) // 2]) if recent else self.ref.window(b)


@dataclass
class Kill:
    number: int
    planned: str
    kind: str  # as classified after the kill
    batch: int | None
    detail: str
    attempt_s: float
    total_s: float
    retry: bool = False  # another try at a kill of ``planned``'s kind that came too late

    def line(self) -> str:
        at = f"{self.kind}@{self.batch}" if self.kind != "startup" else f"startup (next batch {self.batch})"
        return (f"kill {self.number}: {at}" + ("" if self.kind == self.planned else f" (planned {self.planned})")
                + (" [retry]" if self.retry else "") + f" at {self.attempt_s:.1f} s of its start: {self.detail}")


def _classify(job: Job, b: int, kinds: list[str]) -> str:
    """What the files say the job had done to batch b when it died."""
    L = job.layout
    if job.landed(L.commit(b)):
        return "commit"
    if any(job.landed(L.output(k, b)) for k in kinds):
        return "sink"
    return "state"


def _progress_has(layout: Layout, b: int) -> bool:
    path = layout.out / "progress.jsonl"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return False
    for line in reversed(lines[-5:]):
        try:
            if json.loads(line).get("batchId") == b:
                return True
        except ValueError:
            continue
    return False


def _strike(job: Job, planned: Planned, ref: Reference, batches: int, note: Callable[[str], None],
            tracker: Tracker | None = None) -> tuple[str, int | None, str, float] | None:
    """Wait for the planned point and kill there; returns (kind, batch, detail, seconds into the
    start), or None when the job ended first (exit 0).  A missed micro-batch window moves the aim
    to the next batch (a state kill's fraction of the window halves)."""
    L = job.layout
    tracker = tracker or Tracker(ref)
    tracker.start(job)
    kind, b, u = planned.kind, planned.batch, planned.u
    origin = None  # state: when the window opened; commit: when the commit landed
    deadline = time.monotonic() + STALL_S
    while True:
        rc = job.proc.poll()
        if rc is not None:
            if rc == 0:
                return None
            raise ChaosError(f"the job failed (exit {rc}) before the kill point{_lock_or_identity(job.log_tail())}:\n{job.log_tail()}")
        if time.monotonic() > deadline:
            raise ChaosError(f"the {kind} kill point (batch {b}) never came")
        tracker.poll()
        now = time.monotonic()
        fire, missed = False, None
        if kind == "startup":
            started = job.landed(L.offsets(job.next_batch)) or job.landed(L.ck / "metadata") or job.has("python_streaming_source_runner")
            fire = started or job.elapsed() >= u * ref.startup_s
        elif kind == "state":
            outs = ref.outputs.get(b, [])
            if job.existed(L.commit(b)) or job.landed(L.commit(b)) or any(job.landed(L.output(k, b)) for k in outs):
                missed = f"batch {b}'s first output landed before the kill"
            elif origin is None:
                if job.landed(L.offsets(b)):
                    origin = now
                elif job.existed(L.offsets(b)) and job.has("pyspark.worker", forked=True):
                    origin = now  # a replay: the offsets were logged before the restart
            fire = origin is not None and now - origin >= u * tracker.window(b)
        elif kind == "sink":
            outs = ref.outputs.get(b) or ["timeline"]
            target = outs[min(int(u * len(outs)), len(outs) - 1)]
            if job.existed(L.commit(b)) or job.landed(L.commit(b)):
                missed = f"batch {b} committed before its {target} output was seen"
            else:
                fire = job.landed(L.output(target, b))
        else:  # commit
            if job.existed(L.commit(b)):
                missed = f"batch {b} was committed before this start"
            elif origin is None and job.landed(L.commit(b)):
                origin = now
            fire = origin is not None and now - origin >= u * COMMIT_DELAY_S
        if missed:
            nxt = successor(kind, b, batches)
            if nxt is None:
                raise ChaosError(f"the {kind} kill at batch {b} was missed ({missed}) and no batch is left")
            note(f"      ({kind} kill at batch {b} missed: {missed}; aiming at {nxt[0]} of batch {nxt[1]})")
            if kind == "state":
                u /= 2
            kind, b = nxt
            origin = None
            continue
        if fire:
            # what the job is doing, as seen just before the kill
            if kind == "startup":
                java = any("java" in cmd.split(" ", 1)[0] for _, _, cmd in job.processes(fresh=True))
                where = "the query was starting" if started else ("the JVM was up" if java else "before the JVM started")
            elif kind == "state":
                deltas = job.layout.deltas(b)
                done = sum(job.landed(p) for p in deltas)
                where = (f"{now - origin:.2f} s into the batch, "
                         + (f"{done}/{len(deltas)} state-store partitions committed" if done else "no state-store commit yet"))
            elif kind == "sink":
                outs = ref.outputs.get(b, [])
                done = [k for k in outs if job.landed(L.output(k, b))]
                where = f"after {target}: {len(done)}/{len(outs)} outputs landed ({','.join(done)}), no commit"
            else:
                where = (f"{(now - origin) * 1000:.0f} ms after the commit, progress line "
                         f"{'written' if _progress_has(L, b) else 'not yet'}, next offsets "
                         f"{'logged' if job.landed(L.offsets(b + 1)) else 'not yet'}")
            t_kill = job.elapsed()
            job.kill()
            # classify again from what landed by the time the job died
            if kind == "startup":
                b0 = job.next_batch
                landed_any = (job.landed(L.offsets(b0)) or any(job.landed(p) for p in L.deltas(b0))
                              or any(job.landed(L.output(k, b0)) for k in ref.outputs.get(b0, [])) or job.landed(L.commit(b0)))
                actual = "startup" if not landed_any else _classify(job, b0, ref.outputs.get(b0, []))
                return actual, b0, where, t_kill
            actual = _classify(job, b, ref.outputs.get(b, []))
            if actual != kind:
                where += f" (planned {kind}; the files say {actual})"
            return actual, b, where, t_kill
        time.sleep(POLL_S)


@dataclass
class Comparison:
    total: int
    identical: int
    missing: list[str]
    extra: list[str]
    different: list[str]
    by_ext: dict[str, int]
    excluded: dict[str, int]
    docs: dict[str, object]
    compared: list[str] = field(default_factory=list)  # the reference's files that were compared
    by_content: list[str] = field(default_factory=list)  # Parquet files equal by content, not by bytes

    @property
    def ok(self) -> bool:
        docs_missing = bool(self.docs and self.docs.get("missing"))  # a validated batch's Data Docs page lost
        return not self.missing and not self.extra and not self.different and self.identical == self.total and not docs_missing

    @property
    def first_difference(self) -> str | None:
        diffs = sorted([f"{p} (missing)" for p in self.missing] + [f"{p} (extra)" for p in self.extra]
                       + [f"{p} (bytes differ)" for p in self.different])
        return diffs[0] if diffs else None


def _excluded(rel: str) -> str | None:
    for pattern in EXCLUDED:
        if rel == pattern or (pattern.endswith("/") and rel.startswith(pattern)):
            return pattern
    return None


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def compare_trees(ref: Path, got: Path) -> Comparison:
    """Every file of both output trees but the excluded ones: names and bytes."""
    ref_all, got_all = _files(ref), _files(got)
    excluded = Counter(e for e in map(_excluded, ref_all + got_all) if e)
    ref_files = [f for f in ref_all if not _excluded(f)]
    got_files = set(f for f in got_all if not _excluded(f))
    missing = [f for f in ref_files if f not in got_files]
    extra = sorted(got_files - set(ref_files))
    common = [f for f in ref_files if f in got_files]
    unequal = [f for f in common if not filecmp.cmp(ref / f, got / f, shallow=False)]
    # Parquet written by another JVM: the same content can be other bytes (same_parquet_content)
    by_content = [f for f in unequal if f.endswith(".parquet") and same_parquet_content(ref / f, got / f)]
    different = [f for f in unequal if f not in by_content]
    by_ext = Counter(Path(f).suffix or Path(f).name for f in ref_files)
    return Comparison(len(ref_files), len(common) - len(different), missing, extra, different, dict(by_ext),
                      dict(excluded), compare_docs(ref / "data_docs", got / "data_docs"), ref_files, by_content)


def compare_docs(ref: Path, got: Path) -> dict[str, object]:
    """The Data Docs pages: which exist in both, and which read the same once the timestamps and
    GX's random ids are masked, in their text and in their paths (a batch's GX page is in a
    directory named after the clock when it was validated)."""
    def pages(root: Path) -> dict[str, str]:
        return {_MASK.sub("#", f): f for f in _files(root) if f.endswith(".html")} if root.is_dir() else {}

    def masked(p: Path) -> str:
        return _MASK.sub("#", p.read_text(encoding="utf-8", errors="replace"))

    ref_pages, got_pages = pages(ref), pages(got)
    same = [k for k in ref_pages if k in got_pages and masked(ref / ref_pages[k]) == masked(got / got_pages[k])]
    return {"pages": len(ref_pages), "present": sum(k in got_pages for k in ref_pages), "same": len(same),
            "missing": [f for k, f in ref_pages.items() if k not in got_pages],
            "extra": sorted(f for k, f in got_pages.items() if k not in ref_pages),
            "different": [f for k, f in ref_pages.items() if k in got_pages and k not in same]}


@dataclass
class Result:
    seed: int
    plan: list[Planned]
    kills: list[Kill]
    starts: int
    comparison: Comparison | None
    reference_s: float
    killed_s: float
    total_s: float
    workdir: Path
    error: str | None = None

    @property
    def kinds_missing(self) -> list[str]:
        """Kinds of the plan of which no kill was made (each kill classified by the files after it)."""
        made = {k.kind for k in self.kills}
        return [kind for kind in KINDS if kind in {p.kind for p in self.plan} and kind not in made]

    @property
    def ok(self) -> bool:
        return (self.error is None and not self.kinds_missing and self.comparison is not None
                and self.comparison.ok)

    def where(self) -> str:
        """Where every kill struck, one line each (for a failure's message)."""
        return "\n".join(k.line() for k in self.kills) or "no kill was made"


def _retry(kind: str, u: float, committed: int, batches: int) -> Planned | None:
    """Another try at a kill of ``kind`` that came too late (the files say it struck at a later
    point): at the first micro-batch the next start runs (a replay of an uncommitted batch counts),
    a startup or state kill sooner in its window, a sink kill after the sink's first output (the
    widest window: every other output and the validations are still to come)."""
    if kind == "startup":
        return Planned("startup", None, u / 2)
    if committed >= batches:
        return None
    return Planned(kind, committed, u / 2 if kind == "state" else 0.0 if kind == "sink" else u)


def run_killed(cfg: Config, ref: Reference, plan: list[Planned], workdir: Path, t_start: float,
               out=sys.stdout) -> tuple[list[Kill], int]:
    """Start, kill, restart, as ``plan`` says; then a last start to the end.  A kill is reported
    where the files say it struck.  One that came too late for its kind (a sink kill after which
    the commit had landed, a state kill after an output, a start-up kill after the query started)
    is tried again, up to ``cfg.retries`` times in all, when no later kill of the plan is of that
    kind and none of the kind was made yet: what the run must prove is every kind of kill
    survived, not that a loaded machine hits each window at the first try."""
    layout = Layout(workdir / "killed" / "output", workdir / "killed" / "checkpoint")
    cmd = cfg.command(layout.out, layout.ck)
    kills: list[Kill] = []
    last: tuple[int, int] | None = None  # the furthest micro-batch point killed at
    starts, retries = 0, cfg.retries
    tracker = Tracker(ref)
    queue: list[tuple[Planned, bool]] = [(p, False) for p in plan]  # (the kill, a retry)
    i = 0
    while queue:
        (planned, retry), aimed = queue.pop(0), None
        i += 1
        n = i + len(queue)
        if planned.kind != "startup" and last is not None and not retry:
            kind, b = planned.kind, planned.batch
            while (b, PHASE[kind]) <= last:
                nxt = successor(kind, b, cfg.batches)
                if nxt is None:
                    break
                kind, b = nxt
            if (b, PHASE[kind]) <= last:
                if any(k.kind == planned.kind for k in kills):
                    _say(out, f"      (kill {i}: {planned.kind} at batch {planned.batch}: no point left after batch "
                              f"{last[0]}; a {planned.kind} kill was made already, so none is made here)")
                    i -= 1
                    continue
                raise ChaosError(f"kill {i}: no point left after batch {last[0]} for a {planned.kind} kill")
            if (kind, b) != (planned.kind, planned.batch):
                _say(out, f"      (kill {i}: {planned.kind} at batch {planned.batch} already passed; aiming at {kind} of batch {b})")
            aimed = Planned(kind, b, planned.u)
        starts += 1
        job = Job(cmd, layout, workdir / "logs" / f"killed-{starts:02d}.log")
        try:
            struck = _strike(job, aimed or planned, ref, cfg.batches, lambda text: _say(out, text), tracker)
        finally:
            job.close()
        if struck is None:
            _say(out, f"kill {i:2d}/{n}: not made, the job ran to the end first")
            return kills, starts
        kind, b, where, t_kill = struck
        kills.append(Kill(i, planned.kind, kind, b, where, t_kill, time.monotonic() - t_start, retry))
        if kind != "startup":
            last = max(last or (-1, -1), (b, PHASE[kind]))
        label = f"batch {b}" if kind != "startup" else f"next batch {b}"
        _say(out, f"kill {i:2d}/{n}: {kind:<7} {label:<13} at {t_kill:6.1f} s of start {starts:2d} "
                  f"({time.monotonic() - t_start:7.1f} s in all): {where}" + (" [a retry]" if retry else ""))
        wanted = planned.kind
        if (kind != wanted and not any(k.kind == wanted for k in kills) and not any(q.kind == wanted for q, _ in queue)):
            again = _retry(wanted, planned.u, layout.committed(), cfg.batches) if retries > 0 else None
            if again is None:
                _say(out, f"      (the {wanted} kill came too late and " + ("no retry is left" if retries <= 0 else
                          "no micro-batch is left for another try") + ")")
            else:
                retries -= 1
                queue.insert(0, (again, True))
                _say(out, f"      (the {wanted} kill came too late: trying again at "
                          + ("the next start" if wanted == "startup" else f"batch {again.batch}") + ")")
    starts += 1
    job = Job(cmd, layout, workdir / "logs" / f"killed-{starts:02d}.log")
    try:
        rc = job.proc.wait(timeout=FINAL_S)
    except subprocess.TimeoutExpired:
        job.close()
        raise ChaosError(f"the last start did not end in {FINAL_S:.0f} s") from None
    job.close()
    if rc != 0:
        raise ChaosError(f"the last start failed (exit {rc}){_lock_or_identity(job.log_tail())}:\n{job.log_tail()}")
    _say(out, f"last start ({starts}): ran to the end in {job.elapsed():.1f} s")
    return kills, starts


def run_chaos(cfg: Config, out=sys.stdout, spark=None) -> Result:
    """The whole test; ``spark``: run the reference in this process (the killed run is always the CLI)."""
    if cfg.seed is None:
        cfg.seed = random.SystemRandom().randrange(2**32)
    if cfg.workload_seed is None:
        cfg.workload_seed = cfg.seed
    _say(out, f"seed {cfg.seed}")
    t_start = time.monotonic()
    workdir = Path(cfg.workdir) if cfg.workdir else Path(tempfile.mkdtemp(prefix="replemu-chaos-"))
    for sub in ("reference", "killed"):
        if (workdir / sub).exists():
            shutil.rmtree(workdir / sub)
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    plan = plan_kills(cfg.seed, cfg.kills, cfg.batches, cfg.weights)
    _say(out, f"replemu stream --workload {cfg.workload} --partitions {cfg.partitions} --seed {cfg.workload_seed} "
              f"--steps-per-batch {cfg.steps_per_batch} --max-steps {cfg.max_steps} --protocol {cfg.protocol}: "
              f"{cfg.batches} micro-batches; workdir {workdir}")
    _say(out, "plan: " + ", ".join(f"{p.kind}" + (f"@{p.batch}" if p.batch is not None else "") for p in plan))
    result = Result(cfg.seed, plan, [], 0, None, 0.0, 0.0, 0.0, workdir)
    try:
        ref = run_reference(cfg, workdir, out, spark=spark)
        result.reference_s = ref.seconds
        _say(out, f"reference: {cfg.batches} micro-batches in {ref.seconds:.1f} s (start-up {ref.startup_s:.1f} s, "
                  f"batch window median {ref.window(-1):.2f} s)")
        t_killed = time.monotonic()
        result.kills, result.starts = run_killed(cfg, ref, plan, workdir, t_start, out)
        result.killed_s = time.monotonic() - t_killed
        result.comparison = compare_trees(ref.layout.out, workdir / "killed" / "output")
    except ChaosError as exc:
        result.error = str(exc)
    result.total_s = time.monotonic() - t_start
    report(cfg, result, out)
    if result.ok and not cfg.keep and not cfg.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def report(cfg: Config, r: Result, out=sys.stdout) -> None:
    planned, made = Counter(p.kind for p in r.plan), Counter(k.kind for k in r.kills)
    _say(out, "")
    _say(out, f"{'kind':<8} {'planned':>7} {'made':>5}  batches")
    for kind in KINDS:
        batches = ",".join(str(k.batch) for k in r.kills if k.kind == kind)
        _say(out, f"{kind:<8} {planned[kind]:>7} {made[kind]:>5}  {batches}")
    _say(out, f"{'all':<8} {len(r.plan):>7} {len(r.kills):>5}"
              + (f"  ({sum(k.retry for k in r.kills)} retries of kills that came too late)" if any(k.retry for k in r.kills) else ""))
    if r.kinds_missing:
        _say(out, f"no kill of kind {', '.join(r.kinds_missing)} was made (every try came too late); where each struck:")
        for k in r.kills:
            _say(out, "  " + k.line())
    _say(out, f"starts of the killed run: {r.starts} ({max(r.starts - 1, 0)} restarts)")
    c = r.comparison
    if c is not None:
        kinds = ", ".join(f"{n} {ext}" for ext, n in sorted(c.by_ext.items()))
        _say(out, f"identical files: {c.identical}/{c.total} ({kinds}); missing {len(c.missing)}, extra {len(c.extra)}, "
                  f"different {len(c.different)}")
        if c.by_content:
            _say(out, f"  of which {len(c.by_content)} Parquet files by content, not bytes (schema, metadata and rows equal; "
                      "Spark's Parquet writer orders a column's encodings differently in another JVM)")
        _say(out, f"first differing file: {c.first_difference or 'none'}")
        for pattern, n in sorted(c.excluded.items()):
            _say(out, f"excluded from the byte check: {pattern} ({n} files in the two trees): {EXCLUDED[pattern]}")
        d = c.docs
        _say(out, f"data docs (masked): {d['present']}/{d['pages']} reference pages present, {d['same']} the same, "
                  f"{len(d['extra'])} extra" + (f"; first missing {d['missing'][0]}" if d["missing"] else "")
                  + (f"; first different {d['different'][0]}" if d["different"] else ""))
    if r.error:
        _say(out, f"ERROR: {r.error}")
    _say(out, f"time: reference {r.reference_s:.1f} s, killed run {r.killed_s:.1f} s, total {r.total_s:.1f} s")
    verdict = "PASS" if r.ok else "FAIL"
    _say(out, f"{verdict}: seed {r.seed}" + ("" if r.ok else f" (workdir kept: {r.workdir}; replay with --seed {r.seed})"))


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--seed", type=int, default=None, help="the one seed (default: a random one, printed first)")
    p.add_argument("--workload-seed", type=int, default=None, help="the workload's seed (default: --seed)")
    p.add_argument("--steps-per-batch", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=60, help="with --steps-per-batch: ceil(M/K) micro-batches (default 30)")
    p.add_argument("--protocol", default="kip320")
    p.add_argument("--operator", default=DEFAULT_OPERATOR, choices=OPERATOR_NAMES,
                   help="replemu stream --operator: Spark's stateful operator of both runs")
    p.add_argument("--retries", type=int, default=3,
                   help="further kills, in all, for kinds whose kills came too late (default 3)")
    p.add_argument("--workdir", type=Path, default=None, help="default: a new temporary directory, removed after a pass")
    p.add_argument("--keep", action="store_true", help="keep the workdir after a pass")
    a = p.parse_args(argv)
    if a.kills < 1 or a.partitions < 1 or a.steps_per_batch < 1 or a.max_steps < 1:
        p.error("--kills, --partitions, --steps-per-batch and --max-steps must be positive")
    return Config(partitions=a.partitions, kills=a.kills, seed=a.seed, workload_seed=a.workload_seed,
                  steps_per_batch=a.steps_per_batch, max_steps=a.max_steps, protocol=a.protocol,
                  workdir=a.workdir, keep=a.keep, retries=max(0, a.retries), operator=a.operator)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    return 0 if run_chaos(cfg).ok else 1


if __name__ == "__main__":
    sys.exit(main())
