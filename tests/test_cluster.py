"""The stream job beyond one JVM gives the results of a ``local[2]`` run:

* on a standalone cluster — pyspark's own master and two workers (``spark-class
  org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on 127.0.0.1, one core each;
  the driver is killed (SIGKILL of its process groups) mid-stream and the same command restarted;
* through Spark Connect — a server started from pyspark's own ``sbin/start-connect-server.sh``,
  where the foreachBatch sink, the Python data source and the state function run in the server's
  Python processes and only the listener and the driving loop run in the client.

Each compares every output kind's rows per micro-batch (``conftest.output_rows``: sorted rows, since
the Parquet files inside a micro-batch are named and split by the Spark tasks that wrote them,
which differ between set-ups; the GX validations included) and ``replemu results --json``.

``local-cluster[2,1,1024]`` (two executor JVMs, each with its own Python workers) is checked by
``tests/test_storage.py``, where a job started on one JVM is continued on it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, SPARK_HOME, output_rows, replemu
from processes import kill_job, listening_addresses

# seed 5: under workload generator 2 its 8 partitions break invariants 4 times in 30 steps (seed 1: none)
WORKLOAD = ["--workload", "hard", "--partitions", "8", "--seed", "5", "--steps-per-batch", "10", "--max-steps", "30",
            "--protocol", "kip320"]


def assert_same_outputs(out: Path, reference: Path) -> None:
    got, want = output_rows(out), output_rows(reference)
    assert want and ("validations", 0) in want  # the GX results are outputs too
    assert sorted(got) == sorted(want)
    assert [key for key in want if got[key] != want[key]] == []
    results = [replemu("results", str(d), "--json") for d in (out, reference)]
    assert [r.returncode for r in results] == [0, 0], results[0].stderr + results[1].stderr
    assert results[0].stdout == results[1].stdout


@pytest.fixture(scope="module")
def local_output(spark, tmp_path_factory) -> Path:
    """The reference: the same workload on ``local[2]`` (the shared session; what ``replemu stream
    --master local[2]`` runs: the expectation suites observe it, 2 state partitions)."""
    from expectations.suites import ExpectationsObserver
    from scenario_io.profiles import load_profiles
    from streaming.job import run_stream
    from streaming.workload_source import WorkloadSpec

    root = tmp_path_factory.mktemp("local")
    workload = WorkloadSpec.of(load_profiles()["hard"], 5, 8, steps_per_batch=10, max_steps=30)
    stats = run_stream(None, root / "out", root / "ck", "kip320", spark=spark, quiet=True, workload=workload,
                       observer=ExpectationsObserver(), shuffle_partitions=2)
    assert len(stats) == 3 and sum(s.violations for s in stats) > 0  # violations and errors are compared too
    return root / "out"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(condition, what: str, alive=(), deadline_s: float = 600, log=lambda: ""):
    """Poll ``condition`` until it returns something true (returned); fail naming ``what`` when the
    generous deadline passes or a process of ``alive`` ended."""
    deadline = time.monotonic() + deadline_s
    while not (result := condition()):
        ended = [p.args for p in alive if p.poll() is not None]
        assert not ended and time.monotonic() < deadline, f"{what}: never happened ({ended or 'deadline'})\n{log()}"
        time.sleep(0.2)
    return result


def _master_state(ui_port: int) -> dict:
    """The standalone master's state (its web UI's JSON), {} while it does not answer."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            return json.load(answer)
    except OSError:
        return {}


@pytest.fixture
def standalone_cluster(tmp_path):
    """pyspark's own standalone master and two workers (1 core, 1 GiB each) on 127.0.0.1, on free
    ports; work directories and logs under ``tmp_path``; every process of theirs (the executors
    and their Python workers too) killed at the end, even when the test failed.

    Yields ``(master URL, master UI port, [each worker's work directory])``."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_DAEMON_JAVA_OPTS": os.environ.get("REPLEMU_JVM_OPTIONS", ""),  # the master's and workers' JVMs
           "SPARK_LOG_DIR": str(tmp_path / "cluster-logs"), "SPARK_NO_DAEMONIZE": "1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui = _free_port(), _free_port()
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []

    def start(name: str, argv: list[str]) -> None:
        with open(logs / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen([spark_class, *argv], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))

    def log() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(logs.glob("*.log")))

    work_dirs = [tmp_path / f"worker-{i}" for i in (1, 2)]
    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", str(ui)])
        _wait_for(lambda: _master_state(ui).get("status") == "ALIVE", "the master is up", procs, log=log)
        for i, work in enumerate(work_dirs, 1):
            start(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                                  "--cores", "1", "--memory", "1g", "--work-dir", str(work), "--webui-port", str(_free_port())])
        _wait_for(lambda: _master_state(ui).get("aliveworkers") == 2, "two workers registered", procs, log=log)
        yield f"spark://127.0.0.1:{port}", ui, work_dirs
    finally:
        kill_job({p.pid for p in procs})  # master, workers, executor JVMs and their Python workers
        for p in procs:
            p.wait()


def test_on_a_standalone_cluster_a_driver_killed_mid_stream_and_restarted_gives_local_results(
        tmp_path, standalone_cluster, local_output):
    master, ui, work_dirs = standalone_cluster
    out, ck = tmp_path / "out", tmp_path / "ck"
    cmd = [sys.executable, "-m", "replemu", "stream", *WORKLOAD, "--master", master, "--shuffle-partitions", "2",
           "--no-spark-ui", "--output", str(out), "--checkpoint", str(ck)]
    # a cluster master forces no address; on this one machine the driver binds to 127.0.0.1 like the cluster
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    def landed() -> int:  # micro-batches completed (the driver's progress listener, one line each)
        progress = out / "progress.jsonl"
        return len(progress.read_text().splitlines()) if progress.exists() else 0

    # 1: the driver (its Python, its JVM and their Python processes) killed once micro-batch 0 landed
    with open(tmp_path / "first.err", "w") as err:
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        _wait_for(lambda: landed() >= 1, "micro-batch 0 landed", [first], deadline_s=900,
                  log=lambda: (tmp_path / "first.err").read_text()[-2000:])
        assert landed() < 3, "the job finished before the kill"
    finally:
        kill_job({first.pid})
        first.wait()
    # the master sees the driver gone and ends its application (its executors with it)
    _wait_for(lambda: not _master_state(ui).get("activeapps", [None]), "the killed application ended")

    # 2: the same command, restarted from the checkpoint, finishes the stream
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    assert landed() >= 3
    # both applications (the killed one and the restart) ran executors on both workers
    state = _wait_for(lambda: (st := _master_state(ui)) and not st["activeapps"] and st, "the restart's application ended")
    apps = [app["id"] for app in state["completedapps"]]
    assert len(apps) == 2 and state["aliveworkers"] == 2, state
    for work in work_dirs:
        assert sorted(d.name for d in work.iterdir() if d.name.startswith("app-")) == sorted(apps), work
    assert_same_outputs(out, local_output)


@pytest.fixture
def connect_server(tmp_path):
    """A Spark Connect server (pyspark's own scripts) on 127.0.0.1:PORT; stopped after, no JVM left."""
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(tmp_path / "server-logs"),
           "SPARK_PID_DIR": str(tmp_path / "server-pids"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_IDENT_STRING": "replemu-test"}
    (tmp_path / "server-cwd").mkdir()
    started = subprocess.run(["bash", str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
                              "--conf", f"spark.connect.grpc.binding.port={port}",
                              "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
                              "--conf", f"spark.driver.extraJavaOptions={os.environ.get('REPLEMU_JVM_OPTIONS', '')}"],
                             env=env, cwd=tmp_path / "server-cwd", capture_output=True, text=True, timeout=120)
    pid_files = list((tmp_path / "server-pids").glob("*.pid"))
    pid = int(pid_files[0].read_text()) if pid_files else None

    def log() -> str:
        return "\n".join(p.read_text()[-3000:] for p in (tmp_path / "server-logs").glob("*"))

    try:
        assert started.returncode == 0 and pid is not None, started.stdout + started.stderr
        deadline = time.monotonic() + 120
        while True:  # the gRPC port opens once the server's SparkContext is up
            assert os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline, log()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        assert listening_addresses(port) in ({"::ffff:127.0.0.1"}, {"127.0.0.1"})
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(SPARK_HOME / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=60)
        if pid is not None:
            deadline = time.monotonic() + 30
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.2)
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
                time.sleep(1)
            assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z", \
                "the Connect server's JVM survived"


def test_through_spark_connect_the_job_gives_local_outputs(tmp_path, connect_server, local_output):
    done = replemu("stream", *WORKLOAD, "--remote", connect_server, "--shuffle-partitions", "2",
                   "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Spark Connect session" in done.stdout
    # the sink ran on the server: its counts come back from the files it wrote
    # (the workload source hands each partition one tick a batch: its steps are generated in the state function)
    assert re.findall(r"batch \d: (\d+) ticks, 8 partitions", done.stdout) == ["8", "8", "8"], done.stdout
    assert "3 micro-batches" in done.stdout
    assert_same_outputs(tmp_path / "out", local_output)


@pytest.mark.parametrize("extra, message", [
    (["--remote", "http://h:15002"], "is not a Spark Connect URL"),
    (["--remote", "sc://h"], "is not a Spark Connect URL"),
    (["--remote", "sc://h:70000"], "is not a Spark Connect URL"),
    (["--remote", "sc://127.0.0.1:15002", "--master", "local[2]"], "not both"),
])
def test_a_bad_remote_exits_2_before_anything_starts(tmp_path, extra, message):
    done = replemu("stream", *WORKLOAD, *extra, "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"))
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()


def test_an_unreachable_connect_server_exits_3_with_one_line(tmp_path):
    done = replemu("stream", *WORKLOAD, "--remote", f"sc://127.0.0.1:{_free_port()}", "--shuffle-partitions", "2",
                   "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"))
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "no Spark Connect server reachable" in done.stderr
    assert not (tmp_path / "ck").exists()  # refused before the checkpoint was touched


def test_under_spark_submit_its_master_and_conf_win_over_spark_conf(tmp_path):
    """spark-submit's JVM exists before build_spark runs; what spark-submit set must not be
    overridden by conf/spark.conf (spark.master local[*], shuffle partitions 2)."""
    script = tmp_path / "probe.py"
    script.write_text("from streaming.session import build_spark\n"
                      "spark = build_spark()\n"
                      "print('MASTER', spark.sparkContext.master, spark.conf.get('spark.sql.shuffle.partitions'),"
                      " spark.conf.get('spark.sql.session.timeZone'))\n"
                      "spark.stop()\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=3",
                           "--conf", "spark.ui.enabled=false", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MASTER local[1] 3 UTC" in done.stdout, done.stdout + done.stderr[-2000:]
