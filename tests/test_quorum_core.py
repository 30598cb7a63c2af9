"""Unit tests of the metadata quorum's rules (emulator/quorum/model.py) and the thesis membership-change bug."""

from __future__ import annotations

from dataclasses import replace

import pytest

from emulator.quorum.state import ControlType, QuorumRole
from emulator.quorum.steps import (
    QUORUM_STEP_TABLE,
    AddVoter,
    Append,
    Deliver,
    ElectionTimeout,
    LoseDisk,
    QuorumCrash,
    QuorumRestart,
    RemoveVoter,
)
from emulator.quorum.variants import KRAFT595, KRAFT853, KRAFT996, QUORUM_KNOBS
from emulator.scenario import StepRefused
from emulator.steps import StepError
from quorum_helpers import Run


def test_every_quorum_step_kind_has_a_spec_and_parses():
    for kind, spec in QUORUM_STEP_TABLE.items():
        least = {a.name: ("v" if a.name == "value" else 1) for a in spec.args if a.required}
        step = QUORUM_STEP_TABLE.parse(kind.value, least, (1, 2))
        assert type(step) is spec.cls and step.kind is kind
        assert set(spec.arg_names) == set(spec.cls.__dataclass_fields__) - {"kind"}
    with pytest.raises(StepError, match="not one of"):
        QUORUM_STEP_TABLE.parse("crash", {"server": 9}, (1, 2))


def test_presets_and_knobs():
    assert (KRAFT595.dynamic_voters, KRAFT853.dynamic_voters, KRAFT996.pre_vote) == (False, True, True)
    assert all(k.source for k in QUORUM_KNOBS.values())


def test_election_commit_and_hw_needs_a_record_of_the_leaders_epoch():
    r = Run()
    r.elect(1)
    leader = r.s(1)
    assert leader.role is QuorumRole.LEADER and leader.epoch == 1
    assert [rec.control for rec in leader.log] == [ControlType.LEADER_CHANGE, ControlType.VOTERS]
    assert leader.leader_state.high_watermark is None
    r.fetch(2, 2)  # the second fetch tells the leader 2 holds [0, 2)
    assert leader.leader_state.high_watermark == 2 and r.violations == []


def test_a_step_the_protocol_cannot_take_is_refused():
    r = Run()
    with pytest.raises(StepRefused):
        r(Deliver(2, 1))  # a vote response nobody sent
    with pytest.raises(StepRefused):
        r(ElectionTimeout(9))
    r.elect(1)
    with pytest.raises(StepRefused):
        r(ElectionTimeout(1))  # a leader has no election timeout


def test_follower_truncates_to_the_diverging_epoch():
    r = Run()
    r.elect(1)
    r.fetch(2, 2), r.fetch(3, 2)
    r(Append("a"))  # only on 1
    r(QuorumCrash(1))
    r.elect(2, [3])
    r(Append("b"))
    r(QuorumRestart(1))
    r.exchange(2, 1)  # 2's BeginQuorumEpoch, sent when it was elected, was lost with the crash; resend
    from emulator.quorum.steps import BeginQuorumEpoch
    r(BeginQuorumEpoch(2, 1))
    r.exchange(2, 1)
    assert r.s(1).role is QuorumRole.FOLLOWER and r.s(1).leader == 2
    r.fetch(1, 3)
    assert r.records(1) == r.records(2) and ("1", "a") not in r.records(1)
    assert any(e["event"] == "Truncated" for e in r.events) and r.violations == []


def test_hw_counts_the_current_voter_set_only():
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(2, 2), r.fetch(3, 2)
    r.fetch(4, 1, to=2), r.fetch(4, 3)  # the observer is caught up; it never counts for the HW
    r(RemoveVoter(3))
    r(Append("x"))
    r.fetch(4, 2)
    assert r.s(1).leader_state.high_watermark == 2  # 4 holds everything but is no voter
    r.fetch(2, 2)
    assert r.s(1).leader_state.high_watermark == r.s(1).leo and r.violations == []


def test_one_voter_change_at_a_time():
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(2, 2), r.fetch(3, 2), r.fetch(4, 1, to=1), r.fetch(4, 2)
    r(RemoveVoter(3))
    r(AddVoter(4))
    assert r.error_codes() == ["REQUEST_TIMED_OUT"]


def test_static_voter_that_lost_its_disk_votes_with_an_empty_log_dynamic_one_cannot():
    """KIP-853's motivation: a static voter (id only) that lost its disk grants votes as if it had
    its log; with dynamic voters its new directory id makes it an observer and the candidate's Vote
    names the old key: INVALID_VOTER_KEY."""
    for variant, answer in ((KRAFT595, "granted"), (KRAFT853, "INVALID_VOTER_KEY")):
        r = Run(variant=variant)
        r.elect(1)
        r.fetch(2, 2), r.fetch(3, 2)
        r(QuorumCrash(3)), r(LoseDisk(3))
        assert r.s(3).leo == 0
        r(QuorumCrash(1))
        r(ElectionTimeout(2)), r(Deliver(2, 3))
        response = r.q.messages(3, 2)[0]
        assert (response.error if response.error != "NONE" else ("granted" if response.vote_granted else "rejected")) == answer


def test_pre_vote_does_not_disrupt_a_stable_leader():
    """KIP-996: a voter whose fetches fail campaigns with a pre-vote; followers that fetch from the
    leader reject it, so no epoch is bumped."""
    r = Run(variant=KRAFT996)
    r(ElectionTimeout(1))  # prospective in epoch 0
    assert r.s(1).role is QuorumRole.PROSPECTIVE
    r.exchange(1, 2), r.exchange(1, 3)
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 1
    r.exchange(1, 2), r.exchange(1, 3)
    r.fetch(2, 2), r.fetch(3, 2)
    r(ElectionTimeout(3))  # 3 is partitioned in its head only
    r.exchange(3, 2), r.exchange(3, 1)
    assert r.s(3).role is QuorumRole.FOLLOWER and r.s(3).epoch == 1 and r.s(1).role is QuorumRole.LEADER


def _thesis_sequence(r: Run) -> None:
    """Voters 1-4, observer 5 (Ongaro, raft-dev 2015): leader 1 adds 5, only 5 gets the change; 1
    crashes; 2 is elected by {2,3,4} and at once removes 1, committed by {2,3}; 1 comes back and is
    elected in epoch 3 by {1,4,5}, a majority of its uncommitted five-voter set."""
    r.elect(1, [2, 3, 4])
    r.fetch(2, 2), r.fetch(3, 2), r.fetch(4, 1), r.fetch(2, 1)
    r.fetch(5, 1, to=2), r.fetch(5, 3)
    r(AddVoter(5, server=1))
    r.fetch(5, 1)
    r(QuorumCrash(1))
    r.elect(2, [3, 4])
    r(RemoveVoter(1, server=2))
    r.exchange(2, 3), r.fetch(3, 2)
    r(QuorumRestart(1))
    r(ElectionTimeout(1)), r(ElectionTimeout(1))
    r.exchange(1, 4), r.exchange(1, 5)


def test_thesis_membership_bug_with_the_reconfiguration_rule_off():
    r = Run((1, 2, 3, 4), (5,), replace(KRAFT853, reconfig_requires_leader_epoch_commit=False))
    _thesis_sequence(r)
    assert r.s(1).role is QuorumRole.LEADER and r.s(1).epoch == 3
    assert "LeaderCompleteness" in {name for name, _ in r.violations}  # 2's committed removal is not in 1's log


def test_thesis_membership_bug_refused_with_the_rule_on():
    r = Run((1, 2, 3, 4), (5,), KRAFT853)
    _thesis_sequence(r)
    assert "REQUEST_TIMED_OUT" in r.error_codes()  # 2 may not change the voters before committing its epoch
    assert r.violations == []


def test_every_controller_flushes_what_it_fetched_so_a_power_crash_keeps_it():
    """Re-derived (issue 47): an observer here is a controller (only controllers become voters), and
    3.9.0 core RaftManager.scala:238 builds a controller's KafkaRaftClient with followersAlwaysFlush,
    so appendAsFollower (KafkaRaftClient.java:1698) flushes an observer's records as a voter's: a
    power failure loses neither's.  (It used to assert the observer lost them.)"""
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(4, 1, to=1), r.fetch(4, 1)
    r.fetch(2, 2)
    r(QuorumCrash(4, "power")), r(QuorumCrash(2, "power"))
    assert r.s(4).leo == 2 and r.s(2).leo == 2



def test_a_leader_restarted_from_its_state_file_resigns_and_tells_the_voters():
    """``QuorumState.initialize`` (3.9.0): the file names this server leader -> ResignedState, whose
    ``pollResigned`` sends EndQuorumEpoch to the other voters (no preferred successors)."""
    r = Run()
    r.elect(1)
    r(QuorumCrash(1)), r(QuorumRestart(1))
    assert r.s(1).role is QuorumRole.RESIGNED and r.s(1).epoch == 1
    for v in (2, 3):
        (message,) = r.q.messages(1, v)
        assert type(message).__name__ == "EndQuorumEpochRequest" and message.leader_epoch == 1 and message.preferred_successors == ()


def test_a_leader_that_removed_itself_times_out_into_the_next_epoch_as_an_observer():
    """``pollResigned`` (3.9.0): an old leader no longer in the voter set goes unattached in epoch + 1
    (KafkaRaftClientReconfigTest.testRemoveVoterIsLeader's last part)."""
    r = Run()
    r.elect(1)
    r.fetch(2, 2), r.fetch(3, 2)
    r(RemoveVoter(1))
    r.fetch(2, 2), r.fetch(3, 2)
    assert r.s(1).role is QuorumRole.RESIGNED and not r.s(1).is_voter()
    r(ElectionTimeout(1))
    assert r.s(1).role is QuorumRole.UNATTACHED and r.s(1).epoch == 2


def test_a_crashed_leader_answers_no_pending_voter_change():
    """A dead process answers nothing: the admin client's AddRaftVoter times out on its side."""
    r = Run((1, 2, 3), (4,))
    r.elect(1)
    r.fetch(2, 2), r.fetch(3, 2), r.fetch(4, 1, to=1), r.fetch(4, 2)
    r(AddVoter(4))
    assert r.s(1).leader_state.pending is not None and r.errors == []
    r(QuorumCrash(1))
    assert r.errors == []
