"""LeaderAndIsr on a broker (Kafka's ``ReplicaManager.becomeLeaderOrFollower``): which request a
replica processes, and whether it then becomes leader, follower, or has no leader."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .effects import CacheChanged
from .follower import become_follower_and_truncate, become_follower_without_fetcher
from .leader import (
    become_leader,
    maybe_increment_high_watermark,
    stop_leading,
    sync_remote_replicas,
)
from .log import cut
from .replica import LeaderAndIsrRequest, Replica, Role
from .steps import LeaderAndIsr

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition


def leader_and_isr(p: "Partition", step: LeaderAndIsr) -> None:
    """The replica processes the newest pending request (or the one of ``step.epoch``)."""
    rep = p.replicas[step.replica]
    if not rep.alive:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    newer = newer_requests(p, rep)
    if step.epoch is not None:
        if step.epoch <= rep.leader_epoch:
            p.error("STALE_CONTROLLER_EPOCH")
            return
        newer = [q for q in newer if q.leader_epoch == step.epoch]
    if not newer:
        p.error("STALE_CONTROLLER_EPOCH" if step.epoch is None else "UNKNOWN_LEADER_AND_ISR_EPOCH")
        return
    # Without the controller's epoch bump, several requests share an epoch: the newest partition
    # epoch wins.  (With it, a shared epoch is an explicit reuse in the scenario: the first sent.)
    by_partition_epoch = not p.variant.controller_isr_change_bumps_epoch or p.variant.metadata == "kraft"
    process_leader_and_isr(p, rep, max(newer, key=lambda q: (q.leader_epoch, q.partition_epoch if by_partition_epoch else 0)))
    maybe_end_metadata_lag(p, rep)


def maybe_end_metadata_lag(p: "Partition", rep: Replica) -> bool:
    """A broker lagging the metadata log (``lag_metadata``) stops lagging once a delivery brought
    it to the newest partition change: nothing newer is pending.  True if it stopped."""
    c = p.controller
    if rep.id not in c.lagging or newer_requests(p, rep):
        return False
    c.lagging = tuple(x for x in c.lagging if x != rep.id)
    p.event("MetadataCaughtUp", replica=rep.id, partition_epoch=rep.partition_epoch)
    return True


def newer_requests(p: "Partition", rep: Replica) -> list[LeaderAndIsrRequest]:
    """The pending requests the replica has not applied: a newer leader epoch, or an ISR update."""
    return [q for q in rep.pending_requests if q.leader_epoch > rep.leader_epoch or is_isr_update(p, rep, q)]


def is_isr_update(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> bool:
    """An ISR change at an unchanged leader epoch (the controller does not bump the epoch when
    ``controller_isr_change_bumps_epoch`` is off): the same leader, a newer partition epoch
    (KRaft's partition epoch / ZooKeeper's zkVersion).  The broker only takes the new ISR."""
    if p.variant.metadata == "kraft":
        # Partition.makeLeader / makeFollower take any state whose partition epoch is not older
        # (3.8.0 Partition.scala ~836): a leaderless change at the broker's leader epoch too.
        return (request.leader_epoch == rep.leader_epoch and request.partition_epoch > rep.partition_epoch
                and request.leader == rep.believed_leader)
    return (not p.variant.controller_isr_change_bumps_epoch
            and request.leader_epoch == rep.leader_epoch
            and request.partition_epoch > rep.partition_epoch and request.leader is not None
            and request.leader == rep.believed_leader)


def process_leader_and_isr(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    if p.variant.metadata == "kraft" and rep.id not in p.controller.request_replicas(request):
        delete_partition(p, rep, request)
        return
    if request.leader_epoch <= rep.leader_epoch:
        if is_isr_update(p, rep, request):
            _take_isr(p, rep, request)
            return
        p.error("STALE_CONTROLLER_EPOCH")  # a replica ignores epochs <= its own
        return
    _forget_requests_up_to(rep, request)
    rep.partition_epoch = request.partition_epoch
    rep.processed_leader_and_isr = True
    if request.leader is None:
        stop_leading(p, rep)
        rep.role, rep.believed_leader, rep.leader_epoch = Role.NONE, None, request.leader_epoch
        rep.fetch_state = None
    elif request.leader == rep.id:
        become_leader(p, rep, request)
    elif stops_fetcher(p, rep, request):
        become_follower_without_fetcher(p, rep, request)
    else:
        become_follower_and_truncate(p, rep, request)


def delete_partition(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """KRaft ``ReplicaManager.applyDelta`` (3.5.0 / 3.8.0): a partition change that no longer
    lists the broker among the replicas is one of its ``localChanges.deletes``: the broker stops
    the partition (a leader's parked produces answer NOT_LEADER_OR_FOLLOWER) and deletes its
    log (``stopPartitions`` with ``deleteLocalLog``).  A broker without a copy ignores it."""
    if rep.leader_epoch < 0 and rep.leo == 0 and rep.role is Role.NONE:
        _forget_requests_up_to(rep, request)
        return
    stop_leading(p, rep, "NOT_LEADER_OR_FOLLOWER")
    leo = rep.leo
    cut(p, rep, rep.log.start)
    if rep.cache.truncate_from_end(rep.log.start):
        p.effect(CacheChanged(rep.id, rep.cache.changed_from(len(rep.cache))))
    rep.hw = rep.hw_checkpoint = rep.recovery_point = rep.log.start
    rep.role, rep.believed_leader, rep.fetch_state, rep.last_response_hw = Role.NONE, None, None, None
    rep.leader_epoch, rep.partition_epoch = -1, -1
    rep.processed_leader_and_isr, rep.fresh_after_restart = False, True
    rep.pending_requests = []
    p.event("ReplicaDeleted", replica=rep.id, leo=leo, partition_epoch=request.partition_epoch)


def stops_fetcher(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> bool:
    """``ReplicaManager.applyLocalFollowersDelta`` (KRaft; 3.5.0 ~2213, 3.8.0 ~2826): a broker in
    controlled shutdown stops fetching a partition that has no leader or whose ISR lacks it."""
    return rep.id in p.controller.shutting_down and (request.leader is None or rep.id not in request.isr)


def _forget_requests_up_to(rep: Replica, request: LeaderAndIsrRequest) -> None:
    key = (request.leader_epoch, request.partition_epoch)
    rep.pending_requests = [q for q in rep.pending_requests if (q.leader_epoch, q.partition_epoch) > key]


def _take_isr(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """Partition.makeLeader / makeFollower with an unchanged leader epoch: no lag reset, no
    truncation; a leader adopts the ISR (and may advance its HW, the ISR being smaller)."""
    _forget_requests_up_to(rep, request)
    rep.partition_epoch = request.partition_epoch
    if rep.presumes_leadership and request.leader == rep.id:
        ls = rep.leadership
        assert ls is not None
        # Partition.updateAssignmentAndIsr: the committed state replaces a proposal in flight
        # (its answer, if any, is then rejected as stale).
        ls.isr, ls.partition_epoch, ls.in_flight = request.isr, request.partition_epoch, None
        sync_remote_replicas(p, rep, request)
        p.event("IsrUpdate", replica=rep.id, isr=list(request.isr), partition_epoch=request.partition_epoch)
        maybe_increment_high_watermark(p, rep)
    elif rep.role is Role.FOLLOWER and rep.fetch_state is not None and stops_fetcher(p, rep, request):
        # applyLocalFollowersDelta stops the fetcher on any change, a new leader epoch or not
        rep.fetch_state = None
        p.event("FetcherStopped", replica=rep.id, partition_epoch=request.partition_epoch)
