"""One broker's copy of the partition: roles, fetch states, the replica and its leader-only state."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ._build import mypyc_attr
from .epoch_cache import LeaderEpochCache
from .log import Log

UNKNOWN_OFFSET = -1  # a leader's view of a follower it has not heard from in this leadership
NEVER = None  # a lag time that was never set: distinct from time 0 (the lag clock starts at 0)


class Role(str, Enum):
    """What a replica presumes it is (Kafka: leader / follower / no partition state)."""

    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"


class FetchState(str, Enum):
    """``AbstractFetcherThread``'s per-partition state: truncate first, then fetch."""

    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    # KRaft: the partition's replicas in this change when a reassignment changed them (): the
    # scenario's replicas, ``Controller.assignment``); a broker not in them deletes its copy.
    replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """A leader's proposed ISR in flight to the controller (Partition.scala's PendingExpandIsr /
    PendingShrinkIsr): the leader and partition epochs it was based on, and for each replica it
    adds the broker epoch of the fetch that judged it caught up (-1: not checked, KIP-903)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    added_broker_epochs: tuple[tuple[int, int], ...]
    why: str
    # The controller's error when it rejected this request and the leader stays in the pending
    # state until new metadata reaches it (Partition.handleAlterPartitionError: FENCED_LEADER_EPOCH,
    # INVALID_UPDATE_VERSION, INVALID_REQUEST); "" while it awaits the answer.
    rejected: str = ""


@dataclass(frozen=True, slots=True)
class PendingAck:
    """An acks=all produce parked until the HW covers ``last_offset`` (a DelayedProduce)."""

    step: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class LeaderState:
    """In-memory state a replica keeps only while it presumes leadership (Kafka keeps it per
    remote ``Replica``: LEO, lastCaughtUpTimeMs, lastFetchLeaderLogEndOffset, lastFetchTimeMs)."""

    generation: int
    isr: tuple[int, ...]
    partition_epoch: int
    epoch_start_offset: int
    remote_leo: dict[int, int]
    last_caught_up_ms: dict[int, int | None]  # NEVER (None) or a time on the lag clock
    last_fetch_leader_leo: dict[int, int]  # UNKNOWN_OFFSET until the first fetch of this leadership
    last_fetch_ms: dict[int, int | None]
    pending_acks: list[PendingAck] = field(default_factory=list)
    highest_hw: int = 0
    remote_broker_epoch: dict[int, int] = field(default_factory=dict)  # carried by each follower's last fetch (KIP-903)
    in_flight: AlterPartitionRequest | None = None  # the AlterPartition awaiting the controller's answer

    def copy(self) -> "LeaderState":
        """An independent copy (the dicts and the list a step mutates are copied)."""
        return LeaderState(self.generation, self.isr, self.partition_epoch, self.epoch_start_offset, dict(self.remote_leo),
                           dict(self.last_caught_up_ms), dict(self.last_fetch_leader_leo), dict(self.last_fetch_ms),
                           list(self.pending_acks), self.highest_hw, dict(self.remote_broker_epoch), self.in_flight)

    @property
    def awaiting_answer(self) -> bool:
        """An AlterPartition is in flight and the controller has not answered it yet (a rejected one
        the leader keeps while it waits for metadata is answered)."""
        return self.in_flight is not None and not self.in_flight.rejected

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the HW is computed over: the ISR, plus what an AlterPartition in flight adds
        (a shrink counts its removed replicas until the controller accepts it)."""
        if self.in_flight is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.in_flight.isr)))


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class Replica:
    """One broker's copy of the partition: its log, HW, checkpoints and epoch cache."""

    __slots__ = ("id", "log", "hw", "hw_checkpoint", "recovery_point", "cache", "alive", "halted", "role",
                 "believed_leader", "leader_epoch", "partition_epoch", "fresh_after_restart",
                 "processed_leader_and_isr", "fetch_state", "pending_requests", "last_response_hw", "leadership",
                 "broker_epoch", "clean_shutdown_epoch")

    def __init__(self, broker_id: int, cache_semantics: str) -> None:
        self.id = broker_id
        self.log = Log()  # (epoch, value) records by absolute offset
        self.hw = 0
        self.hw_checkpoint = 0  # replication-offset-checkpoint
        self.recovery_point = 0  # offsets below it are fsync'ed
        self.cache = LeaderEpochCache(cache_semantics)
        self.alive = True
        self.halted = False
        self.role = Role.NONE
        self.believed_leader: int | None = None
        self.leader_epoch = -1  # the epoch of the last LeaderAndIsr it processed
        self.partition_epoch = -1  # ... and its partition epoch (zkVersion)
        self.fresh_after_restart = True  # a new Partition object: no known leader yet
        self.processed_leader_and_isr = False  # since the last restart
        self.fetch_state: FetchState | None = None
        self.pending_requests: list[LeaderAndIsrRequest] = []
        self.last_response_hw: int | None = None
        self.leadership: LeaderState | None = None
        self.broker_epoch = -1  # KRaft: the epoch of its current registration (-1: none)
        self.clean_shutdown_epoch: int | None = None  # KRaft: the clean-shutdown file (written by a shutdown step)

    def copy(self) -> "Replica":
        """An independent copy: log, cache, pending requests and leader state copied; scalars,
        enums and frozen requests shared."""
        new = Replica.__new__(Replica)
        new.id, new.log, new.hw, new.hw_checkpoint = self.id, self.log.copy(), self.hw, self.hw_checkpoint
        new.recovery_point, new.cache, new.alive, new.halted = self.recovery_point, self.cache.copy(), self.alive, self.halted
        new.role, new.believed_leader, new.leader_epoch = self.role, self.believed_leader, self.leader_epoch
        new.partition_epoch, new.fresh_after_restart = self.partition_epoch, self.fresh_after_restart
        new.processed_leader_and_isr, new.fetch_state = self.processed_leader_and_isr, self.fetch_state
        new.pending_requests, new.last_response_hw = list(self.pending_requests), self.last_response_hw
        new.leadership = None if self.leadership is None else self.leadership.copy()
        new.broker_epoch, new.clean_shutdown_epoch = self.broker_epoch, self.clean_shutdown_epoch
        return new

    @property
    def leo(self) -> int:
        return self.log.end

    @property
    def presumes_leadership(self) -> bool:
        return self.alive and self.role is Role.LEADER
