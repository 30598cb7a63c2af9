"""Outputs that last (issue 32, item 6): older micro-batches compacted into ranges and bulky kinds
dropped on request change nothing a reader reports: ``replemu results --json``, every (kind,
batch)'s rows, the dashboard's and ``/metrics``' numbers; a crash between a range's rename and
its inputs' removal shows each batch once; the first layout (one ``part-0.parquet``) and a batch
written as several files read the same; a bad ``--retain`` is refused with exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from expectations.suites import ExpectationsObserver
from replemu.cli import main
from replemu.dashboard import RunReader
from replemu.metrics import exposition
from scenario_io.profiles import load_profiles
from streaming import output_layout as layout
from streaming.checkpoint import CheckpointError, claim_run
from streaming.compaction import ALL_KINDS, CompactionPolicy, maybe_compact, merge, plan
from streaming.job import run_stream
from streaming.storage import LocalStore
from streaming.workload_source import WorkloadSpec

SEED, PARTITIONS, STEPS_PER_BATCH, BATCHES = 1, 6, 4, 8
# Small blocks so that 8 micro-batches make levels: 2-batch ranges, 4-batch ranges, 8 ...
SMALL = dict(keep_recent=2, batches_per_range=2, fan_in=2)


@pytest.fixture(scope="module")
def original(spark, tmp_path_factory) -> Path:
    """A real workload stream in the sink's layout: 6 partitions, 8 micro-batches, GX results."""
    root = tmp_path_factory.mktemp("layout")
    workload = WorkloadSpec.of(load_profiles()["hard"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=STEPS_PER_BATCH * BATCHES)
    run_stream(None, root / "out", root / "ck", "hw", spark=spark, quiet=True, workload=workload,
               observer=ExpectationsObserver())
    return root / "out"


def copy_of(original: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(original, out, ignore=shutil.ignore_patterns("data_docs", "gx_results", "logs"))
    if (original / "data_docs" / "index.html").is_file():  # the page links it when it is there
        (out / "data_docs").mkdir()
        shutil.copy(original / "data_docs" / "index.html", out / "data_docs")
    return out


def rows_by_batch(out: Path) -> dict[tuple[str, int], list]:
    """Every (kind, batch)'s rows, sorted (the comparison is of rows, not of files)."""
    rows = {}
    for kind in ALL_KINDS:
        table = layout.read_kind(out, kind)
        for b, t in layout.split_by_batch(table).items():
            rows[(kind, b)] = sorted(json.dumps(r, sort_keys=True, default=str) for r in t.drop_columns(["batch_id"]).to_pylist())
    return rows


def results_json(out: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["results", str(out), "--json"]) == 0
    return capsys.readouterr().out


def reader_view(out: Path) -> dict:
    """What the dashboard, serve and /metrics show (signatures and versions aside)."""
    reader = RunReader(out, "r0", lambda rel: rel)
    overview = {k: v for k, v in reader.overview().items() if k not in ("version", "source", "name")}
    parts = {p["key"]: reader.partition(p["topic"], p["partition"]) for p in overview["partitions"]}
    metrics = exposition(lambda: [RunReader(out, "r0", lambda rel: rel)])[0].decode()
    return {"overview": overview, "batches": reader.batches(), "partitions": parts, "metrics": metrics}


def kinds_units(out: Path) -> dict[str, list[str]]:
    return {kind: [u.name for u in layout.all_units(out, kind)] for kind in ALL_KINDS}


@pytest.mark.parametrize("engine", ["spark", "pyarrow"])
def test_compaction_changes_no_result_row_or_view(original, tmp_path, capsys, spark, engine):
    before = (results_json(original, capsys), rows_by_batch(original), reader_view(original))
    out = copy_of(original, tmp_path)
    session = spark if engine == "spark" else None
    report = maybe_compact(LocalStore(out), session, BATCHES - 1, CompactionPolicy(**SMALL))
    assert report.merged and not report.dropped
    # horizon 5: the 4-batch block 0-3 and the 2-batch block 4-5 are due, 6 and 7 stay fresh
    assert kinds_units(out)["summary"] == ["batch_range=0-3", "batch_range=4-5", "batch_id=6", "batch_id=7"]
    ranged = next(out.glob("log/batch_range=0-3"))
    files = sorted(p for p in ranged.glob("*.parquet"))
    assert files and all("batch_id" in pq.read_schema(f).names for f in files)
    assert json.loads((ranged / layout.MANIFEST).read_text())["rows"]  # which batches it holds
    after = (results_json(out, capsys), rows_by_batch(out), reader_view(out))
    assert after[0] == before[0]
    assert after[1] == before[1]
    assert after[2] == before[2]
    # Later, the next level: 0-3, 4-5, 6 and 7 become one range of 8 (tiered).
    maybe_compact(LocalStore(out), session, BATCHES + 1, CompactionPolicy(**SMALL))
    assert kinds_units(out)["summary"] == ["batch_range=0-7"]
    assert (results_json(out, capsys), rows_by_batch(out)) == before[:2]
    assert reader_view(out) == before[2]


def test_a_crash_between_the_rename_and_the_removal_shows_each_batch_once(original, tmp_path, capsys):
    before = (results_json(original, capsys), rows_by_batch(original), reader_view(original))
    out = copy_of(original, tmp_path)
    store = LocalStore(out)
    p = plan(store, BATCHES - 1, CompactionPolicy(**SMALL))
    for m in p.merges:
        merge(store, None, m, crash_before_removal=True)  # the range renamed in, its inputs still there
    (out / "timeline" / ".batch_range=6-7.tmp").mkdir()  # and a range that never got renamed in
    assert "batch_id=3" in kinds_units(out)["summary"] and "batch_range=0-3" in kinds_units(out)["summary"]
    assert results_json(out, capsys) == before[0]
    assert rows_by_batch(out) == before[1]
    assert reader_view(out) == before[2]
    report = maybe_compact(store, None, BATCHES - 1, CompactionPolicy(**SMALL))  # the next call tidies up
    assert report.removed and not report.merged
    assert kinds_units(out)["summary"] == ["batch_range=0-3", "batch_range=4-5", "batch_id=6", "batch_id=7"]
    assert not list(out.glob("*/.batch_range=*"))
    assert rows_by_batch(out) == before[1]


def test_a_batch_rerun_into_a_range_is_ignored_and_then_removed(original, tmp_path, capsys):
    """``checkpoint repair`` rolled back into compacted batches: the sink writes them again."""
    out = copy_of(original, tmp_path)
    maybe_compact(LocalStore(out), None, BATCHES - 1, CompactionPolicy(**SMALL))
    expected = rows_by_batch(out)
    shutil.copytree(original / "log" / "batch_id=2", out / "log" / "batch_id=2")
    assert layout.landed_counts(LocalStore(out), 2, ["log"])["log"] == sum(
        pq.read_metadata(f).num_rows for f in (original / "log" / "batch_id=2").glob("*.parquet"))
    assert rows_by_batch(out) == expected
    maybe_compact(LocalStore(out), None, BATCHES - 1, CompactionPolicy(**SMALL))
    assert not (out / "log" / "batch_id=2").exists()


def test_retention_drops_only_the_asked_kind_and_says_so(original, tmp_path, capsys):
    before_results, before_rows = results_json(original, capsys), rows_by_batch(original)
    out = copy_of(original, tmp_path)
    report = maybe_compact(LocalStore(out), None, BATCHES - 1, CompactionPolicy(**SMALL, retain={"timeline": 4}))
    assert report.dropped and all(rel.startswith("timeline/") for rel in report.dropped)
    after = rows_by_batch(out)
    assert sorted(b for k, b in after if k == "timeline") == [4, 5, 6, 7]
    assert {key: rows for key, rows in after.items() if key[0] != "timeline"} == \
        {key: rows for key, rows in before_rows.items() if key[0] != "timeline"}
    assert json.loads((out / layout.RETENTION_FILE).read_text())["dropped_before"] == {"timeline": 4}
    assert results_json(out, capsys) == before_results


@pytest.mark.parametrize("retain, words", [
    ("log=100", "log is kept whole"), ("summary=5", "summary is kept whole"), ("validations=5", "kept whole"),
    ("bogus=5", "no output kind 'bogus'"), ("timeline=0", "at least 1"), ("timeline", "KIND=BATCHES"),
    ("timeline=lots", "whole number")])
def test_a_bad_retain_is_refused_before_spark_starts(tmp_path, capsys, retain, words):
    status = main(["stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "4",
                   "--protocol", "hw", "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
                   "--retain", retain])
    err = capsys.readouterr().err
    assert status == 2 and words in err and "Traceback" not in err
    assert not (tmp_path / "ck").exists()
    assert main(["compact", str(tmp_path), "--retain", retain]) == 2


def relayout(out: Path, files: int) -> None:
    """Every fresh batch of ``out`` rewritten as ``files`` Parquet files: 1 is the first layout
    (``part-0.parquet``), more as the sink writes one file per Spark task."""
    import pyarrow as pa

    for d in out.glob("*/batch_id=*"):
        parts = sorted(d.glob("*.parquet"))
        t = pa.concat_tables([pq.read_table(f) for f in parts])
        for f in parts:
            f.unlink()
        if files == 1:
            pq.write_table(t, d / "part-0.parquet")
            continue
        step = -(-t.num_rows // files)
        for i in range(files):
            pq.write_table(t.slice(i * step, step), d / f"part-{i:05d}.parquet")


@pytest.mark.parametrize("files", [1, 3])
def test_the_first_layout_and_several_files_per_batch_read_the_same(original, tmp_path, capsys, files):
    before = (results_json(original, capsys), rows_by_batch(original), reader_view(original))
    out = copy_of(original, tmp_path)
    relayout(out, files)
    assert len(list(out.glob("summary/batch_id=0/*.parquet"))) == files
    assert (results_json(out, capsys), rows_by_batch(out), reader_view(out)) == before
    maybe_compact(LocalStore(out), None, BATCHES - 1, CompactionPolicy(**SMALL))
    assert (results_json(out, capsys), rows_by_batch(out), reader_view(out)) == before


def test_replemu_compact_and_a_compacted_output_still_holds_batches(original, tmp_path, capsys):
    out = copy_of(original, tmp_path)
    assert main(["compact", str(out), "--keep-recent", "2"]) == 0
    assert "nothing to compact" in capsys.readouterr().out  # 100-batch ranges: 12 batches are too few
    maybe_compact(LocalStore(out), None, BATCHES + 5, CompactionPolicy(**SMALL))
    assert not list(out.glob("*/batch_id=*"))
    with pytest.raises(CheckpointError, match="holds micro-batches of an earlier run"):
        claim_run(tmp_path / "new-ck", out, {"protocol": "hw"})


def test_an_output_on_a_hadoop_filesystem_compacts_through_spark(original, tmp_path, capsys, spark):
    """A ``file://`` URI goes through Hadoop's FileSystem (``streaming.storage.HadoopStore``), as
    ``hdfs://`` or ``s3a://`` would: the ranges are written by Spark and renamed through Hadoop."""
    from streaming.storage import HadoopStore, open_store

    before = (results_json(original, capsys), rows_by_batch(original))
    out = copy_of(original, tmp_path)
    store = open_store(out.as_uri(), spark)
    assert isinstance(store, HadoopStore)
    report = maybe_compact(store, spark, BATCHES - 1, CompactionPolicy(**SMALL, retain={"timeline": 4}))
    assert report.merged and report.dropped
    assert kinds_units(out)["summary"] == ["batch_range=0-3", "batch_range=4-5", "batch_id=6", "batch_id=7"]
    assert layout.landed_counts(store, 5, ["summary"]) == {"summary": len(before[1][("summary", 5)])}
    after = rows_by_batch(out)
    assert {k: v for k, v in after.items() if k[0] != "timeline"} == {k: v for k, v in before[1].items() if k[0] != "timeline"}
    assert results_json(out, capsys) == before[0]
    assert layout.read_retention(store)["dropped_before"] == {"timeline": 4}
