"""Metadata as data (issue 33, item 3): a KRaft broker can lag the metadata log (`lag_metadata`),
acting on the partition state it has applied until `leader_and_isr` steps deliver the changes; a
leader whose AlterPartition is rejected follows Kafka's ``Partition.handleAlterPartitionError``
(3.5.0 - 3.9.0): FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and INVALID_REQUEST leave it pending
(the maximal ISR, no new request) until new metadata reaches it; INELIGIBLE_REPLICA resets it to the
committed state."""

from __future__ import annotations

from conftest import run, scenario
from emulator import variant_named
from emulator.config import Config
from emulator.run import Replay
from emulator.state import from_document, to_document

TEN = [f"m{i}" for i in range(10)]
# Leader 0 of epoch 5, ISR [0, 2], caught up; 0 lags; the controller fences 2 (kip966: ISR [0], no
# leader-epoch bump); follower 1 catches up and 0 proposes [0, 1, 2] with its old partition epoch.
INVALID_VERSION = [
    {"elect": {"leader": 0, "epoch": 5, "isr": [0, 2]}}, {"produce": {"values": TEN}},
    {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
    {"lag_metadata": {"replica": 0}}, {"fence": {"replica": 2}},
    {"fetch": {"replica": 1}}, {"fetch": {"replica": 1}},
]


def replay(steps: list, protocol: str = "kip966", replicas=(0, 1, 2), **config) -> Replay:
    s = scenario(steps, replicas, **config)
    r = Replay(tuple(s.replicas), s.config, variant_named(protocol))
    for step in s.steps:
        r.apply(step)
    return r


def events(result: dict, step: int) -> list[str]:
    return [e["event"] for e in result["trace"][step - 1]["outcome"]["events"]]


def test_a_rejected_expansion_keeps_the_leader_pending_until_the_change_reaches_it():
    """PartitionTest.testAlterIsrInvalidVersion: ISR stays, the maximal ISR keeps the added replica,
    no retry; the delivered change ends it."""
    r = replay(INVALID_VERSION)
    p = r.partition
    leader = p.replicas[0].leadership
    assert [(e["step"], e["error"]) for e in p.errors] == [(8, "INVALID_UPDATE_VERSION")]
    assert leader.isr == (0, 2) and leader.maximal_isr == (0, 1, 2)
    assert leader.in_flight is not None and leader.in_flight.rejected == "INVALID_UPDATE_VERSION"
    assert p.controller.isr == (0,) and p.controller.lagging == (0,)

    r.apply(scenario([{"fetch": {"replica": 1}}], (0, 1, 2)).steps[0])  # no new AlterPartition
    r.apply(scenario([{"alter_partition": {"replica": 0}}], (0, 1, 2)).steps[0])
    assert p.errors[-1]["error"] == "NO_ALTER_PARTITION_IN_FLIGHT" and leader.maximal_isr == (0, 1, 2)

    r.apply(scenario([{"leader_and_isr": {"replica": 0}}], (0, 1, 2)).steps[0])
    leader = p.replicas[0].leadership
    assert leader.isr == (0,) and leader.in_flight is None and p.controller.lagging == ()
    r.apply(scenario([{"fetch": {"replica": 1}}], (0, 1, 2)).steps[0])
    assert p.controller.isr == (0, 1)


def test_the_rejection_event_says_the_leader_awaits_metadata():
    result = run(INVALID_VERSION, "kip966", replicas=(0, 1, 2), trace=True)
    rejected = [e for e in result["trace"][7]["outcome"]["events"] if e["event"] == "AlterPartitionRejected"]
    assert len(rejected) == 1 and rejected[0]["error"] == "INVALID_UPDATE_VERSION" and rejected[0]["awaits_metadata"]
    assert "MetadataLag" in events(result, 5)
    assert result["trace"][5]["controller"]["lagging_metadata"] == [0]


def test_ineligible_replica_resets_the_leader_to_its_committed_isr():
    """handleAlterPartitionError: INELIGIBLE_REPLICA is not applied and the partition epoch is right."""
    steps = [{"elect": {"leader": 0, "epoch": 5, "isr": [0]}}, {"produce": {"values": TEN}},
             {"fetch": {"replica": 1}}, {"fetch": {"replica": 1}},
             {"shutdown": {"replica": 1, "phase": "request"}}, {"alter_partition": {"replica": 0}}]
    r = replay(steps, "kip903", replicas=(0, 1), alter_partition="explicit")
    leader = r.partition.replicas[0].leadership
    assert r.partition.errors[-1]["error"] == "INELIGIBLE_REPLICA"
    assert leader.in_flight is None and leader.maximal_isr == (0,)


def test_a_lagging_follower_acts_on_the_state_it_applied_until_delivery():
    """Leadership moves from 0 to 1 while 2 lags: 2 keeps fetching from 0 (which answers
    NOT_LEADER / a fenced epoch) until the election is delivered to it."""
    steps = [{"elect": {"leader": 0, "epoch": 1, "isr": [0, 1, 2]}}, {"produce": {"value": "a"}},
             {"fetch": {"replica": 1}}, {"fetch": {"replica": 2}},
             {"lag_metadata": {"replica": 2}}, {"fence": {"replica": 0}},
             {"fetch": {"replica": 2}}, {"leader_and_isr": {"replica": 2}}, {"fetch": {"replica": 2}}]
    result = run(steps, "kip966", replicas=(0, 1, 2), trace=True)
    at = lambda n: result["trace"][n - 1]  # noqa: E731
    assert at(6)["controller"]["leader"] == 1 and at(6)["replicas"]["2"]["leader_epoch"] == 1
    assert at(7)["replicas"]["2"]["leader_epoch"] == 1  # still following the old leader's epoch
    assert at(8)["replicas"]["2"]["leader_epoch"] == 2 and "lagging_metadata" not in at(8)["controller"]
    assert "MetadataCaughtUp" in events(result, 8)
    assert result["violations"] == []


def test_unfencing_and_registering_end_the_lag():
    base = [{"elect": {"leader": 0, "epoch": 1, "isr": [0, 1]}}, {"lag_metadata": {"replica": 1}}]
    fenced = run(base + [{"fence": {"replica": 1}}, {"unfence": {"replica": 1}}], "kip903", replicas=(0, 1), trace=True)
    assert "lagging_metadata" in fenced["trace"][2]["controller"]
    assert "lagging_metadata" not in fenced["final"]["controller"]
    restarted = run(base + [{"crash": {"replica": 1}}, {"restart": {"replica": 1}}], "kip903", replicas=(0, 1))
    assert "lagging_metadata" not in restarted["final"]["controller"]


def test_lag_metadata_answers_errors_where_it_cannot_apply():
    zk = run([{"elect": {"leader": 0}}, {"lag_metadata": {"replica": 1}}], "kip320", replicas=(0, 1))
    assert [e["error"] for e in zk["errors"]] == ["UNSUPPORTED_VERSION"]
    twice = run([{"elect": {"leader": 0, "epoch": 1}}, {"lag_metadata": {"replica": 1}}, {"lag_metadata": {"replica": 1}}],
                "kip903", replicas=(0, 1))
    assert [e["error"] for e in twice["errors"]] == ["BROKER_ALREADY_LAGGING"]
    down = run([{"elect": {"leader": 0, "epoch": 1}}, {"crash": {"replica": 1}}, {"lag_metadata": {"replica": 1}}],
               "kip903", replicas=(0, 1))
    assert [e["error"] for e in down["errors"]] == ["BROKER_NOT_AVAILABLE"]


def test_the_lag_and_a_pending_rejection_survive_a_state_document():
    """A stream checkpoints the partition between micro-batches: the lag and the leader's pending
    rejected request come back, and the rest of the run is the same."""
    r = replay(INVALID_VERSION)
    doc = to_document(r)
    back = from_document(doc)
    assert to_document(back) == doc
    assert back.partition.controller.lagging == (0,)
    assert back.partition.replicas[0].leadership.in_flight.rejected == "INVALID_UPDATE_VERSION"
    rest = scenario([{"fetch": {"replica": 1}}, {"leader_and_isr": {"replica": 0}}, {"fetch": {"replica": 1}}], (0, 1, 2)).steps
    for replay_ in (r, back):
        for step in rest:
            replay_.apply(step)
    assert to_document(back) == to_document(r)
    assert isinstance(r.partition.config, Config)
