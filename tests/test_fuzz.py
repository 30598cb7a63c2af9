"""Hostile input never crashes or hangs ``replemu``: scenario files and command lines (tests/hostile.py).

* Every input the issue reports (``hostile.issue_examples()``): refused, exit 2.
* Every generator of hostile scenario files, on four seed files each, and a derandomized
  Hypothesis sample of all of them: ``replemu run FILE --protocol all --json`` in-process
  (``replemu.cli.main``) lets no exception escape, answers within ``CASE_SECONDS``, exits 0/1 on a
  valid file (four result objects on stdout) and 2 on an invalid one with one short stderr line
  naming the file; an "either" case does one of the two.
* Every bad command line of the issue (``hostile.CLI_CASES``): exit 2, a message, no traceback.
  Those that would start Spark run as subprocesses and must be refused within ``FAIL_FAST``
  seconds, before the JVM starts.  The three ``state`` cases that need a real stream checkpoint
  (building one takes ~30 s of Spark) run too (``REPLEMU_FUZZ_SPARK=0`` skips them locally);
  ``scripts/fuzz.py`` always runs them.

``python scripts/fuzz.py`` measures the full table (600 files, every command line).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import hostile
from processes import kill_job
from replemu.cli import main

CASE_SECONDS = 5.0  # CPU seconds of one in-process run of a hostile file (or a bad command line)
CASE_WALL_SECONDS = 60.0  # and its wall-clock time: what is left to catch a run that waits forever
FAIL_FAST = 15.0  # a command line that would start Spark must be refused within this


class CaseTimeout(BaseException):
    """Raised by SIGALRM inside the product (a BaseException: ``except Exception`` cannot swallow it)."""


@contextmanager
def time_limit(seconds: float, wall_seconds: float = CASE_WALL_SECONDS):
    """``CaseTimeout`` once this process has spent ``seconds`` of CPU (a loop that does not end),
    or ``wall_seconds`` have passed (a wait that does not end).  CPU time, not the clock, is the
    tight bound: other work on a loaded machine slows the clock's answer, never the CPU spent."""
    def expire(signum, frame):
        raise CaseTimeout()

    old = {sig: signal.signal(sig, expire) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, wall_seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in old.items():
            signal.signal(sig, handler)


def run_main(argv: list[str], capsys, seconds: float = CASE_SECONDS):
    """(status, stdout, stderr, seconds, timed out, escaped exception text) of ``replemu ARGV`` in-process."""
    capsys.readouterr()
    status, escaped, timed_out = None, "", False
    start = time.monotonic()
    try:
        with time_limit(seconds):
            status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except CaseTimeout:
        timed_out = True
    except BaseException:  # noqa: BLE001 - the point is that nothing escapes
        escaped = "".join(traceback.format_exc().splitlines(keepends=True)[-6:])
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    return status, out, err, elapsed, timed_out, escaped


def check_case(case: hostile.Case, directory: Path, capsys) -> str:
    """'' when ``case`` runs cleanly, else what went wrong."""
    directory.mkdir(parents=True, exist_ok=True)
    path = case.write(directory)
    status, out, err, elapsed, timed_out, escaped = run_main(["run", str(path), "--protocol", "all", "--json"], capsys)
    if escaped:
        return f"{case.label} [expected {case.expected}]: an exception escaped main():\n{escaped}"
    verdict = hostile.judge_scenario_run(case, status, out, err, path.name, timed_out=timed_out)
    if verdict.verdict == hostile.CLEAN:
        return ""
    if timed_out:
        detail = f"no answer within {CASE_SECONDS} s of CPU ({elapsed:.1f} s of the clock)"
    else:
        detail = f"{verdict.detail}; exit {status} after {elapsed:.1f} s; stderr: {hostile.shown_stderr(err)!r}"
    return f"{case.label} [expected {case.expected}]: {verdict.verdict}: {detail}"


# -- hostile scenario files -------------------------------------------------------------------

SWEEP_SEEDS = 4  # cases per generator in the sweep (on different seed files)


def test_generators_are_deterministic_and_classify_every_case():
    for name in hostile.GENERATORS:
        for stem in hostile.seed_names()[:3]:
            a, b = hostile.make_case(name, stem, 7), hostile.make_case(name, stem, 7)
            assert a == b, f"{name}/{stem}: not deterministic"
            assert a.expected in hostile.CLASSES and a.label.startswith(f"{name}/{stem}#7: ")
            assert a.expected != hostile.EITHER or a.note, f"{a.label}: an 'either' case must say why"
    batch = list(hostile.generate(11, 2 * len(hostile.GENERATORS)))
    assert {c.generator for c in batch} == set(hostile.GENERATORS)
    assert {c.expected for c in batch} == set(hostile.CLASSES)


@pytest.mark.parametrize("k", range(len(hostile.issue_examples())), ids=[w for w, _ in hostile.issue_examples()])
def test_issue_example(k, tmp_path, capsys):
    """Each input the issue reports, on a bundled scenario: refused with exit 2, quickly, one line."""
    case = hostile.make_case("issue-examples", "s1-kip101-scenario-1", k)
    problem = check_case(case, tmp_path, capsys)
    assert not problem, problem


@pytest.mark.parametrize("generator", list(hostile.GENERATORS))
def test_every_generator(generator, tmp_path, capsys):
    """Each kind of hostile file, on four seed files, with fixed numbers: every failure listed."""
    stems = hostile.seed_names()
    first = list(hostile.GENERATORS).index(generator)
    problems = []
    for k in range(SWEEP_SEEDS):
        case = hostile.make_case(generator, stems[(first + 3 * k) % len(stems)], 1000 + k)
        problem = check_case(case, tmp_path / str(k), capsys)
        if problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


@settings(max_examples=150, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=hostile.case_strategy())
def test_hostile_scenario_files(case, tmp_path, capsys):
    """A derandomized sample over every generator and seed file (no shrinking: a label says it all)."""
    problem = check_case(case, tmp_path / hostile.digest(case.label.encode()), capsys)
    assert not problem, problem


# -- bad command lines ------------------------------------------------------------------------

SPARK_FIXTURES = os.environ.get("REPLEMU_FUZZ_SPARK", "1") == "1"  # REPLEMU_FUZZ_SPARK=0 skips the three


def _cli_subprocess(argv: list[str], cwd: Path, timeout: float):
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "replemu", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, time.monotonic() - start, False
    except subprocess.TimeoutExpired:
        kill_job({proc.pid})
        out, err = proc.communicate()
        return None, out, err, time.monotonic() - start, True


@pytest.fixture(scope="module")
def cli_fixtures(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("cli")

    def cli(argv):
        status, out, err, _, _ = _cli_subprocess(argv, root, 600)
        return status, out, err

    def stream(events: str, output: str, checkpoint: str) -> None:  # the checkpoint the `state` cases read
        from streaming.job import run_stream

        run_stream(events, output, checkpoint, "kip320", spark=request.getfixturevalue("spark"), quiet=True)

    return hostile.cli_fixtures(root / "fx", cli, checkpoint=SPARK_FIXTURES, stream=stream), root


@pytest.mark.parametrize("case", hostile.CLI_CASES, ids=[c.label for c in hostile.CLI_CASES])
def test_bad_command_line(case, cli_fixtures, capsys, monkeypatch):
    fx, root = cli_fixtures
    if case.needs and not SPARK_FIXTURES:
        pytest.skip("needs a real stream checkpoint (~30 s of Spark): set REPLEMU_FUZZ_SPARK=1, or run scripts/fuzz.py")
    fx = hostile.fresh_dir(fx, case.label)
    argv = case.argv(fx)
    shown = "replemu " + " ".join(argv)
    if case.spark or case.isolate:
        limit = 180 if case.needs else (FAIL_FAST if case.spark else 10.0)
        status, _, err, elapsed, timed_out = _cli_subprocess(argv, root, limit)
        escaped = ""
    else:
        monkeypatch.chdir(root)
        status, _, err, elapsed, timed_out, escaped = run_main(argv, capsys, seconds=10.0)
    assert not escaped, f"{shown}: an exception escaped main():\n{escaped}"
    verdict = hostile.judge_cli_run(case, status, err, fx, elapsed, timed_out=timed_out, fail_fast=FAIL_FAST)
    assert verdict.verdict == hostile.CLEAN, (
        f"{shown}: {verdict.verdict}: {verdict.detail or ''} (exit {status}, {elapsed:.1f} s); "
        f"stderr: {hostile.shown_stderr(err)!r}")
