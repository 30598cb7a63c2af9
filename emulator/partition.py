"""One topic-partition as a deterministic state machine: the controller and its replicas.

``Partition.apply(step)`` replays one scenario step under a ``ProtocolVariant`` and returns a
``StepOutcome``.  The rules are protocol.md §A with the emulator semantics of §E; handler
names follow the TLA+ spec and ``Partition.scala`` (``become_leader``,
``become_follower_and_truncate``, ``leader_write``, ``follower_fetch``,
``maybe_increment_high_watermark``, ``maybe_expand_isr``, ``maybe_shrink_isr``).

Kafka's error answers are recorded in ``errors``, never raised.  A broken precondition of the
emulator itself raises ``EmulatorBug``.  The replicas never read the oracle (ghost state).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from .invariants import REGISTRY
from .log import Log
from .oracle import Oracle
from .scenario import (
    CheckpointHw, Config, ControllerRemove, Crash, Elect, Fetch, Flush, LeaderAndIsr, Produce,
    Restart, ShrinkIsr, Step, Tick,
)
from .variants import ProtocolVariant

UNKNOWN_OFFSET = -1  # a leader's view of a follower it has not heard from in this leadership

LEADER, FOLLOWER, NO_ROLE = "leader", "follower", "none"
TRUNCATING, FETCHING = "Truncating", "Fetching"


def prefix_digest(previous: str, records: list[tuple[int, str]]) -> str:
    """SHA-256 chained over compacted records: ``sha256(previous || json(records))``."""
    h = hashlib.sha256(previous.encode("ascii"))
    h.update(json.dumps(records, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return "sha256:" + h.hexdigest()


class EmulatorBug(RuntimeError):
    """A precondition of the emulator's own code was broken (not a protocol finding)."""


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass
class Controller:
    """Durable partition state (ZooKeeper / KRaft): leader, leader epoch, ISR."""

    assignment: tuple[int, ...]
    leader: int | None = None
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = 0  # zkVersion: bumped on every change, NOT the leader epoch
    highest_epoch: int = -1

    def current_request(self) -> LeaderAndIsrRequest | None:
        if self.leader_epoch < 0:
            return None
        return LeaderAndIsrRequest(self.leader, self.leader_epoch, self.isr, self.partition_epoch)


@dataclass(frozen=True, slots=True)
class PendingAck:
    step: int
    first_offset: int
    last_offset: int


@dataclass
class LeaderState:
    """In-memory state a replica keeps only while it presumes leadership."""

    generation: int
    since_ms: int
    isr: tuple[int, ...]
    partition_epoch: int
    epoch_start_offset: int
    remote_leo: dict[int, int]
    last_caught_up_ms: dict[int, int | None]
    last_fetch_leader_leo: dict[int, int | None]
    last_fetch_ms: dict[int, int | None]
    pending_acks: list[PendingAck] = field(default_factory=list)
    highest_hw: int = 0

    def forget_followers(self, now_ms: int) -> None:
        for f in self.remote_leo:
            self.remote_leo[f] = UNKNOWN_OFFSET
            self.last_caught_up_ms[f] = None
            self.last_fetch_leader_leo[f] = None
            self.last_fetch_ms[f] = None
        self.since_ms = now_ms


class Replica:
    """One broker's copy of the partition: its log, HW, checkpoints and epoch cache."""

    def __init__(self, broker_id: int, cache_semantics: str) -> None:
        self.id = broker_id
        self.log = Log()  # (epoch, value) records by absolute offset
        self.hw = 0
        self.hw_checkpoint = 0  # replication-offset-checkpoint
        self.recovery_point = 0  # offsets below it are fsync'ed
        self.cache = LeaderEpochCache(cache_semantics)
        self.alive = True
        self.halted = False
        self.role = NO_ROLE
        self.believed_leader: int | None = None
        self.leader_epoch = -1  # the epoch of the last LeaderAndIsr it processed
        self.fresh_after_restart = True  # a new Partition object: no known leader yet
        self.processed_leader_and_isr = False  # since the last restart
        self.fetch_state: str | None = None
        self.pending_requests: list[LeaderAndIsrRequest] = []
        self.last_response_hw: int | None = None
        self.leadership: LeaderState | None = None

    @property
    def leo(self) -> int:
        return len(self.log)


@dataclass
class StepOutcome:
    step: int
    errors: list[dict]
    events: list[dict]
    violations: list[dict]


class Partition:
    """The controller and replicas of one partition, stepped by scenario steps."""

    def __init__(self, assignment: tuple[int, ...], config: Config, variant: ProtocolVariant) -> None:
        self.assignment = tuple(assignment)
        self.config = config
        self.variant = variant
        self.controller = Controller(assignment=self.assignment, isr=tuple(sorted(self.assignment)))
        self.replicas: dict[int, Replica] = {r: Replica(r, variant.cache_semantics) for r in self.assignment}
        self.now_ms = 0  # the lag clock; only tick moves it
        self.step_number = 0
        self.oracle = Oracle(self)
        self.errors: list[dict] = []
        self.violations: list[dict] = []
        self._violated: set[str] = set()
        self._generation = 0
        self._events: list[dict] = []
        # Offsets below ``compacted_offset`` were compacted away on every replica (long runs);
        # ``prefix_digest`` is the SHA-256 chain over those records.
        self.compacted_offset = 0
        self.prefix_digest = ""

    # =====================================================================================
    # stepping
    # =====================================================================================

    def apply(self, step: Step) -> StepOutcome:
        """Replay one step, then checkpoint (every_step), look for losses and check invariants."""
        self.step_number += 1
        first_error = len(self.errors)
        self._events = []
        self.oracle.begin_step()
        _HANDLERS[type(step)](self, step)
        self._end_of_step()
        self.oracle.scan_losses(self.step_number, self.config.min_insync_replicas)
        fired = self._check("step")
        return StepOutcome(self.step_number, self.errors[first_error:], self._events, fired)

    def finish(self) -> list[dict]:
        """Judge the end-of-run invariants (EventualConvergence); returns what fired."""
        return self._check("end")

    def compactable_offset(self) -> int:
        """The end of the prefix no step can change any more.

        Below every replica's recovery point, HW, HW checkpoint and LEO (dead replicas
        included), below the committed ledger's end, and identical on every replica and in the
        ledger: truncation (to a HW, to an epoch boundary, to a recovery point) never reaches
        below it.
        """
        k = len(self.oracle.committed)
        for r in self.replicas.values():
            k = min(k, r.recovery_point, r.hw, r.hw_checkpoint, r.leo)
            cm = self.oracle.committed_mismatch(r.id)
            if cm is not None:
                k = min(k, cm)
        ids = sorted(self.replicas)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                mm = self.oracle.mismatch(a, b)
                if mm is not None:
                    k = min(k, mm)
        return max(k, self.compacted_offset)

    def compact(self, min_records: int) -> int:
        """Compact the unchangeable prefix into an offset and a digest once it holds at least
        ``min_records`` more records; returns how many records each replica dropped.

        The ghost state that refers only to the prefix (acked records, reported losses,
        records committed twice) goes with it.  A later step that would reach below the
        compacted offset is clamped there and recorded as ``BELOW_COMPACTED_PREFIX``.
        """
        upto = self.compactable_offset()
        if upto - self.compacted_offset < max(min_records, 1):
            return 0
        dropped = None
        for rid in sorted(self.replicas):
            removed = self.replicas[rid].log.compact(upto)
            dropped = removed if dropped is None else dropped
        self.prefix_digest = prefix_digest(self.prefix_digest, dropped)
        self.oracle.compact(upto)
        count = upto - self.compacted_offset
        self.compacted_offset = upto
        return count

    def _check(self, kind: str) -> list[dict]:
        fired = []
        for inv in REGISTRY:
            if inv.kind != kind or inv.name in self._violated:
                continue
            detail = inv.check(self)
            if detail is not None:
                self._violated.add(inv.name)
                v = {"invariant": inv.name, "step": self.step_number, "detail": detail}
                self.violations.append(v)
                fired.append(v)
        return fired

    def _error(self, error: str, step: int | None = None) -> None:
        self.errors.append({"step": self.step_number if step is None else step, "error": error})

    def _event(self, name: str, **fields) -> None:
        self._events.append({"event": name, **fields})

    def _end_of_step(self) -> None:
        # §E.4: with every_step, every live replica checkpoints its HW and flushes its log.
        for r in self.replicas.values():
            if not r.alive:
                continue
            if self.config.hw_checkpoint == "every_step":
                r.hw_checkpoint = r.hw
            if self.config.log_flush == "every_step":
                r.recovery_point = r.leo

    def _live(self, rid: int) -> bool:
        return self.replicas[rid].alive

    # =====================================================================================
    # controller actions
    # =====================================================================================

    def _on_elect(self, step: Elect) -> None:
        """ControllerElectLeader: choose (or take) a leader, bump the epoch, send LeaderAndIsr."""
        c = self.controller
        live_isr = [r for r in self.assignment if r in c.isr and self._live(r)]
        unclean_allowed = self.config.unclean_leader_election if step.unclean is None else step.unclean
        if step.leader is not None:
            leader = step.leader
            if not self._live(leader):
                self._error("LEADER_NOT_AVAILABLE")
                return
            if leader not in live_isr and not unclean_allowed:
                self._error("UNCLEAN_ELECTION_DISABLED")
                return
        elif live_isr:
            leader = live_isr[0]
        else:
            live = [r for r in self.assignment if self._live(r)]
            if not (unclean_allowed and live):
                c.leader = None
                self._error("PartitionOffline")
                self._event("PartitionOffline")
                return
            leader = live[0]
        clean = leader in live_isr
        epoch = c.leader_epoch + 1 if step.epoch is None else step.epoch
        if epoch <= c.highest_epoch:
            self.oracle.find("UniqueLeaderPerEpoch", f"the controller reused leader epoch {epoch} (highest so far {c.highest_epoch})")
        isr = step.isr if step.isr is not None else tuple(sorted(set(live_isr) | {leader}))
        c.leader, c.leader_epoch, c.isr = leader, epoch, tuple(isr)
        c.partition_epoch += 1
        c.highest_epoch = max(c.highest_epoch, epoch)
        if not clean:
            self.oracle.on_unclean_election()
        self._event("Election", leader=leader, epoch=epoch, isr=list(c.isr), clean=clean)
        to = step.to if step.to is not None else (leader,) + tuple(r for r in self.assignment if r != leader)
        self._send_leader_and_isr(c.current_request(), to, exclude=None)

    def _on_controller_remove(self, step: ControllerRemove) -> None:
        """ControllerShrinkIsr after a broker death: drop it from the ISR and bump the epoch."""
        c = self.controller
        r = step.replica
        if r not in c.isr:
            self._error("REPLICA_NOT_IN_ISR")
            return
        if len(c.isr) == 1 and not self.config.unclean_leader_election:
            leader, isr = None, c.isr  # the last ISR member stays, the partition has no leader
        else:
            leader = None if c.leader == r else c.leader
            isr = tuple(x for x in c.isr if x != r)
        if self.variant.controller_isr_change_bumps_epoch:
            c.leader_epoch += 1
            if c.leader_epoch <= c.highest_epoch:
                self.oracle.find("UniqueLeaderPerEpoch", f"the controller reused leader epoch {c.leader_epoch}")
            c.highest_epoch = max(c.highest_epoch, c.leader_epoch)
        c.leader, c.isr = leader, isr
        c.partition_epoch += 1
        self._event("IsrChange", by="controller", isr=list(isr), epoch=c.leader_epoch)
        to = ((leader,) if leader is not None else ()) + tuple(x for x in self.assignment if x != leader)
        self._send_leader_and_isr(c.current_request(), to, exclude=r)

    def _send_leader_and_isr(self, request: LeaderAndIsrRequest, to: tuple[int, ...], exclude: int | None) -> None:
        """Deliver to ``to`` now, in order; every other live replica gets it later (pending)."""
        for r in self.assignment:
            rep = self.replicas[r]
            if r == exclude or not rep.alive or r in to:
                continue
            rep.pending_requests.append(request)
        for r in to:
            if r != exclude and self._live(r):
                self._process_leader_and_isr(self.replicas[r], request)

    # =====================================================================================
    # LeaderAndIsr on a replica
    # =====================================================================================

    def _on_leader_and_isr(self, step: LeaderAndIsr) -> None:
        rep = self.replicas[step.replica]
        if not rep.alive:
            self._error("REPLICA_NOT_AVAILABLE")
            return
        newer = [q for q in rep.pending_requests if q.leader_epoch > rep.leader_epoch]
        if step.epoch is not None:
            if step.epoch <= rep.leader_epoch:
                self._error("STALE_CONTROLLER_EPOCH")
                return
            newer = [q for q in newer if q.leader_epoch == step.epoch]
        if not newer:
            self._error("STALE_CONTROLLER_EPOCH" if step.epoch is None else "UNKNOWN_LEADER_AND_ISR_EPOCH")
            return
        self._process_leader_and_isr(rep, max(newer, key=lambda q: q.leader_epoch))

    def _process_leader_and_isr(self, rep: Replica, request: LeaderAndIsrRequest) -> None:
        if request.leader_epoch <= rep.leader_epoch:
            self._error("STALE_CONTROLLER_EPOCH")  # a replica ignores epochs <= its own
            return
        rep.pending_requests = [q for q in rep.pending_requests if q.leader_epoch > request.leader_epoch]
        rep.processed_leader_and_isr = True
        if request.leader is None:
            self._stop_leading(rep)
            rep.role, rep.believed_leader, rep.leader_epoch = NO_ROLE, None, request.leader_epoch
            rep.fetch_state = None
        elif request.leader == rep.id:
            self._become_leader(rep, request)
        else:
            self._become_follower_and_truncate(rep, request)

    def _become_leader(self, rep: Replica, request: LeaderAndIsrRequest) -> None:
        """BecomeLeader: HW keeps its (possibly stale) value; a leader never truncates."""
        new_leader = rep.role != LEADER
        rep.leader_epoch = request.leader_epoch
        rep.believed_leader, rep.role = rep.id, LEADER
        rep.fresh_after_restart, rep.fetch_state, rep.last_response_hw = False, None, None
        followers = [f for f in self.assignment if f != rep.id]
        if new_leader:
            self._generation += 1
            rep.leadership = LeaderState(
                generation=self._generation,
                since_ms=self.now_ms,
                isr=request.isr,
                partition_epoch=request.partition_epoch,
                epoch_start_offset=rep.leo,
                remote_leo={f: UNKNOWN_OFFSET for f in followers},
                last_caught_up_ms={f: None for f in followers},
                last_fetch_leader_leo={f: None for f in followers},
                last_fetch_ms={f: None for f in followers},
                highest_hw=rep.hw,
            )
        else:
            ls = rep.leadership
            if self.variant.reset_remote_leo_on_new_epoch:
                ls.forget_followers(self.now_ms)
            ls.isr, ls.partition_epoch, ls.epoch_start_offset = request.isr, request.partition_epoch, rep.leo
        if self.variant.assign_epoch_on_election and rep.cache.assign(rep.leader_epoch, rep.leo):
            self.oracle.on_cache_changed(rep)
        self._event("BecomeLeader", replica=rep.id, epoch=rep.leader_epoch, new_leader=new_leader)
        self.oracle.on_presumer_hw(rep)
        self._maybe_increment_high_watermark(rep)

    def _skip_become_follower(self, rep: Replica, request: LeaderAndIsrRequest) -> bool:
        """``Partition.makeFollower`` returns false: same leader, so the fetcher keeps going."""
        if rep.believed_leader != request.leader or rep.fresh_after_restart or rep.role != FOLLOWER:
            return False
        rule = self.variant.skip_if_same_leader
        if rule == "same_leader":
            return True
        if rule == "same_leader_and_epoch_le_plus1":
            return request.leader_epoch <= rep.leader_epoch + 1
        if rule == "same_epoch":
            return request.leader_epoch == rep.leader_epoch
        return False

    def _become_follower_and_truncate(self, rep: Replica, request: LeaderAndIsrRequest) -> None:
        if self._skip_become_follower(rep, request):
            rep.leader_epoch = request.leader_epoch
            self._event("BecomeFollower", replica=rep.id, leader=request.leader, epoch=request.leader_epoch, skipped=True)
            return
        self._stop_leading(rep)
        rep.believed_leader, rep.leader_epoch, rep.role = request.leader, request.leader_epoch, FOLLOWER
        rep.fresh_after_restart = False
        self._event("BecomeFollower", replica=rep.id, leader=request.leader, epoch=request.leader_epoch, skipped=False)
        if self.variant.trunc_rule == "hw":
            self._truncate_to(rep, rep.hw, "hw")  # LogManager.truncateTo(partition -> HW)
            rep.fetch_state = FETCHING
        else:
            rep.fetch_state = TRUNCATING
            self._maybe_truncate(rep)

    def _stop_leading(self, rep: Replica, answer: str = "NOT_LEADER") -> None:
        """Leadership ends: parked acks=all produces get ``answer`` (NOT_LEADER on demotion,
        REQUEST_TIMED_OUT when the broker stops)."""
        if rep.leadership is not None:
            for ack in rep.leadership.pending_acks:
                self._error(answer, step=ack.step)
            rep.leadership = None
            self.oracle.on_presumer_ended(rep)

    # =====================================================================================
    # the follower's truncation phase
    # =====================================================================================

    def _leader_answer_error(self, follower: Replica) -> str | None:
        """Why the believed leader cannot answer Fetch / OffsetsForLeaderEpoch now, if it cannot."""
        leader = self.replicas.get(follower.believed_leader)
        if leader is None or not leader.alive:
            return "LEADER_NOT_AVAILABLE"
        if leader.role != LEADER:
            return "NOT_LEADER"
        if self.variant.fencing:
            if follower.leader_epoch < leader.leader_epoch:
                return "FENCED_LEADER_EPOCH"
            if follower.leader_epoch > leader.leader_epoch:
                return "UNKNOWN_LEADER_EPOCH"
        return None

    def _maybe_truncate(self, rep: Replica) -> bool:
        """Run the truncation phase if the leader can answer; returns True once Fetching.

        Fires on become-follower and, while the follower is Truncating, before every fetch.
        """
        error = self._leader_answer_error(rep)
        if error is not None:
            self._error(error)
            return False
        leader = self.replicas[rep.believed_leader]
        if self.variant.trunc_rule == "kip101":
            # ReplicaFetcherThread.maybeTruncate (0.11): one v0 round, HW fallback.
            _, end = leader.cache.end_offset_for(rep.cache.latest_epoch(), leader.leo, "v0")
            if end == UNDEFINED_EPOCH_OFFSET:
                self._truncate_to(rep, rep.hw, "fallback-to-hw")
            elif end < rep.leo:
                self._truncate_to(rep, end, "epoch-lookup")
        else:
            self._truncate_by_epoch_exchange(rep, leader)
        rep.fetch_state = FETCHING
        return True

    def _truncate_by_epoch_exchange(self, rep: Replica, leader: Replica) -> None:
        """AbstractFetcherThread.getOffsetTruncationState, iterated as KIP-279 describes."""
        version = self.variant.end_offset_for
        for _ in range(len(rep.cache) + 2):
            leader_epoch, leader_end = leader.cache.end_offset_for(rep.cache.latest_epoch(), leader.leo, version)
            if leader_end == UNDEFINED_EPOCH_OFFSET:
                self._truncate_to(rep, rep.hw, "fallback-to-hw")
                return
            if leader_epoch == UNDEFINED_EPOCH:  # the leader answered with the v0 protocol
                self._truncate_to(rep, min(leader_end, rep.leo), "epoch-lookup")
                return
            own_epoch, own_end = rep.cache.end_offset_for(leader_epoch, rep.leo, version)
            if own_end == UNDEFINED_EPOCH_OFFSET:
                self._truncate_to(rep, min(leader_end, rep.leo), "epoch-lookup")
                return
            if own_epoch != leader_epoch:
                self._truncate_to(rep, min(own_end, rep.leo), "epoch-lookup")
                continue
            self._truncate_to(rep, min(leader_end, own_end, rep.leo), "epoch-lookup")
            return
        raise EmulatorBug(f"replica {rep.id}: the KIP-279 truncation loop did not terminate")

    def _truncate_to(self, rep: Replica, offset: int, rule: str) -> None:
        """``UnifiedLog.truncateTo``: cut the log to ``min(offset, LEO)``; always trims the cache.

        The cache is trimmed from ``offset`` even when ``offset >= LEO`` (that removes a
        leader's election-time entry and ends the KIP-279 loop); HW and recovery point are
        capped at ``offset``.
        """
        if offset < self.compacted_offset:
            self._error("BELOW_COMPACTED_PREFIX")
            offset = self.compacted_offset
        before = rep.leo
        new_leo = min(offset, before)
        if new_leo < before:
            del rep.log[new_leo:]
            self.oracle.on_truncate(rep)
            self._event("Truncation", replica=rep.id, from_leo=before, to=new_leo, rule=rule)
        if rep.cache.truncate_from_end(offset):
            self.oracle.on_cache_changed(rep)
        rep.hw = min(rep.hw, offset)
        rep.recovery_point = min(rep.recovery_point, offset)

    def _append(self, rep: Replica, base: int, records: list[tuple[int, str]]) -> None:
        """Append at ``base`` (which must be the LEO), assigning each new epoch in the cache."""
        previous = rep.leo
        rep.log.extend(records)
        last_epoch = None
        changed = False
        for i, (epoch, _) in enumerate(records):
            if epoch != last_epoch:
                changed |= rep.cache.assign(epoch, base + i)
                last_epoch = epoch
        self.oracle.on_append(rep, base, previous)
        if changed:
            self.oracle.on_cache_changed(rep)

    # =====================================================================================
    # leader actions
    # =====================================================================================

    def _on_produce(self, step: Produce) -> None:
        """LeaderWrite: any replica presuming leadership appends, stamping its own epoch."""
        target = self.controller.leader if step.replica is None else step.replica
        if target is None:
            self._error("LEADER_NOT_AVAILABLE")
            return
        leader = self.replicas[target]
        if not leader.alive or leader.role != LEADER:
            self._error("NOT_LEADER")
            return
        acks = step.acks or self.config.acks
        ls = leader.leadership
        if acks == "all" and len(ls.isr) < self.config.min_insync_replicas:
            self._error("NOT_ENOUGH_REPLICAS")  # checked before the append
            return
        base = leader.leo
        self._append(leader, base, [(leader.leader_epoch, v) for v in step.values])
        if acks == "all":
            ls.pending_acks.append(PendingAck(self.step_number, base, leader.leo - 1))
        self._maybe_increment_high_watermark(leader)

    def _maybe_increment_high_watermark(self, leader: Replica) -> bool:
        """Partition.maybeIncrementLeaderHW: HW = min LEO over the ISR and caught-up followers.

        Triggered when the ISR changes or any replica's LEO changes (produce, fetch, election).
        An UNKNOWN remote LEO (-1) blocks any advance; the leader never lowers its HW.
        Returns True if the HW moved.
        """
        ls = leader.leadership
        if self.variant.strict_min_isr_hw and len(ls.isr) < self.config.min_insync_replicas:
            return False
        candidates = [leader.leo]
        for f, remote in ls.remote_leo.items():
            if f in ls.isr or self._caught_up(ls, f):
                candidates.append(remote)
        new_hw = min(candidates)
        if new_hw <= leader.hw:
            return False
        leader.hw = new_hw
        ls.highest_hw = max(ls.highest_hw, new_hw)
        self.oracle.on_presumer_hw(leader)
        self._complete_delayed_produces(leader)
        return True

    def _caught_up(self, ls: LeaderState, f: int) -> bool:
        last = ls.last_caught_up_ms[f]
        return last is not None and self.now_ms - last <= self.config.replica_lag_time_max_ms

    def _complete_delayed_produces(self, leader: Replica) -> None:
        """checkEnoughReplicasReachOffset: answer parked acks=all produces the HW now covers."""
        ls = leader.leadership
        waiting = []
        for ack in ls.pending_acks:
            if leader.hw <= ack.last_offset:
                waiting.append(ack)
            elif len(ls.isr) >= self.config.min_insync_replicas:
                self.oracle.on_ack(leader, ack.first_offset, ack.last_offset, ack.step, ls.isr, self.config.min_insync_replicas)
                self._event("Ack", produce_step=ack.step, offsets=[ack.first_offset, ack.last_offset])
            else:
                self._error("NOT_ENOUGH_REPLICAS_AFTER_APPEND", step=ack.step)
        ls.pending_acks = waiting

    def _leader_write_isr(self, leader: Replica, isr: tuple[int, ...], why: str) -> bool:
        """Write a leader-initiated ISR change (ZK CAS on the partition epoch); no epoch bump."""
        c, ls = self.controller, leader.leadership
        if c.leader != leader.id or c.partition_epoch != ls.partition_epoch:
            return False  # stale zkVersion: a zombie or a leader that missed a LeaderAndIsr
        c.isr = isr
        c.partition_epoch += 1
        ls.isr, ls.partition_epoch = isr, c.partition_epoch
        self._event("IsrChange", by="leader", why=why, isr=list(isr), epoch=c.leader_epoch)
        return True

    def _maybe_expand_isr(self, leader: Replica, f: int) -> bool:
        """Add ``f`` once its LEO reaches the HW (and, with KAFKA-7128, the epoch start)."""
        ls = leader.leadership
        remote = ls.remote_leo[f]
        if f in ls.isr or remote < leader.hw:
            return False
        if self.variant.isr_join_requires_epoch_start and remote < ls.epoch_start_offset:
            return False
        return self._leader_write_isr(leader, tuple(sorted(ls.isr + (f,))), "expand")

    def _on_shrink_isr(self, step: ShrinkIsr) -> None:
        """LeaderShrinkIsr: the controller's leader drops a lagging follower (no epoch bump)."""
        c = self.controller
        leader = self.replicas[c.leader] if c.leader is not None else None
        if leader is None or not leader.alive or leader.role != LEADER:
            self._error("NOT_LEADER")
            return
        f = step.replica
        ls = leader.leadership
        if f == leader.id:
            self._error("INVALID_REQUEST")
            return
        if f not in ls.isr:
            self._error("REPLICA_NOT_IN_ISR")
            return
        if not self._leader_write_isr(leader, tuple(x for x in ls.isr if x != f), "shrink"):
            self._error("INVALID_UPDATE_VERSION")
            return
        ls.last_caught_up_ms[f] = None  # lagging until it fetches up to the LEO again
        ls.last_fetch_leader_leo[f] = None
        self._maybe_increment_high_watermark(leader)

    def _on_tick(self, step: Tick) -> None:
        """Emulated time passes; every presumed leader runs maybeShrinkIsr."""
        self.now_ms += step.ms
        for rid in sorted(self.replicas):
            rep = self.replicas[rid]
            if rep.alive and rep.role == LEADER:
                self._maybe_shrink_isr(rep)

    def _maybe_shrink_isr(self, leader: Replica) -> bool:
        """Drop ISR followers not caught up for longer than replica.lag.time.max.ms."""
        ls = leader.leadership
        lag_max = self.config.replica_lag_time_max_ms
        out_of_sync = [
            f for f in ls.isr
            if f != leader.id
            and self.now_ms - (ls.last_caught_up_ms[f] if ls.last_caught_up_ms[f] is not None else ls.since_ms) > lag_max
        ]
        if not out_of_sync:
            return False
        if not self._leader_write_isr(leader, tuple(f for f in ls.isr if f not in out_of_sync), "lag"):
            return False
        self._maybe_increment_high_watermark(leader)
        return True

    # =====================================================================================
    # follower fetch
    # =====================================================================================

    def _on_fetch(self, step: Fetch) -> None:
        """FollowerReplicate: one Fetch round trip (the response may be lost)."""
        f = self.replicas[step.replica]
        if not f.alive:
            self._error("REPLICA_NOT_AVAILABLE")
            return
        if f.role != FOLLOWER:
            self._error("NOT_FOLLOWER")
            return
        if f.fetch_state == TRUNCATING and not self._maybe_truncate(f):
            return
        error = self._leader_answer_error(f)
        if error is not None:
            self._error(error)
            return
        leader = self.replicas[f.believed_leader]
        fetch_offset = f.leo
        if fetch_offset > leader.leo:
            self._error("OFFSET_OUT_OF_RANGE")
            self._handle_offset_out_of_range(f, leader)
            return
        self._update_follower_fetch_state(leader, f.id, fetch_offset)
        self._maybe_expand_isr(leader, f.id)
        self._maybe_increment_high_watermark(leader)
        end = leader.leo if step.max_records is None else min(leader.leo, fetch_offset + step.max_records)
        records = leader.log[fetch_offset:end]
        leader_hw = leader.hw
        if step.response == "lost":
            return
        if records:
            self._append(f, fetch_offset, records)
        f.hw = min(f.leo, leader_hw)
        f.last_response_hw = leader_hw

    def _update_follower_fetch_state(self, leader: Replica, f: int, fetch_offset: int) -> None:
        """Replica.updateLogReadResult: the remote LEO is the fetch offset, *at request time*."""
        ls = leader.leadership
        ls.remote_leo[f] = fetch_offset
        if fetch_offset >= leader.leo:
            ls.last_caught_up_ms[f] = self.now_ms
        elif ls.last_fetch_leader_leo[f] is not None and fetch_offset >= ls.last_fetch_leader_leo[f]:
            ls.last_caught_up_ms[f] = ls.last_fetch_ms[f]
        ls.last_fetch_leader_leo[f] = leader.leo
        ls.last_fetch_ms[f] = self.now_ms

    def _handle_offset_out_of_range(self, f: Replica, leader: Replica) -> None:
        """The leader has less data: halt (0.10 – 2.0, unclean disabled) or truncate to its LEO."""
        if self.variant.halt_on_out_of_range and not self.config.unclean_leader_election:
            self._lose_memory(f)
            f.alive, f.halted = False, True
            self._error("FollowerHalted")
            self._event("FollowerHalted", replica=f.id)
            return
        self._truncate_to(f, leader.leo, "out-of-range")

    # =====================================================================================
    # durability and faults
    # =====================================================================================

    def _on_checkpoint_hw(self, step: CheckpointHw) -> None:
        if step.replica is None:
            for r in self.replicas.values():
                if r.alive:
                    r.hw_checkpoint = r.hw
            return
        rep = self.replicas[step.replica]
        if not rep.alive:
            self._error("REPLICA_NOT_AVAILABLE")
            return
        rep.hw_checkpoint = rep.hw

    def _on_flush(self, step: Flush) -> None:
        rep = self.replicas[step.replica]
        if not rep.alive:
            self._error("REPLICA_NOT_AVAILABLE")
            return
        offset = rep.leo if step.offset is None else min(step.offset, rep.leo)
        if offset < self.compacted_offset:
            self._error("BELOW_COMPACTED_PREFIX")
            offset = self.compacted_offset
        rep.recovery_point = offset

    def _lose_memory(self, rep: Replica) -> None:
        """A stopped broker forgets everything that was only in memory (§E.2)."""
        self._stop_leading(rep, answer="REQUEST_TIMED_OUT")
        rep.role, rep.believed_leader, rep.leader_epoch = NO_ROLE, None, -1
        rep.fetch_state, rep.pending_requests, rep.last_response_hw = None, [], None
        if self.controller.leader == rep.id:
            self.controller.leader = None  # no epoch bump, ISR unchanged

    def _on_crash(self, step: Crash) -> None:
        rep = self.replicas[step.replica]
        if rep.alive:
            self._lose_memory(rep)
            rep.alive = False
            self._event("Crash", replica=rep.id, mode=step.mode)
        elif step.mode == "process":
            self._error("REPLICA_NOT_AVAILABLE")
            return
        if step.mode == "power" and rep.recovery_point < rep.leo:
            # Any unflushed suffix may be lost; the emulator loses all of it.
            before = rep.leo
            self.oracle.on_power_loss(rep, rep.recovery_point)
            del rep.log[rep.recovery_point:]
            self.oracle.on_truncate(rep)
            self._event("PowerLoss", replica=rep.id, from_leo=before, to=rep.leo)

    def _on_restart(self, step: Restart) -> None:
        rep = self.replicas[step.replica]
        if rep.alive:
            self._error("REPLICA_ALREADY_RUNNING")
            return
        rep.alive, rep.halted = True, False
        rep.hw = min(rep.hw_checkpoint, rep.leo)
        rep.recovery_point = min(rep.recovery_point, rep.leo)
        if rep.cache.truncate_from_end(rep.leo):
            self.oracle.on_cache_changed(rep)
        rep.fresh_after_restart = True
        rep.processed_leader_and_isr = False
        current = self.controller.current_request()
        rep.pending_requests = [current] if current is not None else []
        self._event("Restart", replica=rep.id, hw=rep.hw, leo=rep.leo)


_HANDLERS = {
    Elect: Partition._on_elect,
    LeaderAndIsr: Partition._on_leader_and_isr,
    Produce: Partition._on_produce,
    Fetch: Partition._on_fetch,
    ShrinkIsr: Partition._on_shrink_isr,
    ControllerRemove: Partition._on_controller_remove,
    CheckpointHw: Partition._on_checkpoint_hw,
    Flush: Partition._on_flush,
    Crash: Partition._on_crash,
    Restart: Partition._on_restart,
    Tick: Partition._on_tick,
}
