"""Rules of protocol.md §A / §E, each shown by a small scenario and its negative control."""

import pytest

from conftest import log_of, run, violated
from emulator import VARIANT_NAMES, VARIANTS

ELECT_1 = {"elect": {"leader": 1, "isr": [1, 2, 3]}}


def fetch(r, **kw):
    return {"fetch": {"replica": r, **kw}}


# -- KAFKA-7164: truncate on every epoch change, not only on a leader change ----------------

KAFKA_7164 = [
    ELECT_1,
    {"produce": {"value": "a"}}, fetch(2), fetch(3), fetch(2), fetch(3),   # a committed everywhere
    {"produce": {"value": "b", "acks": 1}}, fetch(3),                       # only r3 copies b
    {"elect": {"leader": 2, "to": [2, 1]}},                                 # r3 misses e1 ...
    {"produce": {"value": "c", "acks": 1}}, fetch(1),
    {"elect": {"leader": 1, "to": [1, 2]}},                                 # ... and e2
    {"produce": {"value": "d", "acks": 1}},
    {"leader_and_isr": {"replica": 3}},                                     # e2, same leader 1 as in e0
    fetch(3), fetch(2), fetch(3), fetch(2), fetch(3),
]


@pytest.mark.parametrize("protocol", ["hw", "kip101", "kip279"])
def test_same_leader_shortcut_keeps_a_stale_record(protocol):
    """Before 2.1 a follower that sees the same leader in a newer epoch skips truncation."""
    result = run(KAFKA_7164, protocol, replicas=(1, 2, 3))
    assert log_of(result, 3)[1] == (1, 0, "b")
    assert {"StrongIsr", "EventualConvergence"} <= violated(result)


def test_kip320_truncates_on_every_epoch_change():
    result = run(KAFKA_7164, "kip320", replicas=(1, 2, 3))
    assert violated(result) == set()
    assert log_of(result, 1) == log_of(result, 2) == log_of(result, 3) == [(0, 0, "a"), (1, 1, "c"), (2, 2, "d")]


# -- KAFKA-7128: a follower joins the ISR only once it reaches the leader's epoch start ------

KAFKA_7128 = [
    ELECT_1,
    {"produce": {"value": "m0", "acks": 1}}, fetch(2), fetch(3), fetch(2), fetch(3),
    {"produce": {"value": "m1"}}, fetch(2), fetch(2),      # r2 has m1, r3 does not
    {"shrink_isr": {"replica": 3}},                         # HW 2: m1 committed and acked
    {"elect": {"leader": 2, "to": [2]}},                    # r2 leads e1 with a stale HW of 1
    {"leader_and_isr": {"replica": 3}},
    fetch(3, response="lost"),                              # r3 fetches at 1 >= HW 1
    {"crash": {"replica": 2}},
    {"crash": {"replica": 1}},
    {"elect": {}},
]


@pytest.mark.parametrize("protocol", ["hw", "kip101", "kip279"])
def test_isr_join_below_epoch_start_loses_committed_data(protocol):
    result = run(KAFKA_7128, protocol, replicas=(1, 2, 3))
    assert result["final"]["controller"]["leader"] == 3
    assert {"NoCommittedDataLoss", "NoAckedDataLoss"} <= violated(result)
    assert [(l["offset"], l["value"], l["acked"]) for l in result["losses"]] == [(1, "m1", True)]


def test_kip320_keeps_the_lagging_follower_out_of_the_isr():
    result = run(KAFKA_7128, "kip320", replicas=(1, 2, 3))
    assert result["final"]["controller"] == {"leader": None, "epoch": 1, "isr": [1, 2]}
    assert {"step": 16, "error": "PartitionOffline"} in result["errors"]
    assert violated(result) == set() and result["losses"] == []


# -- OFFSET_OUT_OF_RANGE -----------------------------------------------------------------------

OUT_OF_RANGE = [
    {"elect": {"leader": 1, "isr": [1, 2]}},
    {"produce": {"values": ["a", "b"]}}, fetch(2), fetch(2),
    {"checkpoint_hw": {}},
    {"crash": {"replica": 2}},
    {"controller_remove": {"replica": 2}},
    {"flush": {"replica": 1, "offset": 1}},
    {"crash": {"replica": 1, "mode": "power"}},            # the last ISR member keeps only a
    {"restart": {"replica": 1}},
    {"elect": {"leader": 1}},
    {"restart": {"replica": 2}},
    {"leader_and_isr": {"replica": 2}},
    fetch(2),
]


def test_hw_follower_halts_on_out_of_range_when_unclean_is_disabled():
    result = run(OUT_OF_RANGE, "hw", hw_checkpoint="explicit", log_flush="explicit")
    r2 = result["final"]["replicas"]["2"]
    assert (r2["alive"], r2["halted"], r2["role"]) == (False, True, "none")
    assert {"step": 14, "error": "FollowerHalted"} in result["errors"]


def test_hw_follower_truncates_to_the_leader_leo_when_unclean_is_enabled():
    result = run(OUT_OF_RANGE, "hw", hw_checkpoint="explicit", log_flush="explicit", unclean_leader_election=True)
    assert result["final"]["replicas"]["2"]["alive"]
    assert log_of(result, 2) == [(0, 0, "a")]
    assert {"step": 14, "error": "OFFSET_OUT_OF_RANGE"} in result["errors"]


@pytest.mark.parametrize("protocol", ["kip101", "kip279", "kip320"])
def test_epoch_variants_truncate_before_fetching_and_never_go_out_of_range(protocol):
    result = run(OUT_OF_RANGE, protocol, hw_checkpoint="explicit", log_flush="explicit")
    assert result["final"]["replicas"]["2"]["alive"]
    assert all(e["error"] != "OFFSET_OUT_OF_RANGE" for e in result["errors"])


# -- fencing and pending truncation (kip320) ---------------------------------------------------

def test_kip320_follower_in_a_newer_epoch_waits_for_the_leader():
    """UNKNOWN_LEADER_EPOCH: the truncation stays pending until the leader catches up (§E.6)."""
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"produce": {"value": "a"}}, fetch(2), fetch(2),
        {"elect": {"leader": 1, "to": [2]}},                 # the leader has not processed e1 yet
        fetch(2),
        {"leader_and_isr": {"replica": 1}},
        fetch(2),
    ]
    kip320 = run(steps, "kip320", trace=True)
    assert kip320["trace"][4]["outcome"]["errors"] == [{"step": 5, "error": "UNKNOWN_LEADER_EPOCH"}]
    assert kip320["trace"][5]["outcome"]["errors"] == [{"step": 6, "error": "UNKNOWN_LEADER_EPOCH"}]
    assert kip320["trace"][7]["outcome"]["errors"] == []
    kip279 = run(steps, "kip279", trace=True)
    assert all(not t["outcome"]["errors"] for t in kip279["trace"])  # no fencing: answered at once


def test_kip320_zombie_leader_cannot_serve_a_follower_of_a_newer_epoch():
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2, 3]}},
        {"elect": {"leader": 2, "to": [2, 3]}},          # 1 is a zombie leader of e0
        {"produce": {"value": "z", "acks": 1, "replica": 1}},
        {"leader_and_isr": {"replica": 1}},
    ]
    zombie_write = run(steps[:3], "kip320", replicas=(1, 2, 3))
    assert log_of(zombie_write, 1) == [(0, 0, "z")]     # LeaderWrite only needs presumed leadership
    result = run(steps, "kip320", replicas=(1, 2, 3))
    assert log_of(result, 1) == []                      # and the truncation phase removes it


# -- controller, produce and ack errors ---------------------------------------------------------

def test_elect_errors_and_offline():
    steps = [
        {"elect": {"leader": 1, "isr": [1]}},
        {"crash": {"replica": 1}},
        {"elect": {"leader": 1}},
        {"elect": {"leader": 2}},
        {"elect": {}},
    ]
    result = run(steps, "kip320")
    assert [(e["step"], e["error"]) for e in result["errors"]] == [
        (3, "LEADER_NOT_AVAILABLE"), (4, "UNCLEAN_ELECTION_DISABLED"), (5, "PartitionOffline"),
    ]
    assert result["final"]["controller"] == {"leader": None, "epoch": 0, "isr": [1]}


def test_unclean_election_makes_later_losses_allowed():
    steps = [
        {"elect": {"leader": 1, "isr": [1]}},
        {"produce": {"value": "a"}},
        {"crash": {"replica": 1}},
        {"elect": {"leader": 2, "unclean": True}},
    ]
    result = run(steps, "kip320")
    assert result["losses"] == [{"offset": 0, "value": "a", "acked": True, "allowed": True, "step": 4}]
    assert "NoCommittedDataLoss" not in violated(result)
    assert result["final"]["controller"] == {"leader": 2, "epoch": 1, "isr": [2]}


def test_acks_all_below_min_isr_is_rejected_before_the_append():
    steps = [
        {"elect": {"leader": 1, "isr": [1]}},
        {"produce": {"value": "a"}},
        {"produce": {"value": "b", "acks": 1}},
    ]
    result = run(steps, "kip320", min_insync_replicas=2)
    assert result["errors"] == [{"step": 2, "error": "NOT_ENOUGH_REPLICAS"}]
    assert log_of(result, 1) == [(0, 0, "b")]


def test_parked_produce_answers_not_leader_on_demotion_and_timeout_on_crash():
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"produce": {"value": "a"}},                      # parked: r2 has not fetched
        {"elect": {"leader": 2}},
        {"produce": {"value": "b"}},
        {"crash": {"replica": 2}},
    ]
    result = run(steps, "kip101")
    assert result["errors"] == [{"step": 2, "error": "NOT_LEADER"}, {"step": 4, "error": "REQUEST_TIMED_OUT"}]


def test_not_enough_replicas_after_append_when_the_isr_shrinks():
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"produce": {"value": "a"}},
        {"shrink_isr": {"replica": 2}},                   # HW reaches 1 with ISR {1} < min.isr 2
    ]
    result = run(steps, "kip320", min_insync_replicas=2)
    assert result["errors"] == [{"step": 2, "error": "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}]
    assert result["losses"] == [] and "AckedImpliesMinIsr" not in violated(result)


def test_tick_shrinks_a_lagging_follower_and_lets_the_hw_advance():
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"produce": {"value": "a", "acks": 1}},
        {"tick": {"ms": 5000}},
        {"produce": {"value": "b", "acks": 1}},
        {"tick": {"ms": 6000}},
    ]
    result = run(steps, "kip320", replica_lag_time_max_ms=10000, trace=True)
    assert result["trace"][2]["controller"]["isr"] == [1, 2]
    assert result["final"]["controller"]["isr"] == [1]
    assert result["final"]["replicas"]["1"]["hw"] == 2


def test_controller_remove_keeps_the_last_isr_member_without_a_leader():
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"crash": {"replica": 1}},
        {"controller_remove": {"replica": 1}},             # leader removed: no leader, e1
        {"controller_remove": {"replica": 3}},
        {"controller_remove": {"replica": 2}},             # the last member stays, e2
    ]
    result = run(steps, "kip320", replicas=(1, 2, 3), trace=True)
    assert result["trace"][2]["controller"] == {"leader": None, "epoch": 1, "isr": [2]}
    r2 = result["trace"][2]["replicas"]["2"]
    assert (r2["role"], r2["leader_epoch"]) == ("none", 1)   # a LeaderAndIsr with no leader
    assert result["errors"] == [{"step": 4, "error": "REPLICA_NOT_IN_ISR"}]
    assert result["final"]["controller"] == {"leader": None, "epoch": 2, "isr": [2]}


def test_power_loss_of_the_last_isr_member_is_an_allowed_loss():
    steps = [
        {"elect": {"leader": 1, "isr": [1]}},
        {"produce": {"values": ["a", "b"]}},
        {"flush": {"replica": 1, "offset": 1}},
        {"crash": {"replica": 1, "mode": "power"}},
        {"restart": {"replica": 1}},
        {"elect": {}},
    ]
    result = run(steps, "kip320", log_flush="explicit")
    assert log_of(result, 1) == [(0, 0, "a")]
    assert result["losses"] == [{"offset": 1, "value": "b", "acked": True, "allowed": True, "step": 6}]
    # No copy of b survives: an allowed loss.  KIP-966's UncleanExclusion still names the
    # re-election of the replica that lost it (kip966 would wait for unclean recovery).
    assert violated(result) == {"UncleanExclusion"}


def test_explicit_reused_epoch_is_reported():
    steps = [{"elect": {"leader": 1, "epoch": 3}}, {"elect": {"leader": 2, "epoch": 2}}]
    result = run(steps, "kip320")
    assert "UniqueLeaderPerEpoch" in violated(result)


ZOOKEEPER_VARIANTS = [v for v in VARIANT_NAMES if VARIANTS[v].metadata == "zookeeper"]
KRAFT_VARIANTS = [v for v in VARIANT_NAMES if VARIANTS[v].metadata == "kraft"]


@pytest.mark.parametrize("protocol", ZOOKEEPER_VARIANTS)
def test_restart_hears_only_the_current_leader_and_isr(protocol):
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"crash": {"replica": 2}},
        {"elect": {"leader": 1}},
        {"restart": {"replica": 2}},
        {"leader_and_isr": {"replica": 2, "epoch": 0}},
        {"leader_and_isr": {"replica": 2}},
        {"leader_and_isr": {"replica": 2}},
    ]
    result = run(steps, protocol)
    assert [(e["step"], e["error"]) for e in result["errors"]] == [(5, "UNKNOWN_LEADER_AND_ISR_EPOCH"), (7, "STALE_CONTROLLER_EPOCH")]
    assert result["final"]["replicas"]["2"]["leader_epoch"] == 1


@pytest.mark.parametrize("protocol", KRAFT_VARIANTS)
def test_a_kraft_restart_registers_and_takes_the_current_state_when_unfenced(protocol):
    """KRaft: the restarted broker is fenced (it leaves the ISR), registers with a new broker epoch
    and, unfenced once it caught up with the metadata log, follows the current leader at once."""
    steps = [
        {"elect": {"leader": 1, "isr": [1, 2]}},
        {"crash": {"replica": 2}},
        {"elect": {"leader": 1}},  # ElectLeaders while the preferred replica leads: nothing written
        {"restart": {"replica": 2}},
        {"leader_and_isr": {"replica": 2}},
    ]
    result = run(steps, protocol)
    assert [(e["step"], e["error"]) for e in result["errors"]] == [(3, "ELECTION_NOT_NEEDED"), (5, "STALE_CONTROLLER_EPOCH")]
    assert result["final"]["controller"]["isr"] == [1] and result["final"]["controller"]["fenced"] == []
    assert result["final"]["replicas"]["2"]["role"] == "follower"
    assert result["final"]["replicas"]["2"]["leader_epoch"] == result["final"]["controller"]["epoch"]


def test_controller_elects_in_assignment_order_not_id_order():
    steps = [
        {"elect": {}},
        {"produce": {"value": "a"}}, fetch(1), fetch(2), fetch(1), fetch(2),
        {"crash": {"replica": 3}},
        {"elect": {}},
    ]
    result = run(steps, "kip320", replicas=(3, 1, 2), trace=True)
    assert result["trace"][0]["controller"]["leader"] == 3
    assert result["final"]["controller"] == {"leader": 1, "epoch": 1, "isr": [1, 2]}
    assert list(result["final"]["replicas"]) == ["1", "2", "3"]
    assert violated(result) == set()


@pytest.mark.parametrize("protocol", VARIANT_NAMES)
def test_last_replica_standing_loses_acked_data_but_under_kip966(protocol):
    """KIP-966's timeline: acked with ISR 3 >= min.isr 2, then only one holder loses it in a power
    failure while the other two (stopped) still hold it: one lossy unclean shutdown, below
    min.insync.replicas, so the loss is not allowed.  Every variant without ELR re-elects the
    replica that lost it; kip966 elects 2 from the ELR instead."""
    steps = [
        ELECT_1,
        {"produce": {"value": "a"}}, fetch(2), fetch(3), fetch(2), fetch(3),
        {"crash": {"replica": 3}}, {"controller_remove": {"replica": 3}},
        {"crash": {"replica": 2}}, {"controller_remove": {"replica": 2}},
        {"produce": {"value": "b"}},                               # ISR {1} < min.isr 2
        {"crash": {"replica": 1, "mode": "power"}},                # nothing was flushed
        {"restart": {"replica": 1}},
        {"elect": {}},
    ]
    result = run(steps, protocol, replicas=(1, 2, 3), min_insync_replicas=2, log_flush="explicit")
    assert {"step": 11, "error": "NOT_ENOUGH_REPLICAS"} in result["errors"]
    if protocol == "kip966":
        assert result["losses"] == [] and result["final"]["controller"]["leader"] == 2
        assert not violated(result) & {"NoCommittedDataLoss", "NoAckedDataLoss", "MinIsrDurability"}
    else:
        step = 13 if protocol == "kip903" else 14  # KRaft re-elects 1 when it registers
        assert result["losses"] == [{"offset": 0, "value": "a", "acked": True, "allowed": False, "step": step}]
        assert {"NoCommittedDataLoss", "NoAckedDataLoss", "MinIsrDurability", "UncleanExclusion"} <= violated(result)
