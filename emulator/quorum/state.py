"""The metadata quorum's state: records, messages, each server's state and the leader's state.

Kafka's words (Kafka 3.9.0, ``raft/src/main/java/org/apache/kafka/raft/``): a server's role is
its ``QuorumState`` epoch state -- ``unattached`` (``UnattachedState``; *voted* is an unattached
state with a ``votedKey`` since 3.9, ``QuorumState.isUnattachedAndVoted``), ``candidate``,
``leader``, ``follower``, ``resigned``, and ``prospective`` (KIP-996, 4.x).  A server is a
*voter* when its (id, directory id) is in the last voter set of its own log, else an
*observer* (``QuorumState.isVoter``).  ``ElectionState`` is the quorum-state file's content:
what a crash keeps besides the flushed log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Union

from ..epoch_cache import LeaderEpochCache

ReplicaKey = tuple[int, Union[int, None]]  # (node id, directory id); None: static voters have no directory id


class QuorumRole(str, Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"
    STOPPED = "stopped"  # not a Kafka state: the process is down

    def __str__(self) -> str:
        return self.value


class ControlType(str, Enum):
    DATA = "data"
    LEADER_CHANGE = "LeaderChange"
    VOTERS = "VotersRecord"


@dataclass(frozen=True, slots=True)
class QuorumRecord:
    """One record of the metadata log (its offset is its index); control records carry their kind."""

    epoch: int
    value: str = ""
    control: ControlType = ControlType.DATA
    voters: tuple[ReplicaKey, ...] = ()  # a VotersRecord's voter set (sorted)
    # a VotersRecord's endpoints: each voter's listeners (their configuration's generation, 1 as formatted),
    # in ``voters`` order; () when every voter has its first listeners (VotersRecord.Voter.endpoints)
    endpoints: tuple[int, ...] = ()

    def listeners_of(self, node: int) -> int | None:
        """The listeners this VotersRecord holds for voter ``node`` (None: not a voter here)."""
        for i, key in enumerate(self.voters):
            if key[0] == node:
                return self.endpoints[i] if self.endpoints else 1
        return None


@dataclass(frozen=True, slots=True)
class ElectionState:
    """The quorum-state file (``FileQuorumStateStore``): epoch, voted key, leader id."""

    epoch: int
    voted_key: ReplicaKey | None = None
    leader: int | None = None


# -- messages (one per request and response kind; fields as Kafka's RPCs name them) -----------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int
    candidate_key: ReplicaKey
    last_offset_epoch: int
    last_offset: int
    voter_key: ReplicaKey  # the receiver as the candidate's voter set names it (KIP-853)
    pre_vote: bool = False
    correlation_id: int = 0  # the request's (Kafka's RaftRequest correlationId); a response carries its request's


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: str
    leader_epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool = False
    endpoints: bool = True  # the named leader's endpoints are in the message (KIP-853 NodeEndpoints)
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_epoch: int
    leader_id: int
    voter_key: ReplicaKey
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: str
    leader_epoch: int
    leader_id: int | None
    endpoints: bool = True  # the named leader's endpoints are in the message (KIP-853 NodeEndpoints)
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: str
    leader_epoch: int
    leader_id: int | None
    endpoints: bool = True  # the named leader's endpoints are in the message (KIP-853 NodeEndpoints)
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_key: ReplicaKey
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_records: int | None = None
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: str
    leader_epoch: int
    leader_id: int | None
    records: tuple[QuorumRecord, ...] = ()
    base_offset: int = 0
    high_watermark: int = -1  # -1: the leader knows none yet
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    endpoints: bool = True  # the named leader's endpoints are in the message (KIP-853 NodeEndpoints)
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """UpdateRaftVoter (KIP-853): a voter's key, its epoch and its local listeners (its kraft.version range is
    every server's: one software version here)."""
    voter_key: ReplicaKey
    current_leader_epoch: int
    listeners: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error: str
    leader_epoch: int
    leader_id: int | None
    # 3.9.0 handleUpdateVoterResponse reads the leader's endpoints only when its host is empty, i.e. never
    endpoints: bool = False
    correlation_id: int = 0


Message = Union[VoteRequest, VoteResponse, BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
                EndQuorumEpochResponse, FetchRequest, FetchResponse, UpdateVoterRequest, UpdateVoterResponse]

# -- effects: what a step did, as the invariant checker needs it --------------------------------


class BecameLeader(NamedTuple):
    server: int
    epoch: int


class HighWatermarkAdvanced(NamedTuple):
    """The leader ``server`` of ``epoch`` moved its high watermark to ``hw``."""

    server: int
    epoch: int
    hw: int


class VotersAppended(NamedTuple):
    """The leader ``server`` appended a VotersRecord at ``offset``; its previous voter set was at ``previous``."""

    server: int
    offset: int
    previous: int


class Truncated(NamedTuple):
    server: int
    to: int


QuorumEffect = Union[BecameLeader, HighWatermarkAdvanced, VotersAppended, Truncated]


@dataclass(slots=True)
class ReplicaState:
    """``LeaderState.ReplicaState``: what the leader knows of one replica's fetches."""

    key: ReplicaKey
    end_offset: int | None = None  # the fetch offset of its last valid fetch
    last_fetch_leader_leo: int = 0  # the leader's LEO at that fetch (lastFetchLeaderLogEndOffset)
    caught_up: bool = False  # lastCaughtUpTimestamp > 0


@dataclass(slots=True)
class PendingVoterChange:
    """``AddVoterHandlerState`` / ``RemoveVoterHandlerState``: a change appended at ``offset``, unanswered."""

    operation: str  # "add_voter" | "remove_voter"
    voter: ReplicaKey
    offset: int


@dataclass(slots=True)
class LeaderState:
    """Kafka's ``LeaderState``: the epoch start offset, the high watermark, each replica's fetch state."""

    epoch: int
    epoch_start_offset: int
    granting_voters: tuple[int, ...]
    high_watermark: int | None = None  # Optional.empty() until a record of this epoch is committed
    # LeaderState.voterStates (by the voter's key) and observerStates (by the fetcher's key): see
    # Server.replica_state_key
    replicas: dict[ReplicaKey, ReplicaState] = field(default_factory=dict)
    pending: PendingVoterChange | None = None
    acknowledged: set[int] = field(default_factory=set)
    resign_requested: bool = False  # LeaderState.requestResign: the leader resigns at its next poll (pollLeader)
    fetched_voters: set[int] = field(default_factory=set)  # LeaderState.fetchedVoters (check quorum)


@dataclass(slots=True)
class Server:
    """One KRaft controller (or observer) of the ``__cluster_metadata-0`` partition."""

    id: int
    directory_id: int
    bootstrap_voters: tuple[ReplicaKey, ...]  # static voters, or the bootstrap checkpoint (offset -1)
    role: QuorumRole = QuorumRole.UNATTACHED
    epoch: int = 0
    voted_key: ReplicaKey | None = None
    leader: int | None = None
    log: list[QuorumRecord] = field(default_factory=list)
    flushed: int = 0  # records below this offset survive a power failure
    hw: int = 0  # the log's high watermark (ReplicatedLog.highWatermark), not persisted
    cache: LeaderEpochCache = field(default_factory=lambda: LeaderEpochCache("v2"))
    state_file: ElectionState = field(default_factory=lambda: ElectionState(0))
    votes_granted: set[int] = field(default_factory=set)  # candidate / prospective
    votes_rejected: set[int] = field(default_factory=set)
    election_voters: tuple[ReplicaKey, ...] = ()  # the voter set the candidacy counts
    backing_off: bool = False
    has_fetched_from_leader: bool = False  # a follower's successful fetch in this epoch (KIP-996 pre-vote)
    leader_state: LeaderState | None = None
    # RequestManager: per destination, the correlation id of the one request whose response is expected
    # (ConnectionState.inFlightCorrelationId); every transition but a granted vote forgets them (resetAll)
    expected: dict[int, int] = field(default_factory=dict)
    next_correlation: int = 0  # NetworkChannel.newCorrelationId
    leader_endpoints: bool = False  # EpochState.leaderEndpoints() not empty (a follower's; an unattached's never)
    # KafkaRaftClient.shutdown(timeoutMs) was called (its GracefulShutdown is set and not finished)
    shutting_down: bool = False
    listeners: int = 1  # its listeners' configuration (a generation: 1 as formatted, + 1 at each change_listeners)

    @property
    def alive(self) -> bool:
        return self.role is not QuorumRole.STOPPED

    @property
    def key(self) -> ReplicaKey:
        return (self.id, self.directory_id)

    @property
    def leo(self) -> int:
        return len(self.log)

    def last_epoch(self) -> int:
        return self.log[-1].epoch if self.log else 0

    def last_voters(self) -> tuple[int, tuple[ReplicaKey, ...]]:
        """``(offset, voters)`` of the last voter set in the log, else of the bootstrap (-1)
        (``KRaftControlRecordStateMachine.lastVoterSetEntry``)."""
        for offset in range(len(self.log) - 1, -1, -1):
            if self.log[offset].control is ControlType.VOTERS:
                return offset, self.log[offset].voters
        return -1, self.bootstrap_voters

    def committed_voters(self) -> tuple[ReplicaKey, ...]:
        """The last voter set below this server's high watermark (committed as far as it knows),
        else the bootstrap's."""
        for offset in range(min(self.hw, len(self.log)) - 1, -1, -1):
            if self.log[offset].control is ControlType.VOTERS:
                return self.log[offset].voters
        return self.bootstrap_voters

    def voter_listeners(self, node: int) -> int | None:
        """The listeners of voter ``node`` in this server's last voter set (a bootstrap voter's are its first)."""
        for offset in range(len(self.log) - 1, -1, -1):
            if self.log[offset].control is ControlType.VOTERS:
                return self.log[offset].listeners_of(node)
        return 1 if any(k[0] == node for k in self.bootstrap_voters) else None

    def voter_node_needs_update(self) -> bool:
        """3.9.0 ``VoterSet.voterNodeNeedsUpdate(localVoterNode)``: this server is a voter of its last voter
        set under its own key, and the node recorded there differs from its local one (its listeners)."""
        return self.is_voter() and self.voter_listeners(self.id) != self.listeners

    def voter_ids(self) -> tuple[int, ...]:
        return tuple(sorted(k[0] for k in self.last_voters()[1]))

    def is_voter(self) -> bool:
        """``QuorumState.isVoter``: the local (id, directory id) is in the last voter set (a static
        voter set has no directory ids: the id alone matches)."""
        return is_voter_key(self.last_voters()[1], self.key)

    def replica_state_key(self, key: ReplicaKey) -> ReplicaKey:
        """Where this server, leading, keeps the fetch state of ``key`` (3.9.0
        ``LeaderState.getOrCreateReplicaState``): under the voter of its last voter set with that id
        when the key matches it (a voter without directory id matches any: static voters), else under
        that very key (an observer's state) -- so a voter back with a new disk fetches as an observer
        and its old copy's offset stays."""
        for voter in self.last_voters()[1]:
            if voter[0] == key[0] and (voter[1] is None or voter[1] == key[1]):
                return voter
        return key

    def voter_key_of(self, node: int) -> ReplicaKey | None:
        for key in self.last_voters()[1]:
            if key[0] == node:
                return key
        return None


def is_voter_key(voters: tuple[ReplicaKey, ...], key: ReplicaKey) -> bool:
    return any(v[0] == key[0] and (v[1] is None or v[1] == key[1]) for v in voters)


def majority(voters: tuple[ReplicaKey, ...]) -> int:
    """``CandidateState.majoritySize``: more than half of the voters."""
    return len(voters) // 2 + 1
