"""`reassign` (issue 49): KRaft's AlterPartitionReassignments as 3.5.0 / 3.8.0
ReplicationControlManager and PartitionChangeBuilder run it: a rearrangement (one record, no
leader-epoch bump, complete at once), adding and removing replicas (brokers the scenario lists in
``brokers``), completion by the AlterPartition that puts the targets in the ISR, cancellation. Kafka's
own tests that need it are tests/kafka/kraft-*reassign*.yaml, kraft-delta-*.yaml,
kraft-fetcher-not-restarted-*.yaml and kraft-isr-enlargement-*.yaml; here what their expect blocks
cannot say (events, errors) and the step's life on the other engines' paths (state documents, the
search's states)."""

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
    # a rearrangement (a new preferred leader) or a removal: no reassignment is in progress
    assert sorted(c for c in explore.enabled_codes(space, replay, counters) if c.startswith("Y")) == ["Y12", "Y13", "Y213", "Y23", "Y312"]
    replay.apply(Reassign((2, 3, 1)))
    restored, _ = explore.restore(space.template, explore.canonical(replay, counters))
    assert restored.partition.assignment == (2, 3, 1)
    restored.apply(Elect())
    assert restored.partition.controller.leader == 2


def test_run_scenario_reports_the_order_in_final_and_trace():
    result = run_scenario(scenario([CREATE, {"reassign": {"replicas": [2, 3, 1]}}], (1, 2, 3)), "kip966", trace=True)
    assert result["final"]["controller"]["replicas"] == [2, 3, 1]
    assert "replicas" not in at(result, 1)["controller"]


# -- adding and removing replicas (brokers: the scenario's other brokers) ------------------------------------


def cluster(steps, brokers=(1, 2, 3, 4), replicas=(1, 2, 3), **config):
    return parse_scenario({"name": "t", "replicas": list(replicas), "brokers": list(brokers), "config": config,
                           "steps": steps})


def result_of(steps, protocol="kip966", **kw):
    return run_scenario(cluster(steps, **kw), protocol, trace=True)


SETTLED = [CREATE, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
           {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}]  # HW 1 on every replica


@pytest.mark.parametrize("protocol", KRAFT)
def test_an_added_replica_copies_the_log_joins_the_isr_and_completes_the_move(protocol):
    """Step 1 of changePartitionReassignment, then the AlterPartition that completes it: the removed
    leader is replaced (NEW_LEADER_ELECTED to it), with a leader-epoch bump, and deletes its copy."""
    steps = SETTLED + [{"reassign": {"replicas": [4, 2, 3]}}, {"fetch": {"replica": 4}}, {"fetch": {"replica": 4}},
                       {"produce": {"value": "b"}}]
    result = result_of(steps, protocol)
    (change,) = events(result, 7, "PartitionChange")
    assert (change["replicas"], change["adding"], change["removing"], change["epoch"]) == ([4, 2, 3, 1], [4], [1], 0)
    assert [e["replica"] for e in events(result, 7, "BecomeFollower")] == [4]  # the others take an ISR-only change
    assert at(result, 8)["controller"]["isr"] == [1, 2, 3]  # 4 copied the record, not caught up with the HW yet
    assert (9, "NEW_LEADER_ELECTED") in errors(result)
    final = result["final"]
    assert final["controller"] == {**final["controller"], "leader": 4, "epoch": 1, "isr": [2, 3, 4], "replicas": [4, 2, 3]}
    assert "adding_replicas" not in final["controller"] and "removing_replicas" not in final["controller"]
    assert final["replicas"]["1"]["role"] == "none" and final["replicas"]["1"]["log"] == []
    assert [r[2] for r in final["replicas"]["4"]["log"]] == ["a", "b"]
    assert result["violations"] == [] and result["losses"] == []


def test_a_fetch_the_leader_cannot_place_is_unknown_leader_epoch():
    """Partition.followerReplicaOrThrow: the leader lags the metadata log and does not list the new
    replica yet: UNKNOWN_LEADER_EPOCH, nothing recorded; once the change reaches it, the fetch counts."""
    steps = [CREATE, {"lag_metadata": {"replica": 1}}, {"reassign": {"replicas": [1, 2, 3, 4]}},
             {"fetch": {"replica": 4}}, {"leader_and_isr": {"replica": 1}}, {"fetch": {"replica": 4}}]
    result = result_of(steps)
    assert (4, "UNKNOWN_LEADER_EPOCH") in errors(result)
    assert result["final"]["controller"]["isr"] == [1, 2, 3, 4] and "adding_replicas" not in result["final"]["controller"]


def test_a_removed_broker_that_lags_deletes_its_copy_when_the_change_reaches_it():
    steps = SETTLED + [{"lag_metadata": {"replica": 3}}, {"reassign": {"replicas": [1, 2]}},
                       {"leader_and_isr": {"replica": 3}}]
    result = result_of(steps)
    assert at(result, 8)["controller"]["replicas"] == [1, 2] and at(result, 8)["controller"]["epoch"] == 1
    assert at(result, 8)["replicas"]["3"]["role"] == "follower"  # it has not applied the change yet
    assert events(result, 9, "ReplicaDeleted") == [{"event": "ReplicaDeleted", "replica": 3, "leo": 1, "partition_epoch": 2}]
    assert result["final"]["replicas"]["3"]["log"] == []


def test_cancelling_reverts_and_a_second_cancel_has_nothing_to_revert():
    steps = [CREATE, {"reassign": {"replicas": [4, 2, 3]}}, {"reassign": {"cancel": True}}, {"reassign": {"cancel": True}}]
    result = result_of(steps)
    assert at(result, 2)["controller"]["adding_replicas"] == [4]
    ctl = at(result, 3)["controller"]
    # PartitionReassignmentRevert: the replicas [4, 2, 3, 1] without the adding ones: [2, 3, 1], not the old order
    assert (ctl["leader"], ctl["epoch"], ctl["isr"], ctl["replicas"]) == (1, 1, [1, 2, 3], [2, 3, 1])
    assert errors(result) == [(4, "NO_REASSIGNMENT_IN_PROGRESS")]
    assert result["final"]["replicas"]["4"]["role"] == "none"


@pytest.mark.parametrize("unclean, expected", [(False, [(6, "INVALID_REPLICA_ASSIGNMENT")]), (True, [])])
def test_a_revert_whose_isr_holds_only_adding_replicas_needs_unclean_election(unclean, expected):
    """PartitionReassignmentRevert: the ISR without the adding replicas is empty: the first original
    replica, which cancelPartitionReassignment accepts only with the topic's unclean election."""
    steps = [CREATE, {"reassign": {"replicas": [1, 2, 4, 5]}}, {"fetch": {"replica": 4}},
             {"fence": {"replica": 1}}, {"fence": {"replica": 2}}, {"reassign": {"cancel": True}}]
    result = result_of(steps, "kip903", replicas=(1, 2), brokers=(1, 2, 4, 5), unclean_leader_election=unclean)
    ctl = at(result, 5)["controller"]
    assert (ctl["leader"], ctl["isr"], ctl["adding_replicas"]) == (4, [4], [4, 5])
    assert [e for e in errors(result) if e[0] == 6] == expected
    final = result["final"]["controller"]
    if unclean:  # replicas [1, 2], ISR [1]: 1 is fenced, no leader
        assert (final["leader"], final["isr"], "replicas" in final) == (None, [1], False)
    else:
        assert final["adding_replicas"] == [4, 5]


def test_zookeeper_variants_leave_the_other_brokers_idle():
    result = run_scenario(cluster([{"elect": {}}, {"reassign": {"replicas": [4, 2, 3]}}]), "kip320")
    assert errors(result) == [(2, "UNSUPPORTED_VERSION")]
    assert result["final"]["replicas"]["4"]["role"] == "none"


@pytest.mark.parametrize("brokers, why", [([1, 2], "must list every replica"), ([1, 2, 3, 3], "unique"),
                                          ("x", "a list of broker ids")])
def test_brokers_must_hold_every_replica_once(brokers, why):
    with pytest.raises(ScenarioError) as e:
        parse_scenario({"name": "t", "replicas": [1, 2, 3], "brokers": brokers, "steps": []}, "b.yaml")
    assert "b.yaml" in str(e.value) and why in str(e.value)


def test_a_reassignment_in_progress_survives_a_state_document_and_a_clone():
    from emulator import state

    sc = cluster([CREATE, {"reassign": {"replicas": [4, 2, 3]}}])
    replay = state.Replay(sc.replicas, sc.config, variant_named("kip966"), brokers=sc.brokers)
    for step in sc.steps:
        replay.apply(step)
    doc = state.to_document(replay)
    assert doc["assignment"] == [1, 2, 3] and doc["brokers"] == [4]
    assert (doc["controller"]["replicas"], doc["controller"]["adding"], doc["controller"]["removing"]) == ([4, 2, 3, 1], [4], [1])
    for copy in (state.from_document(doc), state.from_document(doc, like=replay), state.clone(replay)):
        assert state.to_document(copy) == doc
        copy.apply(parse_scenario({"name": "t", "replicas": [1, 2, 3], "brokers": [1, 2, 3, 4],
                                   "steps": [{"fetch": {"replica": 4}}]}).steps[0])
        assert copy.partition.controller.leader == 4  # 4 caught up (empty log, HW 0): complete, 1 replaced


def test_existing_scenarios_write_no_brokers_key():
    from emulator import state
    from emulator.run import Replay

    replay = Replay((1, 2, 3), scenario([], (1, 2, 3)).config, variant_named("kip966"))
    assert "brokers" not in state.to_document(replay)


def test_the_search_removes_re_adds_and_cancels_and_restores_each_state():
    from emulator import explore
    from emulator.config import Config
    from emulator.steps import StepKind

    alphabet = (StepKind.ELECT, StepKind.REASSIGN, StepKind.FETCH)
    space = explore.Space((1, 2, 3), Config(), variant_named("kip966"), explore.Bounds(depth=4), alphabet)
    replay, counters, _, _ = explore.root(space)
    for code, expect_y in (("Y12", {"Y21", "Y1", "Y2", "Y123"}), ("Y123", {"Y213", "Y312", "Yc"}), ("Yc", None)):
        assert code in explore.enabled_codes(space, replay, counters)
        step, counters = explore.step_of(space, replay, counters, code)
        replay.apply(step)
        t = explore.canonical(replay, counters)
        restored, _ = explore.restore(space.template, t)
        assert explore.canonical(restored, counters) == t
        assert restored.partition.assignment == replay.partition.assignment
        assert (restored.partition.controller.adding, restored.partition.controller.removing) == \
            (replay.partition.controller.adding, replay.partition.controller.removing)
        if expect_y is not None:
            assert {c for c in explore.enabled_codes(space, restored, counters) if c.startswith("Y")} == expect_y
        replay = restored
    assert replay.partition.assignment == (1, 2) and replay.partition.replicas[3].role.value == "none"


def test_a_leader_removed_in_the_step_its_hw_rose_is_judged_from_what_the_new_leader_holds():
    """The fetch that raises leader 1's HW also completes the reassignment that removes it (the
    AlterPartition answered in the same step): the checker folds what 1 committed through the new
    leader, which holds it (a path replemu explore found; it broke the checker before)."""
    steps = [{"elect": {}}, {"shrink_isr": {"replica": 2}}, {"produce": {"value": "v1", "acks": 1}},
             {"fetch": {"replica": 2, "response": "lost"}}, {"produce": {"value": "v2", "acks": 1}},
             {"fetch": {"replica": 2}}, {"reassign": {"replicas": [2]}}, {"fetch": {"replica": 2}}]
    result = run(steps, "kip903", replicas=(1, 2), trace=True)
    assert (8, "NEW_LEADER_ELECTED") in errors(result)
    final = result["final"]
    assert (final["controller"]["leader"], final["replicas"]["2"]["hw"], final["replicas"]["1"]["log"]) == (2, 2, [])
    assert result["violations"] == [] and result["losses"] == []


def test_kafkas_builder_keeps_a_replica_a_cancel_removed_in_the_elr_and_may_elect_it_empty():
    """docs/protocol.md 9.3: 3.8.0's maybePopulateTargetElr does not filter the ELR by the target
    replicas. Cancelling moves the adding leader 4 out of the ISR below min ISR into the ELR while
    broker 4 deletes its copy; re-added, it is elected from the ELR when the ISR empties, and the
    committed record is lost. The emulator runs Kafka's code, so its checker reports it."""
    steps = [CREATE, {"produce": {"value": "v0", "acks": 1}}, {"shrink_isr": {"replica": 2}},
             {"reassign": {"replicas": [4, 2, 3]}}, {"fetch": {"replica": 4}}, {"fetch": {"replica": 3}},
             {"fence": {"replica": 1}}, {"fetch": {"replica": 3}}, {"reassign": {"cancel": True}},
             {"reassign": {"replicas": [4, 2, 3, 1]}}, {"fence": {"replica": 3}}]
    result = result_of(steps, "kip966", min_insync_replicas=2)
    ctl = at(result, 9)["controller"]
    assert (ctl["leader"], ctl["isr"], ctl["elr"], ctl["replicas"]) == (3, [3], [4], [2, 3, 1])
    assert at(result, 9)["replicas"]["4"]["log"] == []
    assert (result["final"]["controller"]["leader"], result["final"]["controller"]["isr"]) == (4, [4])
    found = {(v["invariant"], v["step"]) for v in result["violations"]}
    assert {("LeaderCandidateCompleteness", 9), ("NoCommittedDataLoss", 11)} <= found
    assert result["losses"] == [{"offset": 0, "value": "v0", "acked": False, "allowed": False, "step": 11}]


@pytest.mark.parametrize("protocol, replicas, isr, removing", [
    ("kip903", [1, 2], [1], None),  # 3.5.0: no adding replica to wait for: complete, 2 outside the ISR
    ("kip966", [1, 2, 3], [1, 3], [3]),  # 3.8.0 (KAFKA-15665): waits for every target replica, 2 too
])
def test_a_removal_completes_when_the_adding_replicas_or_all_targets_are_in_the_isr(protocol, replicas, isr, removing):
    steps = [CREATE, {"shrink_isr": {"replica": 2}}, {"reassign": {"replicas": [1, 2]}}]
    ctl = at(result_of(steps, protocol, brokers=(1, 2, 3)), 3)["controller"]
    assert (ctl.get("replicas", [1, 2, 3]), ctl["isr"], ctl.get("removing_replicas")) == (replicas, isr, removing)
