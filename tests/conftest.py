"""Shared helpers: scenario builders and the path of the bundled scenarios."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from emulator import parse_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent

# Every JVM the suite starts (the session fixture's, the `replemu stream` subprocesses', the
# cluster tests' executors) runs short: C1 only and the serial collector halve its CPU
# (streaming/session.py JVM_OPTIONS_ENV). The job's results do not depend on it.
os.environ.setdefault("REPLEMU_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1")
BUNDLED = ROOT / "conf" / "scenarios"
SPARK_HOME = Path(__import__("pyspark").__file__).parent  # pip's pyspark: bin/, sbin/, jars/ (and work/ of local-cluster)


def env_without_java(java_home: str | Path = "/nonexistent-java-home") -> dict[str, str]:
    """This process's environment with ``JAVA_HOME`` naming a directory without Java (pyspark's
    launcher runs ``$JAVA_HOME/bin/java``): a command that would start a JVM fails on that."""
    return {**os.environ, "JAVA_HOME": str(java_home)}

# Hypothesis draws the same examples on every run ("ci", the default: a red CI run means the
# commit, not the dice) unless REPLEMU_HYPOTHESIS=explore asks for fresh random ones (new examples
# each run, failures kept in .hypothesis/ and replayed first): docs/testing.md.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True)
_hypothesis_settings.register_profile("explore", derandomize=False)
_hypothesis_settings.load_profile(os.environ.get("REPLEMU_HYPOTHESIS", "ci"))


def load_script(name: str):
    """``scripts/NAME.py`` as a module (a script, not a package), loaded once per process."""
    import importlib.util

    module_name = f"replemu_scripts_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def scenario(steps: list, replicas=(1, 2), **config):
    """Build a scenario from YAML-shaped steps (the contract's own form)."""
    return parse_scenario({"name": "t", "replicas": list(replicas), "config": config, "steps": steps})


def run(steps: list, protocol: str, replicas=(1, 2), trace: bool = False, **config) -> dict:
    return run_scenario(scenario(steps, replicas, **config), protocol, trace=trace)


def violated(result: dict) -> set[str]:
    return {v["invariant"] for v in result["violations"]}


def log_of(result: dict, replica: int) -> list:
    return [tuple(r) for r in result["final"]["replicas"][str(replica)]["log"]]


def output_rows(out: Path) -> dict[tuple[str, int], list[tuple]]:
    """Every output kind's rows of a ``replemu stream`` output, per micro-batch:
    ``{(kind, batch_id): sorted rows}``, each row a tuple of ``(column, value)`` pairs.

    The comparison of two set-ups that must give the same results (local, local-cluster, a
    standalone cluster, Spark Connect, a killed and restarted run): it compares rows, not files,
    since the names and the split of the Parquet files inside a micro-batch depend on the Spark
    tasks that wrote them (and compaction moves old micro-batches into ranges). Rows are read with
    ``streaming.results.read_output`` (the readers' own view of the layout); every directory of
    OUTPUT that holds ``batch_id=``/``batch_range=`` directories is a kind (the expectation
    suites' ``validations`` too). Missing values (None, NaN) compare equal; a row's order inside
    its micro-batch does not count. Shared by the cluster tests; use it wherever outputs of two
    runs are compared."""
    import math

    import pandas as pd

    from streaming.results import read_output

    def plain(value):
        if hasattr(value, "tolist"):  # numpy scalars and arrays
            value = value.tolist()
        if isinstance(value, (list, tuple)):
            return tuple(plain(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, plain(v)) for k, v in value.items()))
        if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
            return None
        return value

    out = Path(out)
    kinds = sorted(d.name for d in out.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))
                   and any(c.name.startswith(("batch_id=", "batch_range=")) for c in d.iterdir()))
    rows: dict[tuple[str, int], list[tuple]] = {}
    for kind in kinds:
        frame = read_output(out, kind)
        for record in frame.to_dict("records"):
            batch_id = int(record.pop("batch_id"))
            rows.setdefault((kind, batch_id), []).append(tuple(sorted((k, plain(v)) for k, v in record.items())))
    return {key: sorted(batch, key=repr) for key, batch in sorted(rows.items())}


def rows_difference(expected: dict[tuple[str, int], list[tuple]], got: dict[tuple[str, int], list[tuple]]) -> str | None:
    """Where two ``output_rows`` differ, in words (None: they are the same): the first micro-batch
    and kind missing, extra or with other rows, and the first row of it that differs."""
    for key in sorted(set(expected) | set(got)):
        kind, batch = key
        if key not in got:
            return f"{kind} of batch {batch}: missing ({len(expected[key])} rows expected)"
        if key not in expected:
            return f"{kind} of batch {batch}: not expected ({len(got[key])} rows)"
        if expected[key] != got[key]:
            a, b = expected[key], got[key]
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            if i < min(len(a), len(b)):
                cols = [f"{k}: {dict(a[i]).get(k)!r} != {v!r}" for k, v in b[i] if dict(a[i]).get(k) != v]
                return f"{kind} of batch {batch}, row {i}: {'; '.join(cols) or 'columns differ'}"
            return f"{kind} of batch {batch}: {len(b)} rows, expected {len(a)}"
    return None


def replemu(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run the CLI as a user does (``python -m emulator`` is the ``replemu`` script)."""
    return subprocess.run([sys.executable, "-m", "replemu", *args], cwd=cwd, capture_output=True, text=True)


# The files that take a minute or more (Spark jobs, clusters, kills and restarts; measured with
# ``scripts/test.sh``'s --durations on the 2-core machine). They are collected first: scripts/test.sh
# hands whole files to two pytest processes in collection order (--no-loadscope-reorder), so the
# long ones start early and the short ones fill in, and both processes end at about the same time.
LONG_FILES = ("test_cluster.py", "test_chaos.py", "test_stream.py", "test_storage.py", "test_expectations_spark.py",
              "test_failures.py", "test_graceful_stop.py", "test_fuzz.py", "test_checkpoint_repair.py",
              "test_output_layout.py", "test_explore.py", "test_operators.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest keep their order


@pytest.fixture
def write_yaml(tmp_path):
    def _write(data, name="scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path
    return _write


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the whole test session (start-up costs ~20 s)."""
    from streaming.session import build_spark

    session = build_spark("local[2]")
    yield session
    session.stop()


def gap_then_late_row(spark, tmp_path: Path, operator: str | None = None, wait_s: float = 60):
    """``seed-1-two-round-hw.yaml`` streamed under a processing-time trigger without its seq 2, which
    arrives once the gap was reported: returns ``(reasons, reasons_at_the_end, result)``, the
    quarantine reasons when the gap was first reported and after the stream stopped, and the
    partition's result then (``operator``: the stateful operator, None for the default)."""
    import time

    from scenario_io.yaml_files import load_scenario
    from streaming.events import scenario_rows, write_event_files
    from streaming.job import start_stream
    from streaming.results import quarantine_rows, read_results

    rows = scenario_rows(load_scenario(BUNDLED / "seed-1-two-round-hw.yaml"))
    missing = rows.pop(2)
    write_event_files([rows], tmp_path / "events")
    query, sink = start_stream(spark, tmp_path / "events", tmp_path / "output", tmp_path / "checkpoint", "hw",
                               trigger="processing-time=500ms", gap_timeout_ms=500, operator=operator)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not any(s.quarantined for s in sink.stats):
            time.sleep(0.5)
        reasons = [q["reason"] for q in quarantine_rows(tmp_path / "output")]
        assert reasons == ["gap in sequence: seq 2 never arrived; seq 3..4 wait for it"]
        write_event_files([[missing]], tmp_path / "events", prefix="late")  # the row arrives after all
        while time.monotonic() < deadline and not read_results(tmp_path / "output")[0]["steps"] == 4:
            time.sleep(0.5)
    finally:
        settle = time.monotonic() + 10
        while query.status["isTriggerActive"] and time.monotonic() < settle:
            time.sleep(0.05)  # stop between batches, not inside one
        query.stop()
    return reasons, [q["reason"] for q in quarantine_rows(tmp_path / "output")], read_results(tmp_path / "output")[0]
