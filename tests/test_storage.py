"""Output and checkpoint on a Hadoop-compatible URI: the job writes through Hadoop's FileSystem
(``streaming.storage``; the driver's JVM, and the executors that write the outputs).  ``file://``
URIs take that very path on this machine (Hadoop's local filesystem), so the bytes can be compared
with a run on plain paths.

The restart (``replemu stream``) moves the job to ``local-cluster[2,1,1024]`` — a standalone master and two workers
inside the driver's JVM, two executor JVMs each with Python workers of its own, all on this
machine — as someone who tried a job on one machine continues it on a cluster: the checkpoint
holds the number of state partitions, and the results are those of one uninterrupted local run."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SPARK_HOME
from processes import ClusterWatch
from streaming.checkpoint import LEASE_S, LOCK_FILE, CheckpointError, Claim, Lease
from streaming.job import run_stream
from streaming.output_layout import same_parquet_content
from streaming.storage import LocalStore, is_uri, join

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS, STEPS_PER_BATCH, SEED = 6, 10, 3


def parquet_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def cli_stream(out: str, ck: str, max_steps: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "replemu", "stream", "--workload", "hard", "--partitions", str(PARTITIONS),
            "--seed", str(SEED), "--steps-per-batch", str(STEPS_PER_BATCH), "--max-steps", str(max_steps),
            "--protocol", "hw", "--output", out, "--checkpoint", ck, *extra]


def run_watched(cmd: list[str], stdout: Path, deadline_s: float = 1200) -> tuple[subprocess.Popen, str, ClusterWatch]:
    """Run ``cmd`` to its end (a generous deadline: a loaded 2-core machine took ~600 s), polling
    its processes; Spark's work directories of its application are removed after."""
    with open(stdout, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.PIPE, text=True, start_new_session=True)
    watch = ClusterWatch(proc.pid, stdout)
    try:
        deadline = time.monotonic() + deadline_s
        while proc.poll() is None and time.monotonic() < deadline:
            watch.poll()
            time.sleep(0.2)
        stderr = proc.communicate(timeout=max(1, deadline - time.monotonic()))[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        app = re.search(r"Spark application (app-\S+),", stdout.read_text())
        if app:  # local-cluster keeps each executor's work directory under SPARK_HOME/work
            shutil.rmtree(SPARK_HOME / "work" / app.group(1), ignore_errors=True)
    return proc, stderr, watch


def test_a_stream_on_hadoop_uris_continued_on_a_local_cluster_writes_the_bytes_of_one_local_run(spark, tmp_path):
    from expectations.suites import ExpectationsObserver
    from scenario_io.profiles import load_profiles
    from streaming.checkpoint import claim_run, run_identity
    from streaming.workload_source import WorkloadSpec

    out, ck = tmp_path / "uri-out", tmp_path / "uri-ck"
    # micro-batches 0 and 1 on this process's local[2] session, claimed and recorded as `replemu stream`
    # does (the identity of its arguments; the lease a file through Hadoop): one JVM start fewer
    first = WorkloadSpec.of(load_profiles()["hard"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=20)
    identity = run_identity(protocol="hw", knobs={}, input_dir=None, workload=first, shuffle_partitions=2, state_store=None,
                            compact_min_records=None, gap_timeout_ms=60000)
    with claim_run(f"file://{ck}", f"file://{out}", identity, spark=spark):
        assert (ck / LOCK_FILE).exists()  # a lease, written through Hadoop
        run_stream(None, f"file://{out}", f"file://{ck}", "hw", spark=spark, quiet=True, workload=first,
                   observer=ExpectationsObserver(), shuffle_partitions=2)
    # the same job continued by the command on several executor JVMs: it reads the identity back
    # through Hadoop (the Spark UI on: the default)
    second, stderr, watch = run_watched(cli_stream(f"file://{out}", f"file://{ck}", 30, "--master", "local-cluster[2,1,1024]"),
                                        tmp_path / "second.out")
    printed = (tmp_path / "second.out").read_text()
    assert second.returncode == 0, stderr[-3000:]
    assert "2 state partitions" in printed and "master local-cluster[2,1,1024]" in printed
    # two executor JVMs, each with Python workers of its own (a third may flash up while the
    # application stops: the standalone master replaces an executor that exits before it is told)
    assert len(watch.workers_of) == 2 and watch.max_alive >= 2, \
        f"executor JVMs {sorted(watch.executors)}, their Python workers {watch.workers_of}"
    assert watch.ui in ({"::ffff:127.0.0.1"}, {"127.0.0.1"}), watch.ui  # a local master's UI: this machine only

    straight = WorkloadSpec.of(load_profiles()["hard"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=30)
    run_stream(None, tmp_path / "plain-out", tmp_path / "plain-ck", "hw", spark=spark, quiet=True, workload=straight,
               observer=ExpectationsObserver())
    got, want = parquet_files(out), parquet_files(tmp_path / "plain-out")
    assert set(got) == set(want) and any(k.startswith("validations/") for k in want)
    assert any(k.startswith("timeline/batch_id=2/") for k in want)  # the batch the cluster ran is compared too
    # outputs and expectation results: the same files with the same schema, metadata and rows (the
    # bytes of Spark's Parquet writer differ between JVMs: streaming.output_layout.same_parquet_content)
    assert [k for k in sorted(want) if not same_parquet_content(out / k, tmp_path / "plain-out" / k)] == []
    assert any(out.rglob(".part-00000.parquet.crc"))  # written by Hadoop's local filesystem, not by os calls
    assert (out / "data_docs" / "index.html").exists()  # GX wrote them locally; they were copied to the URI
    assert not (out / LOCK_FILE).exists() and not (ck / LOCK_FILE).exists()  # the leases were released
    assert json.loads((ck / "replemu-identity.json").read_text())["identity"]["protocol"] == "hw"
    assert len((out / "progress.jsonl").read_text().splitlines()) >= 3

    # the readers take local directories: a URI is one clear line, exit 2
    proc = subprocess.run([sys.executable, "-m", "replemu", "results", f"file://{out}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "copy the job's output here first" in proc.stderr and "Traceback" not in proc.stderr


def test_a_lease_refuses_a_second_job_and_is_taken_over_once_its_holder_stopped_renewing(tmp_path):
    store = LocalStore(tmp_path / "out")
    store.mkdirs()
    first = Claim()
    first.leases.append(Lease(store, "output directory", first))
    with pytest.raises(CheckpointError, match=r"in use by another running job \(pid \d+ on .*lease renewed 1 s ago"):
        Lease(store, "output directory", Claim())
    first.release()
    assert not store.exists(LOCK_FILE)

    stale = {"holder": "pid 1 on elsewhere", "renewed": time.time() - LEASE_S - 1}
    store.write_bytes(LOCK_FILE, json.dumps(stale).encode())
    claim = Claim()
    claim.leases.append(Lease(store, "output directory", claim))
    assert claim.notes == [f"output directory {store.location}: took over the lease of a job that ended without releasing it "
                           f"(pid 1 on elsewhere)"]
    claim.release()


def test_uris_are_told_from_paths_and_joined_without_losing_the_authority():
    assert is_uri("hdfs://nn:8020/x") and is_uri("s3a://bucket/p") and is_uri("file:///tmp/x")
    assert not is_uri("/tmp/x") and not is_uri("relative/dir") and not is_uri("c:/x")
    assert join("hdfs://nn:8020/out/", "kip101") == "hdfs://nn:8020/out/kip101"
    assert join("/tmp/out", "kip101") == "/tmp/out/kip101"
