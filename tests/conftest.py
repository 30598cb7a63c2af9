"""Shared helpers: scenario builders and the path of the bundled scenarios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from emulator import parse_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "conf" / "scenarios"


def scenario(steps: list, replicas=(1, 2), **config):
    """Build a scenario from YAML-shaped steps (the contract's own form)."""
    return parse_scenario({"name": "t", "replicas": list(replicas), "config": config, "steps": steps})


def run(steps: list, protocol: str, replicas=(1, 2), trace: bool = False, **config) -> dict:
    return run_scenario(scenario(steps, replicas, **config), protocol, trace=trace)


def violated(result: dict) -> set[str]:
    return {v["invariant"] for v in result["violations"]}


def log_of(result: dict, replica: int) -> list:
    return [tuple(r) for r in result["final"]["replicas"][str(replica)]["log"]]


def replemu(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run the CLI as a user does (``python -m emulator`` is the ``replemu`` script)."""
    return subprocess.run([sys.executable, "-m", "replemu", *args], cwd=cwd, capture_output=True, text=True)


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
