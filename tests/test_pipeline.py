"""replemu inside someone else's Spark pipeline: events from any DataFrame through
``replemu.replicate`` into the user's own sink, equal to what ``replemu stream`` writes, and the
GX suites run on a user's micro-batch (docs/api.md, "Spark")."""

from __future__ import annotations

import pandas as pd
import pytest

import replemu
from conftest import BUNDLED
from replemu.compile import compile_scenarios
from streaming.job import run_stream
from streaming.results import read_output
from streaming.schemas import KIND_COLUMNS, OUTPUT_COLUMNS, OUTPUT_KINDS

FILES = sorted(BUNDLED.glob("*.yaml"))


def stream_outputs(spark, tmp_path, protocol: str) -> dict[str, pd.DataFrame]:
    """What ``replemu stream`` writes for the bundled scenarios in one micro-batch, per kind."""
    compile_scenarios(FILES, tmp_path / "events")
    run_stream(tmp_path / "events", tmp_path / "output", tmp_path / "checkpoint", protocol, spark=spark, quiet=True)
    out = {}
    for kind in OUTPUT_KINDS:
        frame = read_output(tmp_path / "output", kind)
        if not frame.empty:
            out[kind] = frame[list(KIND_COLUMNS[kind])].reset_index(drop=True)
    return out


def same_frames(got: dict[str, pd.DataFrame], want: dict[str, pd.DataFrame]) -> None:
    assert sorted(got) == sorted(want)
    for kind in want:
        pd.testing.assert_frame_equal(got[kind].reset_index(drop=True), want[kind], check_dtype=False, obj=kind)


def test_a_batch_dataframe_gives_what_replemu_stream_writes(spark, tmp_path):
    """The bundled scenarios as a batch DataFrame through ``replicate``: every kind's rows equal
    ``replemu stream``'s, with the output columns and a ``kind`` column."""
    want = stream_outputs(spark, tmp_path, "hw")
    rows = replemu.replicate(replemu.events_frame(spark, FILES), "hw")
    assert tuple(rows.columns) == OUTPUT_COLUMNS
    got = replemu.split_kinds(rows)
    same_frames(got, want)
    assert not got["violations"].empty  # hw loses committed data in KIP-101's scenarios


def test_replemu_stream_writes_the_same_bytes_from_rows_as_from_payloads(spark, tmp_path):
    """``replemu stream`` unpacks its payloads in the sink; handed ``replicate``'s rows instead
    (what a user's pipeline gets), over three micro-batches, it writes the same Parquet bytes."""
    compile_scenarios(FILES, tmp_path / "events", split=3)
    trees = []
    for rows in (False, True):
        out = tmp_path / f"rows={rows}"
        stats = run_stream(tmp_path / "events", out / "output", out / "checkpoint", "kip101", max_files_per_trigger=1,
                           spark=spark, quiet=True, rows=rows)
        assert len(stats) == 3
        trees.append({str(f.relative_to(out)): f.read_bytes() for f in sorted((out / "output").rglob("*.parquet"))})
    assert trees[0] == trees[1] and any("violations/" in name for name in trees[0])


def test_a_streaming_source_through_foreach_batch_into_a_user_sink(spark, tmp_path):
    """Events from Spark's ``rate-micro-batch`` source (joined to the event rows by index, a
    handful per micro-batch, partitions interleaved) through ``replicate`` into the user's own
    ``foreachBatch`` sink with a checkpoint, stopped and restarted half way: every step's rows
    equal ``replemu stream``'s, and each partition's latest summary is its one-batch summary."""
    from pyspark.sql.functions import col

    want = stream_outputs(spark, tmp_path / "reference", "kip320")
    events = replemu.events_frame(spark, FILES).toPandas()
    events = events.sort_values(["seq", "topic"]).reset_index(drop=True)  # a slice of every partition per batch
    events["i"] = range(len(events))
    table = spark.createDataFrame(events)
    per_batch = 12

    def source():
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", per_batch).load()
                .join(table, col("value") == col("i")).drop("timestamp", "value", "i"))

    landed: dict[int, pd.DataFrame] = {}

    def user_sink(df, batch_id: int) -> None:  # the user's own sink: kept by batch id, as a replay must be
        landed[batch_id] = df.toPandas()

    rows = replemu.replicate(source(), "kip320")
    checkpoint = str(tmp_path / "checkpoint")
    half = len(events) // per_batch // 2
    for stop_after in (half, len(events) // per_batch + 1):
        query = rows.writeStream.foreachBatch(user_sink).option("checkpointLocation", checkpoint).trigger(
            processingTime="0 seconds").start()
        try:
            while not query.lastProgress or query.lastProgress["batchId"] < stop_after:
                query.awaitTermination(0.2)
                assert query.exception() is None
        finally:
            query.stop()
    assert sum(1 for frame in landed.values() if len(frame)) > 10  # many micro-batches
    got = replemu.split_kinds(pd.concat(landed.values(), ignore_index=True))
    for kind in set(want) - {"summary"}:  # nothing lost, nothing applied twice across the restart
        pd.testing.assert_frame_equal(got[kind], want[kind], check_dtype=False, obj=kind)
    latest = got["summary"].sort_values("steps").groupby(["topic", "partition"]).tail(1)
    pd.testing.assert_frame_equal(latest.sort_values(["topic", "partition"]).reset_index(drop=True), want["summary"],
                                  check_dtype=False, obj="summary")


def test_the_suites_on_a_users_micro_batch(spark):
    """``Expectations.validate`` splits a micro-batch by kind and runs the suites: under hw,
    KIP-101's first scenario fails NoCommittedDataLoss for that partition; under kip320 every
    expectation holds."""
    checks = replemu.Expectations()
    s1 = [f for f in FILES if f.name.startswith("s1-")]
    lossy = checks.validate(replemu.replicate(replemu.events_frame(spark, s1), "hw"), batch_id=0)
    failed = lossy[~lossy.success]
    assert "NoCommittedDataLoss" in set(failed.invariant)
    assert list(failed[failed.invariant == "NoCommittedDataLoss"].partitions.iloc[0]) == ["s1-kip101-scenario-1/0"]
    clean = checks.validate(replemu.replicate(replemu.events_frame(spark, s1), "kip320"), batch_id=1)
    assert len(clean) == len(lossy) and clean.success.all() and set(clean.batch_id) == {1}


def test_bad_event_frames_are_refused_with_the_column_named(spark):
    with pytest.raises(ValueError, match="lacks the event column.*seq"):
        replemu.replicate(spark.createDataFrame([("t", 0)], "topic string, partition int"))
    with pytest.raises(ValueError, match="'args' is int"):
        replemu.replicate(spark.createDataFrame([("t", 0, 1, "x", 3)], "topic string, partition int, seq long, type string, args int"))
    with pytest.raises(ValueError, match="unknown protocol variant 'kip999'"):
        replemu.replicate(replemu.events_frame(spark, FILES[:1]), "kip999")
    with pytest.raises(ValueError, match="partition key"):
        replemu.events_frame(spark, [FILES[0], FILES[0]])
