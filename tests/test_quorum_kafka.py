"""Kafka's own raft tests, translated as situations of the quorum core (never copied code).

Source: apache/kafka tag 3.9.0-rc3 (the 3.9.0 release commit; raft/ identical to the 3.9 branch),
``raft/src/test/java/org/apache/kafka/raft/``.  KafkaRaftClientPreVoteTest is 4.x only and not in
that tree: pre-vote is tested in tests/test_quorum_core.py and, from Kafka 4.x's code and tests
(apache/kafka 53364c5), in tests/test_quorum_kafka_code.py.
"""

from __future__ import annotations

import pytest

from emulator.quorum.state import ElectionState, QuorumRole, VoteRequest
from emulator.quorum.steps import (
    AddVoter,
    Append,
    Deliver,
    ElectionTimeout,
    QuorumCrash,
    QuorumRestart,
    RemoveVoter,
    Resign,
)
from emulator.quorum.variants import KRAFT595
from emulator.scenario import StepRefused
from quorum_helpers import Run, leader_with_hw

T = "raft/src/test/java/org/apache/kafka/raft/"


def _vote(r, to, epoch, candidate=(2, 1), last_epoch=0, last_offset=0, key=None):
    """A Vote request from ``candidate`` put in flight to ``to`` and delivered; its response."""
    r.q._send(candidate[0], to, VoteRequest(epoch, candidate, last_epoch, last_offset, key or (to, r.s(to).directory_id)))
    r(Deliver(candidate[0], to))
    return r.q.in_flight[(to, candidate[0])].pop()


def test_reject_votes_from_same_epoch_after_resigning_leadership():
    """KafkaRaftClientTest.testRejectVotesFromSameEpochAfterResigningLeadership (3.9.0): a leader that
    resigned rejects a Vote of its own epoch."""
    r = leader_with_hw()
    r(Resign(1))
    resp = _vote(r, 1, 1, candidate=(2, 1), last_epoch=1, last_offset=2)
    assert resp.error == "NONE" and not resp.vote_granted and r.s(1).role is QuorumRole.RESIGNED


def test_grant_votes_from_higher_epoch_after_resigning_leadership():
    """KafkaRaftClientTest.testGrantVotesFromHigherEpochAfterResigningLeadership (3.9.0): a resigned
    leader grants a Vote of a higher epoch from an up-to-date candidate and becomes voted (unattached)."""
    r = leader_with_hw()
    r(Resign(1))
    resp = _vote(r, 1, 2, last_epoch=1, last_offset=2)
    assert resp.vote_granted and r.s(1).role is QuorumRole.UNATTACHED and r.s(1).voted_key == (2, 1)
    assert r.s(1).state_file == ElectionState(2, (2, 1), None)


def test_initialize_as_resigned_leader_from_state_store():
    """KafkaRaftClientTest.testInitializeAsResignedLeaderFromStateStore (3.9.0) / QuorumStateTest.
    testInitializeAsResignedLeader: a leader restarted from its quorum-state file is resigned in the
    same epoch and rejects votes of that epoch."""
    r = leader_with_hw()
    r(QuorumCrash(1)), r(QuorumRestart(1))
    assert r.s(1).role is QuorumRole.RESIGNED and r.s(1).epoch == 1
    assert not _vote(r, 1, 1, last_epoch=1, last_offset=5).vote_granted


def test_handle_valid_vote_request_as_follower():
    """KafkaRaftClientTest.testHandleValidVoteRequestAsFollower (3.9.0): unattached in epoch 2 with no
    vote, a Vote of epoch 2 is granted and persisted (assertVotedCandidate)."""
    r = Run((1, 2))
    r.s(1).epoch = 2
    resp = _vote(r, 1, 2, last_epoch=1, last_offset=1)
    assert resp.error == "NONE" and resp.vote_granted and r.s(1).state_file.voted_key == (2, 1)


def test_handle_vote_request_as_follower_with_elected_leader():
    """KafkaRaftClientTest.testHandleVoteRequestAsFollowerWithElectedLeader (3.9.0): a follower of a
    known leader rejects another candidate of the same epoch."""
    r = leader_with_hw()
    resp = _vote(r, 2, 1, candidate=(3, 1), last_epoch=1, last_offset=9)
    assert resp.error == "NONE" and not resp.vote_granted and resp.leader_id == 1


def test_handle_invalid_vote_request_with_older_epoch():
    """KafkaRaftClientTest.testHandleInvalidVoteRequestWithOlderEpoch (3.9.0): FENCED_LEADER_EPOCH and
    the receiver stays in its epoch."""
    r = Run((1, 2))
    r.s(1).epoch = 2
    resp = _vote(r, 1, 1)
    assert resp.error == "FENCED_LEADER_EPOCH" and not resp.vote_granted and r.s(1).epoch == 2


def test_leader_ignore_vote_request_on_same_epoch():
    """KafkaRaftClientTest.testLeaderIgnoreVoteRequestOnSameEpoch (3.9.0): the leader rejects a Vote
    of its epoch and stays leader."""
    r = leader_with_hw()
    resp = _vote(r, 1, 1, last_epoch=0, last_offset=0)
    assert not resp.vote_granted and r.s(1).role is QuorumRole.LEADER


def test_handle_vote_request_as_observer():
    """KafkaRaftClientTest.testHandleVoteRequestAsObserver (3.9.0): an observer grants a Vote of a
    higher epoch from an up-to-date candidate (observers answer votes: their voter set may lag)."""
    r = Run((1, 2, 3), (4,), KRAFT595)
    resp = _vote(r, 4, 2, last_epoch=0, last_offset=0)
    assert resp.vote_granted and r.s(4).voted_key == (2, 1)


def test_invalid_voter_replica_vote_request():
    """KafkaRaftClientTest.testInvalidVoterReplicaVoteRequest (3.9.0): a Vote naming another id or
    another directory id for the receiver is answered INVALID_VOTER_KEY, after the epoch moved."""
    r = leader_with_hw()
    assert _vote(r, 1, 2, last_epoch=1, last_offset=9, key=(10, 99)).error == "INVALID_VOTER_KEY"
    assert _vote(r, 1, 3, last_epoch=1, last_offset=9, key=(1, 99)).error == "INVALID_VOTER_KEY"
    assert r.s(1).epoch == 3


def test_initialize_as_candidate_and_become_leader_quorum_of_three():
    """KafkaRaftClientTest.testInitializeAsCandidateAndBecomeLeaderQuorumOfThree (3.9.0): a candidate
    with one granted vote of three voters becomes leader and writes a LeaderChange record."""
    r = Run()
    r(ElectionTimeout(1))
    r.exchange(1, 2)
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).log[0].control.value == "LeaderChange"


def test_voter_become_candidate_after_fetch_timeout():
    """KafkaRaftClientTest.testVoterBecomeCandidateAfterFetchTimeout (3.9.0): a follower voter whose
    fetch timeout expires becomes candidate in epoch + 1."""
    r = leader_with_hw()
    r(ElectionTimeout(2))
    assert r.s(2).role is QuorumRole.CANDIDATE and r.s(2).epoch == 2 and r.s(2).voted_key == (2, 1)


def test_follower_as_observer_does_not_become_candidate_after_fetch_timeout():
    """KafkaRaftClientTest.testFollowerAsObserverDoesNotBecomeCandidateAfterFetchTimeout (3.9.0)."""
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(4, 1, to=1)
    with pytest.raises(StepRefused):
        r(ElectionTimeout(4))
    assert r.s(4).role is QuorumRole.FOLLOWER


def test_leader_immediately_sends_diverging_epoch():
    """KafkaRaftClientTest.testLeaderImmediatelySendsDivergingEpoch (3.9.0): a fetch whose last fetched
    epoch ends earlier on the leader is answered at once with the diverging epoch and end offset."""
    r = leader_with_hw()
    r.q._send(2, 1, __import__("emulator.quorum.state", fromlist=["FetchRequest"]).FetchRequest((2, 1), 1, 5, 1))
    r(Deliver(2, 1))
    resp = r.q.messages(1, 2)[-1]
    assert (resp.error, resp.diverging_epoch, resp.diverging_end_offset, resp.records) == ("NONE", 1, 2, ())


def test_retry_election():
    """KafkaRaftClientTest.testRetryElection (3.9.0): a candidate rejected by a majority backs off, and
    its next election timeout campaigns in the next epoch."""
    r = Run()
    for v in (2, 3):
        r.s(v).log.append(__import__("emulator.quorum.state", fromlist=["QuorumRecord"]).QuorumRecord(5, "x"))
    r(ElectionTimeout(1))
    r.exchange(1, 2), r.exchange(1, 3)
    assert r.s(1).backing_off and r.s(1).role is QuorumRole.CANDIDATE
    r(ElectionTimeout(1))
    assert r.s(1).epoch == 2 and r.s(1).role is QuorumRole.CANDIDATE


def test_add_voter():
    """KafkaRaftClientReconfigTest.testAddVoter (3.9.0): a caught-up observer is added: a VotersRecord
    is appended and the change answered NONE once committed; it is then a voter."""
    r = leader_with_hw((1, 2, 3), (4,))
    r.fetch(4, 1, to=1), r.fetch(4, 2)
    r(AddVoter(4))
    r.fetch(2, 2), r.fetch(3, 2)
    assert [e for e in r.events if e["event"] == "VoterChangeCompleted"][0]["error"] == "NONE"
    r.fetch(4, 1)
    assert r.s(4).is_voter() and r.s(1).voter_ids() == (1, 2, 3, 4)


def test_add_voter_with_pending_add_voter():
    """KafkaRaftClientReconfigTest.testAddVoterWithPendingAddVoter (3.9.0): REQUEST_TIMED_OUT."""
    r = leader_with_hw((1, 2, 3), (4, 5))
    for o in (4, 5):
        r.fetch(o, 1, to=1), r.fetch(o, 2)
    r(AddVoter(4)), r(AddVoter(5))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"]


def test_add_voter_without_fenced_previous_leaders():
    """KafkaRaftClientReconfigTest.testAddVoterWithoutFencedPreviousLeaders (3.9.0): before the new
    leader's HW exists (no record of its epoch committed) AddVoter is REQUEST_TIMED_OUT."""
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(4, 1, to=1), r.fetch(4, 2)
    r(AddVoter(4))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"]


def test_add_voter_with_existing_voter():
    """KafkaRaftClientReconfigTest.testAddVoterWithExistingVoter (3.9.0): DUPLICATE_VOTER."""
    r = leader_with_hw()
    r(AddVoter(2))
    assert r.error_codes() == ["DUPLICATE_VOTER"]


def test_add_voter_with_lagging_new_voter():
    """KafkaRaftClientReconfigTest.testAddVoterWithLaggingNewVoter (3.9.0): an observer that never
    caught up with the leader's LEO: REQUEST_TIMED_OUT."""
    r = leader_with_hw((1, 2, 3), (4,))
    r(AddVoter(4))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"]


def test_add_voter_with_kraft_version_0():
    """KafkaRaftClientReconfigTest.testAddVoterWithKraftVersion0 (3.9.0): UNSUPPORTED_VERSION."""
    r = leader_with_hw((1, 2, 3), (4,), KRAFT595)
    r(AddVoter(4))
    assert r.error_codes() == ["UNSUPPORTED_VERSION"]


def test_remove_voter_is_leader():
    """KafkaRaftClientReconfigTest.testRemoveVoterIsLeader (3.9.0): the leader removes itself; once the
    change is committed by the remaining voters it resigns and sends EndQuorumEpoch."""
    r = leader_with_hw()
    r(RemoveVoter(1))
    r.fetch(2, 2), r.fetch(3, 2)
    assert r.s(1).role is QuorumRole.RESIGNED
    assert any(type(m).__name__ == "EndQuorumEpochRequest" for m in r.q.messages(1, 2))


def test_remove_voter_with_none_voter():
    """KafkaRaftClientReconfigTest.testRemoveVoterWithNoneVoter (3.9.0): VOTER_NOT_FOUND."""
    r = leader_with_hw((1, 2, 3), (4,))
    r(RemoveVoter(4))
    assert r.error_codes() == ["VOTER_NOT_FOUND"]


def test_remove_voter_fails_when_losing_leadership():
    """KafkaRaftClientReconfigTest.testRemoveVoterFailsWhenLosingLeadership (3.9.0): the pending change
    is answered NOT_LEADER_OR_FOLLOWER when the leader resigns."""
    r = leader_with_hw()
    r(RemoveVoter(3))
    r(Resign(1))
    assert r.error_codes() == ["NOT_LEADER_OR_FOLLOWER"]


def test_update_high_watermark_quorum_size_three():
    """LeaderStateTest.testUpdateHighWatermarkQuorumSizeThree (3.9.0): the HW is the offset two of three
    voters hold, only above the epoch start offset."""
    r = Run()
    r.elect(1)
    r(Append("a"))
    r.fetch(2, 1)
    assert r.s(1).leader_state.high_watermark is None  # 2 fetched at offset 0 (= the epoch start)
    r.fetch(2, 1)
    assert r.s(1).leader_state.high_watermark == 3


def test_high_watermark_does_not_decrease_from_new_voter():
    """LeaderStateTest.testHighWatermarkDoesNotDecreaseFromNewVoter (3.9.0): adding a voter that holds
    less does not move the HW down."""
    r = leader_with_hw((1, 2, 3), (4,))
    r.fetch(4, 1, to=1), r.fetch(4, 2)
    r(Append("a")), r.fetch(2, 2)
    hw = r.s(1).leader_state.high_watermark
    r(AddVoter(4))
    assert r.s(1).leader_state.high_watermark == hw == 3


def test_cannot_follow_or_vote_for_self():
    """QuorumStateTest.testCannotFollowOrVoteForSelf (3.9.0): a server never follows itself."""
    r = Run()
    with pytest.raises(StepRefused):
        r.q._transition_to_follower(r.s(1), 1, 1)


def test_append_failed_with_not_leader_exception():
    """KafkaRaftClientTest.testAppendFailedWithNotLeaderException (3.9.0)."""
    r = Run()
    r(Append("a", server=1))
    assert r.error_codes() == ["NOT_LEADER_OR_FOLLOWER"]
