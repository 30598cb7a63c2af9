"""The SparkSession of every job: the project's settings, the master or Spark Connect URL checks,
and the driver's JVM started in a session of its own (``streaming.jvm_output`` filters what it prints).

Default settings are the packaged ``spark.conf`` (``conf/spark.conf`` in the source tree, ``key
value`` lines); ``--master`` overrides the master, and ``build_spark(remote=…)`` makes the job a
Spark Connect client instead (docs/cluster.md).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from importlib import resources
from pathlib import Path


def read_spark_conf(path: str | Path | None = None) -> dict[str, str]:
    """``key value`` lines of ``path``, or of the packaged defaults (``conf/spark.conf``)."""
    source = str(path) if path else "spark.conf (packaged)"
    text = Path(path).read_text() if path else resources.files("streaming").joinpath("data/spark.conf").read_text()
    conf = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(" ")
        if not sep:
            raise ValueError(f"{source}: line {number}: expected 'key value', got {line!r}")
        conf[key] = value.strip()
    return conf


MASTER_FORMS = (
    (re.compile(r"local(\[(\*|[1-9]\d{0,4})(,[1-9]\d{0,4})?\])?"), "local, local[N], local[*], local[N,F]"),
    (re.compile(r"local-cluster\[[1-9]\d{0,3},[1-9]\d{0,3},[1-9]\d{1,7}\]"), "local-cluster[WORKERS,CORES,MEMORY_MB]"),
    (re.compile(r"spark://[A-Za-z0-9._-]+:\d{1,5}(,[A-Za-z0-9._-]+:\d{1,5})*"), "spark://HOST:PORT"),
    (re.compile(r"yarn"), "yarn"),
    (re.compile(r"k8s://\S+"), "k8s://API_SERVER"),
)


def master_problem(master: str) -> str | None:
    """Why ``master`` is not a Spark master URL (None when it is one): checked before a JVM starts."""
    if any(form.fullmatch(master) for form, _ in MASTER_FORMS):
        return None
    return f"--master {master[:80]!r} is not a Spark master URL (one of: {'; '.join(text for _, text in MASTER_FORMS)})"


def master_cores(master: str) -> int | None:
    """The cores a master URL names (local[4] -> 4, local[*] -> this machine's, local-cluster[2,3,1024] -> 6);
    None for a cluster manager, whose cores only the cluster knows."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if m:
        return os.cpu_count() or 1 if m.group(1) == "*" else int(m.group(1) or 1)
    m = re.fullmatch(r"local-cluster\[(\d+),(\d+),\d+\]", master)
    return int(m.group(1)) * int(m.group(2)) if m else None


LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")


def is_local_master(master: str | None) -> bool:
    """Whether ``master`` runs every Spark process on this machine (local, local[N], local-cluster[…])."""
    return master is not None and bool(LOCAL_MASTER.fullmatch(master))


REMOTE_FORM = re.compile(r"sc://(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})(/(;[A-Za-z_]+=[^;/\s]*)*)?")


def remote_problem(remote: str) -> str | None:
    """Why ``remote`` is not a Spark Connect URL (None when it is one): checked before anything starts."""
    m = REMOTE_FORM.fullmatch(remote)
    if m and 1 <= int(m["port"]) <= 65535:
        return None
    return (f"--remote {remote[:80]!r} is not a Spark Connect URL (sc://HOST:PORT, optionally followed by "
            f"/;token=…;use_ssl=true)")


def remote_unreachable(remote: str, timeout_s: float = 10) -> str | None:
    """Why the Spark Connect server of ``remote`` cannot be reached (None when it accepts a TCP
    connection).  Checked before anything is written: the Connect client itself retries an
    unreachable server for ten minutes."""
    import socket

    m = REMOTE_FORM.fullmatch(remote)
    host, port = m["host"].strip("[]"), int(m["port"])
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        return f"--remote {remote}: no Spark Connect server reachable at {host}:{port} ({exc.strerror or exc})"
    return None


class SessionError(RuntimeError):
    """A session could not be opened (a Spark Connect server that does not answer, a driver JVM
    that did not start): one line for the user."""


def java_problem(exc: BaseException) -> str:
    """The line for a driver JVM that exited before it answered (pyspark's JAVA_GATEWAY_EXITED):
    which Java was tried, what Spark needs."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java_there = os.access(os.path.join(home, "bin", "java"), os.X_OK)
        tried = f"JAVA_HOME={home}" + ("" if java_there else " has no bin/java")
    else:
        import shutil

        found = shutil.which("java")
        java_there = found is not None
        tried = f"java on PATH: {found}" if found else "no JAVA_HOME and no java on PATH"
    said = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    advice = (f"check the JVM options ({JVM_OPTIONS_ENV}, spark.driver.* in conf/spark.conf) and the free memory"
              if java_there else "Spark needs Java 17 or 21, set JAVA_HOME to it")
    return f"the driver's JVM did not start ({tried}; pyspark: {said}): {advice}"


def build_spark(master: str | None = None, conf_path: str | Path | None = None, app_name: str = "replemu", *,
                ui: bool = False, remote: str | None = None):
    """A SparkSession with the project's settings (``conf/spark.conf``).

    ``ui``: Spark's web UI, on for ``replemu stream`` and off everywhere else (tests, ``state``,
    campaigns: it costs start-up time).  ``remote`` (``sc://HOST:PORT``): a Spark Connect session
    on that server instead of a driver in this process; ``SessionError`` when it does not answer.

    Classic sessions: the Python workers use this interpreter; with a local master (local,
    local[N], local-cluster[…]) the driver, executors, block managers and UI bind to 127.0.0.1
    only (``SPARK_LOCAL_IP``, unless already set); with a cluster master (spark://, yarn, k8s://)
    Spark's own defaults and the user's settings decide, so executors on other hosts can reach
    the driver.  Launched by spark-submit, whatever spark-submit set (``--master``, ``--conf``,
    spark-defaults.conf) wins over ``conf/spark.conf``."""
    conf = read_spark_conf(conf_path)
    conf["spark.app.name"] = app_name
    add_jvm_options(conf)
    conf["spark.ui.enabled"] = "true" if ui else "false"
    if remote is not None:
        return _connect_session(remote, conf)
    return _interrupts_held(lambda: _classic_session(master, conf))


def _interrupts_held(start):
    """``start()`` with Ctrl-C held back until it returns: pyspark interrupted while it starts the
    JVM leaves that JVM running without this process, and interrupted in a py4j call it prints a
    traceback.  A Ctrl-C meanwhile is said at once; the session, once up, is stopped and the
    interrupt raised (``KeyboardInterrupt``: ``replemu: interrupted``)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return start()
    caught: list[int] = []

    def hold(signum, frame) -> None:
        if not caught:
            print("replemu: interrupted; stopping as soon as Spark has started", file=sys.stderr, flush=True)
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        spark = start()
    except Exception:
        if caught:
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if caught:
        spark.stop()
        raise KeyboardInterrupt
    return spark


# Extra options for the JVMs a session starts (the driver's and, on local-cluster or a cluster,
# the executors'), appended to spark.driver/executor.extraJavaOptions. For short runs: with
# "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1" (C1 only, one compiler thread,
# no parallel GC threads) a six-batch stream of 20 partitions costs the driver JVM ~32 CPU
# seconds instead of ~60 (most of a short run's JVM CPU is C2 compiling hot code it will not run
# for long); the test suite sets it (tests/conftest.py). Long runs keep the JVM's defaults.
JVM_OPTIONS_ENV = "REPLEMU_JVM_OPTIONS"


def add_jvm_options(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with ``$REPLEMU_JVM_OPTIONS`` appended to the driver's and executors' extra Java
    options (unchanged when it is unset or blank)."""
    extra = os.environ.get(JVM_OPTIONS_ENV, "").strip()
    if extra:
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            conf[key] = f"{conf[key]} {extra}" if conf.get(key) else extra
    return conf


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``build_spark(remote=…)``) rather than a
    classic driver in this process — the one test of which kind a session is.  Through Connect
    there is no SparkContext and no JVM here, and the foreachBatch sink runs in a Python process
    of the server, so its counts never come back to this process (``run_stream`` reads them
    from the files it wrote); the StreamingQueryListener runs here."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def describe_session(spark) -> str:
    """One line for the console: what runs the job and where its Spark UI is."""
    if is_connect(spark):
        return (f"Spark Connect session {spark.session_id}, server master {spark.conf.get('spark.master', '?')} "
                f"(Spark UI: the server's own)")
    sc = spark.sparkContext
    return f"Spark application {sc.applicationId}, master {sc.master}; Spark UI: {sc.uiWebUrl or 'off'}"


def _classic_session(master: str | None, conf: dict[str, str]):
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # Launched by spark-submit: its JVM runs already, with spark-submit's settings as system
        # properties; SparkConf() sees them only once this process is connected to that JVM.
        SparkContext._ensure_initialized()
        submitted = SparkConf()
        master = submitted.get("spark.master", None)
    else:
        master = conf["spark.master"] = master or conf.get("spark.master", "local[*]")
    if master is not None and master.startswith("local-cluster["):
        # It exists to run on several executors: start once all registered (a standalone
        # master schedules on the first one, and state-store locality may keep every task there).
        conf["spark.scheduler.minRegisteredResourcesRatio"] = "1.0"
    if submitted is not None:
        conf = {key: value for key, value in conf.items() if not submitted.contains(key)}
    else:
        if is_local_master(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        _launch_jvm_in_own_session(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _connect_session(remote: str, conf: dict[str, str]):
    """A Spark Connect session with the settings of ``conf`` a session may change (SQL settings:
    shuffle partitions, time zone, Arrow); the others (master, memory, UI) are the server's."""
    problem = remote_unreachable(remote)
    if problem:
        raise SessionError(problem)
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark = SparkSession.builder.remote(remote).getOrCreate()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=2000)])  # seconds, not ten minutes
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyspark's RETRIES_EXCEEDED warning: the error says it
            for key, value in conf.items():
                if spark.conf.isModifiable(key):
                    spark.conf.set(key, value)
    except Exception as exc:
        text = str(exc).strip()
        details = re.search(r'details = "([^"]*)"', text)
        reason = details.group(1) if details else (text.splitlines() or [type(exc).__name__])[0]
        spark.client.close()  # no release RPC at exit either (it would retry for minutes)
        raise SessionError(f"--remote {remote}: the Spark Connect server did not answer: {reason[:300]}") from None
    finally:
        # A running job waits out a server that restarts (about 45 s: 8 retries, backoff up to
        # 10 s), not pyspark's ten minutes: a server gone longer fails the job in two lines.
        spark.client.set_retry_policies([DefaultPolicy(max_retries=8, max_backoff=10000)])
    return spark


def stop_session(spark) -> None:
    """``spark.stop()``, except that a Spark Connect session whose server is gone is closed without
    waiting for it (its release call would retry): the command ends with its own lines."""
    if not is_connect(spark):
        spark.stop()
        return
    from pyspark.sql.connect.client.retries import DefaultPolicy

    try:
        spark.client.set_retry_policies([DefaultPolicy(max_retries=0)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spark.stop()
    except Exception:  # noqa: BLE001 - the server is gone: nothing to release there
        spark.client.close()


def _launch_jvm_in_own_session(conf: dict[str, str]) -> None:
    """Start the driver's JVM in a session of its own, unless one runs already.

    pyspark starts the JVM with SIGINT ignored so that Ctrl-C reaches only Python, but the
    Python workers the JVM forks restore SIGINT: a terminal's Ctrl-C (sent to the whole
    foreground process group) killed a running task, and the "finish the running micro-batch"
    stop failed.  In its own session nothing the terminal sends reaches the JVM or its workers;
    they end when this process ends (the JVM exits when its stdin, a pipe from here, closes).
    Not called under spark-submit, whose JVM exists already (PYSPARK_GATEWAY_PORT)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None:
        return
    spark_conf = SparkConf()
    for key, value in conf.items():
        spark_conf.set(key, value)
    import subprocess
    import threading

    from .jvm_output import pump_jvm_stderr

    try:
        gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True, "stderr": subprocess.PIPE})
    except Exception as exc:  # PySparkRuntimeError JAVA_GATEWAY_EXITED: no Java, a broken one, too little memory
        raise SessionError(java_problem(exc)) from None
    threading.Thread(target=pump_jvm_stderr, args=(gateway.proc.stderr,), name="replemu-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)
