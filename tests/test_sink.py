"""The sink writes where the rows are and commits like a file system transaction.

Each micro-batch's kinds are written by Spark's Parquet writer from the executors into
``OUTPUT/<kind>/.batch_id=N.tmp`` and renamed into place by the driver: a batch that Spark
replays replaces its directories (also when a crash left a half-written staging directory, or
when the replay has no rows of a kind the first attempt had), the files are named in task order
and only data files remain, and what the driver learns is one count per kind."""

from __future__ import annotations

import pyarrow.parquet as pq

from conftest import ROOT, output_rows

SCENARIOS = sorted((ROOT / "conf" / "scenarios").glob("*.yaml"))[:4]


def payloads_frame(spark, protocol: str = "hw"):
    """One micro-batch of payloads, as the stream's foreachBatch receives them (batch form)."""
    from replemu.api import events_frame
    from streaming.pipeline import payloads

    return payloads(events_frame(spark, SCENARIOS), protocol)


def expected_tables(spark, protocol: str = "hw") -> dict:
    """The same batch's rows per kind, computed in this process (the single-file writer)."""
    from streaming.processor import tables_from_payloads

    tables, _ = tables_from_payloads(r["payload"] for r in payloads_frame(spark, protocol).collect())
    return tables


def test_a_batch_lands_as_spark_wrote_it_and_a_replay_replaces_it_whole(spark, tmp_path):
    from streaming.sink import ParquetSink, sorted_kind_table

    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text("{}")
    sink = ParquetSink(out)
    # what a first attempt of batch 3 left behind: a kind this attempt has no rows of, a
    # directory of an old attempt and a half-written staging directory
    for stale in ("quarantine/batch_id=3/part-00000.parquet", "log/batch_id=3/part-00007.parquet",
                  "log/.batch_id=3.tmp/part-00003-half.snappy.parquet"):
        (out / stale).parent.mkdir(parents=True, exist_ok=True)
        (out / stale).write_bytes(b"PAR1 torn")
    sink(payloads_frame(spark), 3)

    want = expected_tables(spark)
    stats = sink.stats[-1]
    assert stats.batch_id == 3 and stats.rows == {k: (want[k].num_rows if k in want else 0) for k in stats.rows}
    assert stats.partitions == want["summary"].num_rows == len(SCENARIOS)
    assert not (out / "quarantine" / "batch_id=3").exists()  # the replay had none: the old rows went
    assert not list(out.rglob(".batch_id=*")) and not list(out.rglob("_SUCCESS")) and not list(out.rglob("*.crc"))
    for kind, table in want.items():
        names = sorted(p.name for p in (out / kind / "batch_id=3").iterdir())
        assert names == [f"part-{i:05d}.parquet" for i in range(len(names))]  # task order, nothing else
        got = pq.read_table(out / kind / "batch_id=3").drop_columns([]).select(list(table.column_names))
        assert sorted_kind_table(kind, got).to_pylist() == sorted_kind_table(kind, table).to_pylist()

    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.parquet")}
    sink(payloads_frame(spark), 3)  # Spark replays the batch after a restart: the same bytes, once
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*.parquet")} == before


def test_the_row_form_and_the_payloads_land_the_same_rows(spark, tmp_path):
    from streaming.pipeline import payloads_to_rows
    from streaming.schemas import OUTPUT_SCHEMA
    from streaming.sink import ParquetSink

    a, b = tmp_path / "a", tmp_path / "b"
    ParquetSink(a)(payloads_frame(spark, "kip320"), 0)
    ParquetSink(b)(payloads_frame(spark, "kip320").mapInArrow(payloads_to_rows, OUTPUT_SCHEMA), 0)
    assert output_rows(a) == output_rows(b) and output_rows(a)


def test_the_driver_is_handed_counts_not_rows(spark, tmp_path, monkeypatch):
    """The sink never collects the batch: a DataFrame whose collect/toPandas/toArrow of rows
    would raise still lands (only the per-kind count is collected, by an aggregate)."""
    from streaming.sink import ParquetSink

    frame = payloads_frame(spark)
    DataFrame = type(frame)  # the classic (or Connect) implementation
    pulled = []
    for name in ("toPandas", "toArrow", "toLocalIterator"):
        original = getattr(DataFrame, name)
        monkeypatch.setattr(DataFrame, name, lambda self, *a, _o=original, _n=name, **k: pulled.append(_n) or _o(self, *a, **k))
    collect = DataFrame.collect
    sizes = []
    monkeypatch.setattr(DataFrame, "collect", lambda self: sizes.append(len(rows := collect(self))) or rows)
    ParquetSink(tmp_path / "out")(frame, 0)
    assert pulled == [] and sizes and max(sizes) <= 7  # one (kind, count) row per kind at most


class _Recorder:
    """An observer that validates beside the writes (``begin_spark_batch``) and notes what it saw
    and which kinds had landed when its results were recorded."""

    def __init__(self) -> None:
        self.begun: list[tuple[int, dict[str, int]]] = []
        self.landed_when_recorded: list[list[str]] = []

    def begin_spark_batch(self, kinds, batch_id, output_dir, counts):
        self.begun.append((batch_id, {kind: df.count() for kind, df in kinds.items()}))
        return lambda: self.landed_when_recorded.append(
            sorted(p.parent.parent.name for p in output_dir.glob(f"*/batch_id={batch_id}/part-00000.parquet")))

    def finish(self, output_dir) -> None:
        pass


def test_an_observer_validates_beside_the_writes_and_records_after_every_kind_landed(spark, tmp_path):
    from streaming.sink import ParquetSink

    out = tmp_path / "out"
    observer = _Recorder()
    sink = ParquetSink(out, observer=observer)
    sink(payloads_frame(spark), 2)
    want = {kind: t.num_rows for kind, t in expected_tables(spark).items() if t.num_rows}
    assert observer.begun == [(2, want)]  # every kind with rows, all of its rows
    assert observer.landed_when_recorded == [sorted(want)]


def test_a_batch_whose_write_fails_records_no_validation(spark, tmp_path, monkeypatch):
    """The observer's results are recorded only for a batch whose kinds all landed: a failed write
    fails the batch (Spark runs it again) and its validation is never recorded."""
    import pytest

    from streaming import sink as sink_module

    observer = _Recorder()
    original = sink_module.commit_written

    def failing(store, staging, target):
        if target.startswith("log/"):
            raise OSError(28, "No space left on device")
        return original(store, staging, target)

    monkeypatch.setattr(sink_module, "commit_written", failing)
    with pytest.raises(OSError):
        sink_module.ParquetSink(tmp_path / "out", observer=observer)(payloads_frame(spark), 0)
    assert [b for b, _ in observer.begun] == [0] and observer.landed_when_recorded == []
