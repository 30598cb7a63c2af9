"""kill -9 of a whole running job (driver, JVM and Python workers) at 1,000 partitions, restarted
from its checkpoint: the outputs are byte-identical to an uninterrupted run — nothing lost,
nothing applied twice."""

import subprocess
import sys
import time
from pathlib import Path

from processes import kill_job
from streaming.job import run_stream

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS, STEPS_PER_BATCH, MAX_STEPS, SEED = 1000, 5, 20, 3


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def workload():
    from scenario_io.profiles import load_profiles
    from streaming.workload_source import workload_options

    return workload_options(load_profiles()["clean"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=MAX_STEPS)


def start_cli(out: Path) -> subprocess.Popen:
    """``replemu stream`` in its own session, so a kill can find the JVM and workers (see tests/processes.py)."""
    cmd = [sys.executable, "-m", "replemu", "stream", "--workload", "clean", "--partitions", str(PARTITIONS),
           "--seed", str(SEED), "--steps-per-batch", str(STEPS_PER_BATCH), "--max-steps", str(MAX_STEPS),
           "--protocol", "kip320", "--output", str(out / "output"), "--checkpoint", str(out / "checkpoint")]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def completed_batches(out: Path) -> int:
    progress = out / "output" / "progress.jsonl"
    return len(progress.read_text().splitlines()) if progress.exists() else 0


def kill_when(proc: subprocess.Popen, ready, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, f"the job ended before the kill point: {proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "the kill point never came"
        time.sleep(0.02)
    kill_job({proc.pid})  # driver, JVM and Python workers at once
    proc.wait()


def test_kill_9_mid_batch_and_mid_sink_then_restart_gives_the_uninterrupted_bytes(spark, tmp_path):
    from expectations.suites import ExpectationsObserver

    straight = run_stream(None, tmp_path / "straight", tmp_path / "straight-ck", "kip320", spark=spark, quiet=True,
                          workload=workload(), observer=ExpectationsObserver())  # as `replemu stream` runs it
    assert [s.batch_id for s in straight] == [0, 1, 2, 3]

    out = tmp_path / "killed"
    # 1: as soon as batch 0 completed, i.e. inside batch 1's state function.
    kill_when(start_cli(out), lambda: completed_batches(out) >= 1)
    # 2: once batch 2's first output file landed, i.e. inside the sink, before Spark's commit.
    kill_when(start_cli(out), lambda: any((out / "output").glob("*/batch_id=2/part-*.parquet")))
    finish = start_cli(out)
    assert finish.wait(timeout=600) == 0, finish.stderr.read().decode()[-2000:]

    expected, got = tree_bytes(tmp_path / "straight"), tree_bytes(out / "output")
    assert "validations/batch_id=3/part-00000.parquet" in expected  # the GX results are outputs too
    assert sorted(got) == sorted(expected)
    assert got == expected
