"""Kafka's own replication tests as our regression suite.

Every ``tests/kafka/*.yaml`` is one test of apache/kafka translated situation by situation into
a scenario (its header names the repository, the test file, the test method and the tag it was
read at); Kafka's assertions are its ``expect`` blocks, intermediate states ``at_step``.  Each
file is replayed for every variant its ``expect`` block names, as a user would:
``replemu run FILE --protocol P --check``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = sorted(HERE.glob("*.yaml"))
HEADER = re.compile(
    r"\A# Kafka regression: apache/kafka (?P<path>\S+\.scala)\n# test: (?P<method>\w+)\n# tag: (?P<tag>\d+\.\d+\.\d+)\n")


def cases():
    for f in FILES:
        for variant in yaml.safe_load(f.read_text())["expect"]:
            yield pytest.param(f, variant, id=f"{f.stem}-{variant}")


def test_the_suite_covers_at_least_fifteen_kafka_tests():
    assert len(FILES) >= 15


@pytest.mark.parametrize("path, variant", list(cases()))
def test_kafka_test_replays_as_kafka_asserts(path, variant):
    out = subprocess.run([sys.executable, "-m", "replemu", "run", str(path), "--protocol", variant, "--check", "--summary"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_names_its_kafka_test(path):
    """Provenance: repository, test file, test method and tag in the header; the name is the file stem."""
    text = path.read_text()
    m = HEADER.match(text)
    assert m, f"{path.name}: the header must name apache/kafka, the test file, the method and the tag"
    assert m["path"].startswith("core/src/test/") and m["method"][0].islower()
    assert yaml.safe_load(text)["name"] == path.stem
