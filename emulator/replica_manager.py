"""LeaderAndIsr on a broker (Kafka's ``ReplicaManager.becomeLeaderOrFollower``): which request a
replica processes, and whether it then becomes leader, follower, or has no leader."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .follower import become_follower_and_truncate
from .leader import become_leader, stop_leading
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
    newer = [q for q in rep.pending_requests if q.leader_epoch > rep.leader_epoch]
    if step.epoch is not None:
        if step.epoch <= rep.leader_epoch:
            p.error("STALE_CONTROLLER_EPOCH")
            return
        newer = [q for q in newer if q.leader_epoch == step.epoch]
    if not newer:
        p.error("STALE_CONTROLLER_EPOCH" if step.epoch is None else "UNKNOWN_LEADER_AND_ISR_EPOCH")
        return
    process_leader_and_isr(p, rep, max(newer, key=lambda q: q.leader_epoch))


def process_leader_and_isr(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    if request.leader_epoch <= rep.leader_epoch:
        p.error("STALE_CONTROLLER_EPOCH")  # a replica ignores epochs <= its own
        return
    rep.pending_requests = [q for q in rep.pending_requests if q.leader_epoch > request.leader_epoch]
    rep.processed_leader_and_isr = True
    if request.leader is None:
        stop_leading(p, rep)
        rep.role, rep.believed_leader, rep.leader_epoch = Role.NONE, None, request.leader_epoch
        rep.fetch_state = None
    elif request.leader == rep.id:
        become_leader(p, rep, request)
    else:
        become_follower_and_truncate(p, rep, request)
