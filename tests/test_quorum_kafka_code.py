"""Issue 47: where the quorum core differed from KafkaRaftClient, each difference as a scenario.

Every test names the Kafka code it follows: apache/kafka 3.9.0 (tag 3.9.0-rc3, the release commit)
``raft/src/main/java/org/apache/kafka/raft/`` for KIP-595 / KIP-853, and apache/kafka commit
53364c539970785f9317c2ddab26a4e350f12b23 (4.x trunk) for pre-vote (KIP-996).  Each failed on the
core before issue 47 (896fc71).
"""

from __future__ import annotations

import pytest

from emulator.quorum.state import (
    BeginQuorumEpochRequest,
    ElectionState,
    EndQuorumEpochRequest,
    FetchResponse,
    QuorumRole,
    VoteRequest,
)
from emulator.quorum.steps import (
    Append,
    BeginQuorumEpoch,
    CheckQuorum,
    Deliver,
    Drop,
    ElectionTimeout,
    LoseDisk,
    QuorumCrash,
    QuorumFetch,
    QuorumRestart,
    RemoveVoter,
    Resign,
    Shutdown,
    ShutdownTimeout,
)
from emulator.quorum.variants import KRAFT595, KRAFT853, KRAFT996
from emulator.scenario import StepRefused
from quorum_helpers import Run, leader_with_hw

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
    r = leader_with_hw()
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
    r = leader_with_hw(variant=KRAFT595)
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
    r = leader_with_hw()
    r(RemoveVoter(1))
    r.fetch(2, 2), r.fetch(3, 1)
    r(QuorumFetch(3), Deliver(3, 1))  # 3's fetch at offset 3 commits the removal
    kinds = [type(m) for m in r.q.messages(1, 3)]
    assert kinds == [FetchResponse, EndQuorumEpochRequest]
    assert r.s(1).role is QuorumRole.RESIGNED


def test_a_restarted_leader_resigns_and_tells_the_voters_with_expected_requests():
    """QuorumState.initialize: the file names this server leader -> resigned; pollResigned sends
    EndQuorumEpoch, whose answers are expected (a response to it is handled)."""
    r = leader_with_hw()
    r(QuorumCrash(1), QuorumRestart(1))
    assert r.s(1).role is QuorumRole.RESIGNED and set(r.s(1).expected) == {2, 3}
    assert isinstance(r.q.messages(1, 2)[0], EndQuorumEpochRequest)
    assert not any(isinstance(m, BeginQuorumEpochRequest) for m in r.q.messages(1, 2))


# -- 3. pre-vote timeouts and a pre-vote of a higher epoch (apache/kafka 53364c5) ---------------------


def test_prospective_times_out_to_unattached_and_ignores_the_last_rounds_grant():
    """KafkaRaftClientPreVoteTest.testProspectiveTransitionsToUnattachedOnElectionFailure and
    testPreVoteRequestTimeout (4.x; KafkaRaftClient.pollProspective -> prospectiveTransitionAfterElectionLoss
    @53364c5): a prospective whose election times out goes unattached in its epoch, and prospective again
    at the next timeout; a grant answering the previous round's pre-vote is ignored, the new round's
    makes it candidate in epoch + 1 (before: it stayed prospective, and counted the old grant)."""
    r = Run((1, 2), variant=KRAFT996)
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.PROSPECTIVE and r.s(1).epoch == 0
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.UNATTACHED and r.s(1).epoch == 0
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.PROSPECTIVE
    r(Deliver(1, 2), Deliver(2, 1))  # the first round's pre-vote, granted: no longer expected
    assert r.s(1).role is QuorumRole.PROSPECTIVE
    r(Deliver(1, 2), Deliver(2, 1))  # this round's
    assert r.s(1).role is QuorumRole.CANDIDATE and r.s(1).epoch == 1
    assert r.s(1).state_file == ElectionState(1, r.s(1).key, None)


def _kraft996_leader_2():
    r = Run((1, 2, 3), variant=KRAFT996)
    r.elect(2)
    assert r.s(2).role is QuorumRole.LEADER
    r.fetch(1, 2), r.fetch(3, 2)
    return r


def test_prospective_with_leader_times_out_back_to_following_it():
    """KafkaRaftClientPreVoteTest.testProspectiveWithLeaderTransitionsToFollower (4.x, 53364c5
    prospectiveTransitionAfterElectionLoss): a follower whose fetch timeout made it prospective goes back
    to following its leader when the election times out, and when a majority rejects its pre-votes
    (the leader and a follower that fetched reject; assertElectedLeader: the same epoch and leader)."""
    r = _kraft996_leader_2()
    epoch = r.s(1).epoch
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.PROSPECTIVE and r.s(1).leader == 2
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.FOLLOWER and (r.s(1).epoch, r.s(1).leader) == (epoch, 2)
    assert r.s(1).state_file == ElectionState(epoch, None, 2)
    r(ElectionTimeout(1))
    r.exchange(1, 2), r.exchange(1, 3)
    assert r.s(1).role is QuorumRole.FOLLOWER and (r.s(1).epoch, r.s(1).leader) == (epoch, 2)


def test_candidate_times_out_to_prospective_in_its_epoch():
    """53364c5 KafkaRaftClient.pollCandidate: "Election was not granted, transitioning to prospective" --
    the same epoch, pre-votes again; no epoch + 1 with standard votes (before: candidate in epoch 2)."""
    r = Run((1, 2, 3), variant=KRAFT996)
    r(ElectionTimeout(1), Deliver(1, 2), Deliver(2, 1))
    assert r.s(1).role is QuorumRole.CANDIDATE and r.s(1).epoch == 1
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.PROSPECTIVE and r.s(1).epoch == 1 and r.s(1).voted_key == r.s(1).key
    assert r.q.messages(1, 3)[-1].pre_vote and r.q.messages(1, 3)[-1].candidate_epoch == 1


def test_pre_vote_of_a_higher_epoch_moves_a_candidate_to_unattached():
    """KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsCandidate (4.x; handleVoteRequest @53364c5
    transitions to unattached for any request of a higher epoch): the candidate of epoch 1 answers a
    pre-vote of epoch 2 granted, with no leader, and is unattached in epoch 2 without a vote."""
    r = Run((1, 2, 3), variant=KRAFT996)
    r(ElectionTimeout(1), Deliver(1, 2), Deliver(2, 1))
    assert r.s(1).role is QuorumRole.CANDIDATE
    r.q._send(2, 1, VoteRequest(2, (2, 1), 0, 0, (1, 1), pre_vote=True))
    r(Deliver(2, 1))
    answer = r.q.messages(1, 2)[-1]
    assert answer.vote_granted and answer.leader_epoch == 2 and answer.leader_id is None
    assert r.s(1).role is QuorumRole.UNATTACHED and r.s(1).epoch == 2 and r.s(1).voted_key is None


# -- 4. an unattached server that knows only the leader's id (QuorumState.initialize, maybeTransition) ---


def _restarted_without_the_leaders_endpoints(variant=None):
    """2 holds the VotersRecord removing leader 1 (not committed: 1 still leads) and restarts: its file
    names leader 1, outside its voter set -> unattached with leader 1 and no endpoints (3.9.0
    QuorumState.initialize)."""
    r = leader_with_hw(variant=variant) if variant else leader_with_hw()
    r(RemoveVoter(1))
    r.fetch(2, 1)
    r(QuorumCrash(2), QuorumRestart(2))
    assert r.s(2).role is QuorumRole.UNATTACHED and r.s(2).leader == 1 and r.s(2).voter_ids() == (2, 3)
    return r


def test_unattached_knowing_only_the_leaders_id_follows_once_a_message_brings_its_endpoints():
    """3.9.0 KafkaRaftClient.maybeTransition: same epoch, ``leaderEndpoints.size() >
    quorum.leaderEndpoints().size()`` -> transitionToFollower.  The leader's BeginQuorumEpoch carries its
    endpoints: 2 follows 1 (before: it stayed unattached for good).  Without them it fetches from no
    leader by default (refused: name a bootstrap server)."""
    r = _restarted_without_the_leaders_endpoints()
    with pytest.raises(StepRefused):
        r(QuorumFetch(2))
    r(BeginQuorumEpoch(1, 2), Deliver(1, 2))
    assert r.s(2).role is QuorumRole.FOLLOWER and r.s(2).leader == 1


def test_prospective_without_the_leaders_endpoints_times_out_to_unattached_with_its_id():
    """KafkaRaftClientPreVoteTest.testProspectiveLosesElectionHasLeaderButMissingEndpoint (4.x, 53364c5):
    prospective knowing the leader's id but not its endpoints times out to unattached, still with the
    leader's id (hasLeader), then prospective again."""
    r = _restarted_without_the_leaders_endpoints(KRAFT996)
    r(ElectionTimeout(2))
    assert r.s(2).role is QuorumRole.PROSPECTIVE and r.s(2).leader == 1
    r(ElectionTimeout(2))
    assert r.s(2).role is QuorumRole.UNATTACHED and r.s(2).leader == 1
    r(ElectionTimeout(2))
    assert r.s(2).role is QuorumRole.PROSPECTIVE and r.s(2).leader == 1


# -- 9. the leader's fetch states: voters by their voter key, observers by theirs ---------------------


def test_a_voter_back_with_a_new_disk_leaves_its_old_copys_offset_counted():
    """3.9.0 LeaderState.getOrCreateReplicaState / isVoter: a fetch whose key does not match the voter
    of that id (a new directory id after a lost disk) is an observer's state; the voter's state keeps
    the old copy's offset, and maybeUpdateHighWatermark counts it.  Five voters: 2 held offset 3, lost
    its disk and fetched again (the answer not yet arrived); 3 reaches offset 3: the HW moves to 3 held
    by 1 and 3 only -- HighWatermarkMajority, as Kafka commits it (before: 2's new fetch overwrote its
    old offset, and the HW stayed)."""
    r = Run((1, 2, 3, 4, 5))
    r.elect(1)
    r(Append("a"))
    r.fetch(2, 2), r.fetch(3, 1)
    assert r.s(1).leader_state.high_watermark is None
    r(QuorumCrash(2), LoseDisk(2))
    r(QuorumFetch(2, to=1), Deliver(2, 1), Deliver(1, 2))  # FENCED_LEADER_EPOCH: it follows 1 in epoch 1
    r(QuorumFetch(2), Deliver(2, 1))  # the new copy's fetch at offset 0 (its answer stays in flight)
    r.fetch(3, 1)
    assert r.s(1).hw == 3 and r.s(2).leo == 0
    assert [v for v, _ in r.violations] == ["HighWatermarkMajority"]


# -- 7. a one-voter quorum elects itself at start and restart (KafkaRaftClient.initialize) ---------------


def test_initialize_single_member_quorum():
    """KafkaRaftClientTest.testInitializeSingleMemberQuorum (3.9.0): the lone voter is leader of epoch 1
    as soon as it starts (``initialize``: isOnlyVoter -> transitionToCandidate, granted at once;
    assertElectedLeader(1, localId)), and the first step's outcome reports it to the checker."""
    for variant in (KRAFT595, KRAFT853, KRAFT996):
        r = Run((1,), variant=variant)
        assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 1
        assert r.s(1).state_file == ElectionState(1, None, 1)
        out = r(Append("a"))
        assert r.s(1).hw == r.s(1).leo and any(type(e).__name__ == "BecameLeader" for e in out.effects)
        assert r.checker.leaders == {1: 1} and r.violations == []


def test_initialize_as_leader_from_state_store_single_member_quorum():
    """KafkaRaftClientTest.testInitializeAsLeaderFromStateStoreSingleMemberQuorum (3.9.0): a lone voter
    restarted from a file naming it leader of epoch e starts resigned and, being the only voter, is at
    once candidate and leader of epoch e + 1 ("We should still bump the epoch after initialization")."""
    r = Run((1,))
    r(Append("a"), QuorumCrash(1), QuorumRestart(1))
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 2
    r(Append("b"))
    assert [rec.value for rec in r.s(1).log if rec.control.value == "data"] == ["a", "b"]
    assert r.violations == []


def test_a_lone_voters_start_survives_the_state_document():
    """The stream keeps a metadata partition as a document between micro-batches: a quorum saved
    before its first step still reports the lone voter's election with that step."""
    import json

    from emulator.quorum.codec import quorum_from_document, quorum_to_document
    from emulator.quorum.invariants import QuorumChecker

    q = Run((1,)).q
    doc = json.loads(json.dumps(quorum_to_document(q, QuorumChecker())))
    q2, checker = quorum_from_document(doc)
    out = q2.apply(Append("a"))
    assert [type(e).__name__ for e in out.effects][:2] == ["BecameLeader", "HighWatermarkAdvanced"]
    checker.observe(q2, out)
    assert checker.committed and checker.leaders == {1: 1}


# -- 10. verdicts: NoLogDivergence is pairwise below the common HW ------------------------------------


def test_log_matching_compares_running_servers_pairwise_not_with_the_checkers_history():
    """TLA+ kip_853 NoLogDivergence (kraft_kip_853_properties.tla @823615e): two started servers' logs are
    equal below their lowest common HW.  Static voters 1 and 2 lose their disks after 'a' was committed
    (KIP-853's motivation), elect 2 in epoch 2 with empty logs and commit 'b' at the same offset while 3,
    the one holder of 'a', is down: Durability and LeaderCompleteness break, but no two running logs
    diverge (before: both servers were judged against the checker's history and LogMatching broke too)."""
    r = leader_with_hw(variant=KRAFT595)
    r(Append("a"))
    r.fetch(2, 1), r.fetch(3, 1), r.fetch(3, 1)
    assert r.s(1).hw == 2
    r(QuorumCrash(1), LoseDisk(1), QuorumCrash(2), LoseDisk(2), QuorumCrash(3))
    r(ElectionTimeout(2), ElectionTimeout(2))
    r.exchange(2, 1), r.exchange(2, 1)  # the Votes, then BeginQuorumEpoch
    assert r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 2
    r(Append("b"))
    r.fetch(1, 2)
    assert r.s(2).hw == 2
    names = {v for v, _ in r.violations}
    assert "Durability" in names and "LogMatchingBelowHighWatermark" not in names
    r(QuorumRestart(3))  # 3 holds 'a', but a restarted server's HW is not persisted (0): no common HW
    assert "LogMatchingBelowHighWatermark" not in {v for v, _ in r.violations}


# -- 11. new vocabulary: resign of a given epoch, the leader's check-quorum timer -----------------------


def test_resign_in_older_epoch_ignored():
    """KafkaRaftClientTest.testResignInOlderEpochIgnored (3.9.0; KafkaRaftClient.resign ~3388): a resign
    of an older epoch is ignored; the leader has no election timeout and stays leader (assertElectedLeader)."""
    r = leader_with_hw((1, 2))
    epoch = r.s(1).epoch
    r(Resign(1, epoch=epoch - 1))
    with pytest.raises(StepRefused):
        r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).state_file == ElectionState(epoch, None, 1)


def test_cannot_resign_with_larger_epoch_than_current_epoch_or_if_not_leader():
    """KafkaRaftClientTest.testCannotResignWithLargerEpochThanCurrentEpoch and testCannotResignIfNotLeader
    (3.9.0): IllegalArgumentException -- a step the protocol cannot take, refused."""
    r = leader_with_hw()
    with pytest.raises(StepRefused):
        r(Resign(1, epoch=r.s(1).epoch + 1))
    with pytest.raises(StepRefused):
        r(Resign(2, epoch=r.s(2).epoch))
    assert r.s(1).role is QuorumRole.LEADER


def test_handle_begin_quorum_epoch_after_user_initiated_resign():
    """KafkaRaftClientTest.testHandleBeginQuorumEpochAfterUserInitiatedResign (3.9.0): resign(epoch) makes
    the leader resigned (at its next poll); a BeginQuorumEpoch of epoch + 1 from 2 is answered NONE and
    1 follows 2 (assertElectedLeader(epoch + 1, 2))."""
    r = leader_with_hw()
    epoch = r.s(1).epoch
    r(Resign(1, epoch=epoch))
    assert r.s(1).role is QuorumRole.RESIGNED
    r.q._send(2, 1, BeginQuorumEpochRequest(epoch + 1, 2, (1, 1)))
    r(Deliver(2, 1))
    assert r.q.messages(1, 2)[-1].error == "NONE"
    assert r.s(1).role is QuorumRole.FOLLOWER and r.s(1).state_file == ElectionState(epoch + 1, None, 2)


def test_election_timeout_after_user_initiated_resign():
    """KafkaRaftClientTest.testElectionTimeoutAfterUserInitiatedResign (3.9.0): the resigned leader sends
    EndQuorumEpoch (acknowledged), answers a Fetch NOT_LEADER_OR_FOLLOWER naming itself, and its election
    timeout makes it candidate in epoch + 1 with no leader."""
    from emulator.quorum.state import FetchRequest

    r = leader_with_hw((1, 2), (3,))
    epoch = r.s(1).epoch
    r(Resign(1, epoch=epoch))
    assert isinstance(r.q.messages(1, 2)[-1], EndQuorumEpochRequest)
    r.exchange(1, 2)
    r.q._send(3, 1, FetchRequest((3, 1), epoch, 0, 0))
    r(Deliver(3, 1))
    answer = r.q.messages(1, 3)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id) == ("NOT_LEADER_OR_FOLLOWER", epoch, 1)
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.CANDIDATE and r.s(1).epoch == epoch + 1 and r.s(1).leader is None


def test_leader_should_resign_leadership_if_not_get_fetch_request_from_majority_voters():
    """KafkaRaftClientTest.testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters (3.9.0;
    LeaderState.updateCheckQuorumForFollowingVoter / timeUntilCheckQuorumExpires, pollLeader): the
    check-quorum interval in which voter 2 fetched passes (with the leader, a majority of 3), so does the
    one in which voter 3 fetched; one in which only observer 4 fetched ends the leadership."""
    r = leader_with_hw((1, 2, 3), (4,))
    r(CheckQuorum(1))  # 2 and 3 fetched during the election's interval
    r.fetch(2, 1)
    r(CheckQuorum(1))
    r.fetch(3, 1)
    r(CheckQuorum(1))
    assert r.s(1).role is QuorumRole.LEADER
    r.fetch(4, 1, to=1)
    r(CheckQuorum(1))
    assert r.s(1).role is QuorumRole.RESIGNED
    assert {type(m) for m in r.q.messages(1, 2)} == {EndQuorumEpochRequest}


def test_leader_should_not_resign_leadership_if_only_one_voter():
    """KafkaRaftClientTest.testLeaderShouldNotResignLeadershipIfOnlyOneVoters (3.9.0): a one-voter leader's
    check-quorum timer never expires (timeUntilCheckQuorumExpires: Long.MAX_VALUE)."""
    r = Run((1,))
    with pytest.raises(StepRefused):
        r(CheckQuorum(1))
    assert r.s(1).role is QuorumRole.LEADER


# -- 11. votes and pre-votes from observers: a removed voter that has not fetched its removal -----------
#
# Kafka's tests hand a Vote "from an observer" to the client directly.  A server sends Vote only while its
# own log says it is a voter (3.9.0 transitionToCandidate; 4.x transitionToProspective), so the sender
# the receiver counts as an observer is a voter removed by a committed VotersRecord it has not fetched
# (or, for the receiving observer, one added by a VotersRecord it has not fetched).


def _removed_voter_3(variant=KRAFT853):
    """Leader 1 of epoch 1 removes voter 3; 2 fetches the VotersRecord[1, 2] and commits it; 3 does not
    fetch it, so it still counts itself a voter of {1, 2, 3}."""
    r = leader_with_hw(variant=variant)
    r(RemoveVoter(3))
    r.fetch(2, 2)
    assert r.s(1).voter_ids() == (1, 2) and r.s(1).hw == r.s(1).leo
    assert r.s(3).is_voter() and r.s(3).voter_ids() == (1, 2, 3)
    return r


def test_leader_accept_vote_from_observer():
    """KafkaRaftClientTest.testLeaderAcceptVoteFromObserver (3.9.0; handleVoteRequest has no voter check):
    the leader of epoch e answers a Vote of epoch e - 1 from a non-voter FENCED_LEADER_EPOCH naming itself,
    and one of epoch e NONE, not granted (a leader never grants), and stays leader."""
    r = _removed_voter_3()
    r(ElectionTimeout(3), Drop(3, 1))  # 3 campaigns in epoch 2: its Vote to 2 stays in flight
    r(ElectionTimeout(2), ElectionTimeout(2))  # 2 (voters {1, 2}) campaigns in epoch 3
    r.exchange(2, 1), r.exchange(2, 1)
    assert r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 3 and r.s(2).is_voter()
    r(Deliver(3, 2))  # the observer's Vote of epoch 2
    answer = r.q.messages(2, 3)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id, answer.vote_granted) == ("FENCED_LEADER_EPOCH", 3, 2, False)
    r(Deliver(2, 3))  # 3 learns epoch 3 and its leader
    r(ElectionTimeout(3), Drop(3, 1), Deliver(3, 2))  # its Vote of epoch 4 moves 2 to unattached: Kafka's too
    assert r.s(2).role is QuorumRole.UNATTACHED and r.s(2).epoch == 4


def test_leader_accept_vote_from_observer_in_its_epoch():
    """testLeaderAcceptVoteFromObserver's second request, the same epoch as the leader's: answered NONE
    with the leader named, not granted; the leader stays leader."""
    r = _removed_voter_3()
    r(ElectionTimeout(3), ElectionTimeout(3), Drop(3, 1), Drop(3, 1))  # 3: candidate in epoch 3, two Votes to 2 in flight
    r(ElectionTimeout(2), ElectionTimeout(2), ElectionTimeout(2))
    r.exchange(2, 1), r.exchange(2, 1), r.exchange(2, 1)
    assert r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 4
    r(Drop(3, 2))  # 3's epoch-2 Vote
    r(ElectionTimeout(3), Drop(3, 1))  # 3: candidate in epoch 4 (its epoch-3 Vote is still first on the link)
    r(Deliver(3, 2))
    assert (r.q.messages(2, 3)[-1].error, r.q.messages(2, 3)[-1].leader_epoch) == ("FENCED_LEADER_EPOCH", 4)
    r(Deliver(3, 2))  # epoch 4: the leader's own
    answer = r.q.messages(2, 3)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id, answer.vote_granted) == ("NONE", 4, 2, False)
    assert r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 4


def test_leader_accept_pre_vote_from_observer():
    """KafkaRaftClientPreVoteTest.testLeaderAcceptPreVoteFromObserver (4.x): a pre-vote from a non-voter of
    an older epoch is answered FENCED_LEADER_EPOCH naming the leader; of the leader's epoch NONE, not
    granted; the leader keeps its epoch (a pre-vote of the same epoch changes nothing)."""
    r = _removed_voter_3(KRAFT996)
    r(ElectionTimeout(3), Drop(3, 1))  # 3 prospective in epoch 1: its PreVote to 2 in flight
    assert r.s(3).role is QuorumRole.PROSPECTIVE and r.q.messages(3, 2)[0].pre_vote
    r(Resign(1), Drop(1, 2))  # 1 steps aside: 2 may pre-vote and vote
    r(ElectionTimeout(2))
    r.exchange(2, 1), r.exchange(2, 1), r.exchange(2, 1)
    assert r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 2
    r(Deliver(3, 2))  # the observer's pre-vote of epoch 1
    answer = r.q.messages(2, 3)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id, answer.vote_granted) == ("FENCED_LEADER_EPOCH", 2, 2, False)
    r(Deliver(2, 3))  # 3 follows 2 in epoch 2
    r(ElectionTimeout(3), Drop(3, 1), Deliver(3, 2))
    answer = r.q.messages(2, 3)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id, answer.vote_granted) == ("NONE", 2, 2, False)
    assert answer.pre_vote and r.s(2).role is QuorumRole.LEADER and r.s(2).epoch == 2


def test_handle_pre_vote_request_as_follower_observer():
    """KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollowerObserver (4.x): an observer following
    the leader grants a pre-vote with an up-to-date log until it has fetched from the leader in this epoch,
    and stays a follower and an observer.  Observer 4 is added (AddRaftVoter) but has not fetched the
    VotersRecord; voter 2, which has, pre-votes to it."""
    from emulator.quorum.steps import AddVoter

    for fetched in (True, False):
        r = leader_with_hw((1, 2, 3), (4,), variant=KRAFT996)
        r.fetch(4, 3, to=1)  # FENCED_LEADER_EPOCH (it learns the leader), the records, caught up
        r(AddVoter(4))
        r.fetch(2, 1)
        assert 4 in r.s(2).voter_ids() and not r.s(4).is_voter()
        if not fetched:
            r(QuorumCrash(4), QuorumRestart(4))  # back as follower of 1 (its file), not fetched in this epoch
        assert r.s(4).role is QuorumRole.FOLLOWER and r.s(4).has_fetched_from_leader is fetched
        r(ElectionTimeout(2), Deliver(2, 4))
        answer = r.q.messages(4, 2)[-1]
        assert answer.pre_vote and (answer.error, answer.leader_id, answer.vote_granted) == ("NONE", 1, not fetched)
        assert r.s(4).role is QuorumRole.FOLLOWER and not r.s(4).is_voter()


# -- 11. graceful shutdown (3.9.0 KafkaRaftClient.shutdown, maybeCompleteShutdown, pollLeader) ---------------


def test_leader_graceful_shutdown():
    """KafkaRaftClientTest.testLeaderGracefulShutdown (3.9.0): shutdown makes the leader resign and send
    EndQuorumEpoch while still running; shutting down it still grants a Vote of epoch + 1; the shutdown
    completes (the server stops, no error) once a new leader is known (BeginQuorumEpoch)."""
    r = leader_with_hw((1, 2))
    epoch = r.s(1).epoch
    r(Shutdown(1))
    assert r.s(1).role is QuorumRole.RESIGNED and r.s(1).shutting_down and r.s(1).alive
    assert isinstance(r.q.messages(1, 2)[-1], EndQuorumEpochRequest)
    r(Deliver(1, 2), ElectionTimeout(2), Deliver(2, 1), Deliver(2, 1))  # the EndQuorumEpoch answer, then the Vote
    answer = r.q.messages(1, 2)[-1]
    assert (answer.error, answer.leader_epoch, answer.leader_id, answer.vote_granted) == ("NONE", epoch + 1, None, True)
    assert r.s(1).role is QuorumRole.UNATTACHED and r.s(1).voted_key == r.s(2).key and r.s(1).shutting_down
    with pytest.raises(StepRefused):
        r(ElectionTimeout(1))  # shutting down: no candidacy of its own
    r(Deliver(1, 2), Deliver(2, 1))  # 2 leads epoch + 1; its BeginQuorumEpoch reaches 1
    assert r.s(2).role is QuorumRole.LEADER and r.s(1).role is QuorumRole.STOPPED and not r.s(1).shutting_down
    assert any(e["event"] == "ShutdownCompleted" and e["server"] == 1 for e in r.events) and r.errors == []


def test_grant_votes_when_shutting_down():
    """KafkaRaftClientTest.testGrantVotesWhenShuttingDown (3.9.0): unattached and voted for the candidate
    in epoch + 1, the Vote answered NONE and granted with no leader."""
    r = leader_with_hw((1, 2))
    r(Shutdown(1), Drop(1, 2), ElectionTimeout(2), Deliver(2, 1))
    assert r.s(1).role is QuorumRole.UNATTACHED and r.s(1).state_file == ElectionState(2, r.s(2).key, None)
    assert r.q.messages(1, 2)[-1].vote_granted and r.s(1).alive


def test_leader_graceful_shutdown_timeout():
    """KafkaRaftClientTest.testLeaderGracefulShutdownTimeout (3.9.0): no new leader before the shutdown
    timer expires: the client stops and the shutdown fails with TimeoutException."""
    r = leader_with_hw((1, 2))
    r(Shutdown(1))
    assert r.s(1).alive and isinstance(r.q.messages(1, 2)[-1], EndQuorumEpochRequest)
    r(ShutdownTimeout(1))
    assert r.s(1).role is QuorumRole.STOPPED and r.error_codes() == ["TimeoutException"]
    with pytest.raises(StepRefused):
        r(ShutdownTimeout(1))


def test_follower_and_observer_graceful_shutdown():
    """KafkaRaftClientTest.testFollowerGracefulShutdown and testObserverGracefulShutdown (3.9.0): a follower
    (it has a remote leader) and an observer (even one that knows no leader) stop at their next poll."""
    r = leader_with_hw((1, 2, 3), (4,))
    assert r.s(4).leader is None
    r(Shutdown(2), Shutdown(4))
    assert r.s(2).role is QuorumRole.STOPPED and r.s(4).role is QuorumRole.STOPPED and r.errors == []
    assert r.s(1).role is QuorumRole.LEADER


def test_graceful_shutdown_single_member_quorum():
    """KafkaRaftClientTest.testGracefulShutdownSingleMemberQuorum (3.9.0): the only voter stops at once,
    sending nothing."""
    r = Run((1,))
    r(Shutdown(1))
    assert r.s(1).role is QuorumRole.STOPPED and not r.q.in_flight.get((1, 1)) and r.errors == []


def test_end_quorum_epoch_sent_based_on_fetch_offset():
    """KafkaRaftClientTest.testEndQuorumEpochSentBasedOnFetchOffset (3.9.0): the shutting-down leader's
    EndQuorumEpoch names its preferred successors by descending fetch offset: the close follower first."""
    r = Run((1, 2, 3))
    r.elect(1)
    r(QuorumFetch(2, max_records=1), Deliver(2, 1), Deliver(1, 2))
    r.fetch(2, 1)  # the lagging follower at offset 1
    r(Append("foo"), Append("bar"))
    r.fetch(3, 2)  # the close follower at offset 4
    r(Shutdown(1))
    for v in (2, 3):
        request = r.q.messages(1, v)[-1]
        assert isinstance(request, EndQuorumEpochRequest) and request.preferred_successors == (3, 2)
    assert r.s(1).alive and r.s(1).shutting_down


def test_candidate_shutting_down_resigns_once_elected():
    """3.9.0 pollCandidate: shutting down, a candidate keeps its election; elected, its next poll resigns
    (pollLeader) before any BeginQuorumEpoch is sent, and it waits for the next leader."""
    r = Run((1, 2, 3))
    r(ElectionTimeout(1), Shutdown(1))
    assert r.s(1).role is QuorumRole.CANDIDATE and r.s(1).shutting_down
    r(Deliver(1, 2), Deliver(2, 1))
    assert r.s(1).role is QuorumRole.RESIGNED and r.s(1).alive
    assert not any(isinstance(m, BeginQuorumEpochRequest) for v in (2, 3) for m in r.q.messages(1, v))


# -- 11. UpdateRaftVoter (KIP-853; 3.9.0 pollFollowerAsVoter, handleUpdateVoterRequest, UpdateVoterHandler) ------


def _moved(r, sid):
    """``sid`` stops, gets new listeners and starts again (a follower of the leader its file names)."""
    from emulator.quorum.steps import ChangeListeners

    r(QuorumCrash(sid), ChangeListeners(sid))
    assert r.s(sid).listeners == 2 and r.s(sid).voter_node_needs_update() is r.s(sid).is_voter()


def test_update_voter():
    """KafkaRaftClientReconfigTest.testUpdateVoter (3.9.0): with a high watermark, the leader answers a
    voter's UpdateRaftVoter NONE at once, without committing the VotersRecord it appended (the voter's new
    listeners); the voter is still a voter of the latest set."""
    from emulator.quorum.steps import UpdateVoter

    r = leader_with_hw((1, 2))
    _moved(r, 2)
    assert r.s(2).role is QuorumRole.FOLLOWER and r.s(2).leader == 1
    r(UpdateVoter(2))
    assert type(r.q.messages(2, 1)[-1]).__name__ == "UpdateVoterRequest"
    r(Deliver(2, 1))
    answer = r.q.messages(1, 2)[-1]
    assert (answer.error, answer.leader_id, answer.leader_epoch) == ("NONE", 1, r.s(1).epoch)
    last = r.s(1).log[-1]
    assert last.control.value == "VotersRecord" and last.listeners_of(2) == 2 and last.listeners_of(1) == 1
    assert r.s(1).hw < r.s(1).leo and 2 in r.s(1).voter_ids() and r.errors == []
    r(Deliver(1, 2))
    r.fetch(2, 2)
    assert r.s(1).hw == r.s(1).leo and not r.s(2).voter_node_needs_update()


def test_leader_updates_voter():
    """KafkaRaftClientReconfigTest.testLeaderUpdatesVoter (3.9.0; LeaderState.appendStartOfEpochControlRecords):
    a leader whose voter set holds only the bootstrap checkpoint writes it with its own node as configured
    (new listeners); once the follower fetched, that voter set is committed."""
    r = Run((1, 2))
    _moved(r, 1)
    r.elect(1)
    r.fetch(2, 2)
    record = r.s(1).log[1]
    assert record.control.value == "VotersRecord" and record.listeners_of(1) == 2 and r.s(1).hw == r.s(1).leo == 2


def test_new_leader_writes_its_changed_listeners_at_epoch_start():
    """3.9.0 appendStartOfEpochControlRecords: ``offset == -1 || voterSetAtEpochStart.voterNodeNeedsUpdate``:
    a voter restarted with new listeners that becomes leader appends LeaderChange and a VotersRecord with
    its own node updated."""
    r = leader_with_hw((1, 2, 3))
    _moved(r, 1)  # resigned leader of epoch 1
    r(Drop(1, 2), Drop(1, 3))
    r.elect(1)
    assert r.s(1).epoch == 2 and r.s(1).role is QuorumRole.LEADER
    assert [rec.control.value for rec in r.s(1).log[-2:]] == ["LeaderChange", "VotersRecord"]
    assert r.s(1).log[-1].listeners_of(1) == 2 and r.s(1).log[-1].value == "update_voter=1"


def test_update_voter_old_epoch():
    """KafkaRaftClientReconfigTest.testUpdateVoterOldEpoch (3.9.0; validateLeaderOnlyRequest): the leader of
    epoch 2 answers an UpdateRaftVoter of epoch 1 FENCED_LEADER_EPOCH; the voter follows it in epoch 2."""
    from emulator.quorum.steps import UpdateVoter

    r = leader_with_hw((1, 2, 3))
    _moved(r, 2)
    r(QuorumCrash(1), QuorumRestart(1), Drop(1, 2), Drop(1, 3))
    r(ElectionTimeout(1), Drop(1, 2))
    r.exchange(1, 3), r.exchange(1, 3)
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 2 and r.s(2).epoch == 1
    r(UpdateVoter(2), Deliver(2, 1))
    assert r.error_codes() == ["FENCED_LEADER_EPOCH"]
    r(Deliver(1, 2))
    assert r.s(2).role is QuorumRole.FOLLOWER and (r.s(2).epoch, r.s(2).leader) == (2, 1)


def test_update_voter_to_not_leader():
    """KafkaRaftClientReconfigTest.testUpdateVoterToNotLeader (3.9.0): a server of that epoch that does not
    lead it (here the leader resigned while the request was in flight) answers NOT_LEADER_OR_FOLLOWER."""
    from emulator.quorum.steps import UpdateVoter

    r = leader_with_hw((1, 2))
    _moved(r, 2)
    r(UpdateVoter(2), Resign(1), Deliver(2, 1))
    assert r.error_codes() == ["NOT_LEADER_OR_FOLLOWER"]


def test_update_voter_without_fenced_previous_leaders():
    """KafkaRaftClientReconfigTest.testUpdateVoterWithoutFencedPreviousLeaders (3.9.0): a new leader without a
    high watermark yet answers REQUEST_TIMED_OUT."""
    from emulator.quorum.steps import UpdateVoter

    r = Run((1, 2, 3))
    _moved(r, 2)
    r.elect(1)
    assert r.s(2).role is QuorumRole.FOLLOWER and r.s(1).leader_state.high_watermark is None
    r(UpdateVoter(2), Deliver(2, 1))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"] and r.s(1).log[-1].value == "bootstrap"


def test_update_voter_with_none_voter_id():
    """KafkaRaftClientReconfigTest.testUpdateVoterWithNoneVoterId (3.9.0; VoterSet.updateVoter empty): a voter
    removed by a committed VotersRecord it never fetched asks for its update: VOTER_NOT_FOUND."""
    from emulator.quorum.steps import UpdateVoter

    r = _removed_voter_3()
    _moved(r, 3)
    assert r.s(3).role is QuorumRole.FOLLOWER and r.s(3).is_voter()
    r(UpdateVoter(3), Deliver(3, 1))
    assert r.error_codes() == ["VOTER_NOT_FOUND"]


def test_update_voter_with_pending_add_voter():
    """KafkaRaftClientReconfigTest.testUpdateVoterWithPendingAddVoter (3.9.0; isOperationPending): while an
    AddRaftVoter waits for its commit, UpdateRaftVoter is answered REQUEST_TIMED_OUT."""
    from emulator.quorum.steps import AddVoter, UpdateVoter

    r = leader_with_hw((1, 2, 3), (4,))
    _moved(r, 2)
    r.fetch(4, 3, to=1)
    r(AddVoter(4))
    assert r.s(1).leader_state.pending is not None
    r(UpdateVoter(2), Deliver(2, 1))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"]


def test_follower_sends_update_voter_only_when_different():
    """KafkaRaftClientReconfigTest.testFollowerSendsUpdateVoter and testFollowerSendsUpdateVoterWhenDifferent
    (3.9.0 pollFollowerAsVoter): at its update-voter period a follower whose node in the voter set differs
    sends UpdateRaftVoter (its key, epoch, listeners), and fetches again after the answer; one whose node
    is the same fetches; under kraft.version 0 (static voters) it always fetches."""
    from emulator.quorum.state import FetchRequest, UpdateVoterRequest
    from emulator.quorum.steps import UpdateVoter

    r = leader_with_hw((1, 2, 3))
    r(UpdateVoter(3))
    assert isinstance(r.q.messages(3, 1)[-1], FetchRequest)
    _moved(r, 2)
    r(UpdateVoter(2))
    request = r.q.messages(2, 1)[-1]
    assert isinstance(request, UpdateVoterRequest)
    assert (request.voter_key, request.current_leader_epoch, request.listeners) == (r.s(2).key, r.s(2).epoch, 2)
    r.exchange(2, 1)
    r(QuorumFetch(2))
    assert isinstance(r.q.messages(2, 1)[-1], FetchRequest)
    s = leader_with_hw((1, 2), variant=KRAFT595)
    _moved(s, 2)
    s(UpdateVoter(2))
    assert isinstance(s.q.messages(2, 1)[-1], FetchRequest)
    with pytest.raises(StepRefused):
        s(UpdateVoter(1))  # the leader has no update-voter period


def test_update_voter_response_causes_epoch_change():
    """KafkaRaftClientReconfigTest.testUpdateVoterResponseCausesEpochChange (3.9.0 handleUpdateVoterResponse ->
    maybeHandleCommonResponse): the answer names a newer epoch and leader (here 1 answers FENCED_LEADER_EPOCH,
    having voted 3 in epoch 2); the voter follows 3 in epoch 2 and its next Fetch goes to 3."""
    from emulator.quorum.steps import UpdateVoter

    r = leader_with_hw((1, 2, 3))
    _moved(r, 2)
    r(UpdateVoter(2))
    r(ElectionTimeout(3), Drop(3, 2))
    r.exchange(3, 1), r.exchange(3, 1)
    assert r.s(3).role is QuorumRole.LEADER and r.s(3).epoch == 2 and r.s(1).leader == 3
    r(Deliver(2, 1), Deliver(1, 2))
    assert r.s(2).role is QuorumRole.FOLLOWER and (r.s(2).epoch, r.s(2).leader) == (2, 3)
    r(QuorumFetch(2))
    assert r.q.messages(2, 3)
