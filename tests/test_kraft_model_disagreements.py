"""The four disagreements of issue 33 (item 4) with an independent model of Kafka's controller and
leader rules, each fixed after reading Kafka's code at the variant's tag and pinned here by a small
scenario and its negative control."""

from __future__ import annotations

from conftest import run


def fetch(r):
    return {"fetch": {"replica": r}}


def state(result, step):
    return result["trace"][step - 1]


# -- 1. kip966: a caught-up follower that is not ISR-eligible does not hold the HW back -----------------

# 2 is caught up (HW 1), then restarts: its old registration is fenced (it leaves the ISR) and it
# registers with a new broker epoch, unfenced. The leader still has the broker epoch of 2's last
# fetch, so 2 is not ISR-eligible (3.8.0 Partition.isReplicaIsrEligible -> isBrokerEpochIsrEligible),
# and maybeIncrementLeaderHW (shouldWaitForReplicaToJoinIsr) does not wait for it: b commits once 3
# has it.
STALE_EPOCH_FOLLOWER = [
    {"elect": {"leader": 1, "epoch": 0}},
    {"produce": {"value": "a"}}, fetch(2), fetch(3), fetch(2), fetch(3),
    {"crash": {"replica": 2}},
    {"restart": {"replica": 2}},
    {"produce": {"value": "b"}}, fetch(3), fetch(3),
]


def test_kip966_hw_does_not_wait_for_a_caught_up_follower_with_a_stale_broker_epoch():
    result = run(STALE_EPOCH_FOLLOWER, "kip966", replicas=(1, 2, 3), acks=1, trace=True)
    assert state(result, 8)["controller"]["isr"] == [1, 3]
    assert state(result, 11)["replicas"]["1"]["hw"] == 2


def test_without_hw_ignores_ineligible_the_same_follower_holds_the_hw_back():
    from conftest import scenario
    from emulator import run_scenario

    result = run_scenario(scenario(STALE_EPOCH_FOLLOWER, (1, 2, 3), acks=1), "kip966", trace=True,
                          knobs={"hw_ignores_ineligible": False})
    assert state(result, 11)["replicas"]["1"]["hw"] == 1


# -- 2. kip966 balanced recovery waits for the LastKnownELR member that joins in the same change --------

# The balanced-unclean-recovery example with 2's answer before 3's registration: when 3 registers
# after an unclean shutdown it leaves the ELR for the LastKnownELR ([2, 3]) in that change, and the
# recovery of the same change must wait for 3's answer (KIP-966; docs/protocol.md 10.5).
BALANCED_OUT_OF_ORDER = [
    {"elect": {"leader": 1, "epoch": 0}},
    {"produce": {"values": ["a", "b"]}}, fetch(2), fetch(3), fetch(2), fetch(3),
    {"flush": {"replica": 2}},
    {"crash": {"replica": 1, "mode": "power"}}, {"crash": {"replica": 2, "mode": "power"}},
    {"crash": {"replica": 3, "mode": "power"}},
    {"fence": {"replica": 1}}, {"fence": {"replica": 2}}, {"fence": {"replica": 3}},
    {"restart": {"replica": 1}}, {"restart": {"replica": 2}},
    {"log_info": {"replica": 2}},                          # 16 ELR [3] still: no recovery
    {"restart": {"replica": 3}},                           # 17 ELR [], LastKnownELR [2, 3]: wait for 3
    {"log_info": {"replica": 3}},                          # 18 every member answered: 2 elected
]


def test_balanced_recovery_waits_for_the_member_that_joins_the_last_known_elr_in_the_same_change():
    result = run(BALANCED_OUT_OF_ORDER, "kip966", replicas=(1, 2, 3), min_insync_replicas=2, log_flush="explicit",
                 trace=True)
    at17 = state(result, 17)["controller"]
    assert at17["leader"] is None and at17["elr"] == [] and at17["last_known_elr"] == [2, 3]
    assert state(result, 18)["controller"]["leader"] == 2
    assert result["losses"] == []


# -- 3 and 4. --knob unclean_recovery=last_known_leader: fencing and SHUTDOWN_NOW ----------------------

# 1, the last ISR member, is fenced (ISR [], ELR [1], LastKnownELR [1]); it restarts without a
# clean-shutdown file and stays fenced: it leaves the ELR and canElectLastKnownLeader elects it
# although it is fenced (ISR [1]).
LAST_KNOWN_LEADER = [
    {"elect": {"leader": 1, "epoch": 0}},
    {"fence": {"replica": 2}}, {"fence": {"replica": 3}}, {"fence": {"replica": 1}},
    {"crash": {"replica": 1}}, {"restart": {"replica": 1, "fenced": True}},   # 6 1 elected, fenced
    {"unfence": {"replica": 2}},
    {"fence": {"replica": 2}},                            # 8 2 is in no ISR: the partition is untouched
    {"shutdown": {"replica": 1}},                         # 9 fenced 1 asks to stop: SHUTDOWN_NOW
]


def lkl(steps):
    from conftest import scenario
    from emulator import run_scenario

    return run_scenario(scenario(steps, (1, 2, 3)), "kip966", trace=True, knobs={"unclean_recovery": "last_known_leader"})


def test_fencing_a_broker_outside_the_isr_leaves_the_partition_alone():
    """3.8.0 handleBrokerFenced rebuilds only brokersToIsrs.partitionsWithBrokerInIsr(broker)."""
    result = lkl(LAST_KNOWN_LEADER)
    assert state(result, 6)["controller"]["leader"] == 1 and state(result, 6)["controller"]["isr"] == [1]
    assert state(result, 8)["controller"] == {**state(result, 7)["controller"], "fenced": [1, 2, 3]}
    assert not [e for e in state(result, 8)["outcome"]["events"] if e["event"] == "PartitionChange"]


def test_a_fenced_broker_shutting_down_leaves_the_isr():
    """3.8.0 calculateNextBrokerState: FENCED + wantShutDown -> SHUTDOWN_NOW, and processBrokerHeartbeat
    runs handleBrokerFenced: the broker leaves the ISR, the partition has no leader, the LastKnownELR
    keeps the last leader (maybeUpdateLastKnownLeader)."""
    result = lkl(LAST_KNOWN_LEADER)
    after = state(result, 9)["controller"]
    assert after["leader"] is None and after["isr"] == [] and after["last_known_elr"] == [1]
    assert state(result, 9)["controller"]["epoch"] == state(result, 8)["controller"]["epoch"] + 1
