"""The build of the core: it type-checks, the compiled build (mypyc, ``setup.py``) gives the bytes
the pure-Python one gives, a stale compiled build is never used, and Spark's Python workers run
the build the driver runs.  (The whole suite runs on either build: ``REPLEMU_PURE=1`` forces the
pure one.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import emulator
from conftest import ROOT
from emulator import VARIANT_NAMES

COMPILED, PURE = "compiled (mypyc)", "pure Python"
needs_compiled = pytest.mark.skipif(emulator.BUILD != COMPILED, reason=f"the core runs as {emulator.BUILD}, not compiled")
WARNING = "replemu: the compiled modules are stale"


def test_the_core_type_checks():
    """``mypy emulator/``: what mypyc compiles must type-check (mypy is a dev dependency)."""
    done = subprocess.run([sys.executable, "-m", "mypy", "emulator/"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def run_cli(args: list[str], pure: bool, cwd: Path = ROOT) -> tuple[str, str]:
    """``replemu ARGS`` in a fresh process on one build; returns (the build it ran, stdout)."""
    code = ("import sys, emulator; print(emulator.BUILD, file=sys.stderr); "
            "from replemu.cli import entry; sys.argv = ['replemu', *sys.argv[1:]]; entry()")
    env = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    if pure:
        env["REPLEMU_PURE"] = "1"
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()[0], done.stdout


def accepted_under(path: Path, protocol: str) -> bool:
    """Whether ``protocol``'s controller takes every step of the scenario (Kafka's ZooKeeper-era
    tests elect with explicit epochs, which a KRaft variant refuses)."""
    from emulator.run import run_scenario
    from emulator.scenario import StepRefused
    from scenario_io.yaml_files import load_scenario

    try:
        run_scenario(load_scenario(path), protocol)
    except StepRefused:
        return False
    return True


@needs_compiled
def test_compiled_and_pure_runs_are_byte_identical():
    paths = sorted([*(ROOT / "conf" / "scenarios").glob("*.yaml"), *(ROOT / "tests" / "kafka").glob("*.yaml")])
    runs = 0
    for protocol in VARIANT_NAMES:  # per variant: the files its controller takes
        files = [str(p.relative_to(ROOT)) for p in paths if accepted_under(p, protocol)]
        args = ["run", *files, "--protocol", protocol, "--json", "--trace"]
        (compiled_build, compiled), (pure_build, pure) = run_cli(args, pure=False), run_cli(args, pure=True)
        assert (compiled_build, pure_build) == (COMPILED, PURE)
        assert len(json.loads(pure)) == len(files) and compiled == pure, protocol
        runs += len(files)
    assert runs > len(VARIANT_NAMES) * len(paths) * 0.8  # most files run under every variant


@needs_compiled
def test_compiled_and_pure_searches_are_identical(tmp_path):
    """Counts per depth, transitions, violations and their paths, the scenario files and the
    picture: all but the seconds."""
    args = ["explore", "--protocol", "hw", "--replicas", "2", "--depth", "6", "--engine", "local", "--json", "--out", "out"]
    found = {}
    for pure in (False, True):
        (tmp_path / str(pure)).mkdir()
        build, stdout = run_cli(args, pure, cwd=tmp_path / str(pure))
        result = json.loads(stdout)
        result.pop("seconds")
        files = {p.relative_to(tmp_path / str(pure)): p.read_bytes() for p in sorted((tmp_path / str(pure)).rglob("*")) if p.is_file()}
        found[pure] = (build, result, files)
    assert (found[False][0], found[True][0]) == (COMPILED, PURE)
    assert found[False][1] == found[True][1]
    assert found[False][1]["violations"] and found[False][1]["distinct_states"] > 10_000
    assert found[False][2] == found[True][2] and len(found[False][2]) > 2


def import_copy(package: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Import the ``emulator`` package at ``package`` in a fresh process: its build, where
    emulator.bounds came from, and its MARKER (absent: None)."""
    code = ("import emulator, emulator.bounds as b; "
            "print(emulator.BUILD, b.__file__.rsplit('/', 1)[1], getattr(b, 'MARKER', None), sep='|')")
    environ = {k: v for k, v in os.environ.items() if k != "REPLEMU_PURE"}
    environ.update(PYTHONPATH=str(package.parent), **(env or {}))
    return subprocess.run([sys.executable, "-c", code], cwd=package.parent, env=environ, capture_output=True, text=True)


@needs_compiled
def test_a_stale_compiled_build_falls_back_to_the_sources(tmp_path):
    """Extension modules built from other sources than the .py files beside them are not used:
    an edit to emulator/*.py takes effect at once (one line on stderr), as with a pure install."""
    package = tmp_path / "emulator"
    shutil.copytree(Path(emulator.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))

    done = import_copy(package)
    assert (done.returncode, done.stderr) == (0, "")
    build, origin, marker = done.stdout.strip().split("|")
    assert build == COMPILED and origin.endswith(".so") and marker == "None"

    done = import_copy(package, {"REPLEMU_PURE": "1"})
    assert (done.returncode, done.stderr, done.stdout.strip()) == (0, "", f"{PURE}|bounds.py|None")

    with open(package / "bounds.py", "a") as f:  # someone edits the core after the build
        f.write("\nMARKER = 'edited'\n")
    done = import_copy(package)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{PURE}|bounds.py|edited"
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(WARNING), done.stderr
    assert "emulator/*.py changed since they were built" in done.stderr

    (package / "bounds.py").write_bytes((Path(emulator.__file__).parent / "bounds.py").read_bytes())  # undone
    done = import_copy(package)
    assert (done.returncode, done.stderr, done.stdout.strip().split("|")[0]) == (0, "", COMPILED)

    (package / "_compiled_from.txt").unlink()  # the build's record is missing
    done = import_copy(package)
    assert done.stdout.strip().split("|")[0] == PURE and done.stderr.startswith(WARNING), done.stderr


def test_version_says_which_build_runs():
    done = subprocess.run([sys.executable, "-m", "replemu", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("replemu ") and f"core: {emulator.BUILD}" in done.stdout


def test_setup_without_a_c_compiler_installs_pure_python_and_says_so(tmp_path):
    pytest.importorskip("mypyc.build")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "emulator", tmp_path / "emulator", ignore=shutil.ignore_patterns("__pycache__", "*.so", "_compiled_from.txt"))
    done = subprocess.run([sys.executable, "setup.py", "--version"], cwd=tmp_path, env={**os.environ, "CC": "false"},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("replemu build:")]
    assert len(lines) == 1 and lines[0].startswith("replemu build: pure-Python core (no working C compiler"), done.stderr


def test_spark_workers_run_the_drivers_build(spark):
    """The executors' Python workers import emulator from the same environment, with the same
    REPLEMU_PURE: they run the build this process runs."""
    builds = spark.sparkContext.parallelize(range(4), 2).map(lambda _: __import__("emulator").BUILD).collect()
    assert builds == [emulator.BUILD] * 4
