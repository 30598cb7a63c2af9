#!/usr/bin/env python3
"""The faults a long-running ``replemu stream`` meets, each tried end to end through the CLI, as a
user would meet it: what the command exits with, the lines the terminal gets, the fix, and after
the fix whether the same command finishes with the results of an uninterrupted run.

    python scripts/faults.py [--faults a,b,...] [--markdown] [--workdir DIR] [--keep] [--connect-wait 180]
                             [--seed 1] [--partitions 60] [--steps-per-batch 20] [--max-steps 200]

The workload is one small clean stream (``replemu stream --workload clean --seed 1 --partitions 60
--steps-per-batch 20 --max-steps 200 --protocol kip320``: 10 micro-batches); its uninterrupted run
is made once, and every fault's ``replemu results OUT --json`` after the fix is compared with it.

a. the output directory's disk full: OUT on a small tmpfs (CK elsewhere); fix: grow the tmpfs.
b. the checkpoint's disk full: CK on a small tmpfs (OUT elsewhere); fix: grow the tmpfs.
c. the last ``offsets/N`` emptied       \\
d. the last ``commits/N`` torn           | on a copy of the uninterrupted run's output and
e. ``metadata`` emptied                  | checkpoint, as a crash during the write leaves them;
f. the last state delta torn (HDFS)      | fix: ``replemu checkpoint repair CK``.
g. the last RocksDB zip torn (``--state-store rocksdb``; its own uninterrupted run first) /
h. a Python worker SIGKILLed inside the state function: the state function runs in a micro-batch's
   second stage, after the first (the source) wrote the shuffle and before the state store's
   deltas land; the job gets its own ``SPARK_LOCAL_DIRS`` so that its shuffle files can be seen,
   and KILL_AFTER_S after micro-batch 3's shuffle landed every forked ``pyspark.daemon`` worker
   of the job's JVM gets SIGKILL (the row says how many of the batch's state deltas had landed:
   none, inside the state function); fix: none but the same command again (if Spark ran the
   task again and the job finished, the row says so).
i. the Spark Connect server stopped mid-stream (``--remote``; pyspark's own
   ``sbin/start-connect-server.sh``, stopped with ``stop-connect-server.sh`` while a micro-batch
   runs); fix: start the server again (same port) and run the same command.  A command that has
   not exited ``--connect-wait`` seconds after the stop is killed, and the row says so (pyspark's
   Connect client retries a lost server for 10 minutes).
j. the output directory removed (``rm -rf OUT``) after a few micro-batches committed; fix: what
   the terminal says.

(a) and (b) mount a tmpfs and need root: without it they are reported as skipped.  Exit status 0
when every fault tried ends, after its fix, with exit 0 and the uninterrupted results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from processes import job_processes, kill_job  # noqa: E402

RUN_S = 900.0  # a run that takes longer than this is an error
POLL_S = 0.005
KILL_AFTER_S = 0.12  # (h): into the state stage, which took 0.3-0.5 s per micro-batch here

FAULTS = {
    "a": "the output directory's disk full",
    "b": "the checkpoint's disk full",
    "c": "the last offsets file emptied",
    "d": "the last commit file torn",
    "e": "metadata emptied",
    "f": "the last state delta torn (HDFS-backed)",
    "g": "the last RocksDB zip torn",
    "h": "a Python worker SIGKILLed inside the state function",
    "i": "the Spark Connect server stopped mid-stream",
    "j": "the output directory removed while running",
}
NEEDS_ROOT = {"a", "b"}


@dataclass
class Config:
    seed: int = 1
    partitions: int = 60
    steps_per_batch: int = 20
    max_steps: int = 200
    protocol: str = "kip320"
    workdir: Path | None = None
    keep: bool = False
    small_output_mb: int = 3
    small_checkpoint_kb: int = 600
    connect_wait: float = 180.0

    @property
    def batches(self) -> int:
        return -(-self.max_steps // self.steps_per_batch)

    def args(self) -> list[str]:
        return ["stream", "--workload", "clean", "--seed", str(self.seed), "--partitions", str(self.partitions),
                "--steps-per-batch", str(self.steps_per_batch), "--max-steps", str(self.max_steps),
                "--protocol", self.protocol, "--no-spark-ui"]

    def command(self, out: Path, ck: Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "replemu", *self.args(), *extra, "--output", str(out), "--checkpoint", str(ck)]


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    seconds: float


class Job:
    """One ``replemu stream`` in its own session (the JVM starts another one: ``tests/processes``)."""

    def __init__(self, cmd: list[str], logs: Path, name: str, env: dict[str, str] | None = None):
        logs.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = logs / f"{name}.stdout", logs / f"{name}.stderr"
        self._out, self._err = open(self.out_path, "wb"), open(self.err_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=env)
        self.sessions = {self.proc.pid}
        self.t0 = time.monotonic()
        self.timed_out = False

    def processes(self) -> list[tuple[int, int, str]]:
        return job_processes(self.sessions)

    def until(self, condition: Callable[[], bool], timeout: float = RUN_S) -> bool:
        """Wait for ``condition``; False when the job ended first (or the time ran out)."""
        deadline, scanned = time.monotonic() + timeout, 0.0
        while self.proc.poll() is None and time.monotonic() < deadline:
            if time.monotonic() - scanned > 0.2:  # keep the JVM's session known while the driver links to it
                self.processes()
                scanned = time.monotonic()
            if condition():
                return True
            time.sleep(POLL_S)
        return False

    def wait(self, timeout: float = RUN_S) -> Outcome:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            kill_job(self.sessions)
            self.proc.wait()
        seconds = time.monotonic() - self.t0
        kill_job(self.sessions)  # nothing of it outlives it (a worker, a JVM)
        self._out.close()
        self._err.close()
        return Outcome(self.proc.returncode, self.out_path.read_text(errors="replace"),
                       self.err_path.read_text(errors="replace"), seconds)


def run(cmd: list[str], logs: Path, name: str, env=None) -> Outcome:
    return Job(cmd, logs, name, env).wait()


def results_json(out: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "replemu", "results", str(out), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout if done.returncode == 0 else done.stderr.strip()


@dataclass
class Row:
    key: str
    fault: str
    status: str = ""  # the failed run's exit status (or what happened instead)
    lines: list[str] = field(default_factory=list)  # its stderr
    fix: str = ""
    after: str = ""  # the same command's exit status after the fix, and the results
    ok: bool = False
    note: str = ""
    seconds: float = 0.0


class Faults:
    def __init__(self, cfg: Config, out=sys.stdout):
        self.cfg, self.out = cfg, out
        self.work = Path(cfg.workdir) if cfg.workdir else Path(tempfile.mkdtemp(prefix="replemu-faults-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs = self.work / "logs"
        self.reference: str | None = None
        self.rocksdb: Path | None = None
        self.mounts: list[Path] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def short(self, text: str) -> str:
        """``text`` with "…" for the workdir, the temporary directory and the repository in paths."""
        for prefix in sorted({str(self.work), tempfile.gettempdir(), str(ROOT)}, key=len, reverse=True):
            text = re.sub(re.escape(prefix.rstrip("/")) + r"(?=/)", "…", text)
        return text

    # -- helpers ----------------------------------------------------------------------------

    def fresh(self, key: str) -> Path:
        d = self.work / key
        if d.exists():
            self._umount_under(d)
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def mount(self, at: Path, size: str) -> None:
        at.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], check=True)
        self.mounts.append(at)

    def _umount_under(self, d: Path) -> None:
        for m in [m for m in self.mounts if m == d or d in m.parents]:
            subprocess.run(["umount", "-l", str(m)], check=False)
            self.mounts.remove(m)

    def cleanup(self) -> None:
        for m in list(self.mounts):
            subprocess.run(["umount", "-l", str(m)], check=False)
        self.mounts.clear()

    def compare(self, out: Path) -> tuple[bool, str]:
        rc, text = results_json(out)
        if rc != 0:
            return False, f"`replemu results` exit {rc}: {self.short(text.splitlines()[-1] if text else '')}"
        if text == self.reference:
            return True, "results identical"
        return False, "results DIFFER from the uninterrupted run's"

    def after(self, row: Row, again: Outcome, out: Path) -> None:
        same, said = self.compare(out) if again.rc == 0 else (False, "")
        row.after = f"exit {again.rc}" + (f"; {said}" if said else "; " + " / ".join(self.short(l) for l in again.stderr.strip().splitlines()[-2:]))
        row.ok = again.rc == 0 and same

    def failed(self, row: Row, outcome: Outcome) -> None:
        row.status = f"{outcome.rc}"
        row.lines = [self.short(l) for l in outcome.stderr.rstrip("\n").splitlines()]

    def make_reference(self) -> None:
        d = self.work / "reference"
        if (d / "results.json").exists():  # a kept workdir's (--workdir): made by this same configuration
            self.reference = (d / "results.json").read_text()
            self.say(f"reference: the uninterrupted run's results from {d / 'results.json'}")
            return
        if d.exists():
            shutil.rmtree(d)
        t0 = time.monotonic()
        self.say("reference: the uninterrupted run ...")
        done = run(self.cfg.command(d / "out", d / "ck"), self.logs, "reference")
        if done.rc != 0:
            raise SystemExit(f"the uninterrupted run failed (exit {done.rc}):\n{done.stderr[-3000:]}")
        rc, text = results_json(d / "out")
        if rc != 0:
            raise SystemExit(f"replemu results of the uninterrupted run failed: {text}")
        self.reference = text
        (d / "results.json").write_text(text)
        self.say(f"reference: exit 0 in {time.monotonic() - t0:.0f} s, {len(done.stdout.splitlines())} lines of progress")

    def copy_reference(self, d: Path, src: Path | None = None) -> tuple[Path, Path]:
        src = src or self.work / "reference"
        shutil.copytree(src / "out", d / "out")
        shutil.copytree(src / "ck", d / "ck")
        return d / "out", d / "ck"

    # -- the faults ---------------------------------------------------------------------------

    def disk_full(self, row: Row, which: str) -> None:
        d = self.fresh(row.key)
        disk = d / "disk"
        size = f"{self.cfg.small_output_mb}m" if which == "output" else f"{self.cfg.small_checkpoint_kb}k"
        self.mount(disk, size)
        out, ck = (disk / "out", d / "ck") if which == "output" else (d / "out", disk / "ck")
        cmd = self.cfg.command(out, ck)
        self.failed(row, run(cmd, self.logs, f"{row.key}-failed"))
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        row.fix = f"grow the tmpfs ({size} -> 64m: `mount -o remount,size=64m`), the same command"
        self.after(row, run(cmd, self.logs, f"{row.key}-after"), out)

    def repaired(self, row: Row, damage: Callable[[Path], str], extra: tuple[str, ...] = (), src: Path | None = None) -> None:
        d = self.fresh(row.key)
        out, ck = self.copy_reference(d, src)
        row.note = damage(ck)
        cmd = self.cfg.command(out, ck, *extra)
        self.failed(row, run(cmd, self.logs, f"{row.key}-failed"))
        repair = subprocess.run([sys.executable, "-m", "replemu", "checkpoint", "repair", str(ck)], cwd=ROOT,
                                capture_output=True, text=True, timeout=600)
        said = [l.strip() for l in repair.stdout.splitlines() if re.search(r"roll|runs? again|whole|new metadata", l, re.I)]
        row.fix = f"`replemu checkpoint repair CK` (exit {repair.returncode}" + (f": {self.short(said[0])}" if said else "") + "), the same command"
        self.after(row, run(cmd, self.logs, f"{row.key}-after"), out)

    @staticmethod
    def _last(directory: Path, suffix: str = "") -> Path:
        files = [p for p in directory.iterdir() if re.fullmatch(r"\d+" + re.escape(suffix), p.name)]
        return max(files, key=lambda p: int(p.name[: len(p.name) - len(suffix)] if suffix else p.name))

    @staticmethod
    def _cut(path: Path, keep: Callable[[int], int]) -> str:
        data = path.read_bytes()
        path.write_bytes(data[: keep(len(data))])
        return f"{path.parent.name}/{path.name}: {len(data)} -> {keep(len(data))} bytes"

    def fault_a(self, row: Row) -> None:
        self.disk_full(row, "output")

    def fault_b(self, row: Row) -> None:
        self.disk_full(row, "checkpoint")

    def fault_c(self, row: Row) -> None:
        self.repaired(row, lambda ck: self._cut(self._last(ck / "offsets"), lambda n: 0))

    def fault_d(self, row: Row) -> None:
        self.repaired(row, lambda ck: self._cut(self._last(ck / "commits"), lambda n: 6))

    def fault_e(self, row: Row) -> None:
        self.repaired(row, lambda ck: self._cut(ck / "metadata", lambda n: 0))

    def fault_f(self, row: Row) -> None:
        self.repaired(row, lambda ck: self._cut(self._last(ck / "state" / "0" / "1", ".delta"), lambda n: n - 25))

    def fault_g(self, row: Row) -> None:
        if self.rocksdb is None:
            d = self.fresh("g-rocksdb")
            t0 = time.monotonic()
            done = run(self.cfg.command(d / "out", d / "ck", "--state-store", "rocksdb"), self.logs, "g-rocksdb")
            if done.rc != 0:
                raise RuntimeError(f"the uninterrupted RocksDB run failed (exit {done.rc}): {done.stderr[-2000:]}")
            same, said = self.compare(d / "out")
            self.say(f"    the uninterrupted RocksDB run: exit 0 in {time.monotonic() - t0:.0f} s, {said}")
            self.rocksdb = d
        self.repaired(row, lambda ck: self._cut(self._last(ck / "state" / "0" / "1", ".zip"), lambda n: n // 2),
                      ("--state-store", "rocksdb"), src=self.rocksdb)

    def fault_h(self, row: Row) -> None:
        """The state function runs in the second stage of a micro-batch: after the first stage
        (the source, in Python too) wrote the shuffle, before the state store's deltas land.  The
        job gets its own SPARK_LOCAL_DIRS so that its shuffle files can be watched; the workers
        are killed KILL_AFTER_S after the batch's shuffle landed."""
        d = self.fresh(row.key)
        out, ck, local = d / "out", d / "ck", d / "spark-local"
        local.mkdir()
        cmd = self.cfg.command(out, ck)
        env = {**os.environ, "SPARK_LOCAL_DIRS": str(local)}
        job = Job(cmd, self.logs, f"{row.key}-failed", env=env)
        shuffle = re.compile(r"^shuffle_(\d+)_\d+_0\.data$")
        aim = min(3, self.cfg.batches - 1)  # a micro-batch of the running stream, not start-up's
        killed, seen = [], {}

        def shuffled() -> bool:
            if not (ck / "commits" / str(aim - 1)).exists():
                return False
            if "before" not in seen:
                seen["before"] = {p.name for p in local.rglob("shuffle_*_0.data")}
                return False
            new = [p for p in local.rglob("shuffle_*_0.data") if shuffle.match(p.name) and p.name not in seen["before"]]
            if new:
                seen["at"] = time.monotonic()
            return bool(new)

        if job.until(shuffled):
            time.sleep(KILL_AFTER_S)
            b = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit()) + 1
            deltas = [p / f"{b + 1}.delta" for p in (ck / "state" / "0").iterdir() if p.name.isdigit()]
            procs = job.processes()
            daemons = {pid for pid, _, c in procs if "pyspark.daemon" in c}
            workers = [pid for pid, ppid, c in procs if ppid in daemons and "pyspark.daemon" in c]
            running = [pid for pid in workers if _state(pid) == "R"]
            landed = [p for p in deltas if p.exists()]
            for pid in workers:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            ms = (time.monotonic() - seen["at"]) * 1000
            row.note = (f"SIGKILL to the {len(killed)} forked pyspark.daemon workers ({len(running)} running), {ms:.0f} ms after "
                        f"micro-batch {b}'s shuffle was written, {len(landed)}/{len(deltas)} of its state deltas written")
        else:
            row.note = "no micro-batch was seen between its shuffle and its state: nothing killed"
        outcome = job.wait()
        self.failed(row, outcome)
        if outcome.rc == 0:
            row.fix = "nothing: the run finished (Spark ran the failed task again)"
            self.after(row, outcome, out)
        else:
            row.fix = "nothing: the same command again"
            self.after(row, run(cmd, self.logs, f"{row.key}-after", env), out)

    def fault_i(self, row: Row) -> None:
        d = self.fresh(row.key)
        out, ck = d / "out", d / "ck"
        server = ConnectServer(d / "server")
        try:
            server.start()
            cmd = self.cfg.command(out, ck, "--remote", server.url, "--shuffle-partitions", "2")
            job = Job(cmd, self.logs, f"{row.key}-failed")
            if job.until(lambda: (ck / "commits" / "2").exists() and (ck / "offsets" / "3").exists()):
                server.stop()
                stopped = time.monotonic()
                row.note = "stop-connect-server.sh while micro-batch 3 ran"
                outcome = job.wait(timeout=self.cfg.connect_wait)
                waited = time.monotonic() - stopped
                if job.timed_out:
                    row.note += f"; no exit {waited:.0f} s later: killed (--connect-wait)"
                else:
                    row.note += f"; exit {waited:.0f} s later"
            else:
                row.note = "micro-batch 3 was not seen running: the server was not stopped"
                outcome = job.wait()
            self.failed(row, outcome)
            if job.timed_out:
                row.status = f"none in {self.cfg.connect_wait:.0f} s (killed)"
            server.start()
            row.fix = "start the server again (`start-connect-server.sh`, the same port), the same command"
            self.after(row, run(cmd, self.logs, f"{row.key}-after"), out)
        finally:
            server.stop()

    def fault_j(self, row: Row) -> None:
        d = self.fresh(row.key)
        out, ck = d / "out", d / "ck"
        cmd = self.cfg.command(out, ck)
        job = Job(cmd, self.logs, f"{row.key}-failed")
        if job.until(lambda: (ck / "commits" / "3").exists()):
            subprocess.run(["rm", "-rf", str(out)], check=True)
            row.note = "`rm -rf OUT` once micro-batch 3 committed"
        outcome = job.wait()
        self.failed(row, outcome)
        if outcome.rc == 0:
            row.fix = "nothing (it said nothing): the same command again"
            self.after(row, run(cmd, self.logs, f"{row.key}-after"), out)
        else:
            aside = ck.with_name("ck.moved-aside")
            ck.rename(aside)
            row.fix = "as told: start over (CK moved aside), the same command"
            self.after(row, run(cmd, self.logs, f"{row.key}-after"), out)

    # -- all ----------------------------------------------------------------------------------

    def run_all(self, keys: list[str]) -> list[Row]:
        rows = []
        root = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None
        for key in keys:
            row = Row(key, FAULTS[key])
            t0 = time.monotonic()
            if key in NEEDS_ROOT and not root:
                row.status, row.fix, row.after = "skipped", "", "mounting a small tmpfs needs root"
                self.say(f"[{key}] {row.fault}: skipped (mounting a small tmpfs needs root)")
                rows.append(row)
                continue
            self.say(f"[{key}] {row.fault}: started")
            try:
                if self.reference is None:
                    self.make_reference()
                    t0 = time.monotonic()
                getattr(self, f"fault_{key}")(row)
            except Exception as exc:  # noqa: BLE001 - one fault's error is its row, the others still run
                row.after = f"ERROR: {type(exc).__name__}: {self.short(str(exc))[:500]}"
            finally:
                self._umount_under(self.work / key)
            row.seconds = time.monotonic() - t0
            self.say(f"[{key}] {row.fault}: exit {row.status or '?'}; fix: {row.fix or '-'}; after: {row.after} "
                     f"({row.seconds:.0f} s){'' if row.ok else '  <-- NOT OK'}")
            rows.append(row)
        return rows


class ConnectServer:
    """A Spark Connect server from pyspark's own scripts on 127.0.0.1:PORT (as tests/test_cluster.py)."""

    def __init__(self, d: Path):
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.d = d
        self.port = _free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.pid: int | None = None
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOG_DIR": str(d / "logs"),
                    "SPARK_PID_DIR": str(d / "pids"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                    "SPARK_IDENT_STRING": "replemu-faults"}

    def start(self) -> None:
        (self.d / "cwd").mkdir(parents=True, exist_ok=True)
        started = subprocess.run(["bash", str(self.home / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
                                  "--conf", f"spark.connect.grpc.binding.port={self.port}",
                                  "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false"],
                                 env=self.env, cwd=self.d / "cwd", capture_output=True, text=True, timeout=120)
        pids = list((self.d / "pids").glob("*.pid"))
        if started.returncode != 0 or not pids:
            raise RuntimeError(f"the Connect server did not start: {started.stdout}{started.stderr}")
        self.pid = int(pids[0].read_text())
        deadline = time.monotonic() + 180
        while True:  # the gRPC port opens once the server's SparkContext is up
            if not os.path.exists(f"/proc/{self.pid}") or time.monotonic() > deadline:
                raise RuntimeError("the Connect server did not open its port")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.5)

    def stop(self) -> None:
        if self.pid is None:
            return
        subprocess.run(["bash", str(self.home / "sbin" / "stop-connect-server.sh")], env=self.env, capture_output=True, timeout=120)
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{self.pid}") and _state(self.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.2)
        if os.path.exists(f"/proc/{self.pid}") and _state(self.pid) != "Z":
            os.kill(self.pid, signal.SIGKILL)
        self.pid = None


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][:1]
    except OSError:
        return "X"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The table


def _md(text: str) -> str:
    """``text`` for a Markdown table cell: pipes escaped, ``<``/``>`` outside code spans escaped."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def table(rows: list[Row], markdown: bool) -> str:
    if markdown:
        out = ["| fault | exit | what the terminal got (stderr, verbatim) | fix | after the fix |", "|---|---|---|---|---|"]
        for r in rows:
            fault = f"({r.key}) {r.fault}" + (f" — {r.note}" if r.note else "")
            got = "<br>".join(_md(l) for l in r.lines) if r.lines else ("(nothing)" if r.status not in ("", "skipped") else "")
            out.append(f"| {_md(fault)} | {r.status} | {got} | {_md(r.fix)} | {_md(r.after)} |")
        return "\n".join(out)
    out = []
    for r in rows:
        out.append(f"({r.key}) {r.fault}" + (f" [{r.note}]" if r.note else ""))
        out.append(f"    exit status: {r.status}")
        for line in r.lines or ["(nothing on stderr)"]:
            out.append(f"    | {line}")
        out.append(f"    fix: {r.fix}")
        out.append(f"    after the fix: {r.after}{'' if r.ok else '  <-- NOT OK'}")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> tuple[Config, list[str], bool]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", default=",".join(FAULTS), help=f"which, comma-separated (default all: {','.join(FAULTS)})")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/guarantees.md)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--partitions", type=int, default=60)
    p.add_argument("--steps-per-batch", type=int, default=20)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--protocol", default="kip320")
    p.add_argument("--workdir", type=Path, default=None, help="default: a new temporary directory, removed unless --keep")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--connect-wait", type=float, default=180.0,
                   help="(i): how long to wait for the command to exit once the server stopped, in seconds (default 180; "
                        "pyspark's Connect client retries for 10 minutes)")
    a = p.parse_args(argv)
    keys = [k.strip() for k in a.faults.split(",") if k.strip()]
    unknown = [k for k in keys if k not in FAULTS]
    if unknown:
        p.error(f"--faults: unknown {','.join(unknown)} (known: {','.join(FAULTS)})")
    cfg = Config(seed=a.seed, partitions=a.partitions, steps_per_batch=a.steps_per_batch, max_steps=a.max_steps,
                 protocol=a.protocol, workdir=a.workdir, keep=a.keep, connect_wait=a.connect_wait)
    return cfg, keys, a.markdown


def main(argv: list[str] | None = None) -> int:
    cfg, keys, markdown = parse_args(argv)
    import pyspark

    faults = Faults(cfg)
    started = dt.datetime.now(dt.timezone.utc)
    faults.say(f"seed {cfg.seed}: replemu {' '.join(cfg.args())} --output OUT --checkpoint CK ({cfg.batches} micro-batches); "
               f"pyspark {pyspark.__version__}; {started:%Y-%m-%d %H:%M} UTC; workdir {faults.work} (… in the table, as are "
               f"{tempfile.gettempdir()} and {ROOT})")
    t0 = time.monotonic()
    try:
        rows = faults.run_all(keys)
    finally:
        faults.cleanup()
    faults.say("")
    faults.say(table(rows, markdown))
    tried = [r for r in rows if r.status != "skipped"]
    ok = all(r.ok for r in tried)
    faults.say(f"\n{sum(r.ok for r in tried)}/{len(tried)} faults ended, after the fix, with exit 0 and the uninterrupted "
               f"results; {len(rows) - len(tried)} skipped; {time.monotonic() - t0:.0f} s in all")
    if ok and not cfg.keep and not cfg.workdir:
        shutil.rmtree(faults.work, ignore_errors=True)
    elif not ok:
        faults.say(f"workdir kept: {faults.work} (logs/ holds every run's stdout and stderr)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
