"""What the Kafka translations (``tests/kafka/*.yaml`` for partitions, ``tests/kafka/quorum/*.yaml``
for the metadata quorum) share: their comment header, the protocols their expect block names, and
one ``replemu run FILE... --protocol P --check --summary`` per protocol, run as a user would (the
console script installed next to this interpreter, from the repository root)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
REPLEMU = Path(sys.executable).with_name("replemu")
KEY_LINE = re.compile(r"#\s*(?P<key>Kafka test|path|method|tag|also):\s*(?P<value>.*\S)\s*$")
TAG = re.compile(r"^\d+\.\d+\.\d+(\s|$)")
CHECK_LINE = re.compile(r"^check (?P<file>\S+) --protocol (?P<protocol>\S+): (?P<verdict>.*)$")


def header(path: Path) -> tuple[dict[str, str], list[str]]:
    """The leading comment block: its ``key: value`` lines, and the free description lines."""
    keys: dict[str, str] = {}
    prose: list[str] = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        m = KEY_LINE.match(line)
        if m and m["key"] not in keys:
            keys[m["key"]] = m["value"]
        else:
            prose.append(line)
    return keys, prose


def expected_protocols(path: Path) -> list[str]:
    """The protocols the file's expect block names, in its order."""
    return list((yaml.safe_load(path.read_text()).get("expect") or {}).keys())


def run_check(files: list[str], protocol: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPLEMU), "run", *files, "--protocol", protocol, "--check", "--summary"],
                          cwd=cwd, capture_output=True, text=True)


def check_all(files: list[Path], protocol: str) -> tuple[int, dict[str, tuple[str, list[str]]], str]:
    """``replemu run FILE... --protocol P --check --summary`` over every one of ``files`` whose expect
    block names ``protocol``: (exit status, file -> (verdict, disagreement lines), stderr).  One
    command per protocol (a command per file and protocol spent most of the suite's time starting
    Python)."""
    out = run_check([str(p.relative_to(ROOT)) for p in files if protocol in expected_protocols(p)], protocol)
    verdicts: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in out.stdout.splitlines():
        m = CHECK_LINE.match(line)
        if m:
            current = m["file"]
            verdicts[current] = (m["verdict"], [])
        elif line.startswith("  - ") and current is not None:
            verdicts[current][1].append(line)
    return out.returncode, verdicts, out.stderr


def assert_names_its_kafka_test(path: Path, test_path: re.Pattern, method: re.Pattern) -> None:
    """Provenance: repository, test file (``test_path``), test method (``method``) and tag in the
    comment header, and 2 to 6 comment lines describing the situation."""
    keys, prose = header(path)
    assert "apache/kafka" in keys.get("Kafka test", ""), f"{path.name}: the header must name the repository apache/kafka"
    assert test_path.match(keys.get("path", "")), f"{path.name}: the header must give the path of Kafka's test file"
    assert method.match(keys.get("method", "")), f"{path.name}: the header must name the test method"
    assert TAG.match(keys.get("tag", "")), f"{path.name}: the header must name the tag the test was read at"
    assert 2 <= len(prose) <= 6, f"{path.name}: 2 to 6 comment lines must describe the situation ({len(prose)} found)"
