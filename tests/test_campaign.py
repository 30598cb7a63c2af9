"""Seeded campaigns find the known bugs of each variant; shrunk counterexamples are short and replay."""

import json

import pytest

from conftest import replemu
from emulator import VARIANT_NAMES, run_scenario
from emulator.workload import generate_partition, generate_scenario
from replemu.campaign import ddmin, run_campaign, shrink
from scenario_io.profiles import load_profiles
from scenario_io.yaml_files import load_scenario

CLEAN = load_profiles()["clean"]


@pytest.fixture(scope="module")
def clean_campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("campaign")
    return run_campaign(1, "clean", 1200, list(VARIANT_NAMES), out, engine="local", progress=False), out


def test_the_same_seed_generates_the_same_partition_and_streams_are_independent():
    assert generate_partition(7, 3, CLEAN) == generate_partition(7, 3, CLEAN)
    assert generate_partition(7, 3, CLEAN) != generate_partition(7, 4, CLEAN)
    assert generate_partition(7, 3, CLEAN) != generate_partition(8, 3, CLEAN)


def test_clean_profile_has_no_power_loss_and_no_unclean_election():
    for k in range(200):
        data = generate_partition(1, k, CLEAN)
        assert not data["config"]["unclean_leader_election"]
        assert all(step.get("crash", {}).get("mode", "process") == "process" for step in data["steps"])


def test_clean_campaign_finds_each_variants_known_bugs(clean_campaign):
    report, _ = clean_campaign
    found = {p: set(r["violations"]) for p, r in report["protocols"].items()}
    assert "NoCommittedDataLoss" in found["hw"]
    assert found["kip101"] & {"EventualConvergence", "StrongIsr"}
    assert not found["kip320"] & {"StrongIsr", "NoCommittedDataLoss"}
    assert all(r["partitions"] == 1200 for r in report["protocols"].values())


def test_examples_replay_to_their_violation(clean_campaign):
    report, _ = clean_campaign
    examples = [(p, e) for p, r in report["protocols"].items() for e in r["examples"]]
    assert examples
    for protocol, e in examples:
        result = run_scenario(load_scenario(e["scenario_file"]), protocol)
        assert {"invariant": e["invariant"], "step": e["step"]} in [{k: v[k] for k in ("invariant", "step")} for v in result["violations"]]


@pytest.mark.parametrize("protocol, invariant", [("hw", "NoCommittedDataLoss"), ("kip101", "StrongIsr")])
def test_shrunk_counterexamples_are_short_and_replay(clean_campaign, tmp_path, protocol, invariant):
    report, _ = clean_campaign
    e = next(e for e in report["protocols"][protocol]["examples"] if e["invariant"] == invariant)
    out = replemu("shrink", e["scenario_file"], "--protocol", protocol, "--invariant", invariant, "--out", str(tmp_path / "s.yaml"))
    assert out.returncode == 0, out.stderr
    shrunk = load_scenario(tmp_path / "s.yaml")
    original = load_scenario(e["scenario_file"])
    assert len(shrunk.steps) <= 20 < len(original.steps)
    assert replemu("run", str(tmp_path / "s.yaml"), "--protocol", protocol, "--check").returncode == 0


def test_ddmin_finds_a_one_minimal_subset():
    items = list(range(40))
    assert ddmin(items, lambda xs: {3, 17, 31} <= set(xs)) == [3, 17, 31]


def test_shrink_refuses_a_scenario_that_does_not_fail():
    s = generate_scenario(1, 0, CLEAN)
    with pytest.raises(ValueError, match="does not break"):
        shrink(s, "kip320", "StrongIsr")


def test_campaign_json_shape(tmp_path):
    out = replemu("campaign", "--protocol", "hw", "--partitions", "300", "--seed", "1", "--profile", "clean",
                  "--engine", "local", "--out", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"seed", "profile", "protocols"} and report["seed"] == 1 and report["profile"] == "clean"
    hw = report["protocols"]["hw"]
    assert set(hw) == {"partitions", "steps", "violations", "examples"}
    assert all(set(e) == {"partition", "invariant", "step", "scenario_file"} for e in hw["examples"])
    assert "campaign seed 1  profile clean" in out.stderr  # parameters printed first
    bad = replemu("campaign", "--partitions", "3", "--seed", "1", "--profile", "nope", "--engine", "local")
    assert bad.returncode == 2 and "unknown profile 'nope'" in bad.stderr


def test_step_stream_prefixes_agree_with_the_generated_scenario():
    from itertools import islice

    from emulator.workload import step_bursts

    doc = generate_partition(3, 5, CLEAN)
    steps = [s for burst in islice(step_bursts(3, 5, CLEAN), 200) for s in burst]
    assert steps[:len(doc["steps"])] == doc["steps"]
