"""The expectation suites where the data is (issue 32, item 2): the validation frames computed by
Spark equal the pandas ones on real outputs, and GX's Spark datasource gives the same
``validations`` rows, GX results files and Data Docs pages as its pandas datasource."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from conftest import BUNDLED
from emulator import VARIANT_NAMES, parse_scenario
from emulator.invariants import INVARIANT_NAMES
from expectations.spark_frames import validation_frames_spark
from expectations.suites import (
    OFFENDING_LIMIT,
    BatchValidator,
    ExpectationsObserver,
    frames_from_outputs,
    materialized,
)
from streaming.events import scenario_rows
from streaming.processor import process_batch, stream_protocol
from streaming.schemas import (
    KIND_COLUMNS,
    arrow_schema,
    output_arrow_schema,
    output_rows_table,
    tables_by_kind,
)
from streaming.sink import sorted_kind_table


def batches_of(scenarios, protocol: str, batches: int = 2) -> list[dict[str, pa.Table]]:
    """Each partition's events cut into ``batches`` micro-batches and run through the streaming
    processor with its state carried over: per micro-batch, kind -> Arrow table as the sink writes it."""
    states: dict[tuple, dict | None] = {}
    out = []
    for b in range(batches):
        rows = []
        for s in scenarios:
            events = scenario_rows(s)
            key = (events[0]["topic"], events[0]["partition"])
            size = -(-len(events) // batches)
            chunk = events[b * size:(b + 1) * size]
            if not chunk:
                continue
            produced, states[key], _ = process_batch(key[0], key[1], chunk, states.get(key), stream_protocol(protocol))
            rows.extend(produced)
        table = pa.Table.from_pylist(rows, schema=output_arrow_schema())
        out.append({k: sorted_kind_table(k, t) for k, t in tables_by_kind(table).items()})
    return out


def bundled() -> list:
    return [parse_scenario(yaml.safe_load(p.read_text())) for p in sorted(BUNDLED.glob("*.yaml"))]


def generated(profile_name: str, partitions: int, steps: int, seed: int = 7) -> list:
    """The workload generator's first ``steps`` steps of ``partitions`` partitions."""
    from emulator.workload import first_steps_document
    from scenario_io.profiles import load_profiles

    profile = load_profiles()[profile_name]
    return [parse_scenario(first_steps_document(seed, k, profile, steps)) for k in range(partitions)]


def records(frame) -> list[tuple]:
    """A pandas frame's rows as plain Python tuples, in order (numpy scalars and dtypes aside)."""
    def plain(v):
        if hasattr(v, "tolist"):  # a numpy scalar or array (a list column)
            v = v.tolist()
        return tuple(v) if isinstance(v, list) else v
    return [tuple(plain(v) for v in row) for row in frame.astype(object).itertuples(index=False)]


def spark_kinds(spark, tables: dict[str, pa.Table]) -> dict:
    return {k: spark.createDataFrame(t) for k, t in tables.items()}


def assert_same_frames(spark, tables: dict[str, pa.Table]) -> dict:
    expected = frames_from_outputs({k: t.to_pandas() for k, t in tables.items()})
    got = validation_frames_spark(spark_kinds(spark, tables), spark)
    for name in ("timeline", "partitions"):
        g = got[name].toPandas()
        assert list(g.columns) == list(expected[name].columns), name
        assert records(g) == records(expected[name]), name
    return expected


def _variant_batches():
    scenarios = bundled()
    return [(v, b, t) for v in VARIANT_NAMES for b, t in enumerate(batches_of(scenarios, v))]


@pytest.fixture(scope="module")
def variant_batches():
    return _variant_batches()


def test_spark_frames_equal_the_pandas_frames_on_every_bundled_scenario_under_every_variant(spark, variant_batches):
    seen_violated = set()
    for _variant, _batch, tables in variant_batches:
        expected = assert_same_frames(spark, tables)
        p = expected["partitions"]
        seen_violated |= {n for n in INVARIANT_NAMES if p[n].any()}
    assert {"NoCommittedDataLoss", "StrongIsr", "EventualConvergence"} <= seen_violated  # the frames carry violations


def test_spark_frames_equal_the_pandas_frames_on_a_generated_workload(spark):
    for profile in ("clean", "unclean", "hard"):
        for tables in batches_of(generated(profile, 12, 60), "kip320", batches=3):
            assert_same_frames(spark, tables)


def _table(kind: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r.get(c) for c in KIND_COLUMNS[kind]} for r in rows], schema=arrow_schema(kind))


def test_spark_frames_edge_cases_equal_the_pandas_frames(spark):
    """Epoch caches empty, null, decreasing; a truncation then appends from the cut; a gap; epoch
    rows that do not move the next offset; violations so far and in the final tier; a leaderless
    controller and a leader outside the ISR; a missing kind."""
    tl = dict(topic="t", partition=0, role="follower", alive=True, leo=1, hw=0, leader_epoch=0)
    timeline = _table("timeline", [
        {**tl, "seq": 1, "replica": 1, "role": "leader", "epoch_cache": "[]"},
        {**tl, "seq": 1, "replica": 2, "epoch_cache": None},
        {**tl, "seq": 2, "replica": 1, "role": "leader", "alive": False, "epoch_cache": "[[0,0],[1,5],[2,5]]"},
        {**tl, "seq": 2, "replica": 2, "role": "leader", "epoch_cache": "[[0,0],[1,5],[3,9]]"},
        {**tl, "seq": 3, "replica": 2, "role": "leader", "epoch_cache": "[[2,0],[1,5]]"},
        {**tl, "partition": 1, "seq": 1, "replica": 1, "role": None, "alive": None, "epoch_cache": "[[0,0]]"},
    ])
    lg = dict(topic="t", partition=0, replica=1, epoch=0)
    log = _table("log", [
        {**lg, "seq": 1, "idx": 0, "op": "append", "offset": 0},
        {**lg, "seq": 1, "idx": 1, "op": "append", "offset": 1},
        {**lg, "seq": 2, "idx": 0, "op": "truncate", "offset": 1},
        {**lg, "seq": 2, "idx": 1, "op": "epoch", "offset": 7},
        {**lg, "seq": 3, "idx": 0, "op": "append", "offset": 1},  # from the cut: contiguous
        {**lg, "replica": 2, "seq": 3, "idx": 0, "op": "append", "offset": 4},  # first of the batch: contiguous
        {**lg, "partition": 1, "seq": 1, "idx": 0, "op": "append", "offset": 0},
        {**lg, "partition": 1, "seq": 2, "idx": 0, "op": "append", "offset": 2},  # a gap
        {**lg, "partition": 2, "seq": 1, "idx": 0, "op": "truncate", "offset": 3},
        {**lg, "partition": 2, "seq": 2, "idx": 0, "op": "append", "offset": 2},  # not at the cut
    ])
    final = lambda leader, isr: json.dumps({"controller": {"leader": leader, "epoch": 1, "isr": isr}, "replicas": {}})  # noqa: E731
    summary = _table("summary", [
        {"topic": "t", "partition": 0, "final": final(None, [1, 2]), "violated": None, "final_findings": None},
        {"topic": "t", "partition": 1, "final": final(3, [1, 2]), "violated": "StrongIsr,WeakIsr", "final_findings": "[]"},
        {"topic": "t", "partition": 2, "final": final(1, [1]), "violated": "",
         "final_findings": json.dumps([{"invariant": "EventualConvergence", "detail": "x"}])},
        {"topic": "t", "partition": 10, "final": final(2, [2]), "violated": "LogMatching", "final_findings": None},
    ])
    expected = assert_same_frames(spark, {"timeline": timeline, "log": log, "summary": summary})
    assert list(expected["timeline"]["cache_increasing"]) == [True, True, False, True, False, True]
    assert list(expected["timeline"]["leading"]) == [True, False, False, True, True, False]
    p = expected["partitions"].set_index("partition_key")
    assert list(p["offsets_contiguous"]) == [True, False, False, True]
    assert list(p["leader_in_isr"]) == [True, False, True, True]
    assert p.loc["t/2", "EventualConvergence"] and p.loc["t/1", "WeakIsr"] and not p.loc["t/0"][list(INVARIANT_NAMES)].any()
    assert_same_frames(spark, {"summary": summary})  # no timeline, no log rows
    assert_same_frames(spark, {})


NOT_COMPARED = {"ge_load_time", "run_time", "validation_time", "pandas_data_fingerprint", "batch_data", "checkpoint_id", "validation_id", "id"}


def comparable(path: Path):
    """A GX results file without what differs between two contexts (ids, load and run times) and what
    names the engine (the batch's type, pandas' fingerprint)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in NOT_COMPARED}
        return [strip(v) for v in x] if isinstance(x, list) else x
    return strip(json.loads(path.read_text()))


def test_spark_and_pandas_validation_give_the_same_rows_results_files_and_docs(spark, variant_batches, tmp_path):
    """Failing batches (hw, kip101) and passing ones: the same rows (offending partitions
    included), the same GX results (counts, partial lists) and the same Data Docs pages."""
    pandas_v = BatchValidator(tmp_path / "pd" / "docs", tmp_path / "pd" / "gx", engine="pandas")
    spark_v = BatchValidator(tmp_path / "sp" / "docs", tmp_path / "sp" / "gx", engine="spark")
    outcomes = set()
    picked = [(v, b, t) for v, b, t in variant_batches if v in ("hw", "kip320")]
    for batch_id, (variant, batch, tables) in enumerate(picked):
        expected = pandas_v.validate(frames_from_outputs({k: t.to_pandas() for k, t in tables.items()}), batch_id)
        frames, releases = {}, []
        for name, df in validation_frames_spark(spark_kinds(spark, tables), spark).items():
            frames[name], release = materialized(df)
            releases.append(release)
        try:
            got = spark_v.validate(frames, batch_id)
        finally:
            for release in releases:
                release()
        assert got == expected, (variant, batch)
        outcomes.add(all(r["success"] for r in got))
    assert outcomes == {True, False}
    # The paths name each validation's run time (its clock), which is all that differs in them.
    def undated(root: Path, pattern: str) -> dict[str, Path]:
        return {re.sub(r"/\d{8}T\d{6}\.\d{6}Z/", "/T/", p.relative_to(root).as_posix()): p for p in root.rglob(pattern)}

    pd_files, sp_files = undated(tmp_path / "pd" / "gx", "*.json"), undated(tmp_path / "sp" / "gx", "*.json")
    assert sorted(pd_files) == sorted(sp_files) and len(pd_files) == 2 * len(picked)
    for rel in pd_files:
        assert comparable(sp_files[rel]) == comparable(pd_files[rel]), rel
    pandas_v.build_docs()
    spark_v.build_docs()
    assert sorted(undated(tmp_path / "pd" / "docs", "*.html")) == sorted(undated(tmp_path / "sp" / "docs", "*.html"))


def test_offending_partitions_are_bounded_and_the_same_for_both_engines(spark):
    """More offending partitions than OFFENDING_LIMIT: both engines count them all and name the
    first OFFENDING_LIMIT in (topic, partition) order (not in the text order of the keys)."""
    n = OFFENDING_LIMIT + 15
    final = json.dumps({"controller": {"leader": 1, "epoch": 1, "isr": [2]}, "replicas": {}})
    summary = _table("summary", [{"topic": "t", "partition": k, "final": final, "violated": "StrongIsr"} for k in range(n)])
    tables = {"summary": summary}
    expected = BatchValidator().validate(frames_from_outputs({k: t.to_pandas() for k, t in tables.items()}), 0)
    frames = validation_frames_spark(spark_kinds(spark, tables), spark)
    got = BatchValidator(engine="spark").validate(frames, 0)
    assert got == expected
    kept = {name: materialized(df) for name, df in frames.items()}  # as the observer keeps them: the order holds
    assert BatchValidator(engine="spark").validate({name: k[0] for name, k in kept.items()}, 0) == expected
    for _, release in kept.values():
        release()
    row = next(r for r in got if r["invariant"] == "StrongIsr")
    assert row["unexpected_count"] == n and row["partitions"] == sorted(f"t/{k}" for k in range(OFFENDING_LIMIT))


def test_the_observer_writes_the_same_validations_from_spark_frames(spark, variant_batches, tmp_path):
    """``on_spark_batch`` (the stream's entry point) writes OUTPUT/validations rows equal to
    ``on_batch``'s, and leaves nothing cached."""
    from streaming.results import read_output

    picked = [t for v, b, t in variant_batches if v == "hw"]
    cached_before = spark.sparkContext._jsc.sc().getPersistentRDDs().size()
    pandas_o, spark_o, rows_o = (ExpectationsObserver(docs_every=0) for _ in range(3))
    for batch_id, tables in enumerate(picked):
        pandas_o.on_batch({k: t.to_pandas() for k, t in tables.items()}, batch_id, tmp_path / "pd")
        spark_o.on_spark_batch(spark_kinds(spark, tables), batch_id, tmp_path / "sp")
        # The micro-batch as one DataFrame of OUTPUT_SCHEMA rows (a kind column), as the sink holds it.
        rows_o.on_spark_batch(spark.createDataFrame(output_rows_table(tables)), batch_id, tmp_path / "rows")
    pandas_o.finish(tmp_path / "pd")
    spark_o.finish(tmp_path / "sp")
    a, b = read_output(tmp_path / "pd", "validations"), read_output(tmp_path / "sp", "validations")
    assert set(a["batch_id"]) == set(range(len(picked))) and not (a["expectation"] == "validation_error").any()
    assert records(a) == records(b) == records(read_output(tmp_path / "rows", "validations"))
    assert not a["success"].all()
    assert (tmp_path / "sp" / "data_docs" / "index.html").exists()
    assert spark.sparkContext._jsc.sc().getPersistentRDDs().size() == cached_before


def test_the_stream_validates_small_batches_here_and_large_ones_where_they_are_with_the_same_results(spark, tmp_path):
    """``replemu stream``'s observer picks each validation frame's engine by its size
    (``driver_rows_limit``): a run that validates every frame in this process, one that validates
    every frame with Spark, and one that validates the large frame (timeline) with Spark and the
    small one (partitions) here write the same ``validations`` rows (the same expectations,
    counts, offending partitions and Data Docs pages)."""
    from streaming.events import write_event_files
    from streaming.job import run_stream
    from streaming.results import read_output

    scenarios = [parse_scenario(yaml.safe_load(p.read_text()), source=str(p)) for p in sorted(BUNDLED.glob("*.yaml"))[:3]]
    events = tmp_path / "events"
    write_event_files([scenario_rows(s) for s in scenarios], events, split=2)
    outputs = {}
    engines = {10**9: {"pandas"}, 0: {"spark"}, 12: {"pandas+spark"}}
    for limit in engines:
        observer = ExpectationsObserver(driver_rows_limit=limit)
        out = tmp_path / f"out-{limit}"
        run_stream(events, out, tmp_path / f"ck-{limit}", "hw", spark=spark, quiet=True, observer=observer,
                   max_files_per_trigger=1)
        assert set(observer.engines) == engines[limit] and len(observer.engines) >= 2
        v = read_output(out, "validations")
        outputs[limit] = [{**r, "partitions": list(r["partitions"])}
                          for r in v.sort_values(["batch_id", "frame", "invariant", "expectation"]).to_dict("records")]
    assert outputs[10**9] == outputs[0] == outputs[12] and any(not r["success"] for r in outputs[0])  # hw breaks something
