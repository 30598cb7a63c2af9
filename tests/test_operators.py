"""``--operator transformWithState`` beside the default ``applyInPandasWithState``, on the suite's
SparkSession: the same state function gives the same output rows, gaps, quarantine and partition
state on the same input; a restarted run of one gives the rows of an uninterrupted run of the
other; a gap is reported after its timeout through a timer; a checkpoint of one operator is
refused by the other before Spark starts, naming both."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import BUNDLED, gap_then_late_row, output_rows, replemu, rows_difference
from emulator import run_scenario
from scenario_io.yaml_files import load_scenario
from streaming.events import scenario_rows, write_event_files
from streaming.job import read_partition_states, run_stream
from streaming.operators import DEFAULT_OPERATOR, OPERATOR_NAMES
from streaming.results import quarantine_rows, read_results

TWS = "transformWithState"


def test_the_operators_are_the_default_and_transform_with_state_and_the_docs_table_is_the_generated_one():
    from conftest import ROOT
    from streaming.operators import operators_markdown

    assert OPERATOR_NAMES == (DEFAULT_OPERATOR, TWS) and DEFAULT_OPERATOR == "applyInPandasWithState"
    page = (ROOT / "docs" / "streaming.md").read_text()
    begin, end = "<!-- operators:begin -->\n", "<!-- operators:end -->"
    assert page.count(begin) == 1 and page.count(end) == 1
    assert page[page.index(begin) + len(begin):page.index(end)] == operators_markdown(), (
        "regenerate with: python -c \"from streaming.operators import operators_markdown; print(operators_markdown(), end='')\"")


def test_transform_with_state_restarted_writes_the_default_operators_rows_gaps_and_state(spark, tmp_path):
    """Good and bad rows over two micro-batches (an unknown step, a gap; then a duplicate and an
    unreadable line): transformWithState, stopped after the first and restarted from its
    checkpoint, writes every output kind's rows, gaps.json and partition state that one
    uninterrupted default run writes, and the good partition ends as ``replemu run`` does."""
    import shutil

    good = scenario_rows(load_scenario(BUNDLED / "s1-kip101-scenario-1.yaml"))
    bad = scenario_rows(load_scenario(BUNDLED / "seed-1-two-round-hw.yaml"))
    topic = bad[0]["topic"]
    bad[2] = {**bad[2], "type": "teleport"}  # an unknown step type
    bad.append({"topic": topic, "partition": 0, "seq": 9, "type": "fetch", "args": json.dumps({"replica": 2})})  # a gap
    events = tmp_path / "events"
    write_event_files([good, bad], events)
    time.sleep(0.01)  # the bad file is the newer
    (events / "events-99998.jsonl").write_text(json.dumps(bad[4]) + "\n[1, 2]\n")  # a duplicate, an unreadable line
    files = sorted(events.iterdir(), key=lambda f: f.stat().st_mtime)

    def stream(operator: str, source: Path):
        return [s.batch_id for s in run_stream(source, tmp_path / operator / "output", tmp_path / operator / "checkpoint",
                                               "hw", max_files_per_trigger=1, spark=spark, quiet=True, operator=operator)]

    arriving = tmp_path / "arriving"  # one input directory: quarantined rows name their file
    arriving.mkdir()
    shutil.copy2(files[0], arriving / files[0].name)  # keeps the mtime: the source's order
    assert stream(TWS, arriving) == [0]
    shutil.copy2(files[1], arriving / files[1].name)
    assert stream(TWS, arriving) == [1]
    assert stream(DEFAULT_OPERATOR, arriving) == [0, 1]
    default, tws = (tmp_path / o / "output" for o in (DEFAULT_OPERATOR, TWS))
    expected = output_rows(default)
    assert {kind for kind, _ in expected} >= {"timeline", "log", "summary", "quarantine"}
    assert rows_difference(expected, output_rows(tws)) is None
    reasons = [q["reason"] for q in quarantine_rows(tws)]
    assert any("unknown step type 'teleport'" in r for r in reasons)
    assert any("duplicate or out-of-order sequence" in r for r in reasons)
    assert any("not a JSON object" in r for r in reasons)
    gaps = json.loads((tws / "gaps.json").read_text())
    assert gaps == json.loads((default / "gaps.json").read_text()) == [
        {"topic": topic, "partition": 0, "missing_seq": 5, "waiting_seqs": [9]}]
    results = {r["scenario"]: r for r in read_results(tws)}
    assert results["s1-kip101-scenario-1"] == run_scenario(load_scenario(BUNDLED / "s1-kip101-scenario-1.yaml"), "hw")
    # replemu state's reader: each checkpoint read as its operator keeps it (told by Spark's state metadata)
    states = [read_partition_states(spark, tmp_path / o / "checkpoint") for o in (DEFAULT_OPERATOR, TWS)]
    assert [(s["topic"], s["next_seq"]) for s in states[1]] == [("s1-kip101-scenario-1", len(good)), (topic, 5)]
    assert states[0] == states[1]


def test_transform_with_state_runs_the_workload_source_across_a_restart(spark, tmp_path):
    """The workload source (ticks; each partition's generator kept in its state): stopped after one
    micro-batch and restarted, every partition ends as the core's replay of the same steps."""
    from scenario_io.profiles import load_profiles
    from streaming.workload_source import WorkloadSpec
    from test_stream import assert_partitions_end_as_the_core

    clean = load_profiles()["clean"]
    for max_steps, batches in ((10, [0]), (20, [1])):
        stats = run_stream(None, tmp_path / "out", tmp_path / "ck", "kip101", spark=spark, quiet=True, operator=TWS,
                           workload=WorkloadSpec.of(clean, 5, 3, 10, max_steps=max_steps))
        assert [s.batch_id for s in stats] == batches
    assert_partitions_end_as_the_core(tmp_path / "out", seed=5, partitions=3, steps=20, protocol="kip101")


def test_transform_with_state_reports_a_gap_after_the_timeout_through_a_timer(spark, tmp_path):
    """Under a processing-time trigger a partition waiting for a missing seq is reported once in
    quarantine when its timer fires, keeps waiting, and applies the row when it comes."""
    reasons, at_the_end, result = gap_then_late_row(spark, tmp_path, TWS, wait_s=90)
    assert at_the_end == reasons  # reported once
    assert result == run_scenario(load_scenario(BUNDLED / "seed-1-two-round-hw.yaml"), "hw")


def _claimed(root: Path, operator: str) -> None:
    """A checkpoint whose identity says ``operator`` (what ``replemu stream`` records at its first start)."""
    from scenario_io.profiles import load_profiles
    from streaming.checkpoint import claim_run, run_identity
    from streaming.operators import state_store_for
    from streaming.workload_source import WorkloadSpec

    w = WorkloadSpec.of(load_profiles()["clean"], 1, 2, 20, 40)
    identity = run_identity(protocol="kip320", knobs=None, input_dir=None, workload=w, shuffle_partitions=2,
                            state_store=state_store_for(operator, None), compact_min_records=None, gap_timeout_ms=60000,
                            operator=operator)
    claim_run(root / "ck", root / "out", identity).release()


@pytest.mark.parametrize("recorded", OPERATOR_NAMES)
def test_a_checkpoint_of_one_operator_is_refused_by_the_other(tmp_path, recorded):
    _claimed(tmp_path, recorded)
    other = next(o for o in OPERATOR_NAMES if o != recorded)
    argv = ("stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "40", "--protocol", "kip320",
            "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--shuffle-partitions", "2")
    r = replemu(*argv, "--operator", other, "--allow-change", "state_store")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f'operator: checkpoint "{recorded}", this run "{other}"' in r.stderr
    assert "operator cannot change: start a new checkpoint" in r.stderr


def test_transform_with_state_refuses_another_state_store_and_an_old_identity_means_the_default(tmp_path):
    from streaming.checkpoint import identity_differences, run_identity

    r = replemu("stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "4", "--protocol",
                "kip320", "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
                "--operator", TWS, "--state-store", "hdfs")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--operator transformWithState runs only on the rocksdb state store, not --state-store hdfs" in r.stderr
    assert not (tmp_path / "ck").exists()  # refused before anything was written
    kw = dict(protocol="hw", knobs=None, input_dir=tmp_path, workload=None, shuffle_partitions=2, state_store=None,
              compact_min_records=None, gap_timeout_ms=60000)
    before = {k: v for k, v in run_identity(**kw).items() if k != "operator"}  # recorded before the choice existed
    assert identity_differences(before, run_identity(**kw)) == []
    assert identity_differences(before, run_identity(**kw, operator=TWS)) == ["operator"]
