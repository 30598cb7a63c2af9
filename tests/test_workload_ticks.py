"""The workload generated where the partitions live (issue 32, item 3): the workload source sends
one tick per partition and micro-batch, and the state function generates the steps from the
generator kept in the partition's state.  The outputs are the rows the same steps give as event
rows, batch by batch; a restart resumes the generator from the checkpoint."""

import json
import os
import time
from itertools import islice
from pathlib import Path

from emulator.workload import partition_header, step_bursts, workload_topic
from scenario_io.profiles import load_profiles
from streaming.processor import process_batch, stream_protocol
from streaming.schemas import HEADER_TYPE, OUTPUT_KINDS, TICK_TYPE
from streaming.state_codec import describe_generator
from streaming.workload_source import WorkloadSpec, batch_range, tick_rows

SEED, PARTITIONS, STEPS_PER_BATCH, MAX_STEPS = 3, 5, 6, 20  # 4 micro-batches: 6, 6, 6 and 2 steps
PROFILE = load_profiles()["hard"]


def generated_rows(k: int, b: int) -> list[dict]:
    """The event rows of partition ``k`` in micro-batch ``b`` as the source generated them
    itself before (the header in batch 0)."""
    first, last = batch_range(b, STEPS_PER_BATCH, MAX_STEPS)
    h = partition_header(SEED, k, PROFILE)
    steps = [s for burst in islice(step_bursts(SEED, k, PROFILE), last) for s in burst][first - 1:last]
    rows = []
    if b == 0:
        rows.append({"topic": h["topic"], "partition": k, "seq": 0, "type": HEADER_TYPE,
                     "args": json.dumps({"scenario": h["name"], "replicas": h["replicas"], "config": h["config"]})})
    for seq, step in enumerate(steps, start=first):
        (kind, args), = step.items()
        rows.append({"topic": h["topic"], "partition": k, "seq": seq, "type": kind, "args": json.dumps(args)})
    return rows


def ticks(k: int, b: int) -> list[dict]:
    task = WorkloadSpec.of(PROFILE, SEED, PARTITIONS, STEPS_PER_BATCH, MAX_STEPS).read_task(b, b + 1, k, k + 1)
    return [dict(zip(("topic", "partition", "seq", "type", "args"), row)) for row in tick_rows(task)]


def _rows(out) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in out)


def test_ticks_give_the_rows_of_the_generated_events_batch_by_batch():
    """process_batch on ticks = process_batch on the events the source used to generate."""
    for k in range(PARTITIONS):
        from_ticks = from_events = None
        for b in range(4):
            t = ticks(k, b)
            assert len(t) == 1 and t[0]["type"] == TICK_TYPE and t[0]["topic"] == workload_topic(SEED, "hard")
            got, from_ticks, _ = process_batch(t[0]["topic"], k, t, from_ticks, stream_protocol("hw"))
            want, from_events, _ = process_batch(t[0]["topic"], k, generated_rows(k, b), from_events, stream_protocol("hw"))
            assert _rows(got) == _rows(want)
            assert from_ticks["next_seq"] == from_events["next_seq"] == batch_range(b, STEPS_PER_BATCH, MAX_STEPS)[1] + 1
            assert from_events["generator"] is None
            shown = describe_generator(from_ticks["generator"])
            assert shown["next_seq"] == from_ticks["next_seq"] and shown["partition"] == k


def test_the_workload_spec_goes_to_spark_as_text_options_and_comes_back_the_same():
    """The driver's typed spec becomes Spark's text options, and the source's reader reads the same
    spec back (with and without ``max_steps``); the profile travels as JSON that rebuilds it."""
    from emulator.workload import profile_from_mapping
    from streaming.workload_source import WorkloadStreamReader

    for max_steps, last_batch in ((MAX_STEPS, 4), (None, None)):
        spec = WorkloadSpec.of(PROFILE, SEED, PARTITIONS, STEPS_PER_BATCH, max_steps)
        options = spec.to_options()
        assert all(isinstance(v, str) for v in options.values()) and ("max_steps" in options) == (max_steps is not None)
        reader = WorkloadStreamReader(options)
        assert reader.spec == WorkloadSpec.from_options(options) == spec and reader._last_batch() == last_batch
    assert profile_from_mapping(spec.profile, json.loads(spec.profile_spec)) == PROFILE
    assert list(spec.document()) == ["seed", "profile", "partitions", "steps_per_batch", "max_steps", "profile_spec", "generator"]


def test_a_tick_that_cannot_be_followed_goes_to_quarantine_with_its_reason():
    topic = workload_topic(SEED, "hard")
    first = ticks(0, 0)
    rows, st, _ = process_batch(topic, 0, first, None, stream_protocol("hw"))
    assert not [r for r in rows if r["kind"] == "quarantine"]

    def reasons(events, state):
        rows, after, _ = process_batch(topic, 0, events, state, stream_protocol("hw"))
        return [r["reason"] for r in rows if r["kind"] == "quarantine"], after

    again, _ = reasons(first, st)  # the start tick a second time
    assert len(again) == 1 and "invalid workload tick" in again[0] and "started already" in again[0]
    earlier, _ = reasons([{**first[0], "args": json.dumps({"first": 3, "last": 6})}], st)
    assert "steps up to 6 were generated already" in earlier[0]
    unstarted, _ = reasons(ticks(0, 1), None)
    assert "never started" in unstarted[0]
    for bad in ("not json", json.dumps({"first": 7}), json.dumps({"first": "7", "last": 12}), json.dumps([1, 2])):
        got, after = reasons([{**ticks(0, 1)[0], "args": bad}], st)
        assert len(got) == 1 and got[0].startswith("seq 7: invalid workload tick"), (bad, got)
        assert after["next_seq"] == st["next_seq"]
    fine, _ = reasons(ticks(0, 1), st)
    assert fine == []


def _event_files(root: Path) -> Path:
    """The generated events as one JSON-lines file per micro-batch (what the source sent before)."""
    root.mkdir(parents=True)
    base = time.time_ns() // 1_000_000 * 1_000_000
    for b in range(4):
        path = root / f"batch-{b:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for k in range(PARTITIONS) for r in generated_rows(k, b)))
        os.utime(path, ns=(base + b * 1_000_000, base + b * 1_000_000))
    return root


def _output_rows(out: Path) -> dict[str, list[str]]:
    from streaming.results import read_output

    got = {}
    for kind in OUTPUT_KINDS:
        frame = read_output(out, kind)
        got[kind] = _rows(frame.astype(object).where(frame.notna(), None).to_dict("records")) if len(frame) else []
    return got


def test_a_workload_stream_writes_the_rows_of_its_steps_as_event_files_and_resumes_after_a_restart(spark, tmp_path):
    from streaming.job import read_partition_states, run_stream

    kw = dict(spark=spark, quiet=True)
    files = run_stream(_event_files(tmp_path / "events"), tmp_path / "files", tmp_path / "ck-files", "hw",
                       max_files_per_trigger=1, **kw)
    straight = run_stream(None, tmp_path / "ticks", tmp_path / "ck-ticks", "hw",
                          workload=WorkloadSpec.of(PROFILE, SEED, PARTITIONS, STEPS_PER_BATCH, MAX_STEPS), **kw)
    assert [s.batch_id for s in files] == [s.batch_id for s in straight] == [0, 1, 2, 3]
    expected = _output_rows(tmp_path / "files")
    assert expected["timeline"] and expected["summary"]
    assert _output_rows(tmp_path / "ticks") == expected  # rows per kind and batch id

    # stopped after two batches, restarted: the generator resumes from the checkpoint
    run_stream(None, tmp_path / "restarted", tmp_path / "ck-restarted", "hw",
               workload=WorkloadSpec.of(PROFILE, SEED, PARTITIONS, STEPS_PER_BATCH, 2 * STEPS_PER_BATCH), **kw)
    middle = {s["partition"]: s["generator"] for s in read_partition_states(spark, tmp_path / "ck-restarted")}
    assert sorted(middle) == list(range(PARTITIONS))
    assert all(g["next_seq"] == 2 * STEPS_PER_BATCH + 1 for g in middle.values())
    second = run_stream(None, tmp_path / "restarted", tmp_path / "ck-restarted", "hw",
                        workload=WorkloadSpec.of(PROFILE, SEED, PARTITIONS, STEPS_PER_BATCH, MAX_STEPS), **kw)
    assert [s.batch_id for s in second] == [2, 3]
    assert _output_rows(tmp_path / "restarted") == expected
    final = read_partition_states(spark, tmp_path / "ck-restarted")
    assert [s["generator"]["next_seq"] for s in final] == [MAX_STEPS + 1] * PARTITIONS
    assert all(s["generator"]["bytes"] < 12_000 for s in final)
