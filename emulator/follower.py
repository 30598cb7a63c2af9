"""The follower side (Kafka's ``AbstractFetcherThread`` / ``ReplicaFetcherThread``): becoming
follower, the truncation phase of each variant, and the fetch round trip."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .bugs import EmulatorBug as EmulatorBug  # defined where it is never compiled
from .effects import RoleChanged
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from .leader import (
    maybe_expand_isr,
    maybe_increment_high_watermark,
    stop_leading,
    update_follower_fetch_state,
)
from .log import append, truncate_to
from .recovery import lose_memory
from .replica import FetchState, LeaderAndIsrRequest, Replica, Role
from .steps import Fetch, FetchResponse

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition


def skip_become_follower(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> bool:
    """``Partition.makeFollower`` returns false: same leader, so the fetcher keeps going."""
    if rep.believed_leader != request.leader or rep.fresh_after_restart or rep.role is not Role.FOLLOWER:
        return False
    rule = p.variant.skip_if_same_leader
    if rule == "same_leader":
        return True
    if rule == "same_leader_and_epoch_le_plus1":
        return request.leader_epoch <= rep.leader_epoch + 1
    if rule == "same_epoch":
        return request.leader_epoch == rep.leader_epoch
    return False


def become_follower_and_truncate(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    if skip_become_follower(p, rep, request):
        rep.leader_epoch = request.leader_epoch
        p.event("BecomeFollower", replica=rep.id, leader=request.leader, epoch=request.leader_epoch, skipped=True)
        return
    make_follower(p, rep, request)
    p.event("BecomeFollower", replica=rep.id, leader=request.leader, epoch=request.leader_epoch, skipped=False)
    if p.variant.trunc_rule == "hw":
        truncate_to(p, rep, rep.hw, "hw")  # LogManager.truncateTo(partition -> HW)
        rep.fetch_state = FetchState.FETCHING
    else:
        rep.fetch_state = FetchState.TRUNCATING
        maybe_truncate(p, rep)


def become_follower_without_fetcher(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """KRaft, a broker in controlled shutdown outside the new ISR (or with no leader): its Partition
    takes the new state (``Partition.makeFollower``) but ``ReplicaManager.applyLocalFollowersDelta``
    (3.5.0 ~2213, 3.8.0 ~2826) stops its fetcher instead of restarting it: no truncation phase, no
    fetch (a ``fetch`` step answers ``FETCHER_STOPPED``) until the broker registers again."""
    make_follower(p, rep, request)
    rep.fetch_state, rep.last_response_hw = None, None
    p.event("BecomeFollower", replica=rep.id, leader=request.leader, epoch=request.leader_epoch, skipped=False,
            fetcher_stopped=True)


def make_follower(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """``Partition.makeFollower``'s state change: leadership ends, the new leader and epoch."""
    stop_leading(p, rep)
    rep.believed_leader, rep.leader_epoch, rep.role = request.leader, request.leader_epoch, Role.FOLLOWER
    rep.fresh_after_restart = False


def leader_answer_error(p: "Partition", follower: Replica) -> str | None:
    """Why the believed leader cannot answer Fetch / OffsetsForLeaderEpoch now, if it cannot."""
    leader = None if follower.believed_leader is None else p.replicas.get(follower.believed_leader)
    if leader is None or not leader.alive:
        return "LEADER_NOT_AVAILABLE"
    if leader.role is not Role.LEADER:
        return "NOT_LEADER"
    if p.variant.fencing:
        if follower.leader_epoch < leader.leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if follower.leader_epoch > leader.leader_epoch:
            return "UNKNOWN_LEADER_EPOCH"
    return None


def maybe_truncate(p: "Partition", rep: Replica) -> bool:
    """Run the truncation phase if the leader can answer; returns True once Fetching.

    Fires on become-follower and, while the follower is Truncating, before every fetch.
    """
    error = leader_answer_error(p, rep)
    if error is not None:
        p.error(error)
        return False
    assert rep.believed_leader is not None  # leader_answer_error found it
    leader = p.replicas[rep.believed_leader]
    if p.variant.trunc_rule == "kip101":
        # ReplicaFetcherThread.maybeTruncate (0.11): one v0 round, HW fallback.
        _, end = leader.cache.end_offset_for(rep.cache.latest_epoch(), leader.leo, "v0")
        if end == UNDEFINED_EPOCH_OFFSET:
            truncate_to(p, rep, rep.hw, "fallback-to-hw")
        elif end < rep.leo:
            truncate_to(p, rep, end, "epoch-lookup")
    else:
        truncate_by_epoch_exchange(p, rep, leader)
    rep.fetch_state = FetchState.FETCHING
    p.effect(RoleChanged(rep.id))
    return True


def truncate_by_epoch_exchange(p: "Partition", rep: Replica, leader: Replica) -> None:
    """AbstractFetcherThread.getOffsetTruncationState, iterated as KIP-279 describes.

    The partition's fetch offset starts at the HW (ReplicaManager.makeFollowers) and moves to each
    intermediate truncation point; an UNDEFINED answer truncates to it (``undefined_truncates_to
    = fetch_offset``, 1.1+) or to the HW (``hw``).
    """
    version = p.variant.end_offset_for
    fetch_offset = rep.hw
    for _ in range(len(rep.cache) + 2):
        leader_epoch, leader_end = leader.cache.end_offset_for(rep.cache.latest_epoch(), leader.leo, version)
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            if p.variant.undefined_truncates_to == "fetch_offset" and fetch_offset != rep.hw:
                truncate_to(p, rep, fetch_offset, "fallback-to-fetch-offset")
            else:
                truncate_to(p, rep, rep.hw, "fallback-to-hw")
            return
        if leader_epoch == UNDEFINED_EPOCH:  # the leader answered with the v0 protocol
            truncate_to(p, rep, min(leader_end, rep.leo), "epoch-lookup")
            return
        own_epoch, own_end = rep.cache.end_offset_for(leader_epoch, rep.leo, version)
        if own_end == UNDEFINED_EPOCH_OFFSET:
            truncate_to(p, rep, min(leader_end, rep.leo), "epoch-lookup")
            return
        if own_epoch != leader_epoch:
            fetch_offset = min(own_end, rep.leo)
            truncate_to(p, rep, fetch_offset, "epoch-lookup")
            continue
        truncate_to(p, rep, min(leader_end, own_end, rep.leo), "epoch-lookup")
        return
    raise EmulatorBug(f"replica {rep.id}: the KIP-279 truncation loop did not terminate")


def fetch(p: "Partition", step: Fetch) -> None:
    """FollowerReplicate: one Fetch round trip (the response may be lost)."""
    f = p.replicas[step.replica]
    if not f.alive:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    if f.role is not Role.FOLLOWER:
        p.error("NOT_FOLLOWER")
        return
    if f.fetch_state is None and p.variant.metadata == "kraft":
        p.error("FETCHER_STOPPED")  # become_follower_without_fetcher: controlled shutdown stopped it
        return
    if f.fetch_state is FetchState.TRUNCATING and not maybe_truncate(p, f):
        return
    error = leader_answer_error(p, f)
    if error is not None:
        p.error(error)
        return
    assert f.believed_leader is not None  # leader_answer_error found it
    leader = p.replicas[f.believed_leader]
    assert leader.leadership is not None  # a live leader has its leader state
    if f.id not in leader.leadership.remote_leo:
        # Partition.followerReplicaOrThrow (3.5.0 / 3.8.0): the leader does not list the follower
        # among the replicas yet (a reassignment's new replica, the leader lagging the metadata
        # log) or any more: the fetch is answered UNKNOWN_LEADER_EPOCH, and the follower retries.
        p.error("UNKNOWN_LEADER_EPOCH")
        return
    fetch_offset = f.leo
    if fetch_offset > leader.leo:
        p.error("OFFSET_OUT_OF_RANGE")
        handle_offset_out_of_range(p, f, leader)
        return
    # Replica.updateFetchStateOrThrow (3.7.0 - 3.8.0) compares with MetadataCache.getAliveBrokerEpoch,
    # which has no epoch for a fenced broker (3.8.0 KRaftMetadataCache ~467): its fetch is served.
    registered = -1 if f.id in p.controller.fenced else p.controller.broker_epochs.get(f.id, -1)
    if p.variant.fetch_fences_stale_broker_epoch and step.broker_epoch is not None and registered > step.broker_epoch:
        p.error("NOT_LEADER_OR_FOLLOWER")  # Replica.updateFetchStateOrThrow: a stale fetch state update
        p.event("StaleFetchFenced", replica=f.id, broker_epoch=step.broker_epoch, expected=registered)
        return
    update_follower_fetch_state(p, leader, f.id, fetch_offset, step.broker_epoch)
    maybe_expand_isr(p, leader, f.id)
    maybe_increment_high_watermark(p, leader)
    end = leader.leo if step.max_records is None else min(leader.leo, fetch_offset + step.max_records)
    records = leader.log[fetch_offset:end]
    leader_hw = leader.hw
    if step.response is FetchResponse.LOST:
        return
    if records:
        append(p, f, fetch_offset, records)
    f.hw = min(f.leo, leader_hw)
    f.last_response_hw = leader_hw


def handle_offset_out_of_range(p: "Partition", f: Replica, leader: Replica) -> None:
    """The leader has less data: halt (0.10 – 2.0, unclean disabled) or truncate to its LEO."""
    if p.variant.halt_on_out_of_range and not p.config.unclean_leader_election:
        lose_memory(p, f)
        f.alive, f.halted = False, True
        p.effect(RoleChanged(f.id))
        p.error("FollowerHalted")
        p.event("FollowerHalted", replica=f.id)
        return
    truncate_to(p, f, leader.leo, "out-of-range")
