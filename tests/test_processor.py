"""The stream's batch function without Spark: event dicts (or pandas frames) in, output rows and
state out, and the rows read back as contract results the way ``replemu results`` reads them.

Every multi-call test passes the state through ``to_tuple`` / ``from_tuple`` between calls, as
Spark's ``GroupState`` does.
"""

import dataclasses
import json
import random
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BUNDLED
from emulator import VARIANT_NAMES, VARIANTS, Replay, parse_scenario, run_scenario
from emulator.kraft import REFUSED
from emulator.scenario import StepRefused
from generators import deep_scenario
from scenario_io.yaml_files import load_scenario
from streaming.events import scenario_rows
from streaming.pipeline import make_state_function
from streaming.processor import COMPACT_MIN_RECORDS, process_batch, stream_protocol
from streaming.results import read_results
from streaming.schemas import STATE_SCHEMA
from streaming.sink import ParquetSink
from streaming.state_codec import document_from_fields, from_tuple, to_tuple

FILES = sorted(BUNDLED.glob("*.yaml"))
SEED1 = BUNDLED / "seed-1-two-round-hw.yaml"
S1 = BUNDLED / "s1-kip101-scenario-1.yaml"


def events_of(scenario) -> list[dict]:
    """The event rows of a scenario as the job hands them to the batch function."""
    return [{**row, "raw": None} for row in scenario_rows(scenario)]


class Feed:
    """One partition fed call by call; the state goes through the Spark state tuple in between."""

    def __init__(self, protocol: str, **kw):
        self.protocol, self.kw = protocol, kw
        self.state_tuple = None
        self.calls: list[list[dict]] = []
        self.waiting = False

    def __call__(self, events: list[dict], timed_out: bool = False) -> list[dict]:
        topic = events[0]["topic"] if events else self.topic
        partition = events[0]["partition"] if events else self.partition
        self.topic, self.partition = topic, partition
        state = None if self.state_tuple is None else from_tuple(self.state_tuple)
        rows, new_state, self.waiting = process_batch(topic, partition, events, state, stream_protocol(self.protocol),
                                                      timed_out=timed_out, **self.kw)
        self.state_tuple = to_tuple(new_state)
        rows = list(rows)
        self.calls.append(rows)
        return list(rows)

    @property
    def state(self) -> dict:
        return from_tuple(self.state_tuple)


def rows_of_payloads(frame) -> list[dict]:
    """The state function's output (one row per partition, every kind in one payload) as row dicts."""
    from streaming.processor import tables_from_payloads

    tables, _ = tables_from_payloads(frame["payload"])
    return [{"kind": kind, **r} for kind, t in tables.items() for r in t.to_pylist()]


def tables_of(rows: list[dict]) -> dict:
    """A batch's rows as the sink receives them from Spark: per kind, an Arrow table."""
    import pyarrow as pa

    from streaming.schemas import KIND_COLUMNS, arrow_schema

    kinds = {r["kind"] for r in rows}
    return {kind: pa.Table.from_pylist([{c: r.get(c) for c in KIND_COLUMNS[kind]} for r in rows if r["kind"] == kind],
                                       schema=arrow_schema(kind)) for kind in kinds}


def results_of(calls: list[list[dict]], out: Path, protocol: str) -> list[dict]:
    """Write each call's rows as one micro-batch with the job's sink; read them back as results."""
    sink = ParquetSink(out)
    for batch_id, rows in enumerate(calls):
        sink.write(tables_of(rows), batch_id, len({(r["topic"], r["partition"]) for r in rows if r["kind"] != "quarantine"}))
    (out / "run.json").write_text(json.dumps({"protocol": protocol}))
    return read_results(out)


def of_kind(rows: list[dict], kind: str) -> list[dict]:
    return [r for r in rows if r["kind"] == kind]


def without_summaries(calls: list[list[dict]]) -> list[dict]:
    return sorted((r for rows in calls for r in rows if r["kind"] != "summary"),
                  key=lambda r: (r["kind"], r["seq"], r["idx"] if r["idx"] is not None else -1))


def reasons(rows: list[dict]) -> list[tuple]:
    return [(r["seq"], r["reason"]) for r in of_kind(rows, "quarantine")]


# -- (a) one call equals replemu run ------------------------------------------------------------

@pytest.mark.parametrize("protocol", VARIANT_NAMES)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_bundled_scenario_in_one_call_reads_back_as_replemu_run(path, protocol, tmp_path):
    scenario = load_scenario(path)
    feed = Feed(protocol)
    rows = feed(events_of(scenario))
    assert not feed.waiting and not of_kind(rows, "quarantine")
    assert len(of_kind(rows, "summary")) == 1
    assert results_of(feed.calls, tmp_path, protocol) == [run_scenario(scenario, protocol)]


@pytest.mark.parametrize("protocol", ["kip903", "kip966"])
def test_a_reassignment_with_other_brokers_split_over_calls_reads_back_as_replemu_run(protocol, tmp_path):
    """issue 49: the header carries the scenario's brokers; a step names an added broker; the fetch
    whose AlterPartition completes the move makes the fetching follower truncate in the same step
    (its append rows stop at what is left) and the removed leader delete its copy."""
    from emulator.scenario import parse_scenario

    scenario = parse_scenario({"name": "move", "replicas": [1, 2], "brokers": [1, 2, 3], "steps": [
        {"elect": {}}, {"produce": {"value": "a", "acks": 1}}, {"reassign": {"replicas": [2, 3]}},
        {"fetch": {"replica": 3}}, {"produce": {"value": "b", "acks": 1, "replica": 2}}, {"fetch": {"replica": 3}}]})
    expected = run_scenario(scenario, protocol)
    assert expected["final"]["controller"]["leader"] == 2 and expected["final"]["replicas"]["1"]["log"] == []
    events = events_of(scenario)
    feed = Feed(protocol)
    for i in range(0, len(events), 3):
        rows = feed(events[i:i + 3])
        assert not of_kind(rows, "quarantine")
    assert results_of(feed.calls, tmp_path, protocol) == [expected]


# -- (b) split over calls, several frames per group, shuffled -------------------------------------

@pytest.mark.parametrize("path", [S1, BUNDLED / "s4-kip279-unclean-elections.yaml"], ids=lambda p: p.stem)
def test_split_over_calls_and_shuffled_within_a_call_gives_the_same_rows(path, tmp_path):
    scenario = load_scenario(path)
    events = events_of(scenario)
    whole = Feed("kip101")
    one = whole(events)

    shuffled = Feed("kip101")
    mixed = list(events)
    random.Random(7).shuffle(mixed)
    assert shuffled(mixed) == one  # same call, any row order: the very same rows

    split = Feed("kip101")
    cuts = [0, 3, 4, 11, len(events)]
    for lo, hi in zip(cuts, cuts[1:]):
        part = events[lo:hi]
        random.Random(hi).shuffle(part)
        split(part)
        assert not split.waiting
    assert without_summaries(split.calls) == without_summaries([one])
    last_summary = of_kind(split.calls[-1], "summary")
    assert last_summary == of_kind(one, "summary")  # steps counted over all calls, same final state
    assert results_of(split.calls, tmp_path / "split", "kip101") == results_of([one], tmp_path / "one", "kip101") \
        == [run_scenario(scenario, "kip101")]


class _GroupState:
    """The part of Spark's GroupState the state function uses (the state is the tuple)."""

    def __init__(self, value=None):
        self.value, self.timeout_ms = value, None
        self.hasTimedOut = False

    @property
    def exists(self):
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value):
        assert isinstance(value, tuple) and len(value) == len(STATE_SCHEMA.fields)
        self.value = value

    def setTimeoutDuration(self, ms):
        self.timeout_ms = ms


def test_the_state_function_takes_a_group_in_several_frames_in_any_order(tmp_path):
    """What applyInPandasWithState calls: a key, an iterator of frames (Spark may split a group's
    rows over several, in any order), the group state.  Three micro-batches of s1 end as `replemu run`."""
    scenario = load_scenario(S1)
    events = events_of(scenario)
    fn = make_state_function(stream_protocol("hw"), gap_timeout_ms=60000, compact_min_records=256)
    state = _GroupState()
    key = (events[0]["topic"], events[0]["partition"])
    calls = []
    for lo, hi in ((0, 7), (7, 15), (15, len(events))):
        frames = [pd.DataFrame([{k: e[k] for k in ("topic", "partition", "seq", "type", "args")} for e in events[i:i + 2]])
                  for i in range(lo, hi, 2)]
        frames.reverse()
        out = list(fn(key, iter(frames), state))
        calls.append(rows_of_payloads(out[0]) if out else [])
        assert state.timeout_ms is None  # no gap: no timeout set
    assert from_tuple(state.get)["next_seq"] == len(events)
    results = results_of(calls, tmp_path, "hw")
    assert results == [run_scenario(scenario, "hw")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.large_base_example,
                                                                 HealthCheck.function_scoped_fixture])
@given(deep_scenario(), st.sampled_from(VARIANT_NAMES), st.lists(st.integers(1, 400), max_size=4),
       st.sampled_from([1, 256]))
def test_deep_scenarios_split_anywhere_and_compacted_read_back_as_replemu_run(tmp_path_factory, scenario, protocol,
                                                                             cuts, compact_min_records):
    """Deep programs (leader changes, truncations, long runs) cut into micro-batches at drawn
    points, compacting after every step (threshold 1) or past 256 records: the rows read back as the result
    of `replemu run` (logs rebuilt from the log rows, epoch-cache entries compaction dropped
    put back)."""
    events = events_of(scenario)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    feed = Feed(protocol, compact_min_records=compact_min_records)
    for lo, hi in zip(bounds, bounds[1:]):
        feed(events[lo:hi])
    try:
        expected = run_scenario(scenario, protocol)
    except StepRefused:
        # `replemu run` answers "not expressible" (a KRaft controller does not take a forced
        # elect); the stream answers that step with the emulator's error row and goes on, and its
        # result reads back as the same "not expressible" answer
        assert any(e["error"] == REFUSED for rows in feed.calls for e in of_kind(rows, "errors"))
        got = results_of(feed.calls, tmp_path_factory.mktemp("refused"), protocol)
        want = run_scenario(scenario, protocol, refusal_as_result=True)["not_expressible"]
        assert [(r["protocol"], r["not_expressible"]["step"], r["not_expressible"]["description"]) for r in got] == \
            [(protocol, want["step"], want["description"])]
        return
    assert not any(e["error"] == "BELOW_COMPACTED_PREFIX" for rows in feed.calls for e in of_kind(rows, "errors"))
    got = results_of(feed.calls, tmp_path_factory.mktemp("deep"), protocol)
    assert got == [expected]
    # the state compacted exactly what the core compacts after every step, wherever the batches end
    replay = Replay(scenario.replicas, scenario.config, VARIANTS[protocol])
    for step in scenario.steps:
        replay.apply(step)
        replay.compact(compact_min_records)
    assert document_from_fields(feed.state["core"])["compacted_offset"] == replay.partition.compacted_offset


def test_a_stream_of_a_zookeeper_era_scenario_reads_back_as_replemu_runs_answer_under_every_variant(tmp_path):
    """Issue 46 item 2, for ``stream --protocol all``: under kip903/kip966 the partition's result
    is "not expressible" at the forced election (no verdict from the steps after it), under the
    ZooKeeper variants the verdict of ``replemu run``."""
    scenario = parse_scenario({"name": "zk-era", "replicas": [1, 2], "steps": [
        {"elect": {"leader": 1, "epoch": 0, "isr": [1, 2]}}, {"produce": {"value": "a"}},
        {"elect": {"leader": 2, "epoch": 1, "isr": [2]}}, {"fetch": {"replica": 1}}]})
    for protocol in VARIANT_NAMES:
        feed = Feed(protocol)
        feed(events_of(scenario))
        got = results_of(feed.calls, tmp_path / protocol, protocol)
        want = run_scenario(scenario, protocol, refusal_as_result=True)
        if "not_expressible" in want:
            assert [r["not_expressible"]["step"] for r in got] == [3] and "final" not in got[0]
            assert got[0]["not_expressible"]["description"] == want["not_expressible"]["description"] == "elect(2, e1, isr=[2])"
        else:
            assert got == [want]


def steady_scenario(records: int):
    steps = [{"elect": {}}]
    for i in range(records // 4):
        steps += [{"produce": {"values": [f"v{i}-{k}" for k in range(4)]}}, {"fetch": {"replica": 2}},
                  {"fetch": {"replica": 3}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}]
    steps += [{"crash": {"replica": 1}}, {"controller_remove": {"replica": 1}}, {"produce": {"value": "after"}},
              {"fetch": {"replica": 3}}, {"restart": {"replica": 1}}, {"leader_and_isr": {"replica": 1}},
              {"fetch": {"replica": 1}}]
    return parse_scenario({"name": "steady", "replicas": [1, 2, 3], "steps": steps})


def test_a_long_partition_is_compacted_and_still_reads_back_whole(tmp_path):
    """Past the default threshold the state keeps a window, not the whole log; the output rows
    still give back every record (the log rows) and the result of `replemu run`."""
    scenario = steady_scenario(2400)
    events = events_of(scenario)
    feeds = {"compacted": Feed("kip320"), "whole": Feed("kip320", compact_min_records=10**9)}
    sizes = {name: [] for name in feeds}
    for k in range(8):
        for name, feed in feeds.items():
            feed(events[k * len(events) // 8:(k + 1) * len(events) // 8])
            sizes[name].append(sum(len(v) for v in feed.state_tuple if isinstance(v, bytes)))
    feed = feeds["compacted"]
    assert document_from_fields(feed.state["core"])["compacted_offset"] >= 2400 - 2 * COMPACT_MIN_RECORDS
    assert document_from_fields(feeds["whole"].state["core"])["compacted_offset"] == 0
    assert max(sizes["compacted"]) < sizes["whole"][-1] / 4, sizes  # a window, not the whole log
    assert results_of(feed.calls, tmp_path / "c", "kip320") == results_of(feeds["whole"].calls, tmp_path / "w", "kip320") \
        == [run_scenario(scenario, "kip320")]


def test_a_compacting_partition_gives_the_same_rows_however_the_stream_is_cut():
    """Compaction runs at steps, not at batch ends: the timeline (epoch caches included), log and
    epoch rows of a long partition are the same in 1, 3 or 16 micro-batches (only the per-batch
    summaries differ)."""
    steps = []
    for election in range(40):  # a new leader epoch every 60 records: epoch-cache entries go cold
        steps.append({"elect": {}})
        for i in range(15):
            steps += [{"produce": {"values": [f"e{election}-{i}-{k}" for k in range(4)]}}, {"fetch": {"replica": 2}},
                      {"fetch": {"replica": 3}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}]
    scenario = parse_scenario({"name": "epochs", "replicas": [1, 2, 3], "steps": steps})
    events = events_of(scenario)
    streams = []
    for parts in (1, 3, 16):
        feed = Feed("kip320", compact_min_records=64)
        for k in range(parts):
            feed(events[k * len(events) // parts:(k + 1) * len(events) // parts])
        streams.append({kind: [r for rows in feed.calls for r in of_kind(rows, kind)]
                        for kind in ("timeline", "log", "violations", "losses", "errors", "quarantine")})
    assert document_from_fields(feed.state["core"])["compacted_offset"] > 2000
    assert sum(r["op"] == "epoch" for r in streams[0]["log"]) > 30
    assert streams[0] == streams[1] == streams[2]


def test_an_ack_still_waiting_across_the_compacted_prefix_is_sent_later(tmp_path):
    """300 records in one acks=all produce; the follower takes 280, so the HW stops inside the
    produce: 280 stable records (>= 256) but the parked produce still needs its records when it is
    answered, so nothing is compacted below its first offset; the ack comes in the next batch.
    (Compacting it away raised CompactedOffsetError out of the batch function and killed the query.)"""
    scenario = parse_scenario({"name": "big-ack", "replicas": [1, 2], "config": {"acks": "all"}, "steps": [
        {"elect": {}}, {"produce": {"values": [f"v{i}" for i in range(300)]}},
        {"fetch": {"replica": 2, "max_records": 280}}, {"fetch": {"replica": 2, "max_records": 1}},
        {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
    ]})
    events = events_of(scenario)
    feed = Feed("kip320")
    feed(events[:5])
    assert document_from_fields(feed.state["core"])["compacted_offset"] == 0  # held below the parked produce
    feed(events[5:])
    assert results_of(feed.calls, tmp_path, "kip320") == [run_scenario(scenario, "kip320")]
    assert any(e["event"] == "Ack" for e in run_scenario(scenario, "kip320", trace=True)["trace"][-1]["outcome"]["events"])


# -- (c) a row ahead of a gap waits ---------------------------------------------------------------

def test_a_row_ahead_of_a_gap_waits_and_is_applied_when_the_gap_fills(tmp_path):
    scenario = load_scenario(SEED1)
    events = events_of(scenario)  # header + 4 steps
    feed = Feed("hw")
    first = feed(events[:2] + events[3:])  # seq 2 is missing
    assert feed.waiting
    assert [r["seq"] for r in of_kind(first, "timeline")][::2] == [1]  # only step 1 applied
    assert feed.state["next_seq"] == 2
    assert [row[0] for row in json.loads(feed.state["waiting"])] == [3, 4]
    assert not of_kind(first, "quarantine")

    second = feed([events[2]])
    assert not feed.waiting
    assert sorted({r["seq"] for r in of_kind(second, "timeline")}) == [2, 3, 4]
    assert json.loads(feed.state["waiting"]) == []
    assert results_of(feed.calls, tmp_path, "hw") == [run_scenario(scenario, "hw")]


# -- (d) bad rows go to quarantine, later rows proceed -----------------------------------------------

def test_duplicates_and_bad_rows_are_quarantined_with_a_reason_and_later_rows_apply(tmp_path):
    scenario = load_scenario(S1)
    events = events_of(scenario)
    topic = events[0]["topic"]
    bad = [dict(e) for e in events]
    bad[2] = {**bad[2], "type": "teleport"}                          # unknown step type
    bad[3] = {**bad[3], "args": json.dumps({"replica": 9})}          # not one of the replicas
    bad[5] = {**bad[5], "args": "{not json"}                         # args are not JSON
    extra = [dict(events[4]),                                        # duplicate of seq 4
             {**events[9], "seq": None},                             # no seq
             {"topic": topic, "partition": 0, "seq": 3, "type": "partition", "args": events[0]["args"], "raw": None}]
    feed = Feed("hw")
    rows = feed(bad[:8]) + feed(extra + bad[8:])
    got = reasons(rows)
    assert any(seq == 2 and "unknown step type 'teleport'" in r for seq, r in got)
    assert any(seq == 3 and "replica 9 is not one of the partition's replicas" in r for seq, r in got)
    assert any(seq == 5 and "args are not JSON" in r for seq, r in got)
    assert any(seq == 4 and "duplicate or out-of-order sequence: seq 4 already applied" in r for seq, r in got)
    assert any(seq is None and r == "missing seq" for seq, r in got)
    assert any(seq == 3 and "duplicate or out-of-order" in r for seq, r in got)  # a second seq 3 (a header) too
    assert len(got) == 6
    quarantined = of_kind(rows, "quarantine")
    assert all(q["raw"] for q in quarantined)  # the row as it came, to inspect or replay
    assert json.loads(next(q["raw"] for q in quarantined if q["seq"] == 2))["type"] == "teleport"
    assert not feed.waiting and feed.state["next_seq"] == len(events)
    # every other row applied, in order, as a scenario without the bad steps
    good = dataclasses.replace(scenario, steps=tuple(s for i, s in enumerate(scenario.steps, start=1) if i not in (2, 3, 5)))
    assert feed.state["steps_applied"] == len(good.steps)
    assert results_of(feed.calls, tmp_path, "hw") == [run_scenario(good, "hw")]


def test_a_row_with_a_seq_but_no_type_is_quarantined_and_later_rows_apply(tmp_path):
    scenario = load_scenario(SEED1)
    events = events_of(scenario)
    feed = Feed("hw")
    rows = feed(events[:2] + [{**events[2], "type": None}] + events[3:])
    assert reasons(rows) == [(2, "seq 2: missing type or args")]
    assert not feed.waiting and feed.state["steps_applied"] == 3
    good = dataclasses.replace(scenario, steps=scenario.steps[:1] + scenario.steps[2:])
    assert results_of(feed.calls, tmp_path, "hw") == [run_scenario(good, "hw")]


def test_rows_before_a_valid_header_are_quarantined_and_the_partition_has_no_result():
    scenario = load_scenario(SEED1)
    events = events_of(scenario)
    feed = Feed("hw")
    rows = feed([{**events[0], "args": json.dumps({"scenario": "x", "replicas": []})}] + events[1:])
    got = reasons(rows)
    assert got[0][0] == 0 and got[0][1].startswith("invalid partition header:") and "replicas must not be empty" in got[0][1]
    assert [seq for seq, _ in got[1:]] == [1, 2, 3, 4]
    assert all("the partition has no valid header (seq 0)" in r for _, r in got[1:])
    assert not of_kind(rows, "timeline") and not of_kind(rows, "summary")


def test_unreadable_rows_without_a_key_are_quarantined():
    rows, state, waiting = process_batch(None, None, [{"topic": None, "partition": None, "seq": None, "type": None,
                                                       "args": None, "raw": "{not json"}], None, stream_protocol("hw"))
    rows = list(rows)
    assert reasons(rows) == [(None, "unreadable row: not valid JSON for the event schema")]
    assert rows[0]["raw"] == "{not json" and not waiting


# -- (e) a gap that times out is reported once ---------------------------------------------------------

def test_a_timed_out_gap_is_reported_once_then_afresh_for_a_new_gap():
    scenario = load_scenario(S1)
    events = events_of(scenario)
    feed = Feed("kip320")
    feed(events[:5] + events[7:9])  # seq 5, 6 missing; 7, 8 wait
    assert feed.waiting
    report = feed([], timed_out=True)
    assert reasons(report) == [(5, "gap in sequence: seq 5 never arrived; seq 7..8 wait for it")]
    assert feed.waiting and feed([], timed_out=True) == []  # reported once
    feed([events[5]])
    assert feed.waiting and feed.state["next_seq"] == 6
    assert reasons(feed([], timed_out=True)) == [(6, "gap in sequence: seq 6 never arrived; seq 7..8 wait for it")]
    feed([events[6]] + events[9:12])
    assert not feed.waiting and feed([], timed_out=True) == []  # no gap: nothing to report
    feed(events[13:15])  # a new gap at 12
    assert reasons(feed([], timed_out=True)) == [(12, "gap in sequence: seq 12 never arrived; seq 13..14 wait for it")]
    assert feed([], timed_out=True) == []


# -- (f) the state row ------------------------------------------------------------------------------

PY_TYPES = {"IntegerType()": int, "LongType()": int, "StringType()": str, "BinaryType()": bytes, "BooleanType()": bool}


def test_the_state_is_a_flat_tuple_of_the_state_schema_and_survives_the_round_trip():
    scenario = load_scenario(S1)
    events = events_of(scenario)
    feed = Feed("kip101")
    feed(events[:6])
    t = feed.state_tuple
    assert len(t) == len(STATE_SCHEMA.fields)
    for value, f in zip(t, STATE_SCHEMA.fields):
        assert value is None or type(value) is PY_TYPES[repr(f.dataType)], (f.name, type(value))
    assert to_tuple(from_tuple(t)) == t
    fields = from_tuple(t)
    assert (fields["header"], fields["next_seq"], fields["steps_applied"], fields["scenario"]) == ("ok", 6, 5, scenario.name)
    # a state that never went through the tuple continues identically
    direct_rows, direct_state, _ = process_batch(events[0]["topic"], 0, events[6:], fields, stream_protocol("kip101"))
    assert feed(events[6:]) == list(direct_rows)
    assert to_tuple(direct_state) == feed.state_tuple


# -- (g) one loop over every family -----------------------------------------------------------------

@pytest.mark.parametrize("protocol, header_type, header, step, stream_knobs, in_force", [
    ("kip320", "partition", {"scenario": "k", "replicas": [1, 2], "config": {"knobs": {"fencing": False, "trunc_rule": "hw"}}},
     ("elect", {"leader": 1, "epoch": 0, "isr": [1, 2]}), {"fencing": True}, {"fencing": True, "trunc_rule": "hw"}),
    ("kraft996", "quorum", {"scenario": "q", "voters": [1, 2, 3], "knobs": {"pre_vote": True, "dynamic_voters": False}},
     ("election_timeout", {"server": 1}), {"pre_vote": False}, {"pre_vote": False, "dynamic_voters": False}),
], ids=["partition", "quorum"])
def test_the_stream_s_knobs_win_over_a_header_s_own_in_either_family(protocol, header_type, header, step, stream_knobs,
                                                                     in_force):
    """``--protocol`` and ``--knob`` resolved once (``stream_protocol``); each partition's header
    applies its own knobs under the stream's, which win: the summary names the knobs in force."""
    resolved = stream_protocol(protocol, stream_knobs)
    assert resolved.family.name == ("quorum" if header_type == "quorum" else "partition") and resolved.name == protocol
    events = [{"topic": "t", "partition": 0, "seq": 0, "type": header_type, "args": json.dumps(header), "raw": None},
              {"topic": "t", "partition": 0, "seq": 1, "type": step[0], "args": json.dumps(step[1]), "raw": None}]
    rows, state, _ = process_batch("t", 0, events, None, resolved)
    rows = list(rows)
    assert not of_kind(rows, "quarantine"), reasons(rows)
    summary, = of_kind(rows, "summary")
    knobs = json.loads(summary["knobs"])
    assert {k: knobs[k] for k in in_force} == in_force and summary["protocol"] == protocol
    assert state["header"] == "ok" and state["steps_applied"] == 1
