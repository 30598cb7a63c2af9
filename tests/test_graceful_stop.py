"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) ends an unbounded stream
after its running micro-batch with exit 0; the same command continues from the checkpoint, and
the results equal an uninterrupted run of the same steps."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from processes import job_processes
from streaming.job import run_stream
from streaming.results import read_results

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS, STEPS_PER_BATCH, SEED = 20, 5, 1


def batches(out: Path) -> int:
    progress = out / "progress.jsonl"
    return len(progress.read_text().splitlines()) if progress.exists() else 0


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def command(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "replemu", "stream", "--workload", "clean", "--partitions", str(PARTITIONS), "--seed", str(SEED),
            "--steps-per-batch", str(STEPS_PER_BATCH), "--trigger", "processing-time=1s", "--protocol", "kip320",
            "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), *extra]


def run_until(tmp_path: Path, at_least: int, *extra: str) -> tuple[int, str, str]:
    proc = subprocess.Popen(command(tmp_path, *extra), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while batches(tmp_path / "out") < at_least:
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.2)
    # Ctrl-C in a terminal goes to its foreground process group: only the driver may be in it; a
    # JVM or Python worker there would die with the running micro-batch (pyspark's workers reset
    # SIGINT to raise KeyboardInterrupt)
    procs = job_processes({proc.pid})
    assert any("java" in cmd for _, _, cmd in procs) and any("pyspark.daemon" in cmd for _, _, cmd in procs), procs
    in_group = [cmd for pid, _, cmd in procs if _pgid(pid) == proc.pid]
    assert not [cmd for cmd in in_group if "java" in cmd or "pyspark" in cmd], in_group
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_ctrl_c_stops_after_the_running_batch_and_the_same_command_continues(spark, tmp_path):
    status, out, err = run_until(tmp_path, 1, "--shuffle-partitions", "3")
    assert status == 0, err[-2000:]
    assert "3 state partitions" in out
    assert "SIGINT: stopping after the running micro-batch" in err and "Traceback" not in err
    assert "continue with the same command" in out
    first = sorted(int(p.name.split("=")[1]) for p in (tmp_path / "out" / "summary").iterdir())
    assert first == list(range(len(first)))  # every micro-batch it started was finished and committed

    status, out, err = run_until(tmp_path, batches(tmp_path / "out") + 1)  # no --shuffle-partitions: the checkpoint's
    assert status == 0, err[-2000:]
    assert "3 state partitions" in out
    assert {json.loads(f.read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"]
            for f in (tmp_path / "ck" / "offsets").iterdir() if f.name.isdigit()} == {"3"}
    assert sorted(p.name for p in (tmp_path / "ck" / "state" / "0").iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    refused = subprocess.run(command(tmp_path, "--shuffle-partitions", "4"), cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "shuffle_partitions: checkpoint 3, this run 4" in refused.stderr, refused.stderr
    done = sorted(int(p.name.split("=")[1]) for p in (tmp_path / "out" / "summary").iterdir())
    assert done == list(range(len(done))) and len(done) > len(first)

    from scenario_io.profiles import load_profiles
    from streaming.workload_source import WorkloadSpec

    straight = WorkloadSpec.of(load_profiles()["clean"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=STEPS_PER_BATCH * len(done))
    run_stream(None, tmp_path / "straight", tmp_path / "straight-ck", "kip320", spark=spark, quiet=True, workload=straight)
    assert read_results(tmp_path / "out") == read_results(tmp_path / "straight")


RUNNER = "/v/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/sql/streaming/python_streaming_source_runner.py"
SERIALIZERS = "/v/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/serializers.py"
DAEMON = "/v/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/daemon.py"


def test_pysparks_tracebacks_of_a_closed_socket_at_stop_are_dropped_and_everything_else_passes():
    """What the JVM's processes printed when a query stopped (seen in CI): dropped; a real error,
    a traceback of our code or any other line passes whole and in order."""
    from streaming.jvm_output import ShutdownNoise

    shutdown = [
        "Traceback (most recent call last):\n", f'  File "{RUNNER}", line 265, in main\n',
        f'  File "{SERIALIZERS}", line 604, in read_int\n', "EOFError\n", "\n",
        "During handling of the above exception, another exception occurred:\n", "\n",
        "Traceback (most recent call last):\n", f'  File "{RUNNER}", line 299, in main\n',
        '  File "/usr/lib/python3.11/socket.py", line 724, in write\n', "BrokenPipeError: [Errno 32] Broken pipe\n",
        "Traceback (most recent call last):\n", f'  File "{DAEMON}", line 264, in manager\n',
        f'  File "{DAEMON}", line 95, in worker\n', "BrokenPipeError: [Errno 32] Broken pipe\n",
    ]
    ours = ["Traceback (most recent call last):\n", '  File "/work/streaming/processor.py", line 3, in step\n',
            "    raise ValueError('x')\n", "ValueError: x\n"]
    real = ["Traceback (most recent call last):\n", f'  File "{RUNNER}", line 120, in main\n',
            "MemoryError\n"]

    def run(lines):
        f = ShutdownNoise()
        return [out for line in lines for out in f.feed(line)] + f.close()

    assert run(["batch 3: 20 rows\n", *shutdown, "stopped\n"]) == ["batch 3: 20 rows\n", "stopped\n"]
    assert run(shutdown) == []
    assert run(["a\n", *ours, "b\n"]) == ["a\n", *ours, "b\n"]
    assert run(real) == real
    f = ShutdownNoise()
    assert [o for line in ours for o in f.feed(line)] == ours  # a real traceback is not held back
