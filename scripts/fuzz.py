"""Re-measure the fuzzing table of the hostile-input issue: scenario files and bad command lines.

    python scripts/fuzz.py [--cases 600] [--seed S] [--timeout 20] [--jobs N] [--slow 5] [--no-spark] [--out DIR]

Generates ``--cases`` hostile scenario files (``tests/hostile.py``: mutated bundled scenarios,
alias bombs, deep nesting, bad bytes, bad ``expect`` blocks ...) and runs each as a user does,
``replemu run FILE --protocol all --json``, in its own process (with ``--timeout`` and a 4 GiB
address-space limit); then every bad command line of ``hostile.CLI_CASES``.  Each case is
classified:

* **clean**: a valid file replayed (exit 0/1, four result objects on stdout); an invalid file or
  command line refused with exit 2 and a one-line message (naming the file); an "either" case
  one of the two;
* **traceback**: "Traceback" on stderr, or an exit status other than 0/1/2;
* **hang/timeout**: no answer within ``--timeout`` seconds, or slower than ``--slow`` seconds
  (a command that would start Spark must be refused before the JVM starts: within
  ``--fail-fast`` seconds and without Spark's output);
* **silently accepted**: an invalid case that exited 0/1;
* **other**: a valid file refused, or an exit 2 whose message is not one short line naming the
  file (or the bad argument).

Prints the seed first, progress, a markdown table and every non-clean case (label, command,
last stderr line); the files of the non-clean scenario cases are kept under ``--out``
(default ``out/fuzz/<seed>``) to replay them.  Exit status 0 only when every case is clean.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import hostile  # noqa: E402

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
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    return (None if timed_out else proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
            time.monotonic() - start, timed_out)


class Table:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, int]] = {}
        self.failures: list[tuple[str, str, str, str, str]] = []  # row, label, verdict, command, detail

    def add(self, row: str, label: str, outcome: hostile.Outcome, command: str, stderr: str) -> None:
        counts = self.rows.setdefault(row, {"cases": 0, **{v: 0 for v in hostile.VERDICTS}})
        counts["cases"] += 1
        counts[outcome.verdict] += 1
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
                        help="skip the `state` cases that need a real stream checkpoint (building one takes ~30 s)")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="scenario files only")
    parser.add_argument("--out", type=Path, default=None, help="where non-clean scenario files are kept (default out/fuzz/SEED)")
    parser.add_argument("--python", default=default_python(), help="the interpreter that runs `-m replemu`")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    print(f"seed {args.seed}  (replay: python scripts/fuzz.py --seed {args.seed} --cases {args.cases})", flush=True)
    keep = args.out or ROOT / "out" / "fuzz" / str(args.seed)
    table = Table()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="replemu-fuzz-") as tmp:
        work = Path(tmp)
        if args.cases:
            run_scenarios(args, table, work / "scenarios", keep)
        if args.cli:
            run_cli(args, table, work)
    print()
    print(table.markdown())
    print()
    if table.failures:
        print(f"{len(table.failures)} non-clean cases (scenario files kept under {keep}):")
        for row, label, verdict, command, detail in table.failures:
            print(f"- [{verdict}] {label}\n    $ {command}\n    {detail}")
    else:
        print("every case is clean")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0 if not table.failures else 1


if __name__ == "__main__":
    sys.exit(main())
