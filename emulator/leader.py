"""The leader side (Kafka's ``Partition.scala``): becoming leader, writes, the high watermark,
ISR expansion and shrinking, and parked acks=all produces.

``maybe*`` functions say when they fire and return whether they changed anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .effects import Acked, CacheChanged, IsrWritten, LeaderHw, LeadershipEnded
from .log import append
from .replica import (
    NEVER,
    UNKNOWN_OFFSET,
    AlterPartitionRequest,
    LeaderAndIsrRequest,
    LeaderState,
    PendingAck,
    Replica,
    Role,
)
from .steps import Produce, ShrinkIsr, Tick

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition


def become_leader(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """Partition.makeLeader, for a new leader AND for the same broker re-elected in a new epoch.

    Every follower's lag state restarts: lastCaughtUpMs = now if it is in the new ISR, else
    NEVER (Replica.resetLastCaughtUpTime), so a follower the controller removed stops holding
    the HW back at once.  A *new* leader knows no follower's LEO yet (UNKNOWN, the HW is frozen
    until they fetch); a re-elected one keeps the remote LEOs it learned before ("only if
    (isNewLeader)"), unless ``reset_remote_leo_on_reelection`` (the TLA+ rule).  The HW keeps its
    (possibly stale) value; a leader never truncates.
    """
    new_leader = rep.role is not Role.LEADER
    rep.leader_epoch = request.leader_epoch
    rep.believed_leader, rep.role = rep.id, Role.LEADER
    rep.fresh_after_restart, rep.fetch_state, rep.last_response_hw = False, None, None
    followers = [f for f in p.controller.request_replicas(request) if f != rep.id]
    if new_leader:
        p.generation += 1
        rep.leadership = LeaderState(
            generation=p.generation,
            isr=request.isr,
            partition_epoch=request.partition_epoch,
            epoch_start_offset=rep.leo,
            remote_leo={f: UNKNOWN_OFFSET for f in followers},
            last_caught_up_ms={f: p.now_ms if f in request.isr else NEVER for f in followers},
            last_fetch_leader_leo={f: UNKNOWN_OFFSET for f in followers},
            last_fetch_ms={f: NEVER for f in followers},
            highest_hw=rep.hw,
            remote_broker_epoch={f: -1 for f in followers},
        )
    else:
        ls = rep.leadership
        assert ls is not None
        ls.isr, ls.partition_epoch, ls.epoch_start_offset = request.isr, request.partition_epoch, rep.leo
        ls.in_flight = None  # a new leader epoch: the answer to an AlterPartition in flight is ignored
        sync_remote_replicas(p, rep, request)
        for f in followers:
            ls.last_caught_up_ms[f] = p.now_ms if f in request.isr else NEVER
            ls.last_fetch_leader_leo[f] = rep.leo
            ls.last_fetch_ms[f] = p.now_ms
            if p.variant.reset_remote_leo_on_reelection:
                ls.remote_leo[f] = UNKNOWN_OFFSET
    if p.variant.assign_epoch_on_election and rep.cache.assign(rep.leader_epoch, rep.leo):
        p.effect(CacheChanged(rep.id, rep.cache.changed_from(len(rep.cache) - 1)))
    p.event("BecomeLeader", replica=rep.id, epoch=rep.leader_epoch, new_leader=new_leader)
    p.effect(LeaderHw(rep.id, rep.hw))
    maybe_increment_high_watermark(p, rep)


def sync_remote_replicas(p: "Partition", rep: Replica, request: LeaderAndIsrRequest) -> None:
    """``Partition.updateAssignmentAndIsr``: a leader tracks the replicas the partition state lists
    (KRaft reassignment): an added one starts unknown (no LEO, never caught up, no broker epoch),
    a removed one is forgotten."""
    ls = rep.leadership
    if ls is None or p.variant.metadata != "kraft":
        return
    followers = [f for f in p.controller.request_replicas(request) if f != rep.id]
    if list(ls.remote_leo) == followers:
        return
    for f in followers:
        if f not in ls.remote_leo:
            ls.remote_leo[f] = UNKNOWN_OFFSET
            ls.last_caught_up_ms[f] = NEVER
            ls.last_fetch_leader_leo[f] = UNKNOWN_OFFSET
            ls.last_fetch_ms[f] = NEVER
            ls.remote_broker_epoch[f] = -1
    for f in [f for f in ls.remote_leo if f not in followers]:
        for d in (ls.remote_leo, ls.last_caught_up_ms, ls.last_fetch_leader_leo, ls.last_fetch_ms, ls.remote_broker_epoch):
            d.pop(f, None)


def stop_leading(p: "Partition", rep: Replica, answer: str = "NOT_LEADER") -> None:
    """Leadership ends: parked acks=all produces get ``answer`` (NOT_LEADER on demotion,
    REQUEST_TIMED_OUT when the broker stops)."""
    if rep.leadership is not None:
        for ack in rep.leadership.pending_acks:
            p.error(answer, step=ack.step)
        rep.leadership = None
        p.effect(LeadershipEnded(rep.id))


def produce(p: "Partition", step: Produce) -> None:
    """LeaderWrite: any replica presuming leadership appends, stamping its own epoch."""
    target = p.controller.leader if step.replica is None else step.replica
    if target is None:
        p.error("LEADER_NOT_AVAILABLE")
        return
    leader = p.replicas[target]
    if not leader.presumes_leadership:
        p.error("NOT_LEADER")
        return
    acks = step.acks or p.config.acks
    ls = leader.leadership
    assert ls is not None
    if acks == "all" and len(ls.isr) < p.config.min_insync_replicas:
        p.error("NOT_ENOUGH_REPLICAS")  # checked before the append
        return
    base = leader.leo
    append(p, leader, base, [(leader.leader_epoch, v) for v in step.values])
    if acks == "all":
        ls.pending_acks.append(PendingAck(p.step_number, base, leader.leo - 1))
    maybe_increment_high_watermark(p, leader)


def maybe_increment_high_watermark(p: "Partition", leader: Replica) -> bool:
    """Partition.maybeIncrementLeaderHW: HW = min LEO over the ISR and caught-up followers.

    Triggered when the ISR changes or any replica's LEO changes (produce, fetch, election).
    An UNKNOWN remote LEO (-1) blocks any advance; the leader never lowers its HW.
    Returns True if the HW moved.
    """
    ls = leader.leadership
    assert ls is not None
    isr = ls.isr if ls.in_flight is None else ls.maximal_isr
    if p.variant.strict_min_isr_hw and len(ls.isr) < p.config.min_insync_replicas:
        return False
    new_hw = leader.log.end
    for f, remote in ls.remote_leo.items():
        if remote < new_hw and (f in isr or (caught_up(p, ls, f) and hw_waits_for(p, ls, f))):
            new_hw = remote
    if new_hw <= leader.hw:
        return False
    leader.hw = new_hw
    ls.highest_hw = max(ls.highest_hw, new_hw)
    p.effect(LeaderHw(leader.id, new_hw))
    complete_delayed_produces(p, leader)
    return True


def hw_waits_for(p: "Partition", ls: LeaderState, f: int) -> bool:
    """Whether a caught-up follower outside the ISR holds the HW back.  With
    ``hw_ignores_ineligible`` only one eligible for the ISR does (3.6.0 - 3.8.0
    ``Partition.maybeIncrementLeaderHW``: ``shouldWaitForReplicaToJoinIsr`` tests
    ``isReplicaIsrEligible``): not fenced and, under KIP-903, the broker epoch its last fetch
    carried is the registered one (``isBrokerEpochIsrEligible``)."""
    if not p.variant.hw_ignores_ineligible:
        return True
    return f not in p.controller.fenced and f not in p.controller.shutting_down and isr_eligible(p, ls, f)


def caught_up(p: "Partition", ls: LeaderState, f: int) -> bool:
    last = ls.last_caught_up_ms[f]
    return last is not None and p.now_ms - last <= p.config.replica_lag_time_max_ms


def complete_delayed_produces(p: "Partition", leader: Replica) -> None:
    """checkEnoughReplicasReachOffset: answer parked acks=all produces the HW now covers."""
    ls = leader.leadership
    assert ls is not None
    min_isr = p.config.min_insync_replicas
    waiting = []
    for ack in ls.pending_acks:
        if leader.hw <= ack.last_offset:
            waiting.append(ack)
        elif len(ls.isr) >= min_isr:
            p.effect(_acked(p, leader, ack, ls.isr))
            p.event("Ack", produce_step=ack.step, offsets=[ack.first_offset, ack.last_offset])
        else:
            p.error("NOT_ENOUGH_REPLICAS_AFTER_APPEND", step=ack.step)
    ls.pending_acks = waiting


def _acked(p: "Partition", leader: Replica, ack: PendingAck, isr: tuple[int, ...]) -> Acked:
    """The facts of an acknowledgement at the moment it is sent."""
    first, last = ack.first_offset, ack.last_offset
    records = tuple(leader.log[first:last + 1])
    replicas = p.replicas.values()
    holders = tuple(
        frozenset(r.id for r in replicas if r.log.end > o and r.log[o] == record)
        for o, record in enumerate(records, start=first)
    )
    short = tuple(r for r in isr if p.replicas[r].log.end <= last)
    return Acked(leader.id, ack.first_offset, ack.last_offset, ack.step, isr, records, holders, short)


def uses_alter_partition(p: "Partition") -> bool:
    """A leader's ISR change is an AlterPartition request (KRaft, or answered explicitly), not
    the ZooKeeper-era conditional write."""
    return p.variant.metadata == "kraft" or p.config.alter_partition == "explicit"


def send_alter_partition(p: "Partition", leader: Replica, isr: tuple[int, ...], why: str, added: tuple[int, ...]) -> bool:
    """Partition.prepareIsrExpand / prepareIsrShrink: propose ``isr``.  It stays in flight (the HW
    counts the maximal ISR) until the controller answers it: at the end of this step with
    every_step (``kraft.answer_in_flight``), at an alter_partition step with explicit.  False: not
    sent (one is in flight)."""
    ls = leader.leadership
    assert ls is not None
    if ls.in_flight is not None:
        return False
    checked = p.variant.isr_expand_checks_broker_epoch
    epochs = tuple((f, ls.remote_broker_epoch.get(f, -1) if checked else -1) for f in added)
    request = AlterPartitionRequest(leader.id, leader.leader_epoch, ls.partition_epoch, isr, epochs, why)
    ls.in_flight = request
    p.event("AlterPartitionSent", leader=leader.id, isr=list(isr), why=why)
    return True


def leader_write_isr(p: "Partition", leader: Replica, isr: tuple[int, ...], why: str, added: tuple[int, ...] = ()) -> bool:
    """Write a leader-initiated ISR change (ZK CAS on the partition epoch); no epoch bump."""
    c, ls = p.controller, leader.leadership
    assert ls is not None
    if uses_alter_partition(p):
        return send_alter_partition(p, leader, isr, why, added)
    if c.leader != leader.id or c.partition_epoch != ls.partition_epoch:
        return False  # stale zkVersion: a zombie or a leader that missed a LeaderAndIsr
    c.isr = isr
    c.partition_epoch += 1
    ls.isr, ls.partition_epoch = isr, c.partition_epoch
    p.effect(IsrWritten(leader.id))
    p.event("IsrChange", by="leader", why=why, isr=list(isr), epoch=c.leader_epoch)
    return True


def _later(a: int | None, b: int | None) -> int | None:
    """``math.max`` of two lag times, NEVER below every time."""
    return b if a is NEVER else a if b is NEVER else max(a, b)


def update_follower_fetch_state(p: "Partition", leader: Replica, f: int, fetch_offset: int,
                                broker_epoch: int | None = None) -> None:
    """Replica.updateLogReadResult: the remote LEO is the fetch offset, *at request time*.

    Caught up now if the fetch reached the leader's LEO; caught up as of the previous fetch if
    it reached the LEO the leader had then (no change while that fetch time is NEVER).
    """
    ls = leader.leadership
    assert ls is not None
    ls.remote_leo[f] = fetch_offset
    # the fetch carries the follower's broker epoch (KIP-903), or the one the step names
    ls.remote_broker_epoch[f] = p.replicas[f].broker_epoch if broker_epoch is None else broker_epoch
    if fetch_offset >= leader.leo:
        ls.last_caught_up_ms[f] = _later(ls.last_caught_up_ms[f], p.now_ms)
    elif fetch_offset >= ls.last_fetch_leader_leo[f]:
        ls.last_caught_up_ms[f] = _later(ls.last_caught_up_ms[f], ls.last_fetch_ms[f])
    ls.last_fetch_leader_leo[f] = leader.leo
    ls.last_fetch_ms[f] = p.now_ms


def isr_eligible(p: "Partition", ls: LeaderState, f: int) -> bool:
    """Partition.isReplicaIsrEligible (3.5, KIP-841 / KIP-903): the leader's metadata says the
    follower's broker is not fenced and its registration is the one the fetch carried.  (The
    emulator's brokers read the controller's state as their metadata cache.)"""
    c = p.controller
    if p.variant.isr_excludes_ineligible and (f in c.fenced or f in c.shutting_down):
        return False
    if p.variant.isr_expand_checks_broker_epoch and ls.remote_broker_epoch.get(f, -1) != c.broker_epochs.get(f, -1):
        return False
    return True


def maybe_expand_isr(p: "Partition", leader: Replica, f: int) -> bool:
    """Add ``f`` once its LEO reaches the HW (and, with KAFKA-7128, the epoch start)."""
    ls = leader.leadership
    assert ls is not None
    remote = ls.remote_leo[f]
    if f in ls.isr or remote < leader.hw or ls.in_flight is not None:
        return False
    if p.variant.isr_join_requires_epoch_start and remote < ls.epoch_start_offset:
        return False
    if not isr_eligible(p, ls, f):
        return False
    return leader_write_isr(p, leader, tuple(sorted(ls.isr + (f,))), "expand", added=(f,))


def shrink_isr(p: "Partition", step: ShrinkIsr) -> None:
    """LeaderShrinkIsr: the controller's leader drops a lagging follower (no epoch bump)."""
    c = p.controller
    leader = p.replicas[c.leader] if c.leader is not None else None
    if leader is None or not leader.presumes_leadership:
        p.error("NOT_LEADER")
        return
    f = step.replica
    ls = leader.leadership
    assert ls is not None
    if f == leader.id:
        p.error("INVALID_REQUEST")
        return
    if f not in ls.isr:
        p.error("REPLICA_NOT_IN_ISR")
        return
    if ls.in_flight is not None:
        p.error("ALTER_PARTITION_IN_FLIGHT")
        return
    if not leader_write_isr(p, leader, tuple(x for x in ls.isr if x != f), "shrink"):
        if not uses_alter_partition(p):
            p.error("INVALID_UPDATE_VERSION")  # (an AlterPartition's rejection is reported with its reason)
        return
    ls.last_caught_up_ms[f] = NEVER  # lagging until it fetches up to the LEO again
    ls.last_fetch_ms[f] = NEVER
    maybe_increment_high_watermark(p, leader)


def tick(p: "Partition", step: Tick) -> None:
    """Emulated time passes; every presumed leader runs maybeShrinkIsr."""
    p.now_ms += step.ms
    for rid in sorted(p.replicas):
        rep = p.replicas[rid]
        if rep.presumes_leadership:
            maybe_shrink_isr(p, rep)


def out_of_sync(p: "Partition", leader: Replica, f: int) -> bool:
    """Partition.getOutOfSyncReplicas: not caught up within replica.lag.time.max.ms.

    NEVER is out of sync at the first check (Kafka stores 0 and tests ``now - 0 > maxLag``);
    with ``isr_shrink_exempts_leo_equal`` (KAFKA-7152) a follower whose last fetch offset is the
    leader's LEO is in sync however long it has been idle.
    """
    ls = leader.leadership
    assert ls is not None
    if p.variant.isr_shrink_exempts_leo_equal and ls.remote_leo[f] == leader.leo:
        return False
    last = ls.last_caught_up_ms[f]
    return last is NEVER or p.now_ms - last > p.config.replica_lag_time_max_ms


def maybe_shrink_isr(p: "Partition", leader: Replica) -> bool:
    """Drop the ISR followers that are out of sync; returns True if the ISR shrank."""
    ls = leader.leadership
    assert ls is not None
    out_of_sync_followers = [f for f in ls.isr if f != leader.id and out_of_sync(p, leader, f)]
    if not out_of_sync_followers or ls.in_flight is not None:
        return False
    if not leader_write_isr(p, leader, tuple(f for f in ls.isr if f not in out_of_sync_followers), "lag"):
        return False
    maybe_increment_high_watermark(p, leader)
    return True
