"""A stream survives any input file: a file that cannot be decoded goes to quarantine whole,
naming its path and why, and its neighbours' rows give what a run without it gives."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BUNDLED
from replemu.compile import compile_scenarios
from streaming.files import DECODED_COLUMNS, RAW_LIMIT, decode_event_file
from streaming.job import run_stream
from streaming.results import quarantine_rows, read_results

GOOD_LINE = json.dumps({"topic": "t", "partition": 0, "seq": 1, "type": "fetch", "args": json.dumps({"replica": 2})})


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def events_parquet() -> bytes:
    from streaming.schemas import event_arrow_schema

    return parquet_bytes(pa.Table.from_pylist([json.loads(GOOD_LINE)], schema=event_arrow_schema()))


# Each kind of file a user (or a broken writer) may leave in the input directory, and the words
# its quarantine reason must use.
BAD_FILES = {
    "binary.jsonl": (bytes(range(256)) * 4, "not UTF-8 text"),
    "latin1.jsonl": (GOOD_LINE.replace("fetch", "fétch").encode("latin-1") + b"\n", "not UTF-8 text"),
    "nul.jsonl": (GOOD_LINE.encode() + b"\n\x00\x00\n", "binary data"),
    "prose.txt": (b"These are my notes about the run.\nNothing here is JSON.\n", "not JSON lines"),
    "foreign.parquet": (parquet_bytes(pa.table({"name": ["x"], "value": [1]})), "without the event columns (missing: topic"),
    "wrong-types.parquet": (parquet_bytes(pa.table({"topic": [1], "partition": ["zero"], "seq": ["a"], "type": [2], "args": [3]})),
                            "other types"),
    "torn.parquet": (events_parquet()[:-20] + b"PAR1", "not a readable Parquet file"),
    "deep.jsonl": (b"[" * 100_000 + b"]" * 100_000 + b"\n", "not JSON lines"),
}


def test_each_kind_of_undecodable_file_is_one_quarantine_row_naming_the_file_and_why():
    for name, (content, words) in BAD_FILES.items():
        rows = decode_event_file(f"file:/in/{name}", content)
        assert len(rows) == 1, name
        (row,) = rows
        assert row["topic"] is None and row["seq"] is None, name
        assert row["_reason"].startswith(f"unreadable file file:/in/{name}: "), row["_reason"]
        assert words in row["_reason"] and "none of its rows were applied" in row["_reason"], (name, row["_reason"])
        assert len(row["_corrupt_record"]) <= RAW_LIMIT


def test_a_readable_file_keeps_its_good_lines_and_quarantines_each_bad_one_alone():
    lines = [GOOD_LINE, "", "{broken", "[1, 2]", json.dumps({"topic": "t", "partition": 2**31, "seq": 1}),
             json.dumps({"topic": "t", "partition": 0, "seq": 2**63}), json.dumps({"topic": 5, "partition": 0}),
             json.dumps({"topic": "t", "partition": 0, "seq": 3, "type": "produce", "args": {"values": ["m"]}}),
             '{"topic": "t\\ud800", "partition": 0, "seq": 4}']
    rows = decode_event_file("f.jsonl", ("\r\n".join(lines) + "\n").encode())
    good = [r for r in rows if r["_reason"] is None]
    assert [(r["seq"], r["type"]) for r in good] == [(1, "fetch"), (3, "produce")]
    assert json.loads(good[1]["args"]) == {"values": ["m"]}  # an args object written inline is kept as JSON text
    reasons = [r["_reason"] for r in rows if r["_reason"] is not None]
    assert reasons == ["unreadable row (f.jsonl line 3): not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
                       "unreadable row (f.jsonl line 4): not a JSON object",
                       "unreadable row (f.jsonl line 5): partition 2147483648 is out of range (0 to 2147483647)",
                       "unreadable row (f.jsonl line 6): seq 9223372036854775808 is out of range (0 to 9223372036854775807)",
                       "unreadable row (f.jsonl line 7): topic must be a string of Unicode text",
                       "unreadable row (f.jsonl line 9): topic must be a string of Unicode text (it holds a lone surrogate)"]


def test_event_parquet_files_decode_to_their_rows():
    (row,) = decode_event_file("e.parquet", events_parquet())
    assert {k: row[k] for k in ("topic", "partition", "seq", "type")} == {"topic": "t", "partition": 0, "seq": 1, "type": "fetch"}
    assert row["_reason"] is None


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.binary(max_size=400),
    st.lists(st.one_of(st.just(GOOD_LINE), st.text(max_size=60), st.binary(max_size=30).map(lambda b: b.decode("latin-1"))),
             max_size=8).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
    st.binary(max_size=200).map(lambda b: b"PAR1" + b),
))
def test_any_bytes_decode_to_rows_that_are_events_or_carry_a_reason(content):
    rows = decode_event_file("x", content)  # never raises
    for row in rows:
        assert set(row) == set(DECODED_COLUMNS)
        if row["_reason"] is None:
            assert row["_corrupt_record"] is None
        else:
            assert row["_reason"].startswith(("unreadable row (x", "unreadable file x: "))
            assert row["topic"] is None and row["partition"] is None and row["seq"] is None
    good_lines = [line for line in content.split(b"\n") if line.strip() == GOOD_LINE.encode()]
    if good_lines and not content.startswith(b"PAR1") and b"\x00" not in content:
        try:
            content.decode("utf-8")
        except UnicodeDecodeError:
            return
        assert sum(r["_reason"] is None and r["seq"] == 1 for r in rows) == len(good_lines)  # good lines survive their neighbours


def test_a_stream_with_every_kind_of_bad_file_gives_the_results_of_a_run_without_them(spark, tmp_path):
    """Bad files beside good ones, and in subdirectories (a `k=1` directory once made Spark's
    partition discovery fail the query: CONFLICTING_DIRECTORY_STRUCTURES)."""
    files = sorted(BUNDLED.glob("*.yaml"))[:10]
    clean = tmp_path / "clean"
    compile_scenarios(files[:8], clean, split=3)
    compile_scenarios(files[8:], tmp_path / "as-parquet", split=1, fmt="parquet")  # Parquet beside JSON lines
    dirty = tmp_path / "dirty"
    shutil.copytree(clean, dirty)
    for p in (tmp_path / "as-parquet").iterdir():
        shutil.copy2(p, clean / f"pq-{p.name}")
        shutil.copy2(p, dirty / f"pq-{p.name}")
    for name, (content, _) in BAD_FILES.items():
        (dirty / name).write_bytes(content)
    for sub in ("notes", "k=1"):  # subdirectories (one looks like a Spark partition directory) are read too
        (dirty / sub).mkdir()
        (dirty / sub / f"in-{sub}.bin").write_bytes(BAD_FILES["binary.jsonl"][0])

    for d in (clean, dirty):
        run_stream(d, tmp_path / f"out-{d.name}", tmp_path / f"ck-{d.name}", "kip320", max_files_per_trigger=4,
                   spark=spark, quiet=True)
    assert read_results(tmp_path / "out-dirty") == read_results(tmp_path / "out-clean")
    quarantined = quarantine_rows(tmp_path / "out-dirty")
    assert quarantine_rows(tmp_path / "out-clean") == []
    assert sorted(Path(q["reason"].split(": ", 1)[0].removeprefix("unreadable file file:")).name for q in quarantined) == sorted([*BAD_FILES, "in-notes.bin", "in-k=1.bin"])
    assert all("none of its rows were applied" in q["reason"] for q in quarantined)
