"""``replemu shrink`` of a metadata-quorum scenario (docs/quorum.md "Shrinking"): delta debugging over
the steps that keeps the invariant broken and drops candidates the protocol refuses; the shrunk file
carries the knobs and an expect block and replays with ``--check``; bad input is one line, exit 2."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from conftest import ROOT, replemu
from emulator.quorum.run import parse_quorum_scenario, quorum_scenario_document
from emulator.quorum.steps import QUORUM_STEP_TABLE
from replemu.campaign import breaks, shrink
from scenario_io.yaml_files import load_any_scenario

THESIS = ROOT / "conf" / "scenarios" / "quorum" / "thesis-membership-change.yaml"
RULE_OFF = ("--knob", "reconfig_requires_leader_epoch_commit=false")
SHRINK = ("shrink", str(THESIS), "--protocol", "kraft853", "--invariant", "LeaderCompleteness")


def test_a_quorum_scenario_document_reads_back_to_the_same_scenario():
    s = load_any_scenario(THESIS)
    for step in s.steps:
        (kind, args), = QUORUM_STEP_TABLE.to_dict(step).items()
        assert QUORUM_STEP_TABLE.parse(kind, args, s.servers) == step
    again = parse_quorum_scenario(yaml.safe_load(yaml.safe_dump(quorum_scenario_document(s))), source=str(THESIS))
    assert (again.steps, again.voters, again.observers, again.knobs, again.expect) == (s.steps, s.voters, s.observers, s.knobs, {})


def test_shrinking_the_thesis_bug_keeps_it_and_replays_with_check(tmp_path):
    outs = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for out in outs:
        done = replemu(*SHRINK, *RULE_OFF, "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert f"wrote {out}" in done.stdout and "79 -> " in done.stdout
    assert outs[0].read_text() == outs[1].read_text()  # deterministic
    doc = yaml.safe_load(outs[0].read_text())
    assert doc["knobs"] == {"reconfig_requires_leader_epoch_commit": False}  # carried: a plain run replays it
    assert doc["expect"] == {"kraft853": {"violations": ["LeaderCompleteness"]}}
    assert len(doc["steps"]) < 79
    checked = replemu("run", str(outs[0]), "--protocol", "kraft853", "--check", "--summary")
    assert checked.returncode == 0 and "agrees" in checked.stdout, checked.stdout + checked.stderr
    # 1-minimal: no single step can go (removing one either loses the violation or is refused)
    small = load_any_scenario(outs[0])
    for i in range(len(small.steps)):
        candidate = replace(small, steps=small.steps[:i] + small.steps[i + 1:])
        assert not breaks(candidate, "kraft853", "LeaderCompleteness"), i


def test_shrink_refuses_a_quorum_scenario_that_does_not_break_the_invariant():
    s = load_any_scenario(THESIS)
    with pytest.raises(ValueError, match="does not break LeaderCompleteness under kraft853"):
        shrink(s, "kraft853", "LeaderCompleteness")


@pytest.mark.parametrize("args, words", [
    (SHRINK, "does not break LeaderCompleteness under kraft853"),  # the rule on: nothing to shrink
    (("shrink", str(THESIS), "--protocol", "kraft853", "--invariant", "StrongIsr", *RULE_OFF), "unknown quorum invariant 'StrongIsr'"),
    (("shrink", str(THESIS), "--protocol", "hw", "--invariant", "LeaderCompleteness"), "--protocol hw is a partition protocol"),
    (("shrink", str(THESIS), "--protocol", "kraft853", "--invariant", "LeaderCompleteness", "--knob", "fencing=true"),
     "--knob fencing is a partition knob"),
    (("shrink", "--from-campaign", "1/clean/0", "--protocol", "kraft853", "--invariant", "LeaderCompleteness"),
     "--protocol kraft853 is a metadata-quorum protocol"),
])
def test_bad_quorum_shrinks_are_one_line_and_exit_2(args, words, tmp_path):
    done = replemu(*args, "--out", str(tmp_path / "s.yaml"))
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "s.yaml").exists()


def test_a_bad_quorum_file_to_shrink_names_the_file_and_step(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump({"name": "q", "voters": [1, 2, 3], "steps": [{"elect": {}}]}))
    done = replemu("shrink", str(path), "--protocol", "kraft853", "--invariant", "LeaderCompleteness")
    assert done.returncode == 2 and str(path) in done.stderr and "step 1" in done.stderr, done.stderr


# -- campaigns ---------------------------------------------------------------------------------------

import json  # noqa: E402

from emulator.quorum.run import run_quorum_scenario  # noqa: E402
from emulator.quorum.variants import QUORUM_VARIANT_NAMES  # noqa: E402
from emulator.quorum.workload import generate_quorum_scenario  # noqa: E402
from replemu.campaign import run_campaign  # noqa: E402
from scenario_io.yaml_files import write_scenario  # noqa: E402

OFF = {"reconfig_requires_leader_epoch_commit": False}


@pytest.mark.parametrize("protocol", QUORUM_VARIANT_NAMES)
def test_generated_quorum_scenarios_are_seeded_and_every_step_is_one_the_protocol_takes(protocol):
    for k in range(25):
        doc = generate_quorum_scenario(3, k, protocol)
        assert doc == generate_quorum_scenario(3, k, protocol)
        scenario = parse_quorum_scenario(doc, source=f"k{k}")
        result = run_quorum_scenario(scenario, protocol)  # would raise StepRefused on a step it cannot take
        assert 1 <= result["steps"] == len(doc["steps"]) <= 90  # a walk ends early when 20 draws in a row are refused
    assert generate_quorum_scenario(3, 0, protocol) != generate_quorum_scenario(4, 0, protocol)


def test_a_quorum_campaign_report_is_deterministic_and_shaped_like_the_partition_one(tmp_path):
    a = run_campaign(1, "quorum", 30, ["kraft853", "kraft996"], tmp_path / "a", knobs=OFF, progress=False)
    b = run_campaign(1, "quorum", 30, ["kraft853", "kraft996"], tmp_path / "b", knobs=OFF, progress=False)
    strip = lambda r: json.loads(json.dumps(r).replace(str(tmp_path / "a"), "").replace(str(tmp_path / "b"), ""))  # noqa: E731
    assert strip(a) == strip(b)
    assert set(a) == {"seed", "profile", "protocols", "knobs"} and a["profile"] == "quorum" and a["knobs"] == OFF
    for r in a["protocols"].values():
        assert set(r) == {"partitions", "steps", "violations", "examples"} and r["partitions"] == 30


def test_a_campaign_finding_replays_from_its_file_and_shrinks(tmp_path):
    """Seed 2, scenario 5591 under kraft853 with the rule off: the campaign's one finding in 15,000
    scenarios (the CLI run reports it; here it is generated alone). Two of the three voters lose their
    disks after a record was committed: more than a quorum of three survives, and Durability says so."""
    doc = generate_quorum_scenario(2, 5591, "kraft853", OFF)
    path = write_scenario(doc, tmp_path / "campaign-2-quorum-kraft853-p5591.yaml")
    done = replemu("run", str(path), "--protocol", "kraft853", "--json")
    assert done.returncode == 0, done.stderr
    assert [(v["invariant"], v["step"]) for v in json.loads(done.stdout)["violations"]] == [("Durability", 51)]
    shrunk = tmp_path / "s.yaml"
    done = replemu("shrink", str(path), "--protocol", "kraft853", "--invariant", "Durability", "--out", str(shrunk))
    assert done.returncode == 0, done.stderr
    assert len(yaml.safe_load(shrunk.read_text())["steps"]) < len(doc["steps"])
    assert replemu("run", str(shrunk), "--protocol", "kraft853", "--check", "--summary").returncode == 0


def test_the_quorum_campaign_command(tmp_path):
    done = replemu("campaign", "--protocol", "kraft853", "--partitions", "5", "--seed", "2", "--profile", "quorum",
                   "--out", str(tmp_path), "--json", "--knob", "reconfig_requires_leader_epoch_commit=false")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seed"] == 2 and report["protocols"]["kraft853"]["partitions"] == 5
    assert "campaign seed 2  profile quorum" in done.stderr
    for args, words in (
        (("--profile", "clean"), "its campaign draws from --profile quorum"),
        (("--profile", "quorum", "--knob", "fencing=true"), "--knob fencing is a partition knob"),
    ):
        bad = replemu("campaign", "--protocol", "kraft853", "--partitions", "3", "--seed", "1", "--out", str(tmp_path), *args)
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    bad = replemu("campaign", "--protocol", "hw", "--partitions", "3", "--seed", "1", "--profile", "clean", "--engine", "local",
                  "--out", str(tmp_path), "--knob", "pre_vote=true")
    assert bad.returncode == 2 and "--knob pre_vote is a metadata-quorum knob" in bad.stderr, bad.stderr


def test_a_quorum_campaign_finding_shrinks_from_the_campaign_as_from_its_file(tmp_path):
    """``--from-campaign SEED/quorum/K --protocol P`` draws scenario K of that quorum campaign again
    (under P, as the campaign drew it): the same shrunk steps as the campaign's example file gives."""
    doc = generate_quorum_scenario(3, 18, "kraft595")
    path = write_scenario(doc, tmp_path / "campaign-3-quorum-kraft595-p18.yaml")
    shrunk = {}
    for how, source in (("file", (str(path),)), ("campaign", ("--from-campaign", "3/quorum/18"))):
        out = tmp_path / f"{how}.yaml"
        done = replemu("shrink", *source, "--protocol", "kraft595", "--invariant", "ElectionSafety", "--out", str(out))
        assert done.returncode == 0, done.stderr
        shrunk[how] = yaml.safe_load(out.read_text())
    assert shrunk["campaign"]["steps"] == shrunk["file"]["steps"] and len(shrunk["file"]["steps"]) < len(doc["steps"])
    assert shrunk["campaign"]["expect"] == {"kraft595": {"violations": ["ElectionSafety"]}}
    done = replemu("shrink", "--from-campaign", "3/hard/18", "--protocol", "kraft595", "--invariant", "ElectionSafety")
    assert done.returncode == 2 and "its campaign draws from --profile quorum" in done.stderr, done.stderr
