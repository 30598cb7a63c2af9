"""One broker's copy of the partition: roles, fetch states, the replica and its leader-only state."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

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


@dataclass(frozen=True, slots=True)
class PendingAck:
    """An acks=all produce parked until the HW covers ``last_offset`` (a DelayedProduce)."""

    step: int
    first_offset: int
    last_offset: int


@dataclass
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

    @property
    def leo(self) -> int:
        return len(self.log)

    @property
    def presumes_leadership(self) -> bool:
        return self.alive and self.role is Role.LEADER
