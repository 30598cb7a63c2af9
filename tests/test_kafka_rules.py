"""The five rules that bring the core in line with Kafka's code (docs/protocol.md, "Rules that
changed"), one test each, quoting the Kafka code or test they come from (apache/kafka at the tag
named).  Each test also pins the behaviour the rule replaced, so reverting it fails here."""

from __future__ import annotations

import pytest

from conftest import scenario, violated
from emulator import run_scenario
from emulator.variants import VARIANT_NAMES, VARIANTS


def replay(steps, protocol, replicas=(1, 2, 3), knobs=None, **config):
    return run_scenario(scenario(steps, replicas, **config), protocol, trace=True, knobs=knobs)


def at(result, step, replica):
    return result["trace"][step - 1]["replicas"][str(replica)]


ZOOKEEPER_VARIANTS = [v for v in VARIANT_NAMES if VARIANTS[v].metadata == "zookeeper"]


# -- rule 1: lag bookkeeping on every LeaderAndIsr that makes a broker leader -----------------

@pytest.mark.parametrize("protocol", ZOOKEEPER_VARIANTS)  # KRaft 3.6+ changes the ISR without a new epoch
def test_rule1_a_follower_the_controller_removed_stops_holding_the_hw_back(protocol):
    """Partition.makeLeader (2.1.0, and 0.10.2.1 - HEAD in substance), run for the same leader
    re-elected in a newer epoch too::

        (assignedReplicas - leaderReplica).foreach { replica =>
          val lastCaughtUpTimeMs = if (inSyncReplicas.contains(replica)) curTimeMs else 0L
          replica.resetLastCaughtUpTime(curLeaderLogEndOffset, curTimeMs, lastCaughtUpTimeMs)

    Replica 3 was caught up when it died; ``controller_remove`` re-elects 1 in a new epoch without
    3, so 3 is NEVER caught up and no longer an HW candidate: the acks=all produce is answered as
    soon as the remaining ISR (1, 2) has it.  (Before, 3's stale remote LEO kept the HW, and the
    ack, waiting for the whole lag window: UncleanLeaderElectionTest's loss never showed.)"""
    r = replay([
        {"elect": {}}, {"produce": {"value": "a"}},
        {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
        {"crash": {"replica": 3}}, {"controller_remove": {"replica": 3}},
        {"produce": {"value": "b", "acks": "all"}},
        {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
    ], protocol)
    assert r["final"]["controller"] == {"leader": 1, "epoch": 1, "isr": [1, 2]}
    assert at(r, 11, 1)["hw"] == 2 and at(r, 11, 1)["remote_leo"]["3"] == 1
    assert any(e["event"] == "Ack" and e["produce_step"] == 9 for e in r["trace"][10]["outcome"]["events"])


@pytest.mark.parametrize("protocol", ZOOKEEPER_VARIANTS)  # KRaft 3.6+ changes the ISR without a new epoch
def test_rule1_a_reelected_leader_restarts_its_followers_lag_clocks(protocol):
    """Same code: an ISR follower's idle time restarts from the re-election (lastCaughtUpMs =
    now).  Follower 2 last caught up at t=0; at t=8000 the leader is re-elected (controller
    removes 3); 5000 ms later 2 is within the 10000 ms lag of the re-election, so a tick keeps it
    in the ISR (before, its old clock said 13000 ms and it was dropped)."""
    r = replay([
        {"elect": {}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
        {"produce": {"value": "b"}},
        {"tick": {"ms": 8000}}, {"crash": {"replica": 3}}, {"controller_remove": {"replica": 3}},
        {"tick": {"ms": 5000}},
    ], protocol)
    assert r["final"]["controller"]["isr"] == [1, 2]


# -- rule 2: NEVER is not a timestamp ------------------------------------------------------------

@pytest.mark.parametrize("protocol", ZOOKEEPER_VARIANTS)  # 3.5 re-leads in a new epoch after the shrink
def test_rule2_a_follower_that_never_caught_up_is_out_of_sync_at_the_next_check(protocol):
    """Partition.getOutOfSyncReplicas (0.10.2.1 - 2.0.0)::

        candidateReplicas.filter(r => (time.milliseconds - r.lastCaughtUpTimeMs) > maxLagMs)

    with lastCaughtUpTimeMs = 0 for a follower that never caught up: ``now - 0 > maxLag`` on any
    real clock.  Follower 2 is shrunk (NEVER), rejoins the ISR at the HW while still below the
    LEO (follower 3 holds the HW back), so it never caught up in this leadership: the next tick,
    only 10 ms later, drops it again (before, a fallback time kept it in the ISR)."""
    r = replay([
        {"elect": {}}, {"produce": {"value": "a"}},
        {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
        {"shrink_isr": {"replica": 2}},
        {"produce": {"value": "b"}}, {"fetch": {"replica": 2}},  # 2 at offset 1 = HW (3 is at 1), LEO 2
        {"tick": {"ms": 10}},
    ], protocol)
    assert at(r, 9, 1)["leo"] == 2 and at(r, 9, 1)["hw"] == 1
    assert r["trace"][8]["controller"]["isr"] == [1, 2, 3]  # rejoined at the HW
    assert r["final"]["controller"]["isr"] == [1, 3]  # out of sync at the first check


# -- rule 3: KAFKA-7152 ----------------------------------------------------------------------------

def test_rule3_kip320_keeps_an_idle_follower_that_has_the_leaders_leo():
    """KAFKA-7152, Partition.getOutOfSyncReplicas (2.1.0)::

        r.logEndOffset.messageOffset != leaderReplica.logEndOffset.messageOffset &&
          (time.milliseconds - r.lastCaughtUpTimeMs) > maxLagMs

    An idle partition: follower 2 fetched everything, then nothing happens for 60 s.  kip320
    (knob isr_shrink_exempts_leo_equal) keeps it; kip279 (2.0) drops it."""
    steps = [{"elect": {}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
             {"tick": {"ms": 60000}}]
    assert replay(steps, "kip320", replicas=(1, 2))["final"]["controller"]["isr"] == [1, 2]
    assert replay(steps, "kip279", replicas=(1, 2))["final"]["controller"]["isr"] == [1]
    off = replay(steps, "kip320", replicas=(1, 2), knobs={"isr_shrink_exempts_leo_equal": False})
    assert off["final"]["controller"]["isr"] == [1]


# -- rule 4: the UNDEFINED fallback of 2.0.0 ------------------------------------------------------

# AbstractFetcherThreadTest.testTruncation's logs (2.1.0): the follower has epochs 0, 2, 4 at
# offsets 0-2, the leader 1, 3, 5; the follower's HW is 0.  Built here with fast elections.
TEST_TRUNCATION_LOGS = [
    {"elect": {"leader": 1, "to": [1]}}, {"produce": {"value": "a"}},
    {"elect": {"leader": 2, "to": [2]}}, {"produce": {"value": "a"}},
    {"elect": {"leader": 1, "to": [1]}}, {"produce": {"value": "b"}},
    {"elect": {"leader": 2, "to": [2]}}, {"produce": {"value": "b"}},
    {"elect": {"leader": 1, "to": [1]}}, {"produce": {"value": "c"}},
    {"elect": {"leader": 2, "to": [2]}}, {"produce": {"value": "c"}},
    {"leader_and_isr": {"replica": 1}},  # 1 follows 2 (epoch 5) and runs the truncation loop
]


def test_rule4_an_undefined_answer_after_the_first_round_truncates_to_the_fetch_offset():
    """AbstractFetcherThread.getOffsetTruncationState (2.0.0)::

        if (leaderEpochOffset.endOffset == UNDEFINED_EPOCH_OFFSET) {
          ... "The initial fetch offset ${partitionStates.stateValue(tp).fetchOffset} will be used for truncation."
          OffsetTruncationState(partitionStates.stateValue(tp).fetchOffset, truncationCompleted = true)

    Rounds 1 and 2 truncate the follower to 2, then 1 (the fetch offset follows); round 3 asks for
    epoch 0, below the leader's first epoch 1: UNDEFINED, so kip279 truncates to the fetch offset
    1, not to the HW 0, and keeps a record (epoch 0) the leader does not have.  The knob set to
    ``hw`` (the 0.11 - 1.0 rule) truncates to 0; kip320's v2 answer converges."""
    r = replay(TEST_TRUNCATION_LOGS, "kip279", replicas=(1, 2))
    truncations = [e for e in r["trace"][-1]["outcome"]["events"] if e["event"] == "Truncation"]
    assert [(t["to"], t["rule"]) for t in truncations] == [(2, "epoch-lookup"), (1, "epoch-lookup")]
    assert r["final"]["replicas"]["1"]["log"] == [[0, 0, "a"]]
    assert r["final"]["replicas"]["2"]["log"][0] == [0, 1, "a"]

    hw_rule = replay(TEST_TRUNCATION_LOGS, "kip279", replicas=(1, 2), knobs={"undefined_truncates_to": "hw"})
    assert hw_rule["final"]["replicas"]["1"]["log"] == []
    assert replay(TEST_TRUNCATION_LOGS, "kip320", replicas=(1, 2))["final"]["replicas"]["1"]["log"] == []


# -- rule 5: re-election keeps remote LEOs ---------------------------------------------------------

ZOMBIE_REELECTION = [
    {"elect": {}},                        # 1 leads epoch 0
    {"produce": {"value": "v1"}},
    {"fetch": {"replica": 2}},
    {"fetch": {"replica": 2}},            # 1 learns LEO 1 for replica 2
    {"elect": {"leader": 3, "to": [3]}},  # 1 never hears of epoch 1
    {"leader_and_isr": {"replica": 2}},   # 2 follows 3 and truncates to 0
    {"crash": {"replica": 3}},
    {"elect": {}},                        # 1 re-elected (epoch 2, ISR [1,2]): HW -> 1 at once
]


def test_rule5_a_reelected_leader_keeps_its_followers_leos():
    """Partition.makeLeader (0.10.2.1 - 2.1.0)::

        if (isNewLeader) {
          ...
          // reset log end offset for remote replicas
          assignedReplicas.filter(_.brokerId != localBrokerId).foreach(_.updateLogReadResult(LogReadResult.UnknownLogReadResult))

    (ReplicaTest.testResetReplicaStateWhenLeaderIsReelected at HEAD.)  Leader 1 re-elected by
    ``controller_remove`` keeps follower 2's LEO in every preset; the TLA+ rule (knob
    reset_remote_leo_on_reelection) forgets it."""
    steps = [{"elect": {}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
             {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}, {"crash": {"replica": 3}}, {"controller_remove": {"replica": 3}}]
    for protocol in VARIANT_NAMES:
        assert replay(steps, protocol)["final"]["replicas"]["1"]["remote_leo"] == {"2": 1, "3": 1}, protocol
    reset = replay(steps, "kip320", knobs={"reset_remote_leo_on_reelection": True})
    assert reset["final"]["replicas"]["1"]["remote_leo"] == {"2": -1, "3": -1}


def test_rule5_the_zombie_reelection_breaks_strong_isr_under_kip320_and_the_tla_knob_prevents_it():
    """The finding the project reports: with Kafka's code (remote LEOs kept on a same-id
    re-election) kip320 breaks StrongIsr without unclean election or power loss; with the TLA+
    model's reset the same eight steps are clean."""
    r = replay(ZOMBIE_REELECTION, "kip320")
    assert "StrongIsr" in violated(r)
    assert next(v for v in r["violations"] if v["invariant"] == "StrongIsr")["step"] == 8
    assert r["final"]["replicas"]["1"]["hw"] == 1 and r["final"]["replicas"]["2"]["leo"] == 0
    clean = replay(ZOMBIE_REELECTION, "kip320", knobs={"reset_remote_leo_on_reelection": True})
    assert not violated(clean) & {"StrongIsr", "NoCommittedDataLoss", "EventualConvergence"}
    assert clean["knobs"]["reset_remote_leo_on_reelection"] is True


def test_knobs_in_a_scenario_file_and_on_the_command_line_and_which_wins(tmp_path):
    """``config.knobs`` sets knobs for one scenario; ``--knob`` wins over it; results record every
    knob in force when any differs from the preset; bad names and values are exit-2 errors."""
    import json

    import yaml

    from conftest import replemu

    f = tmp_path / "z.yaml"
    f.write_text(yaml.safe_dump({"name": "z", "replicas": [1, 2, 3], "steps": ZOMBIE_REELECTION,
                                 "config": {"knobs": {"reset_remote_leo_on_reelection": True}}}))
    out = json.loads(replemu("run", str(f), "--protocol", "kip320", "--json").stdout)
    assert out["knobs"]["reset_remote_leo_on_reelection"] is True and "StrongIsr" not in violated(out)
    out = json.loads(replemu("run", str(f), "--protocol", "kip320", "--json", "--knob", "reset_remote_leo_on_reelection=false").stdout)
    assert "knobs" not in out and "StrongIsr" in violated(out)  # back to the plain preset
    bad = replemu("run", str(f), "--protocol", "kip320", "--knob", "fencing=maybe")
    assert bad.returncode == 2 and "knob fencing: 'maybe' is not one of true, false" in bad.stderr
    f.write_text(yaml.safe_dump({"name": "z", "replicas": [1, 2], "steps": [], "config": {"knobs": {"nope": True}}}))
    bad = replemu("run", str(f))
    assert bad.returncode == 2 and "config: unknown knob 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_without_the_controllers_epoch_bump_brokers_take_the_isr_by_partition_epoch():
    """Knob controller_isr_change_bumps_epoch=false (KRaft-style): ``controller_remove`` keeps the
    leader epoch and bumps only the partition epoch; brokers accept that ISR change (no
    STALE_CONTROLLER_EPOCH), without makeLeader's lag reset, so the removed follower counts as
    caught up until its lag expires; the next fetch after that advances the HW and acks."""
    steps = [{"elect": {}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}},
             {"fetch": {"replica": 2}}, {"fetch": {"replica": 3}}, {"crash": {"replica": 3}}, {"controller_remove": {"replica": 3}},
             {"produce": {"value": "b", "acks": "all"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
             {"tick": {"ms": 20000}}, {"fetch": {"replica": 2}}]
    r = replay(steps, "kip320", knobs={"controller_isr_change_bumps_epoch": False})
    assert not r["errors"]
    assert r["final"]["controller"] == {"leader": 1, "epoch": 0, "isr": [1, 2]}
    assert at(r, 11, 1)["hw"] == 1  # 3 was caught up 0 ms ago: still an HW candidate
    assert r["final"]["replicas"]["1"]["hw"] == 2
    assert any(e["event"] == "Ack" for e in r["trace"][-1]["outcome"]["events"])
