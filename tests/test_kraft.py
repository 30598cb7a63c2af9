"""KRaft (kip903) and KIP-966 (kip966) as a user meets them: the findings of docs/examples replayed
with ``replemu run --check``, the knobs that make the difference, the refusals of the ZooKeeper
variants, and the bounded search proving (and refuting) the data-loss claims."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run, violated
from emulator import VARIANTS, Config, run_scenario
from emulator.explore import Bounds, Space
from emulator.search import search_local
from scenario_io.yaml_files import load_scenario

EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.yaml"))
REPLEMU = Path(sys.executable).with_name("replemu")
LRS = ROOT / "docs" / "examples" / "last-replica-standing.yaml"
STALE_EPOCH = ROOT / "docs" / "examples" / "kip903-stale-broker-epoch.yaml"
BALANCED = ROOT / "docs" / "examples" / "balanced-unclean-recovery.yaml"


def replemu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPLEMU), *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_agrees_with_its_expect_block(path):
    for protocol in yaml.safe_load(path.read_text())["expect"]:
        out = replemu("run", str(path), "--protocol", protocol, "--check")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "agrees" in out.stdout


def test_the_last_replica_standing_loses_committed_data_on_zookeeper_and_kip903_but_not_kip966():
    scenario = load_scenario(LRS)
    for protocol in ("kip320", "kip903"):
        result = run_scenario(scenario, protocol)
        assert "NoCommittedDataLoss" in violated(result), protocol
        assert [(l["value"], l["allowed"]) for l in result["losses"]] == [("v1", False)]
        assert all(r["log"] == [] for r in result["final"]["replicas"].values())  # gone everywhere
    result = run_scenario(scenario, "kip966")
    assert result["violations"] == [] and result["losses"] == []
    assert result["final"]["controller"]["leader"] == 3  # the ELR member
    assert result["final"]["replicas"]["3"]["log"] == [[0, 0, "v1"]]


def test_kip903s_broker_epoch_check_is_what_saves_the_committed_record():
    with_check = run_scenario(load_scenario(STALE_EPOCH), "kip903", trace=True)
    assert {"step": 11, "error": "INELIGIBLE_REPLICA"} in with_check["errors"]
    rejected = [e for t in with_check["trace"] for e in t["outcome"]["events"] if e["event"] == "AlterPartitionRejected"]
    assert rejected and "broker epoch mismatch" in rejected[0]["reason"]
    assert with_check["losses"] == []
    without = run_scenario(load_scenario(STALE_EPOCH), "kip903", knobs={"isr_expand_checks_broker_epoch": False})
    assert "NoCommittedDataLoss" in violated(without)
    assert [(l["value"], l["allowed"]) for l in without["losses"]] == [("v1", False)]


def test_balanced_recovery_waits_for_every_last_known_elr_answer_then_elects_the_longest_log():
    scenario = load_scenario(BALANCED)
    partial = run_scenario(dataclasses.replace(scenario, steps=scenario.steps[:17]), "kip966")
    assert partial["final"]["controller"]["leader"] is None  # 2 answered, 3 not yet
    assert partial["final"]["controller"]["last_known_elr"] == [2, 3]
    result = run_scenario(scenario, "kip966")
    assert result["final"]["controller"]["leader"] == 2 and result["losses"] == []
    # Kafka's code up to 3.9 keeps only the last leader, 3, and elects it once ISR and ELR are
    # empty: it lost a and b in the outage, and so do the others (an unclean election: allowed).
    code = run_scenario(scenario, "kip966", knobs={"unclean_recovery": "last_known_leader"})
    assert code["final"]["controller"]["leader"] == 3
    assert [(l["value"], l["allowed"]) for l in code["losses"]] == [("a", True), ("b", True)]


@pytest.mark.parametrize("step", [{"fence": {"replica": 2}}, {"unfence": {"replica": 2}}, {"log_info": {"replica": 2}}])
def test_zookeeper_variants_refuse_the_kraft_only_steps_and_change_nothing(step):
    base = [{"elect": {"leader": 1}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}]
    for protocol in ("hw", "kip320"):
        plain = run(base + [{"fetch": {"replica": 2}}], protocol)
        refused = run(base + [step, {"fetch": {"replica": 2}}], protocol)
        assert {"step": 4, "error": "UNSUPPORTED_VERSION"} in refused["errors"]
        assert refused["final"] == plain["final"]


def test_a_clean_shutdown_registers_clean_and_keeps_its_elr_place():
    """KIP-966: a broker that shut down cleanly keeps its ELR membership when it registers; one
    that crashed leaves the ELR."""
    steps = [
        {"elect": {"leader": 1}}, {"produce": {"value": "a"}},
        {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
        {"shrink_isr": {"replica": 2}}, {"shrink_isr": {"replica": 3}},  # ISR [1], ELR [3]
    ]
    clean = run(steps + [{"shutdown": {"replica": 3}}, {"restart": {"replica": 3}}], "kip966",
                replicas=(1, 2, 3), min_insync_replicas=2)
    assert clean["final"]["controller"]["elr"] == [3]
    crashed = run(steps + [{"crash": {"replica": 3}}, {"restart": {"replica": 3}}], "kip966",
                  replicas=(1, 2, 3), min_insync_replicas=2)
    assert crashed["final"]["controller"]["elr"] == []


def _search(protocol: str, replicas: int, depth: int, **bounds) -> object:
    config = Config(min_insync_replicas=2, log_flush="explicit")
    space = Space(tuple(range(1, replicas + 1)), config, VARIANTS[protocol],
                  Bounds(depth=depth, records=1, crashes=0, **bounds))
    return search_local(space)


def test_the_search_finds_the_last_replica_standing_under_kip903():
    outcome = _search("kip903", 2, 7, power_crashes=1)
    depth, path = outcome.violations["NoCommittedDataLoss"]
    assert (depth, path) == (5, "P11 F2 S2 C1p R1")  # the ISR shrinks to the leader, which loses v1 and returns


def test_the_search_exhausts_kip966_two_levels_deeper_than_kip320_loses_data():
    kip320 = _search("kip320", 2, 7, power_crashes=1)
    assert kip320.violations["NoCommittedDataLoss"][0] == 6
    kip966 = _search("kip966", 2, 8, power_crashes=1)
    assert kip966.complete and kip966.depth == 8 and "NoCommittedDataLoss" not in kip966.violations
