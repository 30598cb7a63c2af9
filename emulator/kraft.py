"""KRaft: the controller as a state machine over the metadata log (Kafka 3.5 and KIP-966).

Brokers register with a broker epoch and are fenced and unfenced by the controller
(``ClusterControlManager``); every change of a partition goes through one builder
(``PartitionChangeBuilder``): the target ISR, the Eligible Leader Replicas, the election, the
leader-epoch bump and the LastKnownELR; a leader's ISR change is an AlterPartition the controller
validates (``ReplicationControlManager.validateAlterPartitionData``); when no clean election is
possible, unclean recovery elects from the replicas' GetReplicaLogInfo answers.

The rules read only the knobs ``metadata``, ``isr_excludes_ineligible``,
``isr_expand_checks_broker_epoch``, ``elr``, ``unclean_recovery`` and
``controller_isr_change_bumps_epoch`` (docs/protocol.md "KRaft").  ``maybe*`` functions say
when they fire and return whether they changed anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import recovery
from .effects import EpochReused, IsrWritten, MetadataChanged, RoleChanged, UncleanElection
from .leader import maybe_increment_high_watermark
from .replica import AlterPartitionRequest, Replica
from .replica_manager import is_isr_update, process_leader_and_isr
from .steps import (
    AlterPartition,
    Elect,
    Fence,
    LagMetadata,
    LogInfo,
    Reassign,
    Restart,
    Shutdown,
    Unfence,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition

NO_ANSWER = "UNSUPPORTED_VERSION"  # a KRaft-only request under a ZooKeeper variant
NO_LEADER = -1  # Kafka's LeaderConstants.NO_LEADER, as stored in a LastKnownELR (section 10.5)


def is_kraft(p: "Partition") -> bool:
    return p.variant.metadata == "kraft"


def register_all(p: "Partition") -> None:
    """The initial cluster: every broker registered, unfenced, in assignment order (then the
    scenario's other brokers)."""
    c = p.controller
    for r in p.replicas:
        c.broker_epochs[r] = c.next_broker_epoch
        p.replicas[r].broker_epoch = c.next_broker_epoch
        c.next_broker_epoch += 1


def acceptable(p: "Partition", r: int) -> bool:
    """``isAcceptableLeader`` (3.5.0 ``ClusterControlManager.isActive``): a broker the controller
    has neither fenced nor put in controlled shutdown.  The controller cannot see a crash; it
    learns of one when the broker's session times out (a fence step)."""
    return r not in p.controller.fenced and r not in p.controller.shutting_down


# -- the partition change builder ------------------------------------------------------------


def target_elr(p: "Partition", old_isr: tuple[int, ...], isr: tuple[int, ...], elr: tuple[int, ...],
               unclean_shutdown: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``maybePopulateTargetElr``: at or above min ISR the ELR is empty; below it, the ELR keeps
    its members and takes the removed ISR members, less the ISR and unclean-shutdown replicas."""
    if not p.variant.elr or len(isr) >= p.config.min_insync_replicas:
        return ()
    return tuple(sorted((set(elr) | set(old_isr)) - set(isr) - set(unclean_shutdown)))


def recovery_choice(p: "Partition", isr: tuple[int, ...], elr: tuple[int, ...],
                    last_known: tuple[int, ...] | None = None) -> int | None:
    """Unclean recovery's leader once no clean election is possible, or None (wait).  ``isr``,
    ``elr`` and ``last_known`` are the change's targets (default LastKnownELR: the partition's):
    an ELR member that registers after an unclean shutdown joins the LastKnownELR in the same
    change, and balanced recovery waits for its answer too.

    ``last_known_leader`` (Kafka's code): ISR and ELR empty and LastKnownELR holds one broker, the
    last leader: elected (the code does not require it to be acceptable).  ``balanced`` (KIP-966):
    ISR and ELR empty, every LastKnownELR member live, unfenced and answered GetReplicaLogInfo: the
    highest (last epoch, LEO).  ``proactive``: any acceptable replica that answered, the best."""
    c, strategy = p.controller, p.variant.unclean_recovery
    if strategy == "last_known_leader":
        # the partition's LastKnownELR (the builder's target holds only what the change stores);
        # a stored -1 (NO_LEADER, section 10.5) elects nobody: the record would not change.
        if not isr and not elr and len(c.last_known_elr) == 1 and c.last_known_elr[0] != NO_LEADER:
            return c.last_known_elr[0]
        return None
    if strategy == "balanced":
        quorum = c.last_known_elr if last_known is None else last_known
        if isr or elr or not quorum or not all(m in c.log_info and acceptable(p, m) for m in quorum):
            return None
        answered = [m for m in p.assignment if m in quorum]
    elif strategy == "proactive":
        answered = [m for m in p.assignment if m in c.log_info and acceptable(p, m)]
    else:
        return None
    if not answered:
        return None
    best = answered[0]
    for m in answered[1:]:
        if c.log_info[m] > c.log_info[best]:  # (epoch, offset); ties: the first in assignment order
            best = m
    return best


def maybe_complete_reassignment(replicas: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...],
                                isr: tuple[int, ...], all_targets: bool) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``PartitionReassignmentReplicas.maybeCompleteReassignment``: with a reassignment in
    progress, once the target ISR without the removing replicas is not empty and holds every adding
    replica (3.5.0) -- every replica but the removing ones with ``all_targets`` (3.8.0, KAFKA-15665)
    --: (the new replicas, the new ISR).  Else None."""
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(new_isr) >= set(new_replicas if all_targets else adding):
        return None
    return new_replicas, new_isr


def change_partition(p: "Partition", isr: tuple[int, ...], why: str, *, unclean_shutdown: tuple[int, ...] = (),
                     exclude: int | None = None, ineligible: int | None = None, topic_unclean: bool = True,
                     replicas_changed: bool = False, replicas: tuple[int, ...] | None = None,
                     adding: tuple[int, ...] | None = None, removing: tuple[int, ...] | None = None) -> bool:
    """``PartitionChangeBuilder.build`` for a target ISR: the reassignment's completion
    (``completeReassignmentIfNeeded``, with the partition's adding/removing replicas unless the
    target ones are given), ELR, election (the current leader if it is still valid, else the
    first valid target replica), epochs, LastKnownELR; writes and delivers the change.  False: a
    no-op."""
    c = p.controller
    old_isr = c.isr
    targets = p.assignment if replicas is None else replicas
    adding = c.adding if adding is None else adding
    removing = c.removing if removing is None else removing
    # KAFKA-15665 (3.8.0: every target replica in the ISR) came with the 3.8.0 code kip966 runs; kip903
    # runs 3.5.0's (the adding replicas). The variants have no knob of their own for it: ``elr``
    # tells the 3.8.0 variant (docs/protocol.md 10.3).
    completed = maybe_complete_reassignment(targets, adding, removing, isr, p.variant.elr)
    if completed is not None:
        targets, isr = completed
        adding, removing = (), ()
    isr = tuple(sorted(isr))
    elr = target_elr(p, old_isr, isr, c.elr, unclean_shutdown)
    last_known = c.last_known_elr  # (write_change clears it at or above min ISR)
    if unclean_shutdown and p.variant.unclean_recovery == "balanced":
        last_known = tuple(sorted(set(last_known) | (set(unclean_shutdown) & set(c.elr))))

    def valid(r: int | None) -> bool:
        return r is not None and r != ineligible and (r in isr or (not isr and r in elr)) and acceptable(p, r)

    reassigning = targets != p.assignment or adding != c.adding or removing != c.removing
    old_replicas = p.assignment
    if reassigning:  # the election and unclean recovery read the target replicas
        p.assignment = targets
    leader = c.leader
    unclean = False
    if not valid(leader):
        leader = next((r for r in p.assignment if valid(r)), None)
        if leader is None:
            leader = recovery_choice(p, isr, elr, last_known)
            if leader == ineligible:
                leader = None
            unclean = leader is not None
        if leader is None and topic_unclean and p.config.unclean_leader_election:
            leader = next((r for r in p.assignment if r != ineligible and acceptable(p, r)), None)
            unclean = leader is not None
    if reassigning:
        p.assignment = old_replicas
    return write_change(p, leader, isr, elr, last_known, why, unclean=unclean, exclude=exclude,
                        replicas_changed=replicas_changed,
                        reassignment=(targets, adding, removing) if reassigning else None)


def write_change(p: "Partition", leader: int | None, isr: tuple[int, ...], elr: tuple[int, ...],
                 last_known: tuple[int, ...], why: str, *, unclean: bool = False, epoch: int | None = None,
                 force_epoch_bump: bool = False, exclude: int | None = None, to: tuple[int, ...] | None = None,
                 replicas_changed: bool = False,
                 reassignment: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None) -> bool:
    """The rest of ``build``: the leader's ISR after an ELR or unclean election, the leader-epoch
    bump (a new leader; an ISR shrink below metadata.version 3.6; a replica list that lacks an old
    replica: ``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``), the LastKnownELR, then one
    PartitionChangeRecord (with ``reassignment``'s replicas, adding and removing replicas) and its
    delivery.  False when nothing changes."""
    c = p.controller
    if reassignment is not None:
        replicas_changed = True
        if not set(reassignment[0]) >= set(p.assignment):
            force_epoch_bump = True
    leader_changed = leader != c.leader
    if unclean and leader is not None:
        isr, elr, last_known = (leader,), (), ()  # ISR = the new leader; the ELR fields are cleared
    elif leader_changed and leader is not None and leader in elr:
        isr, elr = (leader,), tuple(r for r in elr if r != leader)  # elected from the ELR
    if not isr and not p.variant.elr:
        isr = c.isr  # without ELR the ISR is never emptied: its last member stays
    if p.variant.unclean_recovery == "last_known_leader" and p.variant.elr:
        # maybeUpdateLastKnownLeader: the last leader, stored when the ISR first becomes empty;
        # cleared once the partition has a leader again.
        # Kafka stores partition.leader, NO_LEADER (-1) when the partition has none.
        last_leader = NO_LEADER if c.leader is None else c.leader
        if not isr and c.isr and c.last_known_elr != (last_leader,):
            last_known = (last_leader,)
        elif leader is not None:
            last_known = ()
        else:
            last_known = c.last_known_elr
    elif len(isr) >= p.config.min_insync_replicas:
        last_known = ()
    shrank = not set(isr) >= set(c.isr)
    bump = force_epoch_bump or leader_changed or (p.variant.controller_isr_change_bumps_epoch and shrank)
    if not bump and not replicas_changed and isr == c.isr and elr == c.elr and last_known == c.last_known_elr:
        return False
    if bump:
        new_epoch = c.leader_epoch + 1 if epoch is None else epoch
        if new_epoch <= c.highest_epoch:
            p.effect(EpochReused(new_epoch, f"the controller reused leader epoch {new_epoch} (highest so far {c.highest_epoch})"))
        c.leader_epoch = new_epoch
        c.highest_epoch = max(c.highest_epoch, new_epoch)
    c.leader, c.isr, c.elr, c.last_known_elr = leader, isr, elr, last_known
    removed: tuple[int, ...] = ()
    if reassignment is not None:
        removed = tuple(r for r in p.assignment if r not in reassignment[0])
        set_replicas(p, reassignment[0])
        c.adding, c.removing = reassignment[1], reassignment[2]
    c.partition_epoch += 1
    p.effect(MetadataChanged(c.partition_epoch))
    if leader is not None:
        c.log_info = {}
    if unclean and leader is not None:
        p.effect(UncleanElection(leader))  # reported as a potential data loss, as KIP-966 says of every unclean recovery
    p.event("PartitionChange", why=why, leader=leader, epoch=c.leader_epoch, isr=list(isr), elr=list(elr),
            last_known_elr=list(last_known), clean=not unclean,
            **({"replicas": list(p.assignment), "adding": list(c.adding), "removing": list(c.removing)}
               if reassignment is not None else {}))
    deliver(p, exclude, to, removed)
    return True


def set_replicas(p: "Partition", replicas: tuple[int, ...]) -> None:
    """The partition's replica list (``Partition.assignment``; the controller keeps it only while it
    differs from the scenario's)."""
    p.assignment = replicas
    p.controller.replicas = () if replicas == p.controller.assignment else replicas


def holds_copy(p: "Partition", r: int) -> bool:
    """A broker outside the replica list that still has the partition: it applied a state of it
    and has not deleted it yet (a removed replica that lags the metadata log or was down)."""
    return p.replicas[r].leader_epoch >= 0


def deliver(p: "Partition", exclude: int | None = None, to: tuple[int, ...] | None = None,
            removed: tuple[int, ...] = ()) -> None:
    """The metadata log reaches the brokers: the live, unfenced ones in ``to`` (default: all,
    the leader first, then the replicas ``removed`` by this change and any other broker that
    still holds a copy) process the partition's new state now, the others when they next process
    their pending LeaderAndIsr.  A broker ignores a state that is not newer than its own; one the
    state no longer lists deletes its copy (``process_leader_and_isr``)."""
    c = p.controller
    request = c.current_request()
    if request is None:
        return  # no leader epoch written yet (before the first election): nothing to publish
    others = tuple(r for r in p.replicas if r not in p.assignment and (r in removed or holds_copy(p, r)))
    if to is None:
        first = (c.leader,) if c.leader is not None else ()
        to = first + tuple(r for r in p.assignment if r != c.leader) + others
    # A fenced broker catches up when unfenced; a lagging one by delivery steps (lag_metadata).
    to = tuple(r for r in to if r != exclude and r not in c.fenced and r not in c.lagging)
    for r in p.assignment + others:
        rep = p.replicas[r]
        if rep.alive and r not in to:
            rep.pending_requests.append(request)
    for r in to:
        rep = p.replicas[r]
        if r == exclude or not rep.alive:
            continue
        if request.leader_epoch > rep.leader_epoch or is_isr_update(p, rep, request):
            process_leader_and_isr(p, rep, request)
            p.effect(RoleChanged(r))
        else:
            rep.pending_requests.append(request)


# -- elections --------------------------------------------------------------------------------


def clean_candidates(p: "Partition") -> list[int]:
    """Who a clean election may choose, in assignment order: the acceptable (unfenced) members
    of the ISR, or of the ELR when the ISR is empty (``isValidNewLeader``)."""
    c = p.controller
    pool = c.isr if c.isr else (c.elr if p.variant.elr else ())
    return [r for r in p.assignment if r in pool and acceptable(p, r)]


REFUSED = "NOT_A_KRAFT_STEP"  # an emulator answer: the step asks for what no KRaft controller writes


def refuse(p: "Partition", reason: str) -> None:
    """The step is not one the KRaft controller can take: nothing changes, the error
    ``REFUSED`` and a ``StepRefused`` event say why (``run_scenario`` refuses the scenario)."""
    p.error(REFUSED)
    p.event("StepRefused", reason=reason)


def election_outcome(p: "Partition", unclean: bool) -> tuple[int | None, bool, str | None]:
    """What ``ElectLeaders`` does to the partition (3.5.0 / 3.8.0
    ``ReplicationControlManager.electLeader`` and ``PartitionChangeBuilder.electLeader``):
    (the leader after it, whether that election is unclean, the error answered or None).

    ``ELECTION_NOT_NEEDED`` when the preferred replica leads (PREFERRED) or any broker leads
    (UNCLEAN).  PREFERRED (``electPreferredLeader``): the preferred replica (the first of the
    assignment) if it is a valid leader, else the current leader if it still is (no change:
    ``PREFERRED_LEADER_NOT_AVAILABLE``), else the next valid replica in assignment order.  UNCLEAN
    (``electAnyLeader``): the first valid replica.  Valid = ``clean_candidates``.  Then unclean
    recovery (``recovery_choice``: 3.8.0's ``canElectLastKnownLeader`` under
    ``last_known_leader``), then, for UNCLEAN, the first acceptable replica.  No leader found: no
    record (``PREFERRED_LEADER_NOT_AVAILABLE`` / ``ELIGIBLE_LEADERS_NOT_AVAILABLE``), or, for a
    PREFERRED election whose current leader is no longer valid, a change to no leader."""
    c = p.controller
    if (not unclean and c.leader == p.assignment[0]) or (unclean and c.leader is not None):
        return c.leader, False, "ELECTION_NOT_NEEDED"
    valid = clean_candidates(p)
    if valid:
        if not unclean and p.assignment[0] not in valid and c.leader in valid:
            return c.leader, False, "PREFERRED_LEADER_NOT_AVAILABLE"
        return valid[0], False, None
    choice = recovery_choice(p, c.isr, c.elr)
    if choice is None and unclean:
        choice = next((r for r in p.assignment if acceptable(p, r)), None)
    if choice is not None:
        return choice, True, None
    if c.leader is None:
        return None, False, "ELIGIBLE_LEADERS_NOT_AVAILABLE" if unclean else "PREFERRED_LEADER_NOT_AVAILABLE"
    return None, False, None


def elect(p: "Partition", step: Elect) -> None:
    """``elect`` under KRaft.  The first one, before any leader epoch was written, is the
    partition's creation: the step may set the leader, the epoch and the ISR (the registration a
    story starts from).  Every later one is the admin's ``ElectLeaders`` (``election_outcome``):
    PREFERRED, or UNCLEAN with ``unclean: true``; it writes a change only when the leader changes,
    else answers its error and writes nothing.  An explicit ``epoch`` or ``isr`` there, or a
    ``leader`` other than the one Kafka elects, is refused (``refuse``)."""
    c = p.controller
    if c.leader_epoch < 0:
        create(p, step)
        return
    if step.epoch is not None or step.isr is not None:
        given = " and ".join(([f"epoch {step.epoch}"] if step.epoch is not None else [])
                             + ([f"isr {list(step.isr)}"] if step.isr is not None else []))
        refuse(p, f"elect sets {given}, which only the partition's creation may set: the KRaft controller writes "
                  f"its own next leader epoch and keeps the ISR in an election (ElectLeaders)")
        return
    election = "UNCLEAN" if step.unclean else "PREFERRED"
    leader, unclean, error = election_outcome(p, bool(step.unclean))
    if error is not None:
        p.error(error)
        p.event("ElectLeaders", election=election, error=error)
        return
    if step.leader is not None and leader != step.leader:
        refuse(p, f"elect names leader {step.leader}, but Kafka's ElectLeaders ({election}) elects "
                  f"{'no leader' if leader is None else leader}: a KRaft election cannot choose its leader")
        return
    # A leader elected from the ELR stays in it here: write_change moves it into the ISR ([leader]).
    elr = target_elr(p, c.isr, c.isr, c.elr)
    write_change(p, leader, c.isr, elr, c.last_known_elr, "election " + election.lower(), unclean=unclean, to=step.to)


def create(p: "Partition", step: Elect) -> None:
    """The partition's first registration: the step's leader, epoch and ISR, or the controller's
    choice (the first acceptable ISR member, epoch 0, the ISR as it stands)."""
    c = p.controller
    unclean_allowed = p.config.unclean_leader_election if step.unclean is None else step.unclean
    clean = clean_candidates(p)
    unclean = False
    if step.leader is not None:
        leader = step.leader
        if not acceptable(p, leader):
            p.error("LEADER_NOT_AVAILABLE")
            return
        if leader not in clean:
            if not unclean_allowed:
                p.error("UNCLEAN_ELECTION_DISABLED")
                return
            unclean = True
    elif clean:
        leader = clean[0]
    else:
        choice = recovery_choice(p, c.isr, c.elr)
        if choice is None and unclean_allowed:
            choice = next((r for r in p.assignment if acceptable(p, r)), None)
        if choice is None:
            p.error("PartitionOffline")
            p.event("PartitionOffline")
            return
        leader, unclean = choice, True
    if step.isr is not None:
        isr = step.isr
    elif unclean or leader not in c.isr:
        isr = (leader,)
    else:
        isr = c.isr
    # buildPartitionRegistration (3.8.0 ReplicationControlManager ~830-842) sets no ELR: a partition
    # created below min ISR starts with an empty ELR, whatever its ISR.
    elr: tuple[int, ...] = ()
    to = step.to if step.to is not None else (leader,) + tuple(r for r in p.assignment if r != leader)
    write_change(p, leader, tuple(sorted(isr)), elr, c.last_known_elr, "election", unclean=unclean, epoch=step.epoch,
                 force_epoch_bump=True, to=to)


# -- the broker lifecycle ---------------------------------------------------------------------


def fence(p: "Partition", step: Fence) -> None:
    """The controller fences a broker (its session timed out): it leaves the ISR, and a leader
    it was is replaced (``handleBrokerFenced``)."""
    if not is_kraft(p):
        p.error(NO_ANSWER)
        return
    r = step.replica
    if r in p.controller.fenced:
        p.error("BROKER_ALREADY_FENCED")
        return
    fence_broker(p, r, "fenced")


def fence_broker(p: "Partition", r: int, why: str) -> None:
    c = p.controller
    c.fenced = tuple(sorted(c.fenced + (r,)))
    c.log_info.pop(r, None)
    p.effect(MetadataChanged(c.partition_epoch))  # a BrokerRegistrationChangeRecord: fenced
    p.event("BrokerFenced", replica=r, why=why)
    if r in c.isr:  # handleBrokerFenced: brokersToIsrs.partitionsWithBrokerInIsr (3.5.0 - 3.8.0)
        change_partition(p, tuple(x for x in c.isr if x != r), why, exclude=r)


def unfence(p: "Partition", step: Unfence) -> None:
    """The controller unfences a live broker that caught up with the metadata log: the broker
    processes the partition's state, and a partition without a valid leader elects."""
    if not is_kraft(p):
        p.error(NO_ANSWER)
        return
    r = step.replica
    rep = p.replicas[r]
    if not rep.alive:
        p.error("BROKER_NOT_AVAILABLE")
        return
    if r not in p.controller.fenced:
        p.error("BROKER_NOT_FENCED")
        return
    unfence_broker(p, rep)


def unfence_broker(p: "Partition", rep: Replica) -> None:
    c = p.controller
    c.fenced = tuple(x for x in c.fenced if x != rep.id)
    c.lagging = tuple(x for x in c.lagging if x != rep.id)  # it caught up with the metadata log to be unfenced
    p.effect(MetadataChanged(c.partition_epoch))
    p.event("BrokerUnfenced", replica=rep.id, broker_epoch=rep.broker_epoch)
    request = c.current_request()
    if request is not None and (request.leader_epoch > rep.leader_epoch or is_isr_update(p, rep, request)):
        process_leader_and_isr(p, rep, request)  # it caught up with the metadata log before being unfenced
        p.effect(RoleChanged(rep.id))
    if c.leader is None:  # handleBrokerUnfenced: only the partitions without a leader elect
        change_partition(p, c.isr, "unfenced")


def register(p: "Partition", rep: Replica, fenced: bool) -> None:
    """BrokerRegistration at startup (``ClusterControlManager.registerBroker``): an old, unfenced
    registration is fenced first; the broker gets a new epoch; without a clean-shutdown file for
    its previous epoch it leaves every ELR (``handleBrokerUncleanShutdown``); then it is unfenced
    unless ``fenced``."""
    c = p.controller
    r = rep.id
    if r not in c.fenced:
        fence_broker(p, r, "re-registration")
    clean = rep.clean_shutdown_epoch is not None and rep.clean_shutdown_epoch == c.broker_epochs.get(r)
    rep.clean_shutdown_epoch = None  # the file is removed at startup
    c.shutting_down = tuple(x for x in c.shutting_down if x != r)  # a new registration is not shutting down
    c.lagging = tuple(x for x in c.lagging if x != r)  # a starting broker replays the metadata log
    c.broker_epochs[r] = rep.broker_epoch = c.next_broker_epoch
    c.next_broker_epoch += 1
    p.event("BrokerRegistered", replica=r, broker_epoch=rep.broker_epoch, clean_shutdown=clean)
    if not clean and p.variant.elr and (r in c.elr or r in c.isr):
        # handleBrokerUncleanShutdown (3.8.0 ReplicationControlManager ~1395-1401): the partitions
        # with the broker in the ISR, then those with it in the ELR; it leaves both.  (A fenced
        # broker stays in an ISR only when canElectLastKnownLeader elected it: section 10.5.)
        change_partition(p, tuple(x for x in c.isr if x != r), "unclean shutdown", unclean_shutdown=(r,))
    if not fenced:
        unfence_broker(p, rep)


def restart(p: "Partition", step: Restart) -> None:
    """The broker starts (log recovery, ``recovery.restart``); under KRaft it then registers."""
    was_alive = p.replicas[step.replica].alive
    recovery.restart(p, step)
    if is_kraft(p) and not was_alive:
        register(p, p.replicas[step.replica], step.fenced)


def shutdown(p: "Partition", step: Shutdown) -> None:
    """A clean shutdown in two phases (``step.phase``; ``all``: both in one step).  ``request``
    (KRaft only): the broker asks for a controlled shutdown (KIP-841; 3.5.0
    ``handleBrokerInControlledShutdown``): it stays registered and unfenced, in controlled shutdown
    — no longer an acceptable leader nor eligible for the ISR — and leaves the ISR, leadership
    moving away.  A broker the controller already fenced is answered SHUTDOWN_NOW (3.8.0
    ``calculateNextBrokerState``): it leaves any ISR that still holds it (``handleBrokerFenced``)
    and stops at once.  ``stop``: the broker flushes, checkpoints, writes its clean-shutdown file
    and stops; under KRaft it is fenced."""
    rep = p.replicas[step.replica]
    c = p.controller
    if step.phase != "all" and not is_kraft(p):
        p.error(NO_ANSWER)
        return
    if is_kraft(p) and rep.alive and step.phase in ("all", "request"):
        if rep.id in c.fenced:
            if rep.id in c.isr:
                p.event("BrokerFenced", replica=rep.id, why="shutdown now")
                change_partition(p, tuple(x for x in c.isr if x != rep.id), "shutdown now", exclude=rep.id)
            recovery.shutdown(p, step)  # SHUTDOWN_NOW: the broker stops at once
            return
        if rep.id not in c.shutting_down:
            enter_controlled_shutdown(p, rep.id)
    if step.phase == "request":
        if not rep.alive:
            p.error("REPLICA_NOT_AVAILABLE")
        return
    if is_kraft(p) and rep.alive and rep.id not in c.fenced:
        fence_broker(p, rep.id, "controlled shutdown")
    recovery.shutdown(p, step)


def enter_controlled_shutdown(p: "Partition", r: int) -> None:
    """``handleBrokerInControlledShutdown``: a BrokerRegistrationChangeRecord (in controlled
    shutdown), then the builder without the broker for every partition whose ISR holds it."""
    c = p.controller
    c.shutting_down = tuple(sorted(c.shutting_down + (r,)))
    p.effect(MetadataChanged(c.partition_epoch))
    p.event("BrokerControlledShutdown", replica=r)
    if r in c.isr:
        change_partition(p, tuple(x for x in c.isr if x != r), "controlled shutdown")


def answer_in_flight(p: "Partition") -> None:
    """``alter_partition: every_step``: the controller answers every AlterPartition sent in this
    step, in replica order."""
    for r in p.assignment:
        rep = p.replicas[r]
        ls = rep.leadership
        if ls is not None and ls.awaiting_answer:
            assert ls.in_flight is not None
            request, ls.in_flight = ls.in_flight, None
            answer_alter_partition(p, rep, request)


# -- AlterPartition -----------------------------------------------------------------------------


def alter_partition(p: "Partition", step: AlterPartition) -> None:
    """The controller answers the AlterPartition in flight from leader ``step.replica``."""
    rep = p.replicas[step.replica]
    ls = rep.leadership
    if not rep.alive or ls is None or not ls.awaiting_answer:
        p.error("NO_ALTER_PARTITION_IN_FLIGHT")
        return
    assert ls.in_flight is not None
    request, ls.in_flight = ls.in_flight, None
    answer_alter_partition(p, rep, request)


# Partition.handleAlterPartitionError (3.5.0 - 3.9.0): after these the leader stays in its pending
# state (the maximal ISR, no new AlterPartition) until new metadata reaches it; after the others
# (INELIGIBLE_REPLICA) it returns to its last committed state.
AWAIT_METADATA_ERRORS = ("FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION", "INVALID_REQUEST")
# The marker of an accepted AlterPartition whose response a lagging leader ignored (its leader epoch
# is not the leader's): the leader stays pending until new metadata reaches it, as after the errors above.
STALE_RESPONSE = "STALE_LEADER_EPOCH"


def rejection(p: "Partition", request: AlterPartitionRequest) -> tuple[str, str] | None:
    """``validateAlterPartitionData``: (error, reason) when the controller refuses, else None."""
    c = p.controller
    if request.leader_epoch < c.leader_epoch:
        return "FENCED_LEADER_EPOCH", f"leader epoch {request.leader_epoch} < {c.leader_epoch}"
    if request.leader != c.leader:
        return "INVALID_REQUEST", f"the leader is {c.leader}, not {request.leader}"
    if request.partition_epoch < c.partition_epoch:
        return "INVALID_UPDATE_VERSION", f"partition epoch {request.partition_epoch} < {c.partition_epoch}"
    if not is_kraft(p):
        return None
    added = dict(request.added_broker_epochs)
    for r in request.isr:
        if p.variant.isr_excludes_ineligible and r in c.shutting_down:
            return "INELIGIBLE_REPLICA", f"replica {r} is shutting down"
        if p.variant.isr_excludes_ineligible and r in c.fenced:
            return "INELIGIBLE_REPLICA", f"replica {r} is fenced"
        sent = added.get(r, -1)
        if p.variant.isr_expand_checks_broker_epoch and sent != -1 and sent != c.broker_epochs.get(r):
            return "INELIGIBLE_REPLICA", f"replica {r}: broker epoch mismatch: requested={sent} VS expected={c.broker_epochs.get(r)}"
    return None


def answer_alter_partition(p: "Partition", leader: Replica, request: AlterPartitionRequest) -> bool:
    """Accept (write the ISR, the leader takes it) or reject (an error and its reason; the leader
    keeps its ISR).  Returns True if accepted."""
    ls = leader.leadership
    refused = rejection(p, request)
    if refused is not None:
        error, reason = refused
        p.error(error)
        awaits_metadata = is_kraft(p) and error in AWAIT_METADATA_ERRORS and ls is not None
        p.event("AlterPartitionRejected", leader=leader.id, isr=list(request.isr), error=error, reason=reason,
                **({"awaits_metadata": True} if awaits_metadata else {}))
        if ls is not None and awaits_metadata:
            ls.in_flight = AlterPartitionRequest(request.leader, request.leader_epoch, request.partition_epoch, request.isr,
                                                 request.added_broker_epochs, request.why, error)
        elif ls is not None:
            maybe_increment_high_watermark(p, leader)  # the maximal ISR shrank back to the ISR
        return False
    c = p.controller
    if not is_kraft(p):  # the ZooKeeper-era write, answered explicitly
        c.isr = request.isr
        c.partition_epoch += 1
        if ls is not None and leader.presumes_leadership and leader.leader_epoch == request.leader_epoch:
            ls.isr, ls.partition_epoch = request.isr, c.partition_epoch
        changed = True
    else:  # the leader learns the new state first (the AlterPartition response), then the others
        if c.adding or c.removing:
            # A reassignment in progress: the builder may complete it (ReplicationControlManager
            # .alterPartition, 3.5.0 / 3.8.0): the replicas become the target, the removing ones
            # leave the ISR, and a removed leader is replaced -- answered NEW_LEADER_ELECTED, the
            # change written all the same; the leader stays pending until the metadata reaches it.
            changed = change_partition(p, request.isr, "alter_partition " + request.why)
            if c.leader != leader.id:
                p.error("NEW_LEADER_ELECTED")
                p.event("AlterPartitionNewLeaderElected", leader=leader.id, new_leader=c.leader, epoch=c.leader_epoch)
        else:
            elr = target_elr(p, c.isr, request.isr, c.elr)
            changed = write_change(p, c.leader, request.isr, elr, c.last_known_elr, "alter_partition " + request.why)
        if changed and leader.id in c.lagging and ls is not None and leader.leadership is not None:
            # The AlterPartition response carries the new state to the leader, lagging or not
            # (Partition.handleAlterPartitionUpdate) -- unless the change bumped the leader epoch
            # (kip903's shrink, a reassignment's): the response's leader epoch is not the leader's,
            # so it is ignored (3.5.0 Partition.scala ~1855-1858) and the leader stays in its pending
            # state, the maximal ISR and no new AlterPartition, until the metadata log brings the new epoch.
            current = c.current_request()
            assert current is not None
            if current.leader_epoch == leader.leader_epoch:
                process_leader_and_isr(p, leader, current)
            else:
                ls.in_flight = AlterPartitionRequest(request.leader, request.leader_epoch, request.partition_epoch,
                                                     request.isr, request.added_broker_epochs, request.why,
                                                     STALE_RESPONSE)
                p.event("AlterPartitionResponseIgnored", leader=leader.id, epoch=current.leader_epoch,
                        leader_epoch=leader.leader_epoch, awaits_metadata=True)
    p.effect(IsrWritten(leader.id))
    p.event("IsrChange", by="leader", why=request.why, isr=list(request.isr), epoch=c.leader_epoch)
    if changed and ls is not None and leader.leadership is not None:
        maybe_increment_high_watermark(p, leader)
    return True


# -- metadata delivery -----------------------------------------------------------------------------


def lag_metadata(p: "Partition", step: LagMetadata) -> None:
    """The broker stops applying the metadata log: the partition changes written from now on wait
    in its pending requests until a ``leader_and_isr`` step delivers them (``deliver``)."""
    if not is_kraft(p):
        p.error(NO_ANSWER)
        return
    rep, c = p.replicas[step.replica], p.controller
    if not rep.alive:
        p.error("BROKER_NOT_AVAILABLE")
        return
    if rep.id in c.lagging:
        p.error("BROKER_ALREADY_LAGGING")
        return
    c.lagging = tuple(sorted(c.lagging + (rep.id,)))
    p.event("MetadataLag", replica=rep.id, applied_partition_epoch=rep.partition_epoch)


# -- reassignment ------------------------------------------------------------------------------------


def reassign(p: "Partition", step: Reassign) -> None:
    """AlterPartitionReassignments for the partition (3.5.0 / 3.8.0
    ``ReplicationControlManager.alterPartitionReassignment``): a target list
    (``changePartitionReassignment``) or, with ``cancel``, none (``cancelPartitionReassignment``).

    A target: ``PartitionReassignmentReplicas`` against the current replicas -- removing = current
    less target, adding = target less current (both sorted), replicas = target then removing --
    and the builder with those targets (an empty adding or removing list keeps the partition's),
    ``Election.ONLINE`` (the topic's unclean setting is not read).  The builder completes the
    reassignment at once when the ISR already holds every target replica
    (``maybe_complete_reassignment``): a rearrangement, a removal.  Otherwise the record holds the
    replicas with adding/removing; the added brokers become followers, and the change that puts
    them all in the ISR (the leader's AlterPartition) completes it.  The leader epoch is bumped
    when the replica list loses a replica (``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``;
    3.5.0 ``triggerLeaderEpochBumpIfNeeded``).  No change at all is a no-op (``changeRecordIsNoOp``)."""
    if not is_kraft(p):
        p.error(NO_ANSWER)
        return
    c = p.controller
    if c.leader_epoch < 0:
        p.error("UNKNOWN_TOPIC_OR_PARTITION")  # no partition registration yet
        return
    if step.cancel:
        cancel_reassignment(p)
        return
    assert step.replicas is not None  # parse_step: replicas or cancel
    target, current = step.replicas, p.assignment
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    changed = change_partition(p, c.isr, "reassignment", topic_unclean=False, replicas=target + removing,
                               adding=adding if adding else c.adding, removing=removing if removing else c.removing)
    p.event("PartitionReassignment", replicas=list(target), adding=list(adding), removing=list(removing), changed=changed,
            completed=changed and not c.adding and not c.removing)


def cancel_reassignment(p: "Partition") -> None:
    """``cancelPartitionReassignment`` (3.5.0 / 3.8.0) and ``PartitionReassignmentRevert``: no
    reassignment in progress answers NO_REASSIGNMENT_IN_PROGRESS.  Else the replicas without the
    adding ones (the removing ones kept), the ISR without the adding ones -- when that is empty,
    the first original replica, which needs the topic's unclean leader election (else
    INVALID_REPLICA_ASSIGNMENT, nothing written) -- no adding/removing replicas, the builder's
    election (UNCLEAN when the topic enables it)."""
    c = p.controller
    if not c.adding and not c.removing:
        p.error("NO_REASSIGNMENT_IN_PROGRESS")
        return
    original = tuple(r for r in p.assignment if r not in c.adding)
    isr = tuple(r for r in c.isr if r not in c.adding)
    unclean = not isr
    if unclean:
        if not p.config.unclean_leader_election:
            p.error("INVALID_REPLICA_ASSIGNMENT")
            p.event("PartitionReassignmentCancelled", replicas=list(original), changed=False,
                    reason="reverting would need an unclean leader election")
            return
        isr = original[:1]
    changed = change_partition(p, isr, "reassignment cancelled", replicas=original, adding=(), removing=())
    if changed and unclean and c.leader is not None:
        p.effect(UncleanElection(c.leader))  # Kafka: "This is considered an unclean leader election"
    p.event("PartitionReassignmentCancelled", replicas=list(original), changed=changed)


# -- unclean recovery -----------------------------------------------------------------------------


def log_info(p: "Partition", step: LogInfo) -> None:
    """GetReplicaLogInfo: the replica answers with its last epoch and LEO; the controller elects
    once its strategy has the answers it waits for."""
    if not is_kraft(p) or p.variant.unclean_recovery not in ("balanced", "proactive"):
        p.error(NO_ANSWER)
        return
    rep = p.replicas[step.replica]
    if not rep.alive or not acceptable(p, rep.id):
        p.error("BROKER_NOT_AVAILABLE")
        return
    c = p.controller
    if c.leader is not None and acceptable(p, c.leader):
        p.error("NOT_IN_RECOVERY")
        return
    last_epoch = rep.cache.latest_epoch()
    c.log_info[rep.id] = (last_epoch, rep.leo)
    p.event("ReplicaLogInfo", replica=rep.id, last_epoch=last_epoch, leo=rep.leo)
    change_partition(p, c.isr, "unclean recovery")
