"""The metadata quorum in the stream and the GX suites (issue 34, item 4; docs/quorum.md
"Streaming"): a compiled quorum scenario streams as one more keyed state, in one micro-batch or
many with the same rows, to ``replemu run``'s verdicts; a bad row is quarantined and the stream
goes on; the quorum registry's expectations fail where the core found a violation; a protocol of
the other family is refused before Spark starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import BUNDLED, output_rows, replemu
from emulator.quorum.codec import quorum_from_document, quorum_to_document
from emulator.quorum.invariants import QUORUM_INVARIANT_NAMES, QuorumChecker
from emulator.quorum.model import Quorum
from emulator.quorum.run import run_quorum_scenario
from emulator.quorum.variants import QUORUM_VARIANT_TABLE
from scenario_io.yaml_files import load_any_scenario
from streaming.events import quorum_scenario_rows, write_event_files
from streaming.processor import process_batch, stream_protocol
from streaming.state_codec import from_tuple, to_tuple

STORY = BUNDLED / "quorum" / "thesis-membership-change.yaml"
RULE_OFF = {"reconfig_requires_leader_epoch_commit": False}
TOPIC = "__cluster_metadata"


def story():
    return load_any_scenario(STORY)


def stream_rows(rows: list[dict], batches: int, knobs=None, protocol: str = "kraft853") -> list[dict]:
    """The rows cut into ``batches`` micro-batches through ``process_batch`` with its state carried
    over (through the flat state row, binary fields copied, as Spark stores it): every output row
    but the per-batch summaries, in (kind, seq, idx) order."""
    state, out = None, []
    size = -(-len(rows) // batches)
    for b in range(batches):
        produced, state, _ = process_batch(TOPIC, 0, [dict(r) for r in rows[b * size:(b + 1) * size]], state, stream_protocol(protocol, knobs))
        out += [r for r in produced if r["kind"] != "summary"]
        state = from_tuple(tuple(bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in to_tuple(state)))
    return sorted(out, key=lambda r: (r["kind"], r["seq"] if r["seq"] is not None else -1, r["idx"]))


def verdicts(rows: list[dict]) -> tuple[list, list]:
    violations = [{"invariant": r["invariant"], "step": r["at_step"], "detail": r["detail"]} for r in rows if r["kind"] == "violations"]
    errors = [{"step": r["at_step"], **json.loads(r["error"])} for r in rows if r["kind"] == "errors"]
    return violations, errors


@pytest.mark.parametrize("knobs", [{}, RULE_OFF], ids=["rule-on", "rule-off"])
def test_one_batch_and_many_give_the_same_rows_and_run_s_verdicts(knobs):
    s = story()
    rows = quorum_scenario_rows(s)
    one = stream_rows(rows, 1, knobs)
    for cut in (2, 5, len(rows)):
        assert stream_rows(rows, cut, knobs) == one, cut
    result = run_quorum_scenario(s, "kraft853", knobs=knobs)
    assert verdicts(one) == (result["violations"], result["errors"])
    assert [v["invariant"] for v in result["violations"]] == (["LeaderCompleteness"] if knobs else [])
    timeline = [r for r in one if r["kind"] == "timeline"]
    assert len(timeline) == len(s.steps) * len(s.servers)


def test_the_quorum_document_round_trips_at_every_step():
    s = story()
    q, checker = Quorum(s.voters, s.observers, QUORUM_VARIANT_TABLE.named("kraft853", RULE_OFF)), QuorumChecker()
    for step in s.steps:
        doc = json.loads(json.dumps(quorum_to_document(q, checker)))
        q, checker = quorum_from_document(doc)
        assert quorum_to_document(q, checker) == doc
        checker.observe(q, q.apply(step))


def test_bad_rows_are_quarantined_and_the_partition_goes_on():
    s = story()
    rows = quorum_scenario_rows(s)
    n = len(rows)
    bad = [
        {"topic": TOPIC, "partition": 0, "seq": n, "type": "no_such_step", "args": "{}"},
        {"topic": TOPIC, "partition": 0, "seq": n + 1, "type": "deliver", "args": json.dumps({"source": 3, "destination": 5})},
        {"topic": TOPIC, "partition": 0, "seq": n + 2, "type": "append", "args": "{not json"},
        {"topic": TOPIC, "partition": 0, "seq": 3, "type": "deliver", "args": "{}"},  # a duplicate seq
        {"topic": TOPIC, "partition": 0, "seq": n + 3, "type": "append", "args": json.dumps({"value": "after"})},
    ]
    out = stream_rows(rows + bad, 3)
    reasons = [r["reason"] for r in out if r["kind"] == "quarantine"]
    assert any("unknown quorum step type 'no_such_step'" in r for r in reasons)
    assert any(f"seq {n + 1} (deliver(3, 5)): refused under kraft853" in r for r in reasons)
    assert any(f"seq {n + 2}: args are not JSON" in r for r in reasons)
    assert any("duplicate or out-of-order sequence: seq 3" in r for r in reasons)
    assert len(reasons) == 4
    assert any(r["kind"] == "log" and r["seq"] == n + 3 and r["value"] == "after" for r in out)  # the stream went on
    # a partition header under a quorum protocol, and a quorum header under a partition protocol
    wrong, _, _ = process_batch("t", 0, [{"topic": "t", "partition": 0, "seq": 0, "type": "partition", "args": "{}"}], None, stream_protocol("kraft853"))
    assert "a partition header ('partition') in a stream of the metadata-quorum protocol kraft853" in list(wrong)[0]["reason"]
    wrong, _, _ = process_batch(TOPIC, 0, [dict(rows[0])], None, stream_protocol("kip320"))
    assert list(wrong)[0]["kind"] == "quarantine"


def test_compile_refuses_mixed_families_and_stream_refuses_the_other_family(tmp_path):
    mixed = replemu("compile", str(STORY), str(BUNDLED / "s0-basic-epoch-workflow.yaml"), "--out", str(tmp_path / "m"))
    assert mixed.returncode == 2 and "a stream runs one family" in mixed.stderr and "Traceback" not in mixed.stderr
    assert replemu("compile", str(STORY), "--out", str(tmp_path / "q")).returncode == 0
    assert replemu("compile", str(BUNDLED / "s0-basic-epoch-workflow.yaml"), "--out", str(tmp_path / "p")).returncode == 0
    common = ("--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"))
    cases = [
        (("--input", str(tmp_path / "p"), "--protocol", "kraft853"), "holds partition events"),
        (("--input", str(tmp_path / "q"), "--protocol", "kip320"), "holds metadata-quorum events"),
        (("--input", str(tmp_path / "q"), "--protocol", "kraft853", "--knob", "fencing=false"), "is a partition knob"),
        (("--input", str(tmp_path / "p"), "--protocol", "kip320", "--knob", "pre_vote=true"), "is a metadata-quorum knob"),
    ]
    for args, message in cases:
        r = replemu("stream", *args, *common)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "ck").exists()  # refused before anything was claimed


def _validations(out: Path) -> list[dict]:
    from streaming.results import read_output

    v = read_output(out, "validations")
    return v.sort_values(["batch_id", "frame", "invariant"]).to_dict("records")


def test_the_story_through_the_stream_with_the_quorum_suites(spark, tmp_path):
    """Rule off in three micro-batches and in one (the same rows), rule on with bad rows in
    one: the results are ``replemu run``'s, the quorum suites fail LeaderCompleteness only where
    the core found it."""
    from expectations.suites import ExpectationsObserver
    from streaming.job import run_stream
    from streaming.results import read_results

    s = story()
    rows = quorum_scenario_rows(s)
    write_event_files([rows], tmp_path / "ev3", split=3)
    write_event_files([rows], tmp_path / "ev1")
    n = len(rows)
    write_event_files([rows], tmp_path / "ev1-bad")
    (tmp_path / "ev1-bad" / "events-00009.jsonl").write_text(
        json.dumps({"topic": TOPIC, "partition": 0, "seq": n, "type": "deliver", "args": json.dumps({"source": 3, "destination": 5})})
        + "\nnot json at all\n")

    def run(events, name, knobs, per_trigger):
        observer = ExpectationsObserver(family="quorum", docs_every=0)  # the Data Docs once, at the end
        run_stream(tmp_path / events, tmp_path / name, tmp_path / f"ck-{name}", "kraft853", spark=spark, quiet=True,
                   observer=observer, knobs=knobs, max_files_per_trigger=per_trigger)
        return tmp_path / name

    off3 = run("ev3", "off3", RULE_OFF, 1)
    off1 = run("ev1", "off1", RULE_OFF, None)
    on1 = run("ev1-bad", "on1", {}, None)

    for out, knobs in ((off3, RULE_OFF), (off1, RULE_OFF), (on1, {})):
        expected = run_quorum_scenario(s, "kraft853", knobs=knobs)
        got, = read_results(out)
        for key in ("scenario", "family", "protocol", "knobs", "steps", "violations", "errors", "final"):
            assert got[key] == expected[key], (out.name, key)

    def rows_by_kind(out):  # every kind's rows, whatever micro-batch they came in
        return {kind: sorted((r for (k, _), batch in output_rows(out).items() if k == kind for r in batch), key=repr)
                for kind in ("timeline", "log", "violations", "errors")}
    assert rows_by_kind(off3) == rows_by_kind(off1)
    assert len({b for (k, b) in output_rows(off3) if k == "timeline"}) == 3

    v_off = _validations(off3)
    assert {r["invariant"] for r in v_off} == set(QUORUM_INVARIANT_NAMES)
    failed = [(r["batch_id"], r["invariant"], list(r["partitions"])) for r in v_off if not r["success"]]
    assert failed == [(2, "LeaderCompleteness", [f"{TOPIC}/0"])]
    assert [r["invariant"] for r in _validations(off1) if not r["success"]] == ["LeaderCompleteness"]
    assert all(r["success"] for r in _validations(on1))
    assert (off3 / "data_docs" / "index.html").is_file()

    from streaming.results import quarantine_rows

    reasons = [q["reason"] for q in quarantine_rows(on1)]
    assert len(reasons) == 2 and any("refused under kraft853" in r for r in reasons), reasons


NEW_VOCABULARY = [Path(__file__).resolve().parent / "kafka" / "quorum" / f"{name}.yaml"
                  for name in ("leader-graceful-shutdown-timeout", "leader-graceful-shutdown", "update-voter")]


@pytest.mark.parametrize("path", NEW_VOCABULARY, ids=lambda p: p.stem)
def test_issue_47_steps_stream_as_run_replays_them(path):
    """shutdown, shutdown_timeout, change_listeners and update_voter (issue 47) as stream rows: however cut,
    the same rows, run's verdicts and errors (TimeoutException included); the state document round-trips
    after every step (a server shutting down, listeners, UpdateRaftVoter messages in flight)."""
    s = load_any_scenario(path)
    rows = quorum_scenario_rows(s)
    one = stream_rows(rows, 1)
    assert stream_rows(rows, len(rows)) == one
    result = run_quorum_scenario(s, "kraft853")
    assert verdicts(one) == (result["violations"], result["errors"])
    q, checker = Quorum(s.voters, s.observers, QUORUM_VARIANT_TABLE.named("kraft853")), QuorumChecker()
    for step in s.steps:
        checker.observe(q, q.apply(step))
        doc = json.loads(json.dumps(quorum_to_document(q, checker)))
        q, checker = quorum_from_document(doc)
        assert quorum_to_document(q, checker) == doc
