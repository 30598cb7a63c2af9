"""Kafka's raft tests as scenario files of the metadata quorum: ``tests/kafka/quorum/*.yaml``.

Each file translates one test of apache/kafka's ``raft/src/test/java/org/apache/kafka/raft/`` into
quorum steps, with the same comment header as the partition translations (``test_kafka_regression``):
``# Kafka test: apache/kafka``, ``# path:``, ``# method:``, ``# tag:``, then the situation and which of
Kafka's assertions became the ``expect`` block.  A file has an expect block for each quorum preset
under which its steps can be taken and Kafka's assertion holds (a step a preset cannot take makes
that preset's result "not expressible", never a verdict, so that file is left out of that preset's command).

The suite is replayed as a user would: ONE ``replemu run FILE... --protocol P --check --summary``
per preset that some file expects, from the repository root; every (file, preset) must print
``agrees`` and the command must exit 0.  The tests that could not be expressed are listed in
docs/kafka-tests-not-expressible.md ("Metadata quorum (raft/)").
"""

from __future__ import annotations

import functools
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from kafka_files import (
    REPLEMU,
    assert_names_its_kafka_test,
    check_all,
    expected_protocols,
    header,
    run_check,
)

from emulator.quorum.variants import QUORUM_VARIANT_NAMES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = sorted((HERE / "quorum").glob("*.yaml"))

TEST_PATH = re.compile(r"^raft/src/test/java/org/apache/kafka/raft/[\w/]+Test\.java$")
METHOD = re.compile(r"^test[A-Z][A-Za-z0-9_]*$")


def presets(path: Path) -> list[str]:
    return expected_protocols(path)


PRESETS = [p for p in QUORUM_VARIANT_NAMES if any(p in presets(f) for f in FILES)]


def cases():
    for path in FILES:
        for preset in presets(path):
            yield pytest.param(path, preset, id=f"{path.stem}-{preset}")


@functools.lru_cache(maxsize=None)
def checked(preset: str) -> tuple[int, dict[str, tuple[str, list[str]]], str]:
    """The suite under one preset, as a user runs it (``kafka_files.check_all``)."""
    return check_all(FILES, preset)


def test_the_suite_translates_at_least_twenty_raft_tests():
    """One file per Kafka test: at least 20 files, no two naming the same test method."""
    assert len(FILES) >= 20, [p.name for p in FILES]
    named = [(header(p)[0].get("path"), header(p)[0].get("method")) for p in FILES]
    duplicates = {n for n in named if named.count(n) > 1}
    assert not duplicates, f"several files translate the same Kafka test: {sorted(duplicates)}"
    assert REPLEMU.exists(), f"no replemu console script next to {sys.executable}"


@pytest.mark.parametrize("path, preset", list(cases()))
def test_kafka_raft_test_replays_as_kafka_asserts(path: Path, preset: str):
    status, verdicts, stderr = checked(preset)
    verdict, disagreements = verdicts.get(str(path.relative_to(ROOT)), ("not checked", []))
    assert verdict == "agrees", f"{path.name} under {preset}: {verdict}\n" + "\n".join(disagreements) + stderr[-2000:]


@pytest.mark.parametrize("preset", PRESETS)
def test_the_check_of_each_preset_exits_zero(preset: str):
    """``--check`` exits 0 only when every file agrees: the command a user runs says it too."""
    status, verdicts, stderr = checked(preset)
    expected = {str(p.relative_to(ROOT)) for p in FILES if preset in presets(p)}
    assert status == 0, stderr[-2000:]
    assert set(verdicts) == expected and all(v == "agrees" for v, _ in verdicts.values()), verdicts


def test_a_wrong_expectation_exits_1_naming_the_difference(tmp_path):
    """Negative control: the same file with one wrong expected field disagrees, exit 1, the field named."""
    source = HERE / "quorum" / "retry-election.yaml"
    doc = yaml.safe_load(source.read_text())
    assert doc["expect"]["kraft853"]["servers"][1]["epoch"] == 3
    doc["expect"]["kraft853"]["servers"][1]["epoch"] = 4
    copy = tmp_path / source.name
    copy.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = run_check([str(copy)], "kraft853", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"check {copy} --protocol kraft853: DISAGREES" in done.stdout
    assert "server 1 epoch: expected 4, got 3" in done.stdout
    shutil.copy(source, tmp_path / "unchanged.yaml")  # and the file as committed agrees from anywhere
    assert run_check([str(tmp_path / "unchanged.yaml")], "kraft853", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_names_its_kafka_test(path: Path):
    """Provenance: repository, test file, test method and tag in the comment header."""
    assert_names_its_kafka_test(path, TEST_PATH, METHOD)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_is_a_named_quorum_scenario_with_expectations(path: Path):
    doc = yaml.safe_load(path.read_text())
    assert doc["name"] == path.stem and "voters" in doc
    assert isinstance(doc.get("description"), str) and doc["description"].strip()
    assert presets(path) and set(presets(path)) <= set(QUORUM_VARIANT_NAMES), presets(path)
    numbers = [int(m) for m in re.findall(r"^  - \w+: .*#\s*(\d+)", path.read_text(), re.M)]
    assert numbers == list(range(1, len(doc["steps"]) + 1)), f"{path.name}: each step carries its number"
