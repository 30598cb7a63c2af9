"""Kafka's own replication tests as our regression suite.

Every ``tests/kafka/*.yaml`` is one test of apache/kafka translated situation by situation into a
scenario. Its comment header gives the provenance::

    # Kafka test: apache/kafka
    # path: core/src/test/scala/unit/kafka/server/ISRExpirationTest.scala
    # method: testIsrExpirationForStuckFollowers
    # tag: 1.1.0
    # (optional) also: 2.1.0 for the kip320 assertions
    # two to six lines: the situation, and which of Kafka's assertions became which expectation

Kafka's assertions are the file's ``expect`` block (final state, ``at_step`` for intermediate
states). Each file is replayed for every variant its ``expect`` block names, as a user would:
``replemu run FILE --protocol P --check`` (the console script installed next to this
interpreter), from the repository root.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest
import yaml
from kafka_files import REPLEMU, assert_names_its_kafka_test, check_all, expected_protocols, header

from emulator import VARIANT_NAMES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = sorted(HERE.glob("*.yaml"))
VARIANTS = VARIANT_NAMES

TEST_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)*/src/test/[\w./-]+\.(scala|java)$")
METHOD = re.compile(r"^[a-z][A-Za-z0-9_]*$")


def variants(path: Path) -> list[str]:
    return expected_protocols(path)


def cases():
    for path in FILES:
        for variant in variants(path):
            yield pytest.param(path, variant, id=f"{path.stem}-{variant}")


def test_the_suite_translates_at_least_eighteen_kafka_tests():
    """One file per Kafka test: at least 18 files, no two naming the same test method."""
    assert len(FILES) >= 18, [p.name for p in FILES]
    named = [(header(p)[0].get("path"), header(p)[0].get("method")) for p in FILES]
    duplicates = {n for n in named if named.count(n) > 1}
    assert not duplicates, f"several files translate the same Kafka test: {sorted(duplicates)}"


def test_the_console_script_is_installed():
    assert REPLEMU.exists(), f"no replemu console script next to {sys.executable}"


@functools.lru_cache(maxsize=None)
def checked(variant: str) -> tuple[int, dict[str, tuple[str, list[str]]], str]:
    """The suite under one variant, as a user runs it (``kafka_files.check_all``)."""
    return check_all(FILES, variant)


@pytest.mark.parametrize("path, variant", list(cases()))
def test_kafka_test_replays_as_kafka_asserts(path: Path, variant: str):
    status, verdicts, stderr = checked(variant)
    verdict, disagreements = verdicts.get(str(path.relative_to(ROOT)), ("not checked", []))
    assert verdict == "agrees", f"{path.name} under {variant}: {verdict}\n" + "\n".join(disagreements) + stderr[-2000:]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_check_of_each_variant_exits_zero(variant: str):
    """``--check`` exits 0 only when every file agrees: the command a user runs says it too."""
    status, verdicts, stderr = checked(variant)
    assert status == 0 and all(v == "agrees" for v, _ in verdicts.values()), stderr[-2000:]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_names_its_kafka_test(path: Path):
    """Provenance: repository, test file, test method and tag in the comment header."""
    assert_names_its_kafka_test(path, TEST_PATH, METHOD)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_is_a_named_scenario_with_expectations(path: Path):
    doc = yaml.safe_load(path.read_text())
    assert doc["name"] == path.stem
    assert isinstance(doc.get("description"), str) and doc["description"].strip()
    assert variants(path), f"{path.name}: no expect block"
    assert set(variants(path)) <= set(VARIANTS), variants(path)
