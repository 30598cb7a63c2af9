"""A failed stream says what broke in a couple of lines a person can act on; every trace goes to
the job's log file (issue 26, item 1)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUNDLED, ROOT, env_without_java
from replemu.compile import compile_scenarios
from streaming.failures import explain
from streaming.job import run_stream
from streaming.jvm_output import LogFile

FILES = sorted(BUNDLED.glob("*.yaml"))


def test_a_torn_offsets_file_names_the_file_and_the_repair(spark, tmp_path):
    """The last ``offsets/N`` emptied, as a crash during its write leaves it: the cause is Spark's
    innermost one, the file is named, and the way out is check + repair."""
    compile_scenarios(FILES, tmp_path / "events", split=3)
    run = lambda: run_stream(tmp_path / "events", tmp_path / "out", tmp_path / "ck", "kip320",  # noqa: E731
                             max_files_per_trigger=1, spark=spark, quiet=True)
    run()
    (tmp_path / "ck" / "offsets" / "2").write_bytes(b"")
    with pytest.raises(Exception) as caught:
        run()
    failure = explain(caught.value)
    assert (failure.kind, failure.cause, failure.place) == ("checkpoint", "Incomplete log file", "the checkpoint's logs")
    assert failure.path == str(tmp_path / "ck" / "offsets" / "2")
    first, action = failure.lines("kip320", str(tmp_path / "ck"), str(tmp_path / "out"), "LOG")
    assert first.endswith(f"Incomplete log file, reading the checkpoint's logs ({tmp_path / 'ck' / 'offsets' / '2'})")
    assert f"replemu checkpoint repair {tmp_path / 'ck'}" in action and action.endswith("every trace is in LOG")


def test_a_python_error_in_the_job_is_told_with_its_file_and_line():
    from streaming.processor import process_batch, stream_protocol
    from streaming.state_codec import empty_state

    with pytest.raises(Exception) as caught:  # a state whose held-back rows are not JSON
        process_batch("t", 0, [], {**empty_state("kip320"), "waiting": b"not json"}, stream_protocol("kip320"))
    failure = explain(caught.value)
    assert failure.kind == "python" and failure.cause.startswith("JSONDecodeError: ")
    assert failure.path.startswith("streaming/processor.py:") and failure.path.endswith("in process_batch")
    assert "a bug in replemu" in failure.lines("kip320", "ck", "out", "LOG")[1]


@pytest.mark.parametrize("clone", ["/home/me/replemu", "/srv/streaming/emulator", "/x/replemu/replemu", "/opt/a b/scenario_io"])
def test_a_frame_of_ours_is_named_as_the_repository_names_it_whatever_the_clone_is_called(clone):
    """Issue 46 item 1: a clone in a folder named like one of our packages (``replemu/`` most of
    all) still names ``streaming/processor.py``, not ``replemu/streaming/processor.py``."""
    from streaming.failures import own_path

    for rel in ("streaming/processor.py", "replemu/cli.py", "emulator/partition.py", "scenario_io/loader.py"):
        assert own_path(f"{clone}/{rel}") == rel
    assert own_path("/usr/lib/python3/site-packages/pyspark/sql/streaming/query.py") is None  # pyspark's, not ours
    assert own_path("/usr/lib/python3.11/json/decoder.py") is None


def test_a_python_error_in_a_clone_named_replemu_is_told_with_the_repository_path(tmp_path):
    """The end-to-end check of issue 46 item 1: the sources copied into a folder named ``replemu``
    (as ``git clone …/replemu`` makes), the job's Python error names ``streaming/processor.py``."""
    clone = tmp_path / "replemu"
    for package in ("emulator", "streaming", "scenario_io", "expectations", "replemu"):
        shutil.copytree(ROOT / package, clone / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    probe = ("from streaming.processor import process_batch, stream_protocol\n"
             "from streaming.state_codec import empty_state\n"
             "from streaming.failures import explain\n"
             "try:\n"
             "    process_batch('t', 0, [], {**empty_state('kip320'), 'waiting': b'not json'}, stream_protocol('kip320'))\n"
             "except Exception as e:\n"
             "    print(explain(e).path)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=clone, capture_output=True, text=True,
                          env={**env_without_java(), "PYTHONPATH": str(clone)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("streaming/processor.py:") and done.stdout.strip().endswith("in process_batch")


def test_the_log_rotates_and_keeps_every_line(tmp_path):
    log = LogFile(tmp_path / "logs" / "replemu.log", max_bytes=1000, backups=3)
    lines = [f"line {i:04d} " + "x" * 40 + "\n" for i in range(60)]  # ~3,100 bytes: three rotations
    for line in lines:
        log.write(line)
    log.close()
    files = [tmp_path / "logs" / name for name in ("replemu.log.3", "replemu.log.2", "replemu.log.1", "replemu.log")]
    assert all(f.stat().st_size <= 1000 for f in files)
    assert "".join(f.read_text() for f in files) == "".join(lines)


WORKLOAD = {"seed": 1, "partitions": 30, "steps_per_batch": 20, "max_steps": 40}  # 2 micro-batches (the 2 MB disk fills in the first: its Data Docs alone are larger)


def _stream(out: Path, ck: Path) -> subprocess.CompletedProcess:
    flags = [a for k, v in WORKLOAD.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    return subprocess.run([sys.executable, "-m", "replemu", "stream", "--workload", "clean", *flags, "--output", str(out),
                           "--checkpoint", str(ck), "--protocol", "kip320", "--no-spark-ui"], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("mount") is None or not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0,
                    reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_one_cause_and_after_more_space_the_same_command_finishes_identically(spark, tmp_path):
    """Output and checkpoint on a 2 MB tmpfs: the job stops with exit 3 and two lines naming "No
    space left on device" and what was being written, the traces in a log it names; grown to
    64 MB, the same command finishes with the results of a run that never failed."""
    from scenario_io.profiles import load_profiles
    from streaming.results import read_results
    from streaming.workload_source import WorkloadSpec

    disk = tmp_path / "small"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        failed = _stream(disk / "out", disk / "ck")
        assert failed.returncode == 3, failed.stderr[-2000:]
        told = failed.stderr.strip().splitlines()
        assert 2 <= len(told) <= 5, failed.stderr[-3000:]  # at most a GX line before the two
        stopped = next(i for i, line in enumerate(told) if line.startswith("replemu: the stream stopped"))
        assert "No space left on device, writing " in told[stopped]
        assert "free space on the disk that holds" in told[stopped + 1] and "restart the same command" in told[stopped + 1]
        assert "Traceback" not in failed.stderr and "\tat " not in failed.stderr
        log = Path(told[-1].rsplit("every trace is in ", 1)[1])
        assert "No space left on device" in log.read_text() and "Caused by" in log.read_text()  # kept for whoever digs
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        finished = _stream(disk / "out", disk / "ck")
        assert finished.returncode == 0, finished.stderr[-2000:]
        run_stream(None, tmp_path / "straight-out", tmp_path / "straight-ck", "kip320", spark=spark, quiet=True,
                   workload=WorkloadSpec.of(load_profiles()["clean"], **WORKLOAD))
        assert read_results(disk / "out") == read_results(tmp_path / "straight-out")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


class _RemovesTheOutput:
    """An observer that removes OUTPUT once micro-batch ``after`` landed, as ``rm -rf OUT`` would."""

    def __init__(self, after: int) -> None:
        self.after = after

    def on_spark_batch(self, kinds, batch_id: int, output_dir: Path, counts=None) -> None:
        if batch_id == self.after:
            shutil.rmtree(output_dir)

    def finish(self, output_dir: Path) -> None:
        pass


def test_the_output_directory_removed_mid_run_stops_the_stream_before_the_batch_commits(spark, tmp_path):
    """``rm -rf OUT`` while the stream runs: writing on would recreate OUT with the later
    micro-batches only and end in exit 0 (every earlier one silently lost); the sink stops the
    query before the batch commits, and the lines say what went and the two ways out."""
    from scenario_io.profiles import load_profiles
    from streaming.workload_source import WorkloadSpec

    out, ck = tmp_path / "out", tmp_path / "ck"
    workload = WorkloadSpec.of(load_profiles()["clean"], 1, 6, steps_per_batch=5, max_steps=20)  # 4 micro-batches
    with pytest.raises(Exception) as caught:
        run_stream(None, out, ck, "kip320", spark=spark, quiet=True, workload=workload, observer=_RemovesTheOutput(1))
    assert (ck / "commits" / "0").exists() and not (ck / "commits" / "1").exists()  # batch 1 is not taken as done
    failure = explain(caught.value)
    assert (failure.kind, failure.place) == ("output_gone", "the output")
    assert failure.cause == "the output directory vanished while the stream ran" and failure.path == str(out)
    first, action = failure.lines("kip320", str(ck), str(out), str(out / "logs" / "replemu.log"))
    assert first.endswith(f"the output directory vanished while the stream ran, writing the output ({out})")
    assert f"restore {out} from a copy" in action and f"move {ck} away and run the same command" in action
    assert "went with it" in action.rsplit(";", 1)[1]  # the log in OUT is gone too: not named as where the traces are


# What Spark and gRPC say for the faults of scripts/faults.py that cannot be made cheaply here (a
# killed worker, a stopped Connect server, torn checkpoint files: tests/test_checkpoint_repair.py
# makes those files), trimmed from what those runs left in their logs.
TEXTS = {
    "worker": ("py4j.protocol.Py4JJavaError: An error occurred while calling o61.awaitTermination.\n"
               ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 7.0 failed 1 times, most "
               "recent failure: Lost task 1.0 in stage 7.0 (TID 11) (localhost executor driver): org.apache.spark.SparkException: "
               "Python worker exited unexpectedly (crashed). Consider setting 'spark.python.worker.faulthandler.enabled'\n"
               "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:624)\n"
               "Caused by: java.io.EOFException\n\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)\n",
               ("worker", "Python worker exited unexpectedly (crashed)", None, None)),
    "connect": ('  File "/x/streaming/job.py", line 158, in run_stream\n    query.awaitTermination(0.5)\n'
                '  File "/x/pyspark/sql/connect/client/core.py", line 2456, in _handle_rpc_error\n'
                "pyspark.errors.exceptions.connect.SparkConnectGrpcException: <_MultiThreadedRendezvous of RPC that terminated with:\n"
                "\tstatus = StatusCode.UNAVAILABLE\n"
                '\tdetails = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:34249: Failed to connect to '
                'remote host: Connection refused"\n',
                ("connection", "the Spark Connect server 127.0.0.1:34249 does not answer (Connection refused)", None, None)),
    "connect server stopping": ('  File "/x/streaming/job.py", line 158, in run_stream\n'
                                '  File "/x/pyspark/sql/connect/client/core.py", line 2443, in _handle_rpc_error\n'
                                "pyspark.errors.exceptions.connect.UnknownException: (java.lang.IllegalStateException) Cannot "
                                "call methods on a stopped SparkContext.\nThis stopped SparkContext was created at:\n",
                                ("connection", "the Spark server stopped (Cannot call methods on a stopped SparkContext)", None,
                                 None)),
    "torn commit": ('  File "/x/streaming/job.py", line 158, in run_stream\n'
                    '  File "/x/pyspark/sql/streaming/query.py", line 225, in awaitTermination\n'
                    "pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] Query terminated with "
                    "exception: Unexpected end-of-input in field name\n"
                    "Caused by: com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input in field name\n"
                    "\tat org.apache.spark.sql.execution.streaming.checkpointing.CommitMetadata$.apply(CommitLog.scala:172)\n"
                    "\tat org.apache.spark.sql.execution.streaming.checkpointing.HDFSMetadataLog.getLatest(HDFSMetadataLog.scala:272)\n",
                    ("checkpoint", "Unexpected end-of-input in field name (a torn JSON file)", "the checkpoint's commits", None)),
    "metadata emptied": (": com.fasterxml.jackson.databind.exc.MismatchedInputException: No content to map due to end-of-input\n"
                         "\tat org.apache.spark.sql.execution.streaming.runtime.StreamMetadata$.read(StreamMetadata.scala:60)\n",
                         ("checkpoint", "No content to map due to end-of-input (an empty JSON file)", "the checkpoint's metadata",
                          None)),
    "RocksDB zip torn": (": org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during "
                         "loading state.  SQLSTATE: 58030\nCaused by: org.apache.hadoop.fs.ChecksumException: Checksum error: "
                         "file:/ck/state/0/1/10.zip at 2048 exp: -1774392682 got: -1358750829\n"
                         "\tat org.apache.spark.sql.execution.streaming.state.RocksDBFileManager.unzipBatchZipFileFromDfs(x:985)\n",
                         ("checkpoint", "Checksum error (a torn or altered file)", "the state store in the checkpoint",
                          "/ck/state/0/1/10.zip")),
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_each_fault_of_scripts_faults_is_told_by_its_cause(name):
    text, (kind, cause, place, path) = TEXTS[name]
    failure = explain(text)
    assert (failure.kind, failure.cause, failure.place, failure.path) == (kind, cause, place, path)
    action = failure.lines("kip320", "/ck", "/out", "LOG")[1]
    assert "a bug in replemu" not in action
    if name == "metadata emptied":
        assert failure.lines("kip320", "/ck", "/out", "LOG")[0].endswith("(/ck/metadata)")


@pytest.mark.parametrize("command", [
    ["stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "5", "--protocol", "hw"],
    ["state"],
])
def test_a_driver_jvm_that_cannot_start_is_one_line_naming_the_java_it_tried(tmp_path, command):
    """JAVA_HOME naming a directory without Java (a common slip): exit 3 and one line that says
    which Java was tried and what Spark needs, not "a bug in replemu"."""
    out, ck = tmp_path / "out", tmp_path / "ck"
    if command == ["state"]:  # a checkpoint with something in it, so that `state` gets as far as Spark
        for log in ("offsets", "commits"):
            (ck / log).mkdir(parents=True)
            (ck / log / "0").write_text("v1\n{}\n")
        (ck / "state" / "0" / "0").mkdir(parents=True)
        argv = [*command, str(ck)]
    else:
        argv = [*command, "--output", str(out), "--checkpoint", str(ck)]
    done = subprocess.run([sys.executable, "-m", "replemu", *argv], cwd=ROOT, env=env_without_java(tmp_path / "no-java"),
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("replemu: the compiled modules are stale")]
    assert done.returncode == 3 and len(lines) == 1, done.stderr
    assert f"JAVA_HOME={tmp_path / 'no-java'} has no bin/java" in lines[0] and "Java 17" in lines[0], lines[0]
    assert "bug in replemu" not in lines[0] and "Traceback" not in done.stderr


def test_a_jvm_that_exits_with_java_present_points_at_its_options(monkeypatch, tmp_path):
    """Java is there but the JVM exited at start (a bad option, too little memory): the line says
    which Java and where the options come from, not to install Java."""
    from streaming.session import java_problem

    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    line = java_problem(RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."))
    assert line.startswith(f"the driver's JVM did not start (JAVA_HOME={tmp_path / 'jdk'}; pyspark: [JAVA_GATEWAY_EXITED]")
    assert "REPLEMU_JVM_OPTIONS" in line and "Java 17" not in line
