"""``scripts/same_outputs.py``'s comparison (the script runs its corpus only by hand: minutes).

What a reader of its report relies on: a real difference is reported, named where it is (the
command, the JSON path with its scenario and variant, the line, the Parquet row); what differs
between two runs of one tree by nature (its directory, wall-clock values, Spark's row order and
file names) is not."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from conftest import load_script

same = load_script("same_outputs")


def outcome(stdout: bytes = b"", status: int = 0, files: dict | None = None, stderr: bytes | None = None):
    return same.Outcome([("replemu run x.yaml --json", status, stdout, stderr)], files or {}, 0.0)


def test_a_json_difference_is_named_by_its_path_scenario_and_variant():
    base = b'[{"scenario": "s1", "protocol": "hw", "final": {"replicas": {"2": {"hw": 3}}}}]'
    tree = b'[{"scenario": "s1", "protocol": "hw", "final": {"replicas": {"2": {"hw": 4}}}}]'
    found = same.difference(outcome(base), outcome(tree))
    assert found == "`replemu run x.yaml --json` stdout [0].final.replicas.2.hw: 3 | 4 (scenario s1, hw)"
    assert same.difference(outcome(base), outcome(base)) is None
    assert "keys in another order" in same.json_difference({"a": 1, "b": 2}, {"b": 2, "a": 1})


def test_text_exit_status_stderr_and_files_each_count():
    assert same.difference(outcome(b"a\nb\nc\n"), outcome(b"a\nB\nc\n")) == (
        "`replemu run x.yaml --json` stdout line 2: 'b' | 'B'")
    assert "exit status 0 | 2" in same.difference(outcome(status=0), outcome(status=2))
    assert "stderr line 1" in same.difference(outcome(stderr=b"x: step 3\n"), outcome(stderr=b"x: step 4\n"))
    assert same.difference(outcome(files={"out/a.yaml": b"1"}), outcome(files={})) == (
        "file out/a.yaml only in the base")
    assert same.difference(outcome(files={"a.yaml": b"v: 1\n"}), outcome(files={"a.yaml": b"v: 2\n"})) == (
        "a.yaml: line 1: 'v: 1' | 'v: 2'")


def test_paths_and_wall_clock_values_are_not_differences(tmp_path):
    one, two = tmp_path / "runs" / "run-aaaaaaaa", tmp_path / "runs" / "run-bbbbbbbb"
    base, tree = same.Normaliser(one, tmp_path / "base", tmp_path), same.Normaliser(two, tmp_path / "tree", tmp_path)
    assert base(f"input {one}/events, {tmp_path}/base/x".encode()) == tree(f"input {two}/events, {tmp_path}/tree/x".encode())
    explore = [same.clocked(b'{"seconds": 0.545, "depth": 4}', same.EXPLORE_CLOCK),
               same.clocked(b'{"seconds": 12.5, "depth": 4}', same.EXPLORE_CLOCK)]
    assert explore[0] == explore[1] and b'"depth": 4' in explore[0]
    assert same.clocked(b'{"seconds": 1, "depth": 5}', same.EXPLORE_CLOCK) != explore[0]
    levels = b"hw depth 4: 3,432 new states (4,375 in all), 7,347 transitions in 0.4 s (16,881/s)\n"
    heartbeat = b"hw depth 5: 2,376 of 3,432 states of depth 4 expanded (69%)\n"
    assert same.clocked(levels, same.EXPLORE_CLOCK) == same.clocked(heartbeat + levels + heartbeat, same.EXPLORE_CLOCK)
    progress = ('{"id": "%s", "timestamp": "%s", "batchId": 0, "numInputRows": 7, "durationMs": {"addBatch": %d}, '
                '"stateOperators": [{"numRowsTotal": 7, "allUpdatesTimeMs": %d}], "sources": []}')
    assert (same.progress_projection(progress % ("a", "2026-11-29T03:28:32Z", 9616, 3737))
            == same.progress_projection(progress % ("b", "2026-11-30T00:00:00Z", 10, 1)))
    assert same.progress_projection(progress % ("a", "t", 1, 1)) != same.progress_projection(
        (progress % ("a", "t", 1, 1)).replace('"numInputRows": 7', '"numInputRows": 8'))
    assert same.excluded("out/logs/replemu.log") and same.excluded("ck/offsets/0") and same.excluded("out/replemu.lock")
    assert not same.excluded("out/run.json") and not same.excluded("out/gaps.json") and not same.excluded("x/hw/StrongIsr.yaml")


def test_parquet_rows_are_compared_sorted_whatever_the_files(tmp_path):
    """Spark's files are compared by rows and schema, pooled per directory, in any order."""
    a, b, c = (tmp_path / n for n in "abc")
    for d in (a, b, c):
        d.mkdir()
    pq.write_table(pa.table({"seq": [1, 2], "event": ["x", "fetch(1, lost)"]}), a / "part-0.parquet")
    pq.write_table(pa.table({"seq": [2], "event": ["fetch(1, lost)"]}), b / "part-1-uuid.parquet")
    pq.write_table(pa.table({"seq": [1], "event": ["x"]}), b / "part-0-uuid.parquet")
    pq.write_table(pa.table({"seq": [1, 2], "event": ["x", "fetch(1, LOST)"]}), c / "part-0.parquet")
    rows = {d.name: same.read_rows(sorted(Path(d).glob("*.parquet"))) for d in (a, b, c)}
    assert same.rows_difference(rows["a"], rows["b"]) is None
    assert same.rows_difference(rows["a"], rows["c"]) == "row 1 (sorted) event: 'fetch(1, lost)' | 'fetch(1, LOST)' (seq=2)"
    assert not same.spark_written(a / "part-0.parquet")  # pyarrow's own files are compared by their bytes
