"""`reassign` (issue 49): KRaft's AlterPartitionReassignments to the partition's replicas in a new
order, as 3.8.0 ReplicationControlManager.changePartitionReassignment and PartitionChangeBuilder run
it: one record with the new replica list, no leader-epoch bump, complete at once. Adding or removing
replicas is refused when the scenario is read. Kafka's own tests that need it are tests/kafka/kraft-
reassign*.yaml, kraft-delta-*.yaml and kraft-fetcher-not-restarted-*.yaml; here what their expect
blocks cannot say (events, errors) and the step's life on the other engines' paths (state documents,
the search's states)."""

from __future__ import annotations

import pytest

from conftest import run, scenario
from emulator import run_scenario, variant_named
from emulator.scenario import ScenarioError, parse_scenario

KRAFT = ["kip903", "kip966"]
CREATE = {"elect": {"leader": 1, "epoch": 0}}


def at(result, step):
    return result["trace"][step - 1]


def events(result, step, name):
    return [e for e in at(result, step)["outcome"]["events"] if e["event"] == name]


def errors(result):
    return [(e["step"], e["error"]) for e in result["errors"]]


@pytest.mark.parametrize("protocol", KRAFT)
def test_a_rearrangement_writes_the_replica_list_without_a_leader_epoch_bump(protocol):
    """triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: the new list holds every old replica,
    so no bump; the followers take the change as an ISR-only update (no BecomeFollower: their
    fetchers are not restarted, ReplicaManagerTest.testFetcherAreNotRestartedIfLeaderEpochIsNotBumpedWithKRaftPath)."""
    steps = [CREATE, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"reassign": {"replicas": [3, 2, 1]}}]
    result = run(steps, protocol, replicas=(1, 2, 3), acks=1, trace=True)
    ctl = at(result, 4)["controller"]
    assert ctl["replicas"] == [3, 2, 1] and ctl["leader"] == 1 and ctl["epoch"] == 0
    assert [e["why"] for e in events(result, 4, "PartitionChange")] == ["reassignment"]
    assert events(result, 4, "BecomeFollower") == [] and events(result, 4, "BecomeLeader") == []
    assert result["final"]["replicas"]["2"]["leo"] == 1 and result["errors"] == []


@pytest.mark.parametrize("protocol", KRAFT)
def test_the_new_first_replica_is_the_preferred_leader(protocol):
    steps = [CREATE, {"elect": {}}, {"reassign": {"replicas": [3, 1, 2]}}, {"elect": {}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    assert (2, "ELECTION_NOT_NEEDED") in errors(result)
    assert result["final"]["controller"]["leader"] == 3 and result["final"]["controller"]["epoch"] == 1


def test_the_same_order_writes_nothing():
    result = run([CREATE, {"reassign": {"replicas": [1, 2, 3]}}], "kip966", replicas=(1, 2, 3), trace=True)
    assert events(result, 2, "PartitionChange") == []
    assert "replicas" not in result["final"]["controller"]


def test_zookeeper_variants_answer_unsupported_version_and_change_nothing():
    steps = [{"elect": {"leader": 1, "epoch": 0}}, {"reassign": {"replicas": [2, 1]}}]
    for protocol in ("hw", "kip320"):
        result = run(steps, protocol, replicas=(1, 2))
        assert errors(result) == [(2, "UNSUPPORTED_VERSION")]
        assert "replicas" not in result["final"]["controller"]


@pytest.mark.parametrize("args, why", [
    ({"replicas": [1, 2, 3, 3]}, "lists a replica twice"),
    ({"replicas": [2, 1, 3, 4]}, "is not one of the partition's replicas"),  # 4: not a broker of the scenario
    ({"replicas": []}, "must not be empty"),
    ({}, "give exactly one of"),
    ({"replicas": [1, 2], "cancel": True}, "give exactly one of"),
])
def test_a_target_outside_the_scenarios_brokers_or_malformed_is_refused_when_read(args, why):
    data = {"name": "r", "replicas": [1, 2, 3], "steps": [{"elect": {}}, {"reassign": args}]}
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data, "r.yaml")
    assert "r.yaml: step 2 (reassign)" in str(e.value) and why in str(e.value)


def test_the_replica_order_survives_a_state_document_and_a_clone():
    from emulator import state
    from emulator.run import Replay
    from emulator.steps import Elect, Reassign

    sc = scenario([], (1, 2, 3))
    replay = Replay((1, 2, 3), sc.config, variant_named("kip903"))
    replay.apply(Elect())
    replay.apply(Reassign((3, 1, 2)))
    doc = state.to_document(replay)
    assert doc["assignment"] == [1, 2, 3] and doc["controller"]["replicas"] == [3, 1, 2]
    for copy in (state.from_document(doc), state.from_document(doc, like=replay), state.clone(replay)):
        assert copy.partition.assignment == (3, 1, 2)
        copy.apply(Elect())  # PREFERRED: the new first replica
        assert copy.partition.controller.leader == 3


def test_the_search_restores_the_replica_order_of_its_states():
    from emulator import explore
    from emulator.config import Config
    from emulator.steps import Elect, Reassign, StepKind

    alphabet = (StepKind.ELECT, StepKind.REASSIGN)
    space = explore.Space((1, 2, 3), Config(), variant_named("kip966"), explore.Bounds(depth=2), alphabet)
    replay, counters, _, _ = explore.root(space)
    assert sorted(c for c in explore.enabled_codes(space, replay, counters) if c.startswith("Y")) == ["Y213", "Y312"]
    replay.apply(Reassign((2, 3, 1)))
    restored, _ = explore.restore(space.template, explore.canonical(replay, counters))
    assert restored.partition.assignment == (2, 3, 1)
    restored.apply(Elect())
    assert restored.partition.controller.leader == 2


def test_run_scenario_reports_the_order_in_final_and_trace():
    result = run_scenario(scenario([CREATE, {"reassign": {"replicas": [2, 3, 1]}}], (1, 2, 3)), "kip966", trace=True)
    assert result["final"]["controller"]["replicas"] == [2, 3, 1]
    assert "replicas" not in at(result, 1)["controller"]
