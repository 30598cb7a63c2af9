"""Re-measure the table of the hostile-input issue (14): "never a traceback, never a silent mix".

    python scripts/fuzz.py [--cases 600] [--seed S] [--timeout 20] [--jobs N] [--slow 5] [--out DIR]
                           [--no-spark] [--no-cli] [--no-stream] [--no-checkpoint] [--no-inspect]
                           [--inspect-cases 60] [--stream-timeout 900] [--stream-runs 20] [--verbose]

Five rows, each case classified **clean**, **traceback** (a traceback on stderr, an exit status
other than 0/1/2: exit 3 "the job failed" counts here), **hang/timeout**, **silently accepted**
(something that must be refused or reported went through) or **other** (refused or reported, but
badly: a message that does not name the file, a valid input refused ...).

* **fuzzed scenario files**: ``--cases`` hostile scenario files (``tests/hostile.py``: mutated
  bundled scenarios, alias bombs, deep nesting, bad bytes, bad ``expect`` blocks ...), each run as
  ``replemu run FILE --protocol all --json`` in its own process (``--timeout``, a 4 GiB
  address-space limit).  Clean: a valid file replayed (exit 0/1, four result objects), an invalid
  one refused with exit 2 and one line naming the file (within ``--slow`` seconds).
* **bad CLI arguments**: every command line of ``hostile.CLI_CASES``; clean: exit 2 with a
  message naming the bad path or value, before Spark starts (``--fail-fast`` seconds).
* **bad rows in stream input** (Spark): the bundled scenarios compiled (``--split 3``) under topics
  of their own (the good partitions), and one partition per case (a copy of a bundled scenario
  under topic ``fzNN-<stem>``) in which the case injects one fault among the good rows (a
  wrong-typed column, partition 2^31, seq 2^63, args nested 100,000 deep, an unknown step type, a
  replica not in the partition, a duplicate seq, a gap ...) or adds one file (non-UTF-8 bytes, a
  NUL byte, binary data, a foreign or damaged Parquet file, a file in ``k=1/``, a 16 MiB line
  ...).  All cases sit side by side in one input directory: one ``replemu stream`` run with every
  fault, one reference run without any (``replemu results OUT --json`` and
  ``streaming.results.quarantine_rows``).  Clean: the job exited 0, the fault is in quarantine
  with a reason naming it (its file and line, or its partition and seq; a gap: in
  ``OUTPUT/gaps.json``, which a drained run writes instead), the case's partition is as expected
  (``same`` as the reference, ``absent`` when a whole file's rows must not be applied), and every
  good partition equals the reference.  When the run with the faults fails, the cases are bisected
  (at most ``--stream-runs`` runs) until each job-killing case is alone: it is a traceback, and
  an input directory holding just its fault is kept.
* **checkpoint misuse** (Spark): two real checkpoints (a ``--workload clean --partitions 20 --seed
  1 --steps-per-batch 5 --max-steps 10`` run and an ``--input`` run); on copies of them another
  ``--protocol``/``--input``/``--partitions``/``--steps-per-batch``/``--seed``/``--knob``/profile/
  gap timeout/compaction threshold/state store, a damaged or missing identity file, a checkpoint or
  output path that is a file, output == checkpoint (or one inside the other), a new checkpoint
  with a used output; then on the originals the same command again, a larger ``--max-steps`` and
  ``--allow-change protocol`` (all three must be accepted; the change recorded in the identity's
  history) and the old protocol after it; and second jobs while a processing-time job holds the
  lock.  Clean: a refusal exits 2 before Spark starts (``--fail-fast`` seconds) with a message
  naming the difference or the path, and leaves the identity file as it was; an accepted restart
  exits 0.
* **``replemu inspect`` of corrupted replica dirs**: ``replemu run S --protocol hw --json`` of four
  bundled scenarios, ``replemu export`` to replica directories, then ``--inspect-cases`` copies
  with one file damaged each (``INSPECT_KINDS``: segments truncated, bytes flipped, length fields
  zeroed, set to 2^31-1 or negative, garbage appended, magic bytes, batches changed under a
  recomputed CRC-32C; checkpoint files not UTF-8, malformed, wrong version, count mismatch,
  negative or out-of-range numbers, flipped, cut, deleted, a directory; the segment deleted,
  renamed, duplicated, a directory).  Clean: exit 0 with a new ``finding:`` line naming the
  damaged file, or exit 2 with one line naming its partition directory.  A change Kafka's own
  formats cannot reveal is an "either" case (clean whatever inspect says, if it says it cleanly):
  a segment cut at a batch boundary or emptied, a changed ``partitionLeaderEpoch`` (outside the
  CRC, unchecked by Kafka's recovery), a batch changed under a valid CRC into another well-formed
  one, and a checkpoint file that is still well-formed after the change (``checkpoint_well_formed``
  re-reads it as Kafka's ``CheckpointFile`` does: version 0, a count, that many lines of
  non-negative numbers; checkpoint files have no checksum).  Unreadable permissions are not
  tested (the harness may run as root).

kill -9 at any point of a stream is measured by ``scripts/chaos.py``, not here.

Prints the seed first, progress per row, the markdown table and every non-clean case (row,
label, command, detail and last stderr line); inputs of non-clean cases are kept under ``--out``
(default ``out/fuzz/<seed>``) to replay them.  Exit status 0 only when every case is clean.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile  # noqa: E402
from processes import kill_job  # noqa: E402

MEMORY_LIMIT = 4 << 30
# Runs `replemu` under an address-space limit (an expanded alias bomb must not take the machine).
_LIMITED = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({0}, {0})); "
            "sys.argv = ['replemu'] + sys.argv[1:]; runpy.run_module('replemu', run_name='__main__', alter_sys=True)")


def default_python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def run_process(cmd: list[str], timeout: float, cwd: Path) -> tuple[int | None, str, str, float, bool]:
    """(status, stdout, stderr, seconds, timed out); the whole process group is killed on timeout."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_job({proc.pid})
        out, err = proc.communicate()
        timed_out = True
    return (None if timed_out else proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
            time.monotonic() - start, timed_out)


class Table:
    def __init__(self, verbose: bool = False) -> None:
        self.rows: dict[str, dict[str, int]] = {}
        self.failures: list[tuple[str, str, str, str, str]] = []  # row, label, verdict, command, detail
        self.verbose = verbose

    def add(self, row: str, label: str, outcome: hostile.Outcome, command: str, stderr: str) -> None:
        counts = self.rows.setdefault(row, {"cases": 0, **{v: 0 for v in hostile.VERDICTS}})
        counts["cases"] += 1
        counts[outcome.verdict] += 1
        if self.verbose:
            print(f"    {outcome.verdict}: {label}{' -- ' + outcome.detail if outcome.detail else ''}", flush=True)
        if outcome.verdict != hostile.CLEAN:
            self.failures.append((row, label, outcome.verdict, command,
                                  f"{outcome.detail}; stderr: {hostile.shown_stderr(stderr)}"))

    def markdown(self) -> str:
        cols = ("cases",) + hostile.VERDICTS
        lines = ["| | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        for row, counts in self.rows.items():
            lines.append(f"| {row} | " + " | ".join(str(counts[c]) for c in cols) + " |")
        return "\n".join(lines)


def progress(row: str, done: int, total: int, table: Table, started: float) -> None:
    counts = table.rows.get(row, {})
    bad = {v: counts.get(v, 0) for v in hostile.VERDICTS if v != hostile.CLEAN and counts.get(v, 0)}
    print(f"  {row}: {done}/{total} ({time.monotonic() - started:.0f} s) clean {counts.get(hostile.CLEAN, 0)}"
          + "".join(f", {k} {v}" for k, v in bad.items()), flush=True)


def run_scenarios(args, table: Table, work: Path, keep: Path) -> None:
    row = "fuzzed scenario files"
    cases = list(hostile.generate(args.seed, args.cases))
    kinds = {c.expected for c in cases}
    print(f"{row}: {len(cases)} cases from {len(hostile.GENERATORS)} generators "
          f"({', '.join(f'{k} {sum(c.expected == k for c in cases)}' for k in sorted(kinds))})", flush=True)
    started = time.monotonic()

    def one(i_case):
        i, case = i_case
        d = work / f"{i:04d}"
        d.mkdir(parents=True, exist_ok=True)
        path = case.write(d)
        cmd = [args.python, "-c", _LIMITED.format(MEMORY_LIMIT), "run", str(path), "--protocol", "all", "--json"]
        status, out, err, secs, timed_out = run_process(cmd, args.timeout, d)
        outcome = hostile.judge_scenario_run(case, status, out, err, path.name, timed_out=timed_out, slow=secs > args.slow)
        if outcome.verdict == hostile.HANG and not timed_out:
            outcome = hostile.Outcome(outcome.verdict, f"{outcome.detail} ({secs:.1f} s)")
        return i, case, path, outcome, err

    done = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for i, case, path, outcome, err in pool.map(one, enumerate(cases)):
            shown = path
            if outcome.verdict != hostile.CLEAN:
                shown = keep / f"{i:04d}-{case.generator}.yaml"
                shown.parent.mkdir(parents=True, exist_ok=True)
                shown.write_bytes(case.data)
            table.add(row, f"{case.label} [expected {case.expected}]", outcome,
                      f"replemu run {shlex.quote(str(shown))} --protocol all --json", err)
            done += 1
            if done % 50 == 0 or done == len(cases):
                progress(row, done, len(cases), table, started)


def run_cli(args, table: Table, work: Path) -> None:
    row = "bad CLI arguments"
    cases = [c for c in hostile.CLI_CASES if args.spark or "checkpoint" not in c.needs]
    skipped = len(hostile.CLI_CASES) - len(cases)
    print(f"{row}: {len(cases)} command lines" + (f" ({skipped} needing a stream checkpoint skipped: --no-spark)" if skipped else ""),
          flush=True)

    def cli(argv: list[str]) -> tuple[int, str, str]:
        status, out, err, _, timed_out = run_process([args.python, "-m", "replemu", *argv], 600, work)
        return (-1 if timed_out else status), out, err

    fixtures_dir = work / "cli"
    if args.spark:
        print("  building a stream checkpoint for the `state` cases (Spark, ~30 s) ...", flush=True)
    fx = hostile.cli_fixtures(fixtures_dir, cli, checkpoint=args.spark)
    started = time.monotonic()

    def one(case: hostile.CliCase):
        f = hostile.fresh_dir(fx, case.label)
        argv = case.argv(f)
        timeout = 180 if case.needs else args.timeout
        status, out, err, secs, timed_out = run_process([args.python, "-m", "replemu", *argv], timeout, work)
        outcome = hostile.judge_cli_run(case, status, err, f, secs, timed_out=timed_out, fail_fast=args.fail_fast)
        return case, argv, outcome, err

    done = 0
    # Spark cases start a JVM when the product does not refuse them first: two at a time at most.
    with ThreadPoolExecutor(min(args.jobs, 2)) as pool:
        for case, argv, outcome, err in pool.map(one, cases):
            table.add(row, f"{case.label} [expected {'exit 2' if case.expected == hostile.INVALID else 'exit 0 or 2'}]",
                      outcome, "replemu " + " ".join(shlex.quote(a) for a in argv), err)
            done += 1
            if done % 20 == 0 or done == len(cases):
                progress(row, done, len(cases), table, started)


# -- shared by the three rows below -------------------------------------------------------------

BUNDLED = ROOT / "conf" / "scenarios"
_QUARANTINE_PY = ("import json, sys; from streaming.results import quarantine_rows; "
                  "print(json.dumps(quarantine_rows(sys.argv[1]), default=str))")


def replemu_cmd(args, *argv: str) -> list[str]:
    return [args.python, "-m", "replemu", *map(str, argv)]


def shown_cmd(argv: list[str]) -> str:
    """A command line as a user types it: ``replemu ...`` for this repository's CLI."""
    if argv[1:3] == ["-m", "replemu"]:
        argv = ["replemu", *argv[3:]]
    return " ".join(shlex.quote(str(a)) for a in argv)


def must_run(args, argv: list[str], what: str, timeout: float = 600, cwd: Path = ROOT) -> str:
    """stdout of a command the harness itself needs (a fixture); a failure stops the row."""
    status, out, err, _, timed_out = run_process(argv, timeout, cwd)
    if status != 0:
        raise RuntimeError(f"{what}: {shown_cmd(argv)} -> {'timed out' if timed_out else f'exit {status}'}: "
                           f"{hostile.shown_stderr(err)}")
    return out


def scenario_docs() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(BUNDLED.glob("*.yaml"))}


def spark_noise(stderr: str) -> bool:
    return any(m in stderr for m in hostile.SPARK_MARKS)


# -- row: bad rows in stream input ------------------------------------------------------------
#
# One input directory holds every case side by side: good partitions (the bundled scenarios,
# each under its own topic) and one partition per case (a copy of a bundled scenario under a
# topic of its own, ``fzNN-<stem>``), compiled with ``--split 3`` into three files whose lines
# the row cases edit in place; the file cases add (or replace) whole files.  A reference run
# reads the same directory without any fault.  When the run with the faults fails, the cases are
# bisected (each half in a run of its own) until the case that kills the job is alone, at most
# ``--stream-runs`` runs in all.

STREAM_ROW = "bad rows in stream input"
FAULT, VALID_INPUT, EITHER_INPUT = "fault", "valid", "either"
SPLIT_FILES = 3


@dataclass
class Look:
    """Where a case's fault must show: a quarantine row whose reason holds ``token`` (a file, or
    ``file line N``), or one of the partition's rows (``key``) with ``seq``; or a gap entry."""

    token: str | None = None
    key: str | None = None
    seq: int | None = None
    words: tuple[str, ...] = ()
    gap: bool = False  # reported in OUTPUT/gaps.json (a drained run cannot time a gap out)


@dataclass
class StreamCase:
    label: str
    expected: str  # fault | valid | either
    partition: str  # the case's own partition against the reference: same | absent | any | none
    key: str | None  # its topic (and scenario name)
    apply: Callable[["StreamBuild"], Look]
    note: str = ""


class StreamBuild:
    """The files of one input directory: the split files as lists of lines, other files as bytes."""

    def __init__(self, split: dict[str, list[str]], own: dict[str, bytes]):
        self.lines = {name: list(lines) for name, lines in split.items()}
        self.files = dict(own)
        self.index: dict[tuple[str, int], tuple[str, int]] = {}
        for name, lines in split.items():
            for i, line in enumerate(lines):
                row = json.loads(line)
                self.index[(row["topic"], row["seq"])] = (name, i)

    def row(self, key: str, seq: int) -> dict:
        name, i = self.index[(key, seq)]
        return json.loads(self.lines[name][i])

    def token(self, name: str, i: int) -> str:
        return line_token(name, i + 1)

    def replace(self, key: str, seq: int, text: str) -> str:
        name, i = self.index[(key, seq)]
        self.lines[name][i] = text
        return self.token(name, i)

    def blank(self, key: str, seq: int) -> None:
        name, i = self.index[(key, seq)]
        self.lines[name][i] = ""  # an empty line: later line numbers stay what they were

    def append(self, text: str, not_beside: tuple[str, int] | None = None, rng: random.Random | None = None) -> str:
        names = sorted(self.lines)
        if not_beside is not None:
            names = [n for n in names if n != self.index[not_beside][0]] or names
        name = (rng or random.Random(0)).choice(names)
        self.lines[name].append(text)
        return self.token(name, len(self.lines[name]) - 1)

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        for name, lines in sorted(self.lines.items()):
            (directory / name).write_text("".join(line + "\n" for line in lines))
        for rel, data in sorted(self.files.items()):
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def line_token(name: str, number: int) -> str:
    """How a quarantine reason names a line: ``unreadable row (PATH line N): ...``."""
    return f"{name} line {number})"


def _dumps(row: dict) -> str:
    return json.dumps(row)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _row_cases(rng: random.Random) -> list[tuple[str, str, str, Callable]]:
    """(label, expected, partition, apply(build, key, steps)) of the faults injected among good rows."""
    wrong = [("seq", lambda r: str(r["seq"])), ("partition", lambda r: "0"), ("type", lambda r: 7),
             ("args", lambda r: 12), ("seq", lambda r: True), ("partition", lambda r: 0.5)]

    def mid(steps: int) -> int:
        return rng.randint(1, steps)

    def wrong_type(b, key, steps):
        s = mid(steps)
        col, value = rng.choice(wrong)
        r = b.row(key, s)
        r[col] = value(r)
        return Look(token=b.replace(key, s, _dumps(r)), words=(f"{col} must be",))

    def replaced(col, value, words):
        def apply(b, key, steps):
            s = mid(steps)
            r = b.row(key, s)
            if value is None:
                del r[col]
            else:
                r[col] = value
            return Look(token=b.replace(key, s, _dumps(r)), words=words)
        return apply

    def appended(text, words):
        return lambda b, key, steps: Look(token=b.append(text, rng=rng), words=words)

    def step(kind, args_text, words, seq_words=True):
        def apply(b, key, steps):
            s = mid(steps)
            r = b.row(key, s)
            r["type"], r["args"] = kind, args_text
            b.replace(key, s, _dumps(r))
            return Look(key=key, seq=s, words=words)
        return apply

    def inline_deep(b, key, steps):
        s = mid(steps)
        r = b.row(key, s)
        text = _dumps({**r, "args": None}).replace('"args": null', '"args": ' + _nested(100_000))
        return Look(token=b.replace(key, s, text), words=("not JSON",))

    def dup_identical(b, key, steps):
        s = mid(steps)
        b.append(b.lines[b.index[(key, s)][0]][b.index[(key, s)][1]], not_beside=(key, s), rng=rng)
        return Look(key=key, seq=s, words=("duplicate",))

    def dup_conflicting(b, key, steps):
        s = mid(steps)
        r = {**b.row(key, s), "type": "tick", "args": json.dumps({"ms": 1})}
        b.append(_dumps(r), not_beside=(key, s), rng=rng)
        return Look(key=key, seq=s, words=("duplicate",))

    def missing_seq(b, key, steps):
        r = b.row(key, mid(steps))
        del r["seq"]
        b.append(_dumps(r), rng=rng)
        return Look(key=key, words=("missing seq",))

    def gap(b, key, steps):
        s = rng.randint(1, max(1, steps - 1))
        b.blank(key, s)
        return Look(key=key, seq=s, gap=True)

    def far_ahead(b, key, steps):
        r = {**b.row(key, 1), "seq": hostile.INT64_MAX, "type": "tick", "args": json.dumps({"ms": 1})}
        b.append(_dumps(r), rng=rng)
        return Look(key=key, seq=steps + 1, gap=True)

    def big_header(b, key, steps):
        r = b.row(key, 0)
        header = json.loads(r["args"])
        header["replicas"] = list(range(1000))
        r["args"] = json.dumps(header)
        b.replace(key, 0, _dumps(r))
        return Look(key=key, seq=0, words=("header",))

    def second_header(b, key, steps):
        s = mid(steps)
        r = {**b.row(key, s), "type": "partition", "args": b.row(key, 0)["args"]}
        b.replace(key, s, _dumps(r))
        return Look(key=key, seq=s, words=("header",))

    def surrogate_topic(b, key, steps):
        s = mid(steps)
        text = _dumps(b.row(key, s)).replace(json.dumps(key), json.dumps(key)[:-1] + '\\ud800"', 1)
        return Look(token=b.replace(key, s, text))

    def surrogate_value(b, key, steps):
        s = mid(steps)
        r = {**b.row(key, s), "type": "produce", "args": '{"value": "m\\ud800"}'}
        b.replace(key, s, _dumps(r))
        return Look(key=key, seq=s)

    return [
        ("a line with a wrong-typed column", FAULT, "any", wrong_type),
        ("a line with partition 2^31", FAULT, "any", replaced("partition", 2**31, ("out of range",))),
        ("a line with seq 2^63", FAULT, "any", replaced("seq", 2**63, ("out of range",))),
        ("a line with seq -1", FAULT, "any", replaced("seq", -1, ("out of range",))),
        ("a line without topic", FAULT, "any", replaced("topic", None, ("missing topic",))),
        ("a JSON array line", FAULT, "same", appended("[1, 2, 3]", ("not a JSON object",))),
        ("a line that is not JSON", FAULT, "same", appended('{"topic": "x", "partition": 0, "seq": 1, ', ("not JSON",))),
        ("args nested 100,000 deep (inline)", FAULT, "any", inline_deep),
        ("args nested 100,000 deep (a JSON string)", FAULT, "any", step("fetch", _nested(100_000), ("args",))),
        ("args that are not JSON", FAULT, "any", step("fetch", "{replica: 1", ("not JSON",))),
        ("an unknown step type", FAULT, "any", step("explode", "{}", ("unknown step type",))),
        ("a replica not in the partition", FAULT, "any", step("fetch", json.dumps({"replica": 99}), ("99",))),
        ("a duplicate seq (an identical row in another file)", FAULT, "same", dup_identical),
        ("a duplicate seq (another step, in another file)", FAULT, "any", dup_conflicting),
        ("a row without seq", FAULT, "same", missing_seq),
        ("a gap (a row missing)", FAULT, "any", gap),
        ("a row at seq 2^63-1 (far ahead)", FAULT, "same", far_ahead),
        ("a header with 1,000 replicas", FAULT, "any", big_header),
        ("a second header at a later seq", FAULT, "any", second_header),
        ("a lone surrogate escape in the topic", EITHER_INPUT, "any", surrogate_topic),
        ("a lone surrogate escape in a produced value", EITHER_INPUT, "any", surrogate_value),
    ]


def _file_cases(rng: random.Random, foreign: bytes, typed: bytes) -> list[tuple[str, str, str, str | None, str, Callable]]:
    """(label, expected, partition, format of its own partition's good file or None, file name suffix,
    apply(build, name, key))."""

    def lines_of(b, name):
        return b.files[name].decode().splitlines()

    def whole(data, words, rel=None):
        def apply(b, name, key):
            target = rel or name
            b.files[target] = data() if callable(data) else data
            return Look(token=target if "/" not in target else target.split("/")[-1], words=words)
        return apply

    def own_bytes(mutate, words, token_line=None):
        def apply(b, name, key):
            b.files[name] = mutate(b.files[name])
            return Look(token=name if token_line is None else line_token(name, token_line(b, name)), words=words)
        return apply

    def insert_at_middle_line(data: bytes, insert: bytes) -> bytes:
        lines = data.split(b"\n")
        i = rng.randint(1, max(1, len(lines) - 2))
        j = lines[i].find(b'"type": "') + len(b'"type": "')
        lines[i] = lines[i][:j] + insert + lines[i][j:]
        return b"\n".join(lines)

    def moved(rel_of):
        def apply(b, name, key):
            b.files[rel_of(name)] = b.files.pop(name)
            return Look(token=rel_of(name))
        return apply

    def huge_line(b, name, key):
        lines = lines_of(b, name)
        lines.insert(2, "x" * (16 << 20))
        b.files[name] = ("\n".join(lines) + "\n").encode()
        return Look(token=line_token(name, 3), words=("not JSON",))

    def torn_tail(b, name, key):
        lines = lines_of(b, name)
        lines[-1] = lines[-1][: rng.randint(1, len(lines[-1]) - 2)]
        b.files[name] = "\n".join(lines).encode()
        return Look(token=line_token(name, len(lines)), words=("not JSON",))

    def damaged_parquet(b, name, key):
        data = b.files[name]
        b.files[name] = data[: rng.randint(8, len(data) - 9)] + b"PAR1"
        return Look(token=name, words=("Parquet",))

    binary = bytes(rng.randrange(256) for _ in range(4096))
    return [
        ("a file with non-UTF-8 bytes (its partition's rows and one 0xff)", FAULT, "absent", "jsonl", "jsonl",
         own_bytes(lambda d: insert_at_middle_line(d, b"\xff"), ("not UTF-8",))),
        ("a file with a NUL byte (its partition's rows and one NUL)", FAULT, "absent", "jsonl", "jsonl",
         own_bytes(lambda d: insert_at_middle_line(d, b"\x00"), ("binary data",))),
        ("a binary file", FAULT, "none", None, "jsonl", whole(binary, ("none of its rows were applied",))),
        ("a text file that is not JSON at all", FAULT, "none", None, "txt",
         whole(b"These are my notes about the run.\nNothing here is JSON.\n", ("not JSON lines",))),
        ("a file of JSON objects that are not events", FAULT, "none", None, "jsonl",
         whole(b'{}\n{"a": 1}\n', ("none of its rows were applied",))),
        ("a file of one array nested 100,000 deep", FAULT, "none", None, "jsonl",
         whole(_nested(100_000).encode() + b"\n", ("not JSON lines",))),
        ("a Parquet file that is not ours", FAULT, "none", None, "parquet", whole(foreign, ("without the event columns",))),
        ("a Parquet file with the event columns of other types", FAULT, "none", None, "parquet", whole(typed, ("other types",))),
        ("a damaged Parquet file (its partition's rows, cut)", FAULT, "absent", "parquet", "parquet", damaged_parquet),
        ("a good Parquet file beside JSON lines", VALID_INPUT, "same", "parquet", "parquet", lambda b, n, k: Look(token=n)),
        ("a good file in a subdirectory k=1/", VALID_INPUT, "same", "jsonl", "jsonl", moved(lambda n: f"k=1/{n}")),
        ("a binary file in a subdirectory k=1/", FAULT, "none", None, "bin",
         whole(binary[::-1], ("none of its rows were applied",), rel="k=1/junk.bin")),
        ("a hidden file (.name): skipped, as Spark does", VALID_INPUT, "absent", "jsonl", "jsonl", moved(lambda n: f".{n}")),
        ("an empty file (0 bytes)", EITHER_INPUT, "none", None, "jsonl", whole(b"", ())),
        ("a file of blank lines", EITHER_INPUT, "none", None, "jsonl", whole(b"\n  \n\t\n", ())),
        ("a 16 MiB line among its partition's good rows", FAULT, "same", "jsonl", "jsonl", huge_line),
        ("a torn last line (a writer died mid-file)", FAULT, "any", "jsonl", "jsonl", torn_tail),
        ("CRLF line ends", VALID_INPUT, "same", "jsonl", "jsonl", own_bytes(lambda d: d.replace(b"\n", b"\r\n"), ())),
        ("a UTF-8 byte-order mark", FAULT, "absent", "jsonl", "jsonl",
         own_bytes(lambda d: b"\xef\xbb\xbf" + d, ("not JSON",), token_line=lambda b, n: 1)),
    ]


_FOREIGN_PARQUET_PY = """
import sys, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"name": ["x"], "value": [1]}), sys.argv[1])
pq.write_table(pa.table({"topic": [1], "partition": ["zero"], "seq": ["a"], "type": [2], "args": [3]}), sys.argv[2])
"""


def build_stream_cases(args, rng: random.Random, work: Path) -> tuple[list[StreamCase], dict[str, list[str]], dict[str, bytes], list[str]]:
    """The cases, the split files' lines, the other good files, and the good partitions' names."""
    docs = scenario_docs()
    stems = sorted(docs)
    yamls = work / "yaml"
    yamls.mkdir(parents=True)

    def copy(name: str, stem: str) -> Path:
        doc = json.loads(json.dumps(docs[stem]))
        doc["name"] = doc["topic"] = name
        doc.pop("partition", None)
        path = yamls / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    good = [f"good-{stem}" for stem in stems]
    split_yamls = [copy(n, s) for n, s in zip(good, stems)]
    cases: list[StreamCase] = []
    own_formats: dict[str, tuple[str, Path]] = {}  # key -> (format, yaml)
    steps_of: dict[str, int] = {}
    i = 0
    for label, expected, partition, fn in _row_cases(rng):
        stem = rng.choice(stems)
        key = f"fz{i:02d}-{stem}"
        split_yamls.append(copy(key, stem))
        steps_of[key] = len(docs[stem]["steps"])
        cases.append(StreamCase(label, expected, partition, key,
                                (lambda fn, key: lambda b: fn(b, key, steps_of[key]))(fn, key)))  # noqa: B023 (bound by the outer lambda)
        i += 1
    foreign = work / "foreign"
    foreign.mkdir()
    must_run(args, [args.python, "-c", _FOREIGN_PARQUET_PY, str(foreign / "a.parquet"), str(foreign / "b.parquet")],
             "writing the foreign Parquet files")
    for label, expected, partition, fmt, suffix, fn in _file_cases(rng, (foreign / "a.parquet").read_bytes(),
                                                                   (foreign / "b.parquet").read_bytes()):
        key = None
        name = f"fz{i:02d}-file.{suffix}"
        if fmt:
            stem = rng.choice(stems)
            key = f"fz{i:02d}-{stem}"
            name = f"{key}.{fmt}"
            own_formats[key] = (fmt, copy(key, stem))
        cases.append(StreamCase(label, expected, partition, key, (lambda fn, name, key: lambda b: fn(b, name, key))(fn, name, key)))  # noqa: B023 (bound by the outer lambda)
        i += 1

    split_dir = work / "compiled-split"
    must_run(args, replemu_cmd(args, "compile", *split_yamls, "--out", split_dir, "--split", SPLIT_FILES), "compiling the good rows")
    split = {p.name: p.read_text().splitlines() for p in sorted(split_dir.glob("*.jsonl"))}
    own: dict[str, bytes] = {}
    jsonl_keys = [k for k, (fmt, _) in own_formats.items() if fmt == "jsonl"]
    if jsonl_keys:
        d = work / "compiled-own"
        must_run(args, replemu_cmd(args, "compile", *(own_formats[k][1] for k in jsonl_keys), "--out", d), "compiling own files")
        by_key: dict[str, list[str]] = {}
        for p in sorted(d.glob("*.jsonl")):
            for line in p.read_text().splitlines():
                by_key.setdefault(json.loads(line)["topic"], []).append(line)
        for k in jsonl_keys:
            own[f"{k}.jsonl"] = "".join(line + "\n" for line in by_key[k]).encode()
    for k, (fmt, path) in own_formats.items():
        if fmt == "parquet":
            d = work / f"compiled-{k}"
            must_run(args, replemu_cmd(args, "compile", path, "--out", d, "--format", "parquet"), "compiling a Parquet file")
            (p,) = sorted(d.glob("*.parquet"))
            own[f"{k}.parquet"] = p.read_bytes()
    return cases, split, own, good


@dataclass
class StreamRun:
    status: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    results: dict[str, dict] = field(default_factory=dict)
    quarantine: list[dict] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    problem: str = ""  # why the run cannot be judged ('' when it can)
    command: str = ""


_PY_EXCEPTION = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception): ")
_PROJECT_FRAME = re.compile(r'File "' + re.escape(str(ROOT)) + r'/([^"]+)", line (\d+), in (\S+)')


def python_cause(stderr: str) -> str:
    """The first Python exception in a failed job's stderr, and the innermost frame of this
    project's code before it: ``UnicodeEncodeError: ... (streaming/files.py:155 decode_file_batches)``."""
    frame = ""
    for line in stderr.splitlines():
        m = _PROJECT_FRAME.search(line)
        if m:
            frame = f"{m.group(1)}:{m.group(2)} {m.group(3)}"
        if _PY_EXCEPTION.match(line.strip()):
            return line.strip()[:200] + (f" ({frame})" if frame else "")
    return ""


def stream_run(args, input_dir: Path, out: Path, ck: Path) -> StreamRun:
    argv = replemu_cmd(args, "stream", "--input", input_dir, "--output", out, "--checkpoint", ck, "--protocol", "kip320",
                       "--max-files-per-trigger", "6")
    status, stdout, stderr, secs, timed_out = run_process(argv, args.stream_timeout, ROOT)
    run = StreamRun(status, stdout, stderr, secs, timed_out, command=shown_cmd(argv))
    if timed_out:
        run.problem = f"no end within {args.stream_timeout:.0f} s"
        return run
    if status != 0 or "Traceback" in stderr:
        cause = python_cause(stderr)
        run.problem = f"the job {'exited ' + str(status) if status != 0 else 'printed a traceback'}" + (f": {cause}" if cause else "")
        return run
    st, res, err, _, _ = run_process(replemu_cmd(args, "results", out, "--json"), 300, ROOT)
    if st != 0:
        run.problem = f"replemu results exited {st}: {hostile.last_line(err)}"
        return run
    run.results = {r["scenario"]: r for r in json.loads(res)}
    st, q, err, _, _ = run_process([args.python, "-c", _QUARANTINE_PY, str(out)], 300, ROOT)
    if st != 0:
        run.problem = f"reading the quarantine failed: {hostile.last_line(err)}"
        return run
    run.quarantine = json.loads(q)
    gaps = out / "gaps.json"
    run.gaps = json.loads(gaps.read_text()) if gaps.exists() else []
    return run


def judge_stream_case(case: StreamCase, look: Look, run: StreamRun, ref: StreamRun, good_problem: str) -> hostile.Outcome:
    if run.timed_out:
        return hostile.Outcome(hostile.HANG, run.problem)
    if run.problem:
        return hostile.Outcome(hostile.TRACEBACK, run.problem)
    if good_problem:
        return hostile.Outcome(hostile.SILENT, good_problem)
    ours = [q for q in run.quarantine
            if (look.token and look.token in (q.get("reason") or ""))
            or (look.key and q.get("topic") == look.key and (look.seq is None or q.get("seq") == look.seq))]
    gapped = [g for g in run.gaps if look.key and str(g.get("topic")).startswith(look.key)
              and (look.seq is None or g.get("missing_seq") == look.seq)]
    named = [q for q in ours if all(w in q["reason"] for w in look.words)]
    got, want = run.results.get(case.key or ""), ref.results.get(case.key or "")
    part = ""
    if case.partition == "same" and got != want:
        part = "its partition's result differs from the reference" if got else "its partition has no result (the reference has one)"
    elif case.partition == "absent" and got is not None:
        part = "its partition has a result: rows of a file that should have been skipped or quarantined whole were applied"
    if case.expected == FAULT:
        reported = gapped if look.gap else ours
        if not reported:
            where = "OUTPUT/gaps.json" if look.gap else "quarantine"
            return hostile.Outcome(hostile.SILENT, f"not in {where}" + (f"; {part}" if part else ""))
        if part:
            return hostile.Outcome(hostile.SILENT, part)
        if not look.gap and not named:
            return hostile.Outcome(hostile.OTHER, f"quarantined, but the reason does not say {' / '.join(look.words)!r}: "
                                                  f"{ours[0]['reason'][:200]!r}")
        if look.gap:
            return hostile.Outcome(hostile.CLEAN, f"in gaps.json: {gapped[0]}")
        seq = named[0].get("seq")
        return hostile.Outcome(hostile.CLEAN, f"seq {int(seq) if isinstance(seq, float) else seq}: {named[0]['reason'][:200]}")
    if part:
        return hostile.Outcome(hostile.SILENT if case.expected == VALID_INPUT else hostile.OTHER, part)
    if case.expected == VALID_INPUT and ours:
        return hostile.Outcome(hostile.OTHER, f"a valid input was quarantined: {ours[0]['reason'][:200]!r}")
    return hostile.Outcome(hostile.CLEAN, f"quarantined: {ours[0]['reason'][:200]}" if ours else "nothing quarantined")


def good_partitions_problem(run: StreamRun, ref: StreamRun, good: list[str]) -> str:
    """'' when every good partition's result equals the reference and none is in quarantine."""
    differ = [g for g in good if run.results.get(g) != ref.results.get(g)]
    quarantined = sorted({q["topic"] for q in run.quarantine if q.get("topic") in good})
    if differ:
        return f"good partition(s) {', '.join(differ)} differ from the reference run"
    if quarantined:
        return f"rows of good partition(s) {', '.join(quarantined)} were quarantined"
    return ""


def run_stream_row(args, table: Table, work: Path, keep: Path) -> None:
    row = STREAM_ROW
    rng = random.Random(f"{args.seed}/stream")
    started = time.monotonic()
    try:
        cases, split, own, good = build_stream_cases(args, rng, work / "stream")
    except RuntimeError as exc:
        table.add(row, "building the stream inputs", hostile.Outcome(hostile.TRACEBACK, str(exc)), "(fixture)", "")
        return
    print(f"{row}: {len(cases)} cases in one input directory beside {len(good)} good partitions "
          f"(one reference run, one run with every fault; bisected if it fails, at most {args.stream_runs} runs)", flush=True)

    def build(subset: list[int]) -> tuple[StreamBuild, dict[int, Look]]:
        b = StreamBuild(split, own)
        looks = {k: cases[k].apply(b) for k in subset}
        return b, looks

    runs = 0

    def do_run(name: str, subset: list[int]) -> tuple[StreamRun, dict[int, Look], Path]:
        nonlocal runs
        runs += 1
        b, looks = build(subset)
        d = work / "stream" / name
        b.write(d / "input")
        r = stream_run(args, d / "input", d / "out", d / "ck")
        print(f"  run {runs} ({name}: {len(subset)} faults): {'ok' if not r.problem else r.problem} after {r.seconds:.0f} s",
              flush=True)
        return r, looks, d

    ref, _, _ = do_run("reference", [])
    if ref.problem or ref.quarantine or ref.gaps:
        why = ref.problem or f"the reference run reported {len(ref.quarantine)} quarantined rows, {len(ref.gaps)} gaps"
        for c in cases:
            table.add(row, c.label, hostile.Outcome(hostile.TRACEBACK if ref.problem else hostile.OTHER, f"reference: {why}"),
                      ref.command, ref.stderr)
        return
    missing_ref = [g for g in good + [c.key for c in cases if c.key] if g not in ref.results]
    if missing_ref:
        print(f"  note: the reference run has no result for {', '.join(missing_ref)}", flush=True)
    verdicts: dict[int, tuple[hostile.Outcome, str, str]] = {}

    def keep_input(name: str, subset: list[int], d: Path | None) -> Path:
        """A copy of an input directory for the report (written afresh when ``d`` is None)."""
        target = keep / "stream" / name / "input"
        shutil.rmtree(target, ignore_errors=True)
        if d is None:
            build(subset)[0].write(target)
        else:
            shutil.copytree(d / "input", target)
            if (d / "stderr.txt").exists():
                shutil.copyfile(d / "stderr.txt", target.parent / "stderr.txt")
        return target

    def judge_run(subset: list[int], r: StreamRun, looks: dict[int, Look], d: Path, name: str) -> None:
        good_problem = "" if r.problem else good_partitions_problem(r, ref, good)
        kept = None
        for k in subset:
            outcome = judge_stream_case(cases[k], looks[k], r, ref, good_problem)
            if r.problem and len(subset) > 1:
                outcome = hostile.Outcome(outcome.verdict, f"{outcome.detail} (in a run with {len(subset)} cases, not bisected "
                                                           f"further: --stream-runs {args.stream_runs})")
            command = r.command
            if outcome.verdict != hostile.CLEAN:
                kept = kept or keep_input(name, subset, d)
                command = command.replace(str(d), str(kept.parent))
            verdicts[k] = (outcome, command, r.stderr)
        if not r.problem:
            for q in r.quarantine:
                if not any((lk.token and lk.token in (q.get("reason") or "")) or (lk.key and q.get("topic") == lk.key)
                           for lk in looks.values()):
                    print(f"  note: a quarantine row no case claims: {q.get('topic')}/{q.get('partition')} seq {q.get('seq')}: "
                          f"{str(q.get('reason'))[:160]}", flush=True)

    def resolve(name: str, subset: list[int], failed: tuple[StreamRun, Path] | None = None) -> bool:
        """Judge ``subset``; returns whether a run with it fails.  ``failed``: a failed run that
        held ``subset`` and nothing else that could have failed it (its other half passed)."""
        if failed is None:
            r, looks, d = do_run(name, subset)
            if r.problem:
                (d / "stderr.txt").write_text(r.stderr)
            if not r.problem or r.timed_out or len(subset) == 1 or runs >= args.stream_runs:
                judge_run(subset, r, looks, d, name)
                return bool(r.problem)
            failed = (r, d)
        r, d = failed
        if len(subset) == 1:
            (k,) = subset
            kept = keep_input(f"{k:02d}-alone", subset, None)
            (kept.parent / "stderr.txt").write_text(r.stderr)
            verdicts[k] = (hostile.Outcome(hostile.TRACEBACK, f"the job died with this fault (a run with it failed, the same "
                                                             f"cases without it passed): {r.problem}"),
                           shown_cmd(replemu_cmd(args, "stream", "--input", kept, "--output", kept.parent / "out", "--checkpoint",
                                                 kept.parent / "ck", "--protocol", "kip320", "--max-files-per-trigger", "6")),
                           r.stderr)
            return True
        if runs >= args.stream_runs:
            b, looks = build(subset)
            judge_run(subset, r, looks, d, name)
            return True
        half = len(subset) // 2
        if resolve(f"{name}-a", subset[:half]):
            resolve(f"{name}-b", subset[half:])
        else:
            resolve(f"{name}-b", subset[half:], failed=(r, d))
        return True

    resolve("faults", list(range(len(cases))))
    for k, c in enumerate(cases):
        outcome, command, stderr = verdicts[k]
        table.add(row, f"{c.label} [expected {c.expected}{', partition ' + c.partition if c.partition != 'none' else ''}]",
                  outcome, command, stderr if outcome.verdict == hostile.TRACEBACK else "")
    progress(row, len(cases), len(cases), table, started)
    print(f"  ({runs} stream runs)", flush=True)


# -- row: checkpoint misuse -------------------------------------------------------------------

CHECKPOINT_ROW = "checkpoint misuse"
IDENTITY = "replemu-identity.json"
WORKLOAD = ("--workload", "clean", "--partitions", "20", "--seed", "1", "--steps-per-batch", "5", "--max-steps", "10")


@dataclass
class Misuse:
    label: str
    argv: Callable[[Path], list[str]]  # `replemu stream` arguments, given the case directory
    expect: str = "refuse"  # refuse | accept
    words: Callable[[Path], tuple[str, ...]] = lambda d: ()
    base: str | None = None  # "w" / "i": the case starts from a copy of that checkpoint and output
    prepare: Callable[[Path], None] | None = None
    check: Callable[[Path], str] | None = None  # accepted: '' or what is wrong afterwards


def _batches(out: Path) -> int:
    from streaming.output_layout import batch_index  # fresh and compacted micro-batches alike

    return len(batch_index(out, "summary"))


def misuse_cases(base: Path, events: Path, other_events: Path) -> tuple[list[Misuse], list[Misuse], list[Misuse]]:
    """(cases on copies of the base checkpoints, in any order; cases on the originals, in order;
    cases against a live job)."""

    def w(d, *extra, ck="ck", out="out"):
        return ["stream", *WORKLOAD, "--protocol", "kip320", "--output", str(d / out), "--checkpoint", str(d / ck), *extra]

    def swap(argv, *extra):  # some options replaced (or added)
        argv = list(argv)
        for flag, value in zip(extra[::2], extra[1::2]):
            if flag in argv and flag != "--allow-change":
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        return argv

    def wl(d, *extra, **kw):  # the workload with some of its options replaced
        return swap(w(d, **kw), *extra)

    def i(d, *extra, inp=None, ck="ck", out="out"):
        return ["stream", "--input", str(inp or events), "--protocol", "kip320", "--output", str(d / out),
                "--checkpoint", str(d / ck), *extra]

    def tamper(field_, value):
        def prep(d):
            p = d / "ck" / IDENTITY
            doc = json.loads(p.read_text())
            doc["identity"][field_] = value
            p.write_text(json.dumps(doc))
        return prep

    def write(rel, text):
        def prep(d):
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        return prep

    def remove(rel):
        return lambda d: (d / rel).unlink()

    copies = [
        Misuse("workload checkpoint: another --protocol", lambda d: wl(d, "--protocol", "kip101"), base="w",
               words=lambda d: ("protocol", "kip101")),
        Misuse("workload checkpoint: --protocol all", lambda d: wl(d, "--protocol", "all"), base="w", words=lambda d: ("protocol",)),
        Misuse("workload checkpoint: another --partitions", lambda d: wl(d, "--partitions", "21"), base="w", words=lambda d: ("workload",)),
        Misuse("workload checkpoint: another --steps-per-batch", lambda d: wl(d, "--steps-per-batch", "7"), base="w",
               words=lambda d: ("workload",)),
        Misuse("workload checkpoint: another --seed", lambda d: wl(d, "--seed", "2"), base="w", words=lambda d: ("workload",)),
        Misuse("workload checkpoint: another --workload profile", lambda d: wl(d, "--workload", "hard"), base="w",
               words=lambda d: ("workload",)),
        Misuse("workload checkpoint: another --knob", lambda d: wl(d, "--knob", "trunc_rule=hw"), base="w", words=lambda d: ("knobs",)),
        Misuse("workload checkpoint: --input instead of --workload", lambda d: i(d), base="w", words=lambda d: ("input", "workload")),
        Misuse("workload checkpoint: another --gap-timeout-ms", lambda d: wl(d, "--gap-timeout-ms", "5000"), base="w",
               words=lambda d: ("gap_timeout_ms",)),
        Misuse("workload checkpoint: another --compact-min-records", lambda d: wl(d, "--compact-min-records", "10"), base="w",
               words=lambda d: ("compact_min_records",)),
        Misuse("workload checkpoint: another --state-store", lambda d: wl(d, "--state-store", "rocksdb"), base="w",
               words=lambda d: ("state_store",)),
        Misuse("workload checkpoint: --allow-change protocol, but another --seed", lambda d: wl(d, "--protocol", "kip101", "--seed", "2",
               "--allow-change", "protocol"), base="w", words=lambda d: ("workload",)),
        Misuse("workload checkpoint: --allow-change of an unknown field", lambda d: wl(d, "--allow-change", "bogus"), base="w",
               words=lambda d: ("bogus",)),
        Misuse("workload checkpoint: its identity file is not JSON", lambda d: w(d), base="w",
               prepare=write(f"ck/{IDENTITY}", "{garbage"), words=lambda d: (IDENTITY,)),
        Misuse("workload checkpoint: its identity file deleted (offsets, no identity)", lambda d: w(d), base="w",
               prepare=remove(f"ck/{IDENTITY}"), words=lambda d: (IDENTITY,)),
        Misuse("workload checkpoint: an older state schema version, --allow-change state_schema_version",
               lambda d: wl(d, "--allow-change", "state_schema_version"), base="w", prepare=tamper("state_schema_version", 1),
               words=lambda d: ("state_schema_version",)),
        Misuse("input checkpoint: another --input", lambda d: i(d, inp=other_events), base="i", words=lambda d: ("input",)),
        Misuse("input checkpoint: another --protocol", lambda d: swap(i(d), "--protocol", "hw"), base="i",
               words=lambda d: ("protocol", "hw")),
        Misuse("input checkpoint: --workload instead of --input", lambda d: w(d), base="i", words=lambda d: ("input", "workload")),
        Misuse("a checkpoint path that is a file", lambda d: w(d, ck="ck-file"), prepare=write("ck-file", "not a directory\n"),
               words=lambda d: (str(d / "ck-file"),)),
        Misuse("a checkpoint path under a file", lambda d: w(d, ck="ck-file/ck"), prepare=write("ck-file", "x\n"),
               words=lambda d: ("ck-file",)),
        Misuse("an output path that is a file", lambda d: w(d, out="out-file"), prepare=write("out-file", "x\n"),
               words=lambda d: (str(d / "out-file"),)),
        Misuse("output == checkpoint", lambda d: w(d, ck="same", out="same"), words=lambda d: (str(d / "same"),)),
        Misuse("output inside the checkpoint", lambda d: w(d, out="ck/out"), base="w", words=lambda d: (str(d / "ck"),)),
        Misuse("checkpoint inside the output", lambda d: w(d, ck="out/ck"), base="w", words=lambda d: (str(d / "out"),)),
        Misuse("a new checkpoint with a used output", lambda d: w(d, ck="new-ck"), base="w", words=lambda d: ("--output", str(d / "out"))),
    ]

    def identity_of(d: Path) -> dict:
        return json.loads((d / "ck" / IDENTITY).read_text())

    def recorded_kip101(d: Path) -> str:
        doc = identity_of(d)
        if doc["identity"].get("protocol") != "kip101":
            return f"the identity still says protocol {doc['identity'].get('protocol')!r}"
        if not doc.get("history") or doc["history"][-1].get("changed") != ["protocol"]:
            return f"the identity's history does not record the change: {doc.get('history')!r:.200}"
        return ""

    counted: dict[str, int] = {}

    def count_batches(d: Path) -> str:
        """The same command again: accepted; remember how far the run has got."""
        counted["w"] = _batches(d / "out")
        return ""

    def more_batches(d: Path) -> str:
        """A larger --max-steps: the run went on from where it was."""
        n = _batches(d / "out")
        return "" if n > counted.get("w", 0) else f"no new micro-batch ({n} summary batches, {counted.get('w')} before)"

    originals = [
        Misuse("workload checkpoint: the same command again (continues)", lambda d: w(d), expect="accept", base="w",
               check=count_batches),
        Misuse("workload checkpoint: a larger --max-steps (not identity: continues)", lambda d: wl(d, "--max-steps", "20"),
               expect="accept", base="w", check=more_batches),
        Misuse("input checkpoint: --allow-change protocol (accepted, recorded)",
               lambda d: swap(i(d), "--protocol", "kip101") + ["--allow-change", "protocol"], expect="accept", base="i",
               check=recorded_kip101),
        Misuse("input checkpoint: the old --protocol after an allowed change", lambda d: i(d), base="i",
               words=lambda d: ("protocol", "kip101")),
    ]
    live = [
        Misuse("a second job, same command, while the first runs", lambda d: ["stream", *WORKLOAD[:8], "--protocol", "kip320",
               "--trigger", "processing-time=5s", "--output", str(d / "out"), "--checkpoint", str(d / "ck")],
               words=lambda d: ("in use", str(d / "ck"))),
        Misuse("a second job on the live checkpoint, another output", lambda d: ["stream", *WORKLOAD[:8], "--protocol", "kip320",
               "--trigger", "processing-time=5s", "--output", str(d / "out2"), "--checkpoint", str(d / "ck")],
               words=lambda d: ("in use", str(d / "ck"))),
        Misuse("a second job on the live output, another checkpoint", lambda d: ["stream", *WORKLOAD[:8], "--protocol", "kip320",
               "--trigger", "processing-time=5s", "--output", str(d / "out"), "--checkpoint", str(d / "ck2")],
               words=lambda d: (str(d / "out"),)),
    ]
    return copies, originals, live


def judge_misuse(case: Misuse, status, err: str, secs: float, timed_out: bool, d: Path, fail_fast: float,
                 before: bytes | None) -> hostile.Outcome:
    if timed_out:
        return hostile.Outcome(hostile.HANG, f"no answer within {secs:.0f} s" + (" (a refusal must come before Spark starts)"
                                                                              if case.expect == "refuse" else ""))
    if "Traceback" in err:
        return hostile.Outcome(hostile.TRACEBACK, "traceback on stderr")
    if status not in (0, 1, 2):
        return hostile.Outcome(hostile.TRACEBACK, f"exit status {status}")
    if case.expect == "accept":
        if status != 0:
            return hostile.Outcome(hostile.OTHER, f"refused (exit {status}) a restart that must be accepted")
        problem = case.check(d) if case.check else ""
        return (hostile.Outcome(hostile.OTHER, f"accepted, but {problem}") if problem
                else hostile.Outcome(hostile.CLEAN, f"accepted, exit 0 after {secs:.0f} s"))
    if status != 2:
        return hostile.Outcome(hostile.SILENT, f"exit {status} after {secs:.0f} s")
    lines = [line for line in err.splitlines() if line.strip()]
    if not lines:
        return hostile.Outcome(hostile.OTHER, "exit 2 with no message")
    if spark_noise(err):
        return hostile.Outcome(hostile.HANG if secs > fail_fast else hostile.OTHER, f"refused after Spark started ({secs:.0f} s)")
    if secs > fail_fast:
        return hostile.Outcome(hostile.HANG, f"refused after {secs:.0f} s (must be before Spark starts, < {fail_fast:.0f} s)")
    missing = [w for w in case.words(d) if w not in err]
    if missing:
        return hostile.Outcome(hostile.OTHER, f"the message does not name {missing[0]!r}")
    if len(lines) > 12 or max(len(line) for line in lines) > hostile.MESSAGE_LIMIT:
        return hostile.Outcome(hostile.OTHER, f"a message of {len(lines)} lines")
    identity = d / "ck" / IDENTITY
    if before is not None and (not identity.exists() or identity.read_bytes() != before):
        return hostile.Outcome(hostile.OTHER, "refused, but the checkpoint's identity file changed")
    return hostile.Outcome(hostile.CLEAN, f"refused in {secs:.1f} s: {' / '.join(line.strip() for line in lines)[:240]}")


def run_checkpoint_row(args, table: Table, work: Path) -> None:
    row = CHECKPOINT_ROW
    root = work / "checkpoints"
    root.mkdir(parents=True)
    started = time.monotonic()
    events, other_events = root / "events", root / "other-events"
    try:
        seeds_ = sorted(BUNDLED.glob("*.yaml"))[:3]
        must_run(args, replemu_cmd(args, "compile", *seeds_, "--out", events, "--split", "2"), "compiling events")
        shutil.copytree(events, other_events)
        print(f"{row}: building two real checkpoints (a workload run and an --input run; Spark) ...", flush=True)
        copies, originals, live = misuse_cases(root, events, other_events)
        for name, argv in (("w", ["stream", *WORKLOAD, "--protocol", "kip320"]),
                           ("i", ["stream", "--input", str(events), "--protocol", "kip320"])):
            must_run(args, replemu_cmd(args, *argv, "--output", root / name / "out", "--checkpoint", root / name / "ck"),
                     f"the base checkpoint {name}", timeout=args.stream_timeout, cwd=root)
    except RuntimeError as exc:
        table.add(row, "building the base checkpoints", hostile.Outcome(hostile.TRACEBACK, str(exc)), "(fixture)", "")
        return
    total = len(copies) + len(originals) + len(live)
    print(f"{row}: {total} cases ({len(copies)} on copies of the two checkpoints, {len(originals)} continuing them, "
          f"{len(live)} against a live job)", flush=True)

    def one(k_case: tuple[int, Misuse], original: bool = False):
        k, case = k_case
        d = root / case.base if original else root / "cases" / f"{k:02d}"
        if not original:
            d.mkdir(parents=True)
            if case.base:
                for part in ("ck", "out"):
                    shutil.copytree(root / case.base / part, d / part)
        if case.prepare:
            case.prepare(d)
        argv = case.argv(d)
        identity = d / "ck" / IDENTITY
        before = identity.read_bytes() if identity.is_file() and case.expect == "refuse" else None
        timeout = args.stream_timeout if case.expect == "accept" else max(60.0, 4 * args.fail_fast)
        status, _, err, secs, timed_out = run_process(replemu_cmd(args, *argv), timeout, root)
        outcome = judge_misuse(case, status, err, secs, timed_out, d, args.fail_fast, before)
        return case, argv, outcome, err

    def add(case, argv, outcome, err):
        table.add(row, f"{case.label} [expected {'exit 2' if case.expect == 'refuse' else 'exit 0'}]", outcome,
                  "replemu " + " ".join(shlex.quote(a) for a in argv), err)

    with ThreadPoolExecutor(min(args.jobs, 2)) as pool:
        for result in pool.map(one, enumerate(copies)):
            add(*result)
    progress(row, len(copies), total, table, started)
    for k, case in enumerate(originals):
        add(*one((k, case), original=True))
    progress(row, len(copies) + len(originals), total, table, started)

    # A live job: a processing-time workload run that never ends by itself.
    d = root / "live"
    d.mkdir()
    first = live[0].argv(d)
    log = open(d / "first-job.log", "wb")
    proc = subprocess.Popen(replemu_cmd(args, *first), cwd=root, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        locked = False
        while time.monotonic() < deadline and proc.poll() is None:
            held = [d / part / "replemu.lock" for part in ("ck", "out")]
            if all(p.exists() and p.read_text().startswith(f"pid {proc.pid} ") for p in held) and (d / "ck" / IDENTITY).exists():
                locked = True
                break
            time.sleep(0.2)
        for case in live:
            if not locked or proc.poll() is not None:
                why = f"the first job ended (exit {proc.poll()})" if proc.poll() is not None else "the first job never held the lock"
                add(case, case.argv(d), hostile.Outcome(hostile.OTHER, f"not measured: {why}"), "")
                continue
            argv = case.argv(d)
            status, _, err, secs, timed_out = run_process(replemu_cmd(args, *argv), max(60.0, 4 * args.fail_fast), root)
            outcome = judge_misuse(case, status, err, secs, timed_out, d, args.fail_fast, None)
            if proc.poll() is not None and outcome.verdict == hostile.CLEAN:
                outcome = hostile.Outcome(hostile.OTHER, f"the first job had ended (exit {proc.poll()}) before the second was refused")
            add(case, argv, outcome, err)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                kill_job({proc.pid})
                proc.wait()
        log.close()
    progress(row, total, total, table, started)


# -- row: `replemu inspect` of corrupted replica directories ------------------------------------

INSPECT_ROW = "`replemu inspect` of corrupted replica dirs"
INSPECT_SCENARIOS = ("s1-kip101-scenario-1", "s2-kip101-scenario-2", "s4-kip279-unclean-elections",
                     "seed-2-divergence-lagging-replica-first")
LEC, HWC = "leader-epoch-checkpoint", "replication-offset-checkpoint"
SEGMENT = "00000000000000000000.log"
MUST, MAY = "must", "either"  # the change must be found / may legitimately read clean

_CRC32C_TABLE: list[int] = []


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of a v2 record batch (from attributes to the end)."""
    if not _CRC32C_TABLE:
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC32C_TABLE.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def segment_batches(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every v2 batch of a well-formed segment (Kafka's layout: baseOffset int64,
    length int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16, ...)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        end = pos + 12 + size
        if size < 49 or end > len(data):
            break
        out.append((pos, end))
        pos = end
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def first_value_span(data: bytes, start: int) -> tuple[int, int] | None:
    """Byte span of the first record's value in the batch at ``start`` (None when empty)."""
    pos = start + 61
    _, pos = _varint(data, pos)  # record length
    pos += 1  # attributes
    _, pos = _varint(data, pos)  # timestamp delta
    _, pos = _varint(data, pos)  # offset delta
    key_len, pos = _varint(data, pos)
    pos += max(key_len, 0)
    value_len, pos = _varint(data, pos)
    return (pos, pos + value_len) if value_len > 0 else None


def restamp(data: bytearray, start: int, end: int) -> None:
    """Recompute a batch's CRC-32C after a change inside it (the change then passes the CRC)."""
    data[start + 17:start + 21] = crc32c(bytes(data[start + 21:end])).to_bytes(4, "big")


_INT_RE = re.compile(r"[+-]?[0-9]+")


def checkpoint_well_formed(data: bytes, fields: tuple[str, ...]) -> bool:
    """Whether Kafka's ``CheckpointFile`` reads ``data`` without an error (version 0, a count,
    ``count`` lines of whitespace-separated ``fields``: int32/int64/str), numbers non-negative."""
    bounds = {"int32": 2**31 - 1, "int64": 2**63 - 1}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return True
    if not _INT_RE.fullmatch(lines[0]) or int(lines[0]) != 0:
        return False
    if len(lines) == 1:
        return True
    if not _INT_RE.fullmatch(lines[1]) or not 0 <= int(lines[1]) <= bounds["int32"]:
        return False
    for line in lines[2:]:
        parts = re.split(r"[ \t\n\x0b\f\r]+", line)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != len(fields):
            return False
        for kind, part in zip(fields, parts):
            if kind != "str" and (not _INT_RE.fullmatch(part) or not 0 <= int(part) <= bounds[kind]):
                return False
    return len(lines) - 2 == int(lines[1])


CHECKPOINT_FIELDS = {LEC: ("int32", "int64"), HWC: ("str", "int32", "int64")}


@dataclass
class Corruption:
    kind: str
    file: str  # the file changed (relative to the partition directory)
    expected: str  # must | either
    note: str = ""


def _corrupt_segment(kind: str, path: Path, rng: random.Random) -> Corruption:
    data = bytearray(path.read_bytes())
    batches = segment_batches(bytes(data))
    starts = [s for s, _ in batches]
    ends = {e for _, e in batches} | {0}
    b0, b1 = rng.choice(batches)
    if kind in ("value-not-utf8-valid-crc", "value-changed-valid-crc"):
        b0, b1 = rng.choice([b for b in batches if first_value_span(bytes(data), b[0])] or [(b0, b1)])
    name = path.name

    def put(pos: int, value: int, size: int, signed: bool = True) -> None:
        data[pos:pos + size] = value.to_bytes(size, "big", signed=signed)

    c = Corruption(kind, name, MUST)
    if kind == "truncate-inside-a-batch":
        cut = rng.choice([p for p in range(1, len(data)) if p not in ends])
        del data[cut:]
        c.note = f"cut at byte {cut}"
    elif kind == "truncate-at-a-batch-boundary":
        cut = rng.choice(sorted(ends - {len(data)}))
        del data[cut:]
        c.expected, c.note = MAY, f"cut at byte {cut}, a batch boundary: a shorter log Kafka reads whole"
    elif kind == "flip-a-random-byte":
        p = rng.randrange(len(data))
        data[p] ^= rng.randint(1, 255)
        in_epoch = any(s + 12 <= p < s + 16 for s in starts)
        c.note = f"byte {p}"
        if in_epoch:
            c.expected, c.note = MAY, f"byte {p}, in a partitionLeaderEpoch field (outside the CRC; Kafka's recovery does not check it)"
    elif kind == "flip-a-byte-under-the-crc":
        p = rng.randrange(b0 + 21, b1)
        data[p] ^= rng.randint(1, 255)
        c.note = f"byte {p}"
    elif kind == "flip-a-crc-byte":
        p = rng.randrange(b0 + 17, b0 + 21)
        data[p] ^= rng.randint(1, 255)
        c.note = f"byte {p}"
    elif kind == "flip-the-epoch-field":
        p = rng.randrange(b0 + 12, b0 + 16)
        data[p] ^= rng.randint(1, 255)
        c.expected, c.note = MAY, f"byte {p}: partitionLeaderEpoch is outside the CRC and Kafka's recovery does not check it"
    elif kind == "epoch-field-negative":
        put(b0 + 12, -1, 4)
        c.expected, c.note = MAY, "partitionLeaderEpoch -1 (NO_PARTITION_LEADER_EPOCH): outside the CRC, unchecked by Kafka"
    elif kind in ("length-zero", "length-int32-max", "length-negative", "length-minus-one", "length-plus-one"):
        size = b1 - b0 - 12
        value = {"length-zero": 0, "length-int32-max": 2**31 - 1, "length-negative": rng.choice([-1, -(2**31)]),
                 "length-minus-one": size - 1, "length-plus-one": size + 1}[kind]
        put(b0 + 8, value, 4)
        c.note = f"batch at byte {b0}: length {size} -> {value}"
    elif kind == "base-offset-changed":
        put(b0, int.from_bytes(data[b0:b0 + 8], "big", signed=True) + rng.choice([-1, 1, 7, 2**40]), 8)
        c.note = f"batch at byte {b0}"
    elif kind == "magic-1":
        data[b0 + 16] = 1
    elif kind == "magic-3":
        data[b0 + 16] = 3
    elif kind == "append-garbage":
        n = rng.randint(1, 200)
        data += bytes(rng.randrange(256) for _ in range(n))
        c.note = f"{n} bytes"
    elif kind == "append-zeros":
        n = rng.choice([1, 11, 17, 18, 61, 100])
        data += bytes(n)
        c.note = f"{n} zero bytes"
    elif kind == "empty-segment":
        data = bytearray()
        c.expected, c.note = MAY, "an empty segment is an empty log to Kafka too"
    elif kind == "record-count-plus-one-valid-crc":
        put(b0 + 57, int.from_bytes(data[b0 + 57:b0 + 61], "big", signed=True) + 1, 4)
        restamp(data, b0, b1)
    elif kind == "value-not-utf8-valid-crc":
        span = first_value_span(bytes(data), b0)
        if span is None:
            raise AssertionError(f"{path}: no record value to change")
        data[span[0]] = 0xFF
        restamp(data, b0, b1)
    elif kind == "value-changed-valid-crc":
        span = first_value_span(bytes(data), b0)
        if span is None:
            raise AssertionError(f"{path}: no record value to change")
        data[span[0]] = ord("Z") if data[span[0]] != ord("Z") else ord("Y")
        restamp(data, b0, b1)
        c.expected, c.note = MAY, "another value with a valid CRC: a different, well-formed log"
    elif kind == "gzip-flag-valid-crc":
        data[b0 + 22] |= 0x01
        restamp(data, b0, b1)
    else:
        raise AssertionError(kind)
    path.write_bytes(bytes(data))
    return c


def _corrupt_checkpoint(kind: str, path: Path, rng: random.Random) -> Corruption:
    name = path.name
    fields = CHECKPOINT_FIELDS[name]
    data = path.read_bytes()
    lines = data.decode().splitlines()
    c = Corruption(kind, name, MUST)
    if kind == "ckpt-not-utf8":
        p = rng.randrange(len(data) + 1)
        data = data[:p] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + data[p:]
    elif kind == "ckpt-malformed-line":
        data = data + rng.choice([b"garbage\n", b"1 2 3 4\n", b"x y\n", b"\n"])
        lines = data.decode().splitlines()
        lines[1] = str(len(lines) - 2)  # the count agrees: only the line is wrong
        data = ("\n".join(lines) + "\n").encode()
        if checkpoint_well_formed(data, fields):
            c.expected = MAY
    elif kind == "ckpt-wrong-version":
        lines[0] = rng.choice(["1", "2", "-1", "v0"])
        data = ("\n".join(lines) + "\n").encode()
    elif kind == "ckpt-count-mismatch":
        lines[1] = str(int(lines[1]) + rng.choice([1, 2, -1 if int(lines[1]) else 1]))
        data = ("\n".join(lines) + "\n").encode()
    elif kind == "ckpt-negative-number":
        n = rng.randrange(2, len(lines))
        parts = lines[n].split()
        parts[-1] = "-" + parts[-1].lstrip("-") if parts[-1] != "0" else "-1"
        lines[n] = " ".join(parts)
        data = ("\n".join(lines) + "\n").encode()
    elif kind == "ckpt-number-too-big":
        n = rng.randrange(2, len(lines))
        parts = lines[n].split()
        k = 0 if name == LEC else 1  # an epoch, a partition: int32
        parts[k] = str(2**31)
        lines[n] = " ".join(parts)
        data = ("\n".join(lines) + "\n").encode()
    elif kind == "ckpt-truncate":
        cut = rng.randrange(1, len(data))
        data = data[:cut]
        c.note = f"cut at byte {cut}"
    elif kind == "ckpt-flip-a-byte":
        p = rng.randrange(len(data))
        data = data[:p] + bytes([data[p] ^ rng.randint(1, 255)]) + data[p + 1:]
        c.note = f"byte {p}"
    elif kind == "ckpt-append-garbage":
        data = data + bytes(rng.choice(b"0123456789 \n\tabc\xff") for _ in range(rng.randint(1, 12)))
    elif kind == "ckpt-empty":
        data = b""
        c.expected, c.note = MAY, "Kafka reads an empty checkpoint as no entries"
    elif kind == "ckpt-version-only":
        data = b"0\n"
        c.expected, c.note = MAY, "Kafka reads a version line alone as no entries"
    elif kind == "ckpt-crlf":
        data = data.replace(b"\n", b"\r\n")
    elif kind == "ckpt-trailing-spaces":
        data = data.replace(b"\n", b"  \n")
    elif kind == "ckpt-delete":
        path.unlink()
        return c
    elif kind == "ckpt-directory":
        path.unlink()
        path.mkdir()
        return c
    else:
        raise AssertionError(kind)
    if kind not in ("ckpt-empty", "ckpt-version-only", "ckpt-malformed-line") and checkpoint_well_formed(data, fields):
        c.expected = MAY
        c.note = (c.note + "; " if c.note else "") + "still a well-formed checkpoint (no checksum: Kafka cannot tell either)"
    path.write_bytes(data)
    return c


def _corrupt_layout(kind: str, part: Path, rng: random.Random) -> Corruption:
    seg = part / SEGMENT
    if kind == "delete-the-segment":
        seg.unlink()
    elif kind == "a-directory-for-the-segment":
        seg.unlink()
        seg.mkdir()
    elif kind == "segment-named-not-an-offset":
        seg.rename(part / rng.choice(["abc.log", "-1.log", "99999999999999999999999.log", "0x10.log"]))
    elif kind == "segment-renamed-to-another-offset":
        seg.rename(part / f"{rng.choice([1, 5, 2**40]):020d}.log")
    elif kind == "a-second-segment-with-offset-0":
        shutil.copyfile(seg, part / "0.log")
    else:
        raise AssertionError(kind)
    return Corruption(kind, SEGMENT, MUST)


SEGMENT_KINDS = ("truncate-inside-a-batch", "truncate-at-a-batch-boundary", "flip-a-random-byte", "flip-a-byte-under-the-crc",
                 "flip-a-crc-byte", "flip-the-epoch-field", "epoch-field-negative", "length-zero", "length-int32-max",
                 "length-negative", "length-minus-one", "length-plus-one", "base-offset-changed", "magic-1", "magic-3",
                 "append-garbage", "append-zeros", "empty-segment", "record-count-plus-one-valid-crc",
                 "value-not-utf8-valid-crc", "value-changed-valid-crc", "gzip-flag-valid-crc")
CHECKPOINT_KINDS = ("ckpt-not-utf8", "ckpt-malformed-line", "ckpt-wrong-version", "ckpt-count-mismatch", "ckpt-negative-number",
                    "ckpt-number-too-big", "ckpt-truncate", "ckpt-flip-a-byte", "ckpt-append-garbage", "ckpt-empty",
                    "ckpt-version-only", "ckpt-crlf", "ckpt-trailing-spaces", "ckpt-delete", "ckpt-directory")
LAYOUT_KINDS = ("delete-the-segment", "a-directory-for-the-segment", "segment-named-not-an-offset",
                "segment-renamed-to-another-offset", "a-second-segment-with-offset-0")
INSPECT_KINDS = SEGMENT_KINDS + CHECKPOINT_KINDS + LAYOUT_KINDS
# Kinds that need a checkpoint file with an entry line.
_NEEDS_ENTRY = ("ckpt-negative-number", "ckpt-number-too-big")


def corrupt(kind: str, root: Path, rng: random.Random) -> tuple[Path, Corruption]:
    """Change one file of one replica under ``root`` (an exported result); the partition
    directory and what was done."""
    parts = sorted(p for b in root.glob("broker-*") for p in b.iterdir() if p.is_dir())
    if kind in SEGMENT_KINDS or kind in LAYOUT_KINDS:
        parts = [p for p in parts if segment_batches((p / SEGMENT).read_bytes())] or parts
        part = rng.choice(parts)
        if kind in LAYOUT_KINDS:
            return part, _corrupt_layout(kind, part, rng)
        return part, _corrupt_segment(kind, part / SEGMENT, rng)
    files = [(p, f) for p in parts for f in (LEC, HWC)
             if kind not in _NEEDS_ENTRY or len((p / f).read_text().splitlines()) > 2]
    part, f = rng.choice(files)
    return part, _corrupt_checkpoint(kind, part / f, rng)


def finding_lines(out: str, root: Path) -> set[str]:
    """The ``finding:`` lines of an inspect report, ``root`` written as ``<root>`` (comparable across copies)."""
    return {line.strip().replace(str(root), "<root>") for line in out.splitlines() if line.strip().startswith("finding:")}


def judge_inspect(c: Corruption, status, out: str, err: str, timed_out: bool, part: Path, case_root: Path,
                  pristine: set[str]) -> hostile.Outcome:
    if timed_out:
        return hostile.Outcome(hostile.HANG, "timed out")
    if "Traceback" in err:
        return hostile.Outcome(hostile.TRACEBACK, "traceback on stderr")
    if status not in (0, 2):
        return hostile.Outcome(hostile.TRACEBACK, f"exit status {status}")
    if status == 2:
        problem = hostile.message_problem(err, None, (str(part),))
        return hostile.Outcome(hostile.OTHER, f"exit 2 but {problem}") if problem else hostile.Outcome(hostile.CLEAN)
    new = sorted(finding_lines(out, case_root) - pristine)
    rel = str(part).replace(str(case_root), "<root>")
    naming = [f for f in new if f"{rel}/{c.file}" in f or (c.file == SEGMENT and rel in f)]
    if c.expected == MAY:
        return hostile.Outcome(hostile.CLEAN, f"{len(new)} new findings")
    if not new:
        return hostile.Outcome(hostile.SILENT, "exit 0 and no finding")
    if not naming:
        return hostile.Outcome(hostile.OTHER, f"findings, none naming {c.file}: {new[0][:200]!r}")
    return hostile.Outcome(hostile.CLEAN, f"{len(new)} new findings")


def run_inspect_row(args, table: Table, work: Path, keep: Path) -> None:
    row = INSPECT_ROW
    rng = random.Random(f"{args.seed}/inspect")
    root = work / "inspect"
    started = time.monotonic()
    exports: dict[str, Path] = {}
    pristine: dict[str, set[str]] = {}
    try:
        for stem in INSPECT_SCENARIOS:
            result = root / f"{stem}.json"
            result.parent.mkdir(parents=True, exist_ok=True)
            result.write_text(must_run(args, replemu_cmd(args, "run", BUNDLED / f"{stem}.yaml", "--protocol", "hw", "--json"),
                                       f"replemu run {stem}"))
            exports[stem] = root / "exports" / stem
            must_run(args, replemu_cmd(args, "export", result, "--to", exports[stem]), f"replemu export {stem}")
            out = must_run(args, replemu_cmd(args, "inspect", exports[stem]), f"replemu inspect of the pristine {stem}")
            pristine[stem] = finding_lines(out, exports[stem])
            for seg in exports[stem].glob(f"broker-*/*/{SEGMENT}"):
                data = seg.read_bytes()
                for start, end in segment_batches(data):
                    if crc32c(data[start + 21:end]) != int.from_bytes(data[start + 17:start + 21], "big"):
                        raise RuntimeError(f"the harness's CRC-32C disagrees with the batch at byte {start} of {seg}")
            if pristine[stem]:
                print(f"  note: the pristine export of {stem} already has {len(pristine[stem])} findings: "
                      f"{next(iter(pristine[stem]))[:160]}", flush=True)
    except RuntimeError as exc:
        table.add(row, "exporting the replica directories", hostile.Outcome(hostile.TRACEBACK, str(exc)), "(fixture)", "")
        return
    kinds = list(INSPECT_KINDS) + [rng.choice(INSPECT_KINDS) for _ in range(max(0, args.inspect_cases - len(INSPECT_KINDS)))]
    kinds = kinds[:args.inspect_cases]
    print(f"{row}: {len(kinds)} corrupted copies of {len(exports)} exported results ({len(INSPECT_KINDS)} kinds of damage)",
          flush=True)
    plans = []
    for k, kind in enumerate(kinds):
        stem = rng.choice(sorted(exports))
        case_root = root / "cases" / f"{k:03d}-{kind}"
        shutil.copytree(exports[stem], case_root)
        part, c = corrupt(kind, case_root, random.Random(f"{args.seed}/inspect/{k}"))
        plans.append((k, stem, case_root, part, c))

    def one(plan):
        k, stem, case_root, part, c = plan
        cmd = replemu_cmd(args, "inspect", case_root)
        status, out, err, secs, timed_out = run_process(cmd, args.timeout, root)
        return plan, judge_inspect(c, status, out, err, timed_out, part, case_root, pristine[stem]), err, status

    done, either_found, either_clean = 0, 0, 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for (_k, stem, case_root, part, c), outcome, err, status in pool.map(one, plans):
            shown = case_root
            if outcome.verdict != hostile.CLEAN:
                shown = keep / "inspect" / case_root.name
                shutil.rmtree(shown, ignore_errors=True)
                shutil.copytree(case_root, shown, symlinks=True)
            elif c.expected == MAY:
                if status == 0 and not outcome.detail.startswith("0 "):
                    either_found += 1
                else:
                    either_clean += 1
            rel = part.relative_to(case_root) / c.file
            table.add(row, f"{stem}: {c.kind} of {rel}{' (' + c.note + ')' if c.note else ''} [expected "
                      f"{'a finding or exit 2' if c.expected == MUST else 'either'}]", outcome, f"replemu inspect {shown}", err)
            done += 1
            if done % 20 == 0 or done == len(plans):
                progress(row, done, len(plans), table, started)
    print(f"  'either' cases (a change Kafka's formats cannot reveal): {either_found} reported a finding, "
          f"{either_clean} read clean", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=600, help="hostile scenario files (default 600)")
    parser.add_argument("--seed", type=int, default=None, help="generator seed (default: random, printed)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang (default 20)")
    parser.add_argument("--slow", type=float, default=5.0, help="a scenario run slower than this is a hang too (default 5)")
    parser.add_argument("--fail-fast", type=float, default=15.0,
                        help="a command line that would start Spark must be refused within this (default 15 s)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="cases run in parallel")
    parser.add_argument("--no-spark", dest="spark", action="store_false",
                        help="nothing that needs Spark: no `state` cases needing a real checkpoint, no stream input and "
                             "no checkpoint misuse rows")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="skip the bad CLI arguments row")
    parser.add_argument("--no-stream", dest="stream", action="store_false", help="skip the bad rows in stream input row")
    parser.add_argument("--no-checkpoint", dest="checkpoint", action="store_false", help="skip the checkpoint misuse row")
    parser.add_argument("--no-inspect", dest="inspect", action="store_false", help="skip the `replemu inspect` row")
    parser.add_argument("--inspect-cases", type=int, default=60,
                        help=f"corrupted replica directories (default 60; the first {len(INSPECT_KINDS)} one of each kind)")
    parser.add_argument("--stream-timeout", type=float, default=900.0,
                        help="seconds before a Spark run (a stream, a base checkpoint) counts as a hang (default 900)")
    parser.add_argument("--stream-runs", type=int, default=20,
                        help="most stream runs of the input row, bisection of a failed run included (default 20)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the inputs of non-clean cases are kept (default out/fuzz/SEED)")
    parser.add_argument("--python", default=default_python(), help="the interpreter that runs `-m replemu`")
    parser.add_argument("--verbose", action="store_true", help="print every case's verdict as it comes")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    print(f"seed {args.seed}  (replay: python scripts/fuzz.py --seed {args.seed} --cases {args.cases} "
          f"--inspect-cases {args.inspect_cases})", flush=True)
    keep = args.out or ROOT / "out" / "fuzz" / str(args.seed)
    table = Table(args.verbose)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="replemu-fuzz-") as tmp:
        work = Path(tmp)
        if args.cases:
            run_scenarios(args, table, work / "scenarios", keep)
        if args.cli:
            run_cli(args, table, work)
        if args.spark and args.stream:
            run_stream_row(args, table, work, keep)
        if args.spark and args.checkpoint:
            run_checkpoint_row(args, table, work)
        if args.inspect and args.inspect_cases:
            run_inspect_row(args, table, work, keep)
    print()
    print(table.markdown())
    print()
    print("kill -9: see scripts/chaos.py")
    print()
    if table.failures:
        print(f"{len(table.failures)} non-clean cases (inputs kept under {keep}):")
        for row, label, verdict, command, detail in table.failures:
            print(f"- [{row}] [{verdict}] {label}\n    $ {command}\n    {detail}")
    else:
        print("every case is clean")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0 if not table.failures else 1


if __name__ == "__main__":
    sys.exit(main())
