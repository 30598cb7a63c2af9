"""Issue 47: where the quorum core differed from KafkaRaftClient, each difference as a scenario.

Every test names the Kafka code it follows: apache/kafka 3.9.0 (tag 3.9.0-rc3, the release commit)
``raft/src/main/java/org/apache/kafka/raft/`` for KIP-595 / KIP-853, and apache/kafka commit
53364c539970785f9317c2ddab26a4e350f12b23 (4.x trunk) for pre-vote (KIP-996).  Each failed on the
core before issue 47 (896fc71).
"""

from __future__ import annotations

from emulator.quorum_state import (
    BeginQuorumEpochRequest,
    ElectionState,
    EndQuorumEpochRequest,
    FetchResponse,
    QuorumRole,
)
from emulator.quorum_steps import (
    Append,
    Deliver,
    Drop,
    ElectionTimeout,
    LoseDisk,
    QuorumCrash,
    QuorumFetch,
    QuorumRestart,
    RemoveVoter,
    Resign,
)
from emulator.quorum_variants import KRAFT595
from quorum_helpers import Run


def _leader_with_hw(voters=(1, 2, 3), observers=(), variant=None):
    r = Run(voters, observers, variant) if variant else Run(voters, observers)
    r.elect(1)
    for v in voters[1:]:
        r.fetch(v, 2)
    return r


# -- 1. stale answers (handleInboundMessage: RequestManager.isResponseExpected; resetConnections) ----


def test_a_new_leader_ignores_the_answer_to_a_vote_of_its_previous_candidacy():
    """3.9.0 KafkaRaftClient.handleInboundMessage (~2612) handles a response only if
    ``requestManager.isResponseExpected``; onBecomeCandidate / onBecomeLeader ``resetConnections``.
    1 campaigns in epoch 1, then in epoch 2 and wins with 3's vote.  2, meanwhile in epoch 3, answers
    1's epoch-1 Vote FENCED_LEADER_EPOCH (epoch 3): no longer expected, so 1 stays leader of epoch 2
    (before: it handled the answer and dropped to unattached in epoch 3)."""
    r = Run()
    r(ElectionTimeout(1), ElectionTimeout(1), Drop(1, 3), Deliver(1, 3), Deliver(3, 1))
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 2
    r(ElectionTimeout(2), ElectionTimeout(2), ElectionTimeout(2))
    r(Drop(2, 1), Drop(2, 1), Drop(2, 1))
    r(Deliver(1, 2))  # 1's Vote of epoch 1 reaches 2 (epoch 3): FENCED_LEADER_EPOCH
    answer = r.q.messages(2, 1)[0]
    assert answer.error == "FENCED_LEADER_EPOCH" and answer.leader_epoch == 3
    r(Deliver(2, 1))
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 2
    assert any(e["event"] == "ResponseIgnored" for e in r.events)


def test_only_the_answer_to_the_last_fetch_is_appended():
    """A follower sends Fetch twice (its first request timed out: ``maybeSendRequest`` sends again,
    ``RequestManager.onRequestSent`` replaces the correlation id expected); the leader appended in
    between.  The first answer is ignored, the second appended: the follower holds all 3 records
    (before: the first was appended and the second ignored as not at its end offset: 2 records)."""
    r = Run()
    r.elect(1)
    r.fetch(2, 2)
    r(QuorumFetch(3), Deliver(3, 1))          # the first Fetch answered: offsets 0-1
    r(Append("a"), QuorumFetch(3), Deliver(3, 1))  # the second: offsets 0-2
    r(Deliver(1, 3), Deliver(1, 3))
    assert r.s(3).leo == r.s(1).leo == 3
    assert [e["api"] for e in r.events if e["event"] == "ResponseIgnored"][-1] == "FetchResponse"


# -- 2. a leader has no voted key (LeaderState.election / ResignedState.election) ------------------


def test_a_leader_and_a_resigned_leader_hold_no_voted_key():
    """3.9.0 LeaderState.election() and ResignedState.election() are
    ``ElectionState.withElectedLeader`` (no votedKey; votedId -1 in the quorum-state file):
    KafkaRaftClientTest.testInitializeAsCandidateAndBecomeLeader asserts ``assertElectedLeader``."""
    r = _leader_with_hw()
    assert r.s(1).voted_key is None and r.s(1).state_file == ElectionState(1, None, 1)
    r(Resign(1))
    assert r.s(1).role is QuorumRole.RESIGNED and r.s(1).voted_key is None


# -- 5. a message naming the receiver as leader (hasConsistentLeader) ------------------------------


def test_a_message_naming_the_receiver_leader_is_inconsistent():
    """3.9.0 KafkaRaftClient.hasConsistentLeader (~2314): a message naming this server leader is
    consistent only if it is the leader; maybeTransition throws IllegalStateException.  1 led epoch 1,
    lost its disk (static voters: epoch 0 again); it fetches from 2, whose FENCED_LEADER_EPOCH answer
    names 1 leader of epoch 1: recorded as InconsistentLeader, 1 stays in epoch 0 (before: it moved to
    epoch 1 unattached)."""
    r = _leader_with_hw(variant=KRAFT595)
    r(QuorumCrash(1), LoseDisk(1))
    assert r.s(1).epoch == 0
    r(QuorumFetch(1, to=2), Deliver(1, 2))
    assert r.q.messages(2, 1)[0].error == "FENCED_LEADER_EPOCH" and r.q.messages(2, 1)[0].leader_id == 1
    r(Deliver(2, 1))
    assert r.s(1).epoch == 0 and r.s(1).role is QuorumRole.UNATTACHED
    assert [e for e in r.events if e["event"] == "InconsistentLeader"][-1]["server"] == 1


# -- 6. a leader that commits its own removal answers the Fetch first (requestResign, pollLeader) ---


def test_a_leader_that_committed_its_removal_answers_the_fetch_before_resigning():
    """3.9.0 RemoveVoterHandler.highWatermarkUpdated -> LeaderState.requestResign; pollLeader resigns
    at the next poll, after the Fetch that moved the HW was answered: on the link to the fetcher the
    Fetch answer comes before EndQuorumEpoch (KafkaRaftClientReconfigTest.testRemoveVoterIsLeader)."""
    r = _leader_with_hw()
    r(RemoveVoter(1))
    r.fetch(2, 2), r.fetch(3, 1)
    r(QuorumFetch(3), Deliver(3, 1))  # 3's fetch at offset 3 commits the removal
    kinds = [type(m) for m in r.q.messages(1, 3)]
    assert kinds == [FetchResponse, EndQuorumEpochRequest]
    assert r.s(1).role is QuorumRole.RESIGNED


def test_a_restarted_leader_resigns_and_tells_the_voters_with_expected_requests():
    """QuorumState.initialize: the file names this server leader -> resigned; pollResigned sends
    EndQuorumEpoch, whose answers are expected (a response to it is handled)."""
    r = _leader_with_hw()
    r(QuorumCrash(1), QuorumRestart(1))
    assert r.s(1).role is QuorumRole.RESIGNED and set(r.s(1).expected) == {2, 3}
    assert isinstance(r.q.messages(1, 2)[0], EndQuorumEpochRequest)
    assert not any(isinstance(m, BeginQuorumEpochRequest) for m in r.q.messages(1, 2))
