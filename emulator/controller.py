"""The controller (ZooKeeper / KRaft): the durable partition state, elections, ISR removal, and
LeaderAndIsr delivery.  Actions are named as in the TLA+ spec (``ControllerElectLeader``,
``ControllerShrinkIsr``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import kraft
from .effects import EpochReused, UncleanElection
from .replica import LeaderAndIsrRequest
from .replica_manager import process_leader_and_isr
from .steps import ControllerRemove, Elect

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition


@dataclass(slots=True)
class Controller:
    """Durable partition state: leader, leader epoch, ISR."""

    assignment: tuple[int, ...]  # the scenario's replica order (``Partition.assignment``: the current one, KRaft's reassign)
    leader: int | None = None
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0  # zkVersion: bumped on every change, NOT the leader epoch
    highest_epoch: int = -1
    # KRaft (ClusterControlManager, PartitionRegistration): the ELR and LastKnownELR, the fenced
    # brokers, each broker's registered epoch, the next epoch a registration gets (the offset
    # of its record in the metadata log), and the GetReplicaLogInfo answers of an unclean recovery.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    fenced: tuple[int, ...] = ()
    broker_epochs: dict[int, int] = field(default_factory=dict)
    next_broker_epoch: int = 0
    log_info: dict[int, tuple[int, int]] = field(default_factory=dict)
    shutting_down: tuple[int, ...] = ()  # registered brokers in controlled shutdown (inControlledShutdown)
    lagging: tuple[int, ...] = ()  # brokers that apply the metadata log only by delivery steps (lag_metadata)
    # KRaft reassignment (PartitionRegistration): the replica list once a reassignment changed it
    # (``Partition.assignment`` is the same list; () while it is the scenario's), and the
    # addingReplicas / removingReplicas of the reassignment in progress.
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def copy(self) -> "Controller":
        return Controller(self.assignment, self.leader, self.leader_epoch, self.isr, self.partition_epoch, self.highest_epoch,
                          self.elr, self.last_known_elr, self.fenced, dict(self.broker_epochs), self.next_broker_epoch,
                          dict(self.log_info), self.shutting_down, self.lagging, self.replicas, self.adding, self.removing)

    def current_request(self) -> LeaderAndIsrRequest | None:
        if self.leader_epoch < 0:
            return None
        return LeaderAndIsrRequest(self.leader, self.leader_epoch, self.isr, self.partition_epoch, self.replicas)

    def request_replicas(self, request: LeaderAndIsrRequest) -> tuple[int, ...]:
        """The partition's replicas as a request states them."""
        return request.replicas if request.replicas else self.assignment


def elect(p: "Partition", step: Elect) -> None:
    """ControllerElectLeader: choose (or take) a leader, bump the epoch, send LeaderAndIsr."""
    if p.variant.metadata == "kraft":
        kraft.elect(p, step)
        return
    c = p.controller
    live_isr = [r for r in p.assignment if r in c.isr and p.replicas[r].alive]
    unclean_allowed = p.config.unclean_leader_election if step.unclean is None else step.unclean
    if step.leader is not None:
        leader = step.leader
        if not p.replicas[leader].alive:
            p.error("LEADER_NOT_AVAILABLE")
            return
        if leader not in live_isr and not unclean_allowed:
            p.error("UNCLEAN_ELECTION_DISABLED")
            return
    elif live_isr:
        leader = live_isr[0]
    else:
        live = [r for r in p.assignment if p.replicas[r].alive]
        if not (unclean_allowed and live):
            c.leader = None
            p.error("PartitionOffline")
            p.event("PartitionOffline")
            return
        leader = live[0]
    clean = leader in live_isr
    epoch = c.leader_epoch + 1 if step.epoch is None else step.epoch
    if epoch <= c.highest_epoch:
        p.effect(EpochReused(epoch, f"the controller reused leader epoch {epoch} (highest so far {c.highest_epoch})"))
    isr = step.isr if step.isr is not None else tuple(sorted(set(live_isr) | {leader}))
    c.leader, c.leader_epoch, c.isr = leader, epoch, tuple(isr)
    c.partition_epoch += 1
    c.highest_epoch = max(c.highest_epoch, epoch)
    if not clean:
        p.effect(UncleanElection(leader))
    p.event("Election", leader=leader, epoch=epoch, isr=list(c.isr), clean=clean)
    to = step.to if step.to is not None else (leader,) + tuple(r for r in p.assignment if r != leader)
    request = c.current_request()
    assert request is not None  # an epoch was just written
    send_leader_and_isr(p, request, to, exclude=None)


def controller_remove(p: "Partition", step: ControllerRemove) -> None:
    """ControllerShrinkIsr after a broker death: drop it from the ISR and bump the epoch."""
    c = p.controller
    r = step.replica
    if r not in c.isr:
        p.error("REPLICA_NOT_IN_ISR")
        return
    if p.variant.metadata == "kraft":  # the partition change builder: ELR, a new leader at once
        kraft.change_partition(p, tuple(x for x in c.isr if x != r), "controller_remove", exclude=r, ineligible=r)
        return
    isr: tuple[int, ...]
    if len(c.isr) == 1 and not p.config.unclean_leader_election:
        leader, isr = None, c.isr  # the last ISR member stays, the partition has no leader
    else:
        leader = None if c.leader == r else c.leader
        isr = tuple(x for x in c.isr if x != r)
    if p.variant.controller_isr_change_bumps_epoch:
        c.leader_epoch += 1
        if c.leader_epoch <= c.highest_epoch:
            p.effect(EpochReused(c.leader_epoch, f"the controller reused leader epoch {c.leader_epoch}"))
        c.highest_epoch = max(c.highest_epoch, c.leader_epoch)
    c.leader, c.isr = leader, isr
    c.partition_epoch += 1
    p.event("IsrChange", by="controller", isr=list(isr), epoch=c.leader_epoch)
    to = ((leader,) if leader is not None else ()) + tuple(x for x in p.assignment if x != leader)
    request = c.current_request()
    assert request is not None  # the ISR is only changed after a first election
    send_leader_and_isr(p, request, to, exclude=r)


def send_leader_and_isr(p: "Partition", request: LeaderAndIsrRequest, to: tuple[int, ...], exclude: int | None) -> None:
    """Deliver to ``to`` now, in order; every other live replica gets it later (pending)."""
    for r in p.assignment:
        rep = p.replicas[r]
        if r == exclude or not rep.alive or r in to:
            continue
        rep.pending_requests.append(request)
    for r in to:
        if r != exclude and p.replicas[r].alive:
            process_leader_and_isr(p, p.replicas[r], request)
