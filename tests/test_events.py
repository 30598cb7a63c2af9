"""`replemu compile`: the event table, its split, and its errors."""

import json

import yaml

from conftest import BUNDLED, replemu

S1 = BUNDLED / "s1-kip101-scenario-1.yaml"


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_compile_writes_a_header_and_one_row_per_step_split_in_order(tmp_path):
    out = replemu("compile", str(S1), "--out", str(tmp_path / "ev"), "--split", "3")
    assert out.returncode == 0, out.stderr
    files = sorted((tmp_path / "ev").iterdir())
    assert [f.name for f in files] == ["events-00000.jsonl", "events-00001.jsonl", "events-00002.jsonl"]
    assert [f.stat().st_mtime_ns for f in files] == sorted(f.stat().st_mtime_ns for f in files)
    rows = [r for f in files for r in read_jsonl(f)]
    assert [r["seq"] for r in rows] == list(range(21))
    header = rows[0]
    assert (header["topic"], header["partition"], header["type"]) == ("s1-kip101-scenario-1", 0, "partition")
    assert json.loads(header["args"])["replicas"] == [1, 2]
    assert (rows[8]["type"], json.loads(rows[8]["args"])) == ("fetch", {"replica": 1, "response": "lost"})


def test_two_files_with_one_partition_key_are_refused(tmp_path, write_yaml):
    data = yaml.safe_load(S1.read_text())
    data["name"] = "other"
    data["topic"] = "s1-kip101-scenario-1"
    other = write_yaml(data, "other.yaml")
    out = replemu("compile", str(S1), str(other), "--out", str(tmp_path / "ev"))
    assert out.returncode == 2
    assert "partition key s1-kip101-scenario-1/0 is also the key of" in out.stderr
    assert not (tmp_path / "ev").exists()


def test_results_of_a_directory_that_is_not_a_stream_output_exits_2(tmp_path):
    out = replemu("results", str(tmp_path))
    assert out.returncode == 2 and "not a replemu stream output directory" in out.stderr
