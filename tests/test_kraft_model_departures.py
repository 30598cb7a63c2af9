"""The six departures of issue 49 from an independent model of Kafka's KRaft partition layer, each
fixed to Kafka's code at the variant's tag and pinned here by a small scenario (each fails on 896fc71)."""

from __future__ import annotations

import pytest

from conftest import run, scenario
from emulator import run_scenario

KRAFT = ["kip903", "kip966"]


def fetch(r, **kw):
    return {"fetch": {"replica": r, **kw}}


def at(result, step):
    return result["trace"][step - 1]


def errors(result):
    return [(e["step"], e["error"]) for e in result["errors"]]


# -- 1. A broker in controlled shutdown outside the ISR stops fetching: no truncation ---------------

# 1 leads with an uncommitted record a (acks=1, nobody fetched). Its controlled shutdown moves the
# leadership to 2 and 1 becomes a follower outside the ISR: 3.5.0 ReplicaManager.applyLocalFollowersDelta
# (~2213; 3.8.0 ~2826) stops its fetcher instead of starting one, so it never truncates a away; the
# one-step shutdown then stops it with a still on disk (as the one-step shutdown of 857ebf1 did).
@pytest.mark.parametrize("protocol", KRAFT)
def test_a_broker_in_controlled_shutdown_does_not_truncate_when_it_leaves_the_isr(protocol):
    steps = [{"elect": {"leader": 1, "epoch": 0}}, {"produce": {"value": "a"}}, {"shutdown": {"replica": 1}}]
    result = run(steps, protocol, replicas=(1, 2, 3), acks=1, trace=True)
    assert result["final"]["controller"]["leader"] == 2
    assert result["final"]["replicas"]["1"]["leo"] == 1


@pytest.mark.parametrize("protocol", KRAFT)
def test_a_follower_in_controlled_shutdown_keeps_its_log_after_its_isr_removal(protocol):
    """A follower (not the leader) asks to shut down: the ISR change (kip903: with its epoch bump)
    reaches it and stops its fetcher; a fetch is then refused and its suffix stays."""
    steps = [{"elect": {"leader": 1, "epoch": 0}}, {"produce": {"value": "a"}}, fetch(2),
             {"shutdown": {"replica": 2, "phase": "request"}}, {"produce": {"value": "b"}}, fetch(2)]
    result = run(steps, protocol, replicas=(1, 2, 3), acks=1, trace=True)
    assert at(result, 4)["controller"]["isr"] == [1, 3]
    assert (6, "FETCHER_STOPPED") in errors(result)
    assert result["final"]["replicas"]["2"]["leo"] == 1


# -- 2. kip903: a lagging leader ignores an AlterPartition response that bumped the leader epoch -----

# 1 lags the metadata log and shrinks its ISR; the controller accepts and kip903 bumps the leader
# epoch (triggerLeaderEpochBumpIfNeeded). The response's leader epoch 1 is not the leader's 0:
# 3.5.0 Partition.handleAlterPartitionUpdate (~1855-1858) ignores it, the leader stays at epoch 0 in
# its pending state until the delivery of the new epoch.
LAGGING_SHRINK = [{"elect": {"leader": 1, "epoch": 0}}, {"lag_metadata": {"replica": 1}},
                  {"shrink_isr": {"replica": 3}}, {"leader_and_isr": {"replica": 1}}]


def test_kip903_a_lagging_leader_ignores_a_response_with_a_new_leader_epoch():
    result = run(LAGGING_SHRINK, "kip903", replicas=(1, 2, 3), trace=True)
    ctl, leader = at(result, 3)["controller"], at(result, 3)["replicas"]["1"]
    assert ctl["epoch"] == 1 and ctl["isr"] == [1, 2]
    assert leader["leader_epoch"] == 0
    assert any(e["event"] == "AlterPartitionResponseIgnored" for e in result["trace"][2]["outcome"]["events"])
    assert at(result, 4)["replicas"]["1"]["leader_epoch"] == 1


def test_kip966_a_lagging_leader_takes_the_response_of_an_isr_only_change():
    """The negative control: kip966 keeps the leader epoch, the response is taken at once."""
    result = run(LAGGING_SHRINK[:3], "kip966", replicas=(1, 2, 3), trace=True)
    assert at(result, 3)["replicas"]["1"]["leader_epoch"] == 0
    assert not any(e["event"] == "AlterPartitionResponseIgnored" for e in result["trace"][2]["outcome"]["events"])


# -- 3. kip966: a fenced follower's fetch with a stale broker epoch is served ------------------------

# 2 is fenced but still fetches from 1 with broker epoch 0 (its registered one is 1). 3.8.0
# Replica.updateFetchStateOrThrow (~118-122) compares with MetadataCache.getAliveBrokerEpoch (~467),
# which has no epoch for a fenced broker: the fetch is served.
def test_kip966_a_fenced_followers_stale_fetch_is_served():
    steps = [{"elect": {"leader": 1, "epoch": 0}}, {"produce": {"value": "a"}}, {"fence": {"replica": 2}},
             fetch(2, broker_epoch=0)]
    result = run(steps, "kip966", replicas=(1, 2, 3), acks=1, trace=True)
    assert (4, "NOT_LEADER_OR_FOLLOWER") not in errors(result)
    assert result["final"]["replicas"]["2"]["leo"] == 1


def test_kip966_an_unfenced_followers_stale_fetch_is_still_fenced():
    steps = [{"elect": {"leader": 1, "epoch": 0}}, {"produce": {"value": "a"}}, fetch(2, broker_epoch=0)]
    result = run(steps, "kip966", replicas=(1, 2, 3), acks=1, trace=True)
    assert (3, "NOT_LEADER_OR_FOLLOWER") in errors(result)
    assert result["final"]["replicas"]["2"]["leo"] == 0


# -- 4. kip966: a partition created below min ISR has no ELR --------------------------------------------

def test_kip966_creation_below_min_isr_writes_no_elr():
    """3.8.0 ReplicationControlManager.buildPartitionRegistration (~830-842) sets replicas, ISR,
    leader and epochs only: the ELR starts empty."""
    steps = [{"elect": {"leader": 1, "epoch": 0, "isr": [1]}}]
    result = run(steps, "kip966", replicas=(1, 2, 3), min_insync_replicas=2, trace=True)
    assert at(result, 1)["controller"]["isr"] == [1] and at(result, 1)["controller"]["elr"] == []


# -- 5. A lagging broker applies a leaderless change at its leader epoch --------------------------------

# kip966, min ISR 2: 3, then 2, then 1 are fenced: no leader, epoch 1, ISR [], ELR [1, 2]. 3 is
# unfenced (it takes that state) and lags; 2 registers after an unclean shutdown and leaves the ELR:
# a change with no leader at the same leader epoch and a newer partition epoch. 3.8.0
# Partition.makeFollower (~836) takes any state whose partition epoch is not older, so the delivery
# applies it and the lag ends (docs/protocol.md 10.3 item 5).
LEADERLESS = [{"elect": {"leader": 1, "epoch": 0}}, {"fence": {"replica": 3}}, {"fence": {"replica": 2}},
              {"fence": {"replica": 1}}, {"unfence": {"replica": 3}}, {"lag_metadata": {"replica": 3}},
              {"crash": {"replica": 2}}, {"restart": {"replica": 2, "fenced": True}},
              {"leader_and_isr": {"replica": 3}}]


def test_a_lagging_broker_applies_a_leaderless_change_at_its_leader_epoch():
    result = run(LEADERLESS, "kip966", replicas=(1, 2, 3), min_insync_replicas=2, trace=True)
    assert at(result, 4)["controller"]["leader"] is None
    assert at(result, 8)["controller"]["elr"] == [1] and at(result, 8)["controller"]["epoch"] == 1
    assert 9 not in [s for s, _ in errors(result)]
    assert at(result, 8)["controller"]["lagging_metadata"] == [3]
    assert "lagging_metadata" not in result["final"]["controller"]


# -- 6. last_known_leader: an unclean re-registration removes the broker from the ISR too --------------

# min ISR 2: 3, 2, 1 fenced (ISR [], ELR [1, 2], LastKnownELR [1]); 2 and then 1 register after an
# unclean shutdown, staying fenced: the ELR empties and canElectLastKnownLeader elects the fenced 1
# (ISR [1]). 1 registers uncleanly once more: 3.8.0 handleBrokerUncleanShutdown (~1395-1401) takes
# every partition with 1 in its ISR as well as its ELR, so 1 leaves the ISR and the leadership.
LAST_KNOWN = [{"elect": {"leader": 1, "epoch": 0}}, {"fence": {"replica": 3}}, {"fence": {"replica": 2}},
              {"fence": {"replica": 1}},
              {"crash": {"replica": 2}}, {"restart": {"replica": 2, "fenced": True}},
              {"crash": {"replica": 1}}, {"restart": {"replica": 1, "fenced": True}},
              {"crash": {"replica": 1}}, {"restart": {"replica": 1, "fenced": True}}]


def test_last_known_leader_an_unclean_registration_leaves_the_isr():
    result = run_scenario(scenario(LAST_KNOWN, (1, 2, 3), min_insync_replicas=2), "kip966", trace=True,
                          knobs={"unclean_recovery": "last_known_leader"})
    at8 = at(result, 8)["controller"]
    assert at8["leader"] == 1 and at8["isr"] == [1] and at8["fenced"] == [1, 2, 3]
    at10 = at(result, 10)["controller"]
    assert at10["leader"] is None and at10["isr"] == [] and at10["elr"] == []
