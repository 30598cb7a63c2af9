"""``replemu run`` of a metadata-quorum scenario (docs/quorum.md "Scenario files"): the step table,
the final logs and the verdict; ``--check`` against the file's expect block; the thesis bug shown
by one knob; bad files and refused steps as one-line errors with exit 2."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import ROOT, replemu

THESIS = ROOT / "conf" / "scenarios" / "quorum" / "thesis-membership-change.yaml"
RULE_OFF = ("--knob", "reconfig_requires_leader_epoch_commit=false")


def test_the_bundled_quorum_story_prints_its_table_logs_and_verdict_and_agrees_with_its_expectation():
    done = replemu("run", str(THESIS), "--protocol", "kraft853", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "step  event" in out and "s5 e LEO/HW" in out and "remove_voter(1, 2)" in out
    assert "s2 remove_voter REQUEST_TIMED_OUT" in out  # the rule at work: 2 has committed nothing of its epoch
    assert "e1 VotersRecord[1, 2, 3, 4, 5]" in out  # the final logs side by side
    assert "verdict thesis-membership-change / kraft853: no invariant violated" in out
    assert "--protocol kraft853: agrees" in out


def test_without_the_reconfiguration_rule_the_thesis_bug_breaks_leader_completeness():
    done = replemu("run", str(THESIS), "--protocol", "kraft853", "--json", *RULE_OFF)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["family"] == "quorum" and result["knobs"] == {"reconfig_requires_leader_epoch_commit": False}
    assert [(v["invariant"], v["step"]) for v in result["violations"]] == [("LeaderCompleteness", 79)]
    servers = result["final"]["servers"]
    # server 1 leads epoch 3 over a log without server 2's committed epoch-2 records
    assert servers["1"]["role"] == "leader" and servers["1"]["epoch"] == 3
    committed_by_2 = servers["2"]["log"][:servers["2"]["hw"]]
    assert [2, 2, "LeaderChange"] in committed_by_2 and [2, 2, "LeaderChange"] not in servers["1"]["log"]
    # --check compares with the preset's expectation, which the knob breaks: exit 1, the difference named
    checked = replemu("run", str(THESIS), "--protocol", "kraft853", "--check", "--summary", *RULE_OFF)
    assert checked.returncode == 1 and "violations: expected [], got ['LeaderCompleteness']" in checked.stdout


def test_the_json_is_the_same_on_every_run_and_trace_has_one_row_per_step():
    runs = [replemu("run", str(THESIS), "--protocol", "kraft853", "--json", "--trace") for _ in range(2)]
    assert runs[0].returncode == 0 and runs[0].stdout == runs[1].stdout
    result = json.loads(runs[0].stdout)
    assert [row["step"] for row in result["trace"]] == list(range(1, result["steps"] + 1))


def _write(tmp_path, doc) -> str:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


BASE = {"name": "q", "voters": [1, 2, 3], "steps": [{"election_timeout": {"server": 1}}]}


@pytest.mark.parametrize("change, message", [
    ({"voters": []}, "'voters' must be a non-empty list of server ids"),
    ({"observers": [1]}, "server 1 is both a voter and an observer"),
    ({"replicas": [1, 2]}, "unknown key 'replicas'"),
    ({"knobs": {"fencing": True}}, "unknown quorum knob 'fencing'"),
    ({"steps": [{"election_timeout": {"server": 9}}]}, "step 1 (election_timeout)"),
    ({"steps": [{"elect": {}}]}, "unknown quorum step type 'elect'"),
    ({"expect": {"kip320": {}}}, "expect.kip320: not a quorum protocol"),
    ({"expect": {"kraft853": {"violations": ["StrongIsr"]}}}, "expect.kraft853.violations"),
])
def test_a_bad_quorum_file_exits_2_with_one_line_naming_the_file(tmp_path, change, message):
    path = _write(tmp_path, {**BASE, **change})
    done = replemu("run", path, "--protocol", "kraft853")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert message in done.stderr and path in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_step_the_protocol_cannot_take_is_refused_naming_the_step(tmp_path):
    path = _write(tmp_path, {**BASE, "steps": [{"election_timeout": {"server": 1}}, {"deliver": {"source": 2, "destination": 1}}]})
    done = replemu("run", path, "--protocol", "kraft853")
    assert done.returncode == 2 and "step 2 (deliver(2, 1)): refused under kraft853" in done.stderr, done.stderr


@pytest.mark.parametrize("args, message", [
    (["--protocol", "kip320"], "--protocol kip320 is a partition protocol"),
    (["--protocol", "kraft853", "--knob", "fencing=true"], "--knob fencing is a partition knob"),
])
def test_a_partition_protocol_or_knob_for_a_quorum_file_exits_2(args, message):
    done = replemu("run", str(THESIS), *args)
    assert done.returncode == 2 and message in done.stderr and done.stdout == "", done.stderr


def test_a_quorum_protocol_or_knob_for_a_partition_file_and_mixed_files_exit_2():
    partition = str(ROOT / "conf" / "scenarios" / "s0-basic-epoch-workflow.yaml")
    done = replemu("run", partition, "--protocol", "kraft853")
    assert done.returncode == 2 and "is a metadata-quorum protocol" in done.stderr, done.stderr
    done = replemu("run", partition, "--protocol", "kip320", "--knob", "pre_vote=true")
    assert done.returncode == 2 and "--knob pre_vote is a metadata-quorum knob" in done.stderr, done.stderr
    done = replemu("run", partition, str(THESIS))
    assert done.returncode == 2 and "cannot be run together" in done.stderr, done.stderr


def test_check_compares_the_servers_final_fields(tmp_path):
    doc = {**BASE, "expect": {"kraft853": {"servers": {1: {"role": "candidate", "epoch": 1, "voted_for": 1}, 2: {"epoch": 0}}}}}
    assert replemu("run", _write(tmp_path, doc), "--protocol", "kraft853", "--check").returncode == 0
    doc["expect"]["kraft853"]["servers"][2] = {"epoch": 1}
    done = replemu("run", _write(tmp_path, doc), "--protocol", "kraft853", "--check", "--summary")
    assert done.returncode == 1 and "server 2 epoch: expected 1, got 0" in done.stdout, done.stdout


# A leader removes itself (the removal not yet committed), then a voter that holds every committed
# record loses its disk: the leader still holds them and still leads, so nothing committed is lost.
# Found by `replemu campaign --protocol kraft853 --profile quorum --seed 1` (scenario 1282) and shrunk;
# the first wording of Durability counted only servers in their own latest voter set.
SELF_REMOVAL = """
name: self-removal-then-disk-loss
voters: [1, 2, 3]
observers: [4]
knobs: {reconfig_requires_leader_epoch_commit: false}
steps:
- election_timeout: {server: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 1, destination: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 1, destination: 3}
- fetch: {server: 1}
- deliver: {source: 1, destination: 3}
- append: {value: v12}
- deliver: {source: 3, destination: 1}
- fetch: {server: 1}
- deliver: {source: 1, destination: 3}
- election_timeout: {server: 1}
- deliver: {source: 1, destination: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 3, destination: 1}
- election_timeout: {server: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 1, destination: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 1, destination: 3}
- election_timeout: {server: 1}
- deliver: {source: 1, destination: 3}
- deliver: {source: 3, destination: 1}
- election_timeout: {server: 3}
- deliver: {source: 3, destination: 1}
- deliver: {source: 1, destination: 3}
- remove_voter: {voter: 3}
- crash: {server: 1}
- lose_disk: {server: 1}
"""


def test_a_leader_that_removed_itself_still_holds_what_was_committed():
    from emulator.quorum.run import parse_quorum_scenario, run_quorum_scenario

    doc = yaml.safe_load(SELF_REMOVAL)
    result = run_quorum_scenario(parse_quorum_scenario(doc), "kraft853")
    assert result["violations"] == []
    # the leader's disk goes too: now no voter holds the committed records
    doc["steps"] += [{"crash": {"server": 3}}, {"lose_disk": {"server": 3}}]
    result = run_quorum_scenario(parse_quorum_scenario(doc), "kraft853")
    assert [v["invariant"] for v in result["violations"]][:1] == ["Durability"]
