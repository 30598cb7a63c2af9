"""The metadata quorum's steps: one frozen dataclass per kind, and ``QUORUM_STEP_TABLE``.

The table is a ``StepTable`` of ``emulator.step_table`` (one parse / write / describe for both
families); a ``REPLICA`` argument names a server of the quorum (a voter or an observer).  Messages
are explicit: a step that sends a request (``election_timeout``, ``fetch``, ``begin_quorum_epoch``,
``resign``, ``shutdown``) puts it in flight on the link from its sender to its destination;
``deliver`` hands the oldest message of one link to its destination, which answers by putting the
response in flight on the reverse link; ``drop`` loses it.  So a search can reorder and lose every
request and every response.

Every engine reads this table: ``replemu run``, the stream (``emulator.quorum.stream``), ``replemu
explore`` (``emulator.quorum.explore``), shrink and the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union

from ..step_table import Arg, ArgType, CrashMode, StepSpec, StepTable
from ..steps import steps_markdown


class QuorumStepKind(str, Enum):
    """The metadata quorum's step kinds: one row of ``QUORUM_STEP_TABLE`` each."""

    ELECTION_TIMEOUT = "election_timeout"
    DELIVER = "deliver"
    DROP = "drop"
    FETCH = "fetch"
    BEGIN_QUORUM_EPOCH = "begin_quorum_epoch"
    RESIGN = "resign"
    APPEND = "append"
    ADD_VOTER = "add_voter"
    REMOVE_VOTER = "remove_voter"
    CRASH = "crash"
    RESTART = "restart"
    LOSE_DISK = "lose_disk"
    CHECK_QUORUM = "check_quorum"
    SHUTDOWN = "shutdown"
    SHUTDOWN_TIMEOUT = "shutdown_timeout"
    UPDATE_VOTER = "update_voter"
    CHANGE_LISTENERS = "change_listeners"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ElectionTimeout:
    server: int
    kind = QuorumStepKind.ELECTION_TIMEOUT


@dataclass(frozen=True, slots=True)
class Deliver:
    source: int
    destination: int
    kind = QuorumStepKind.DELIVER


@dataclass(frozen=True, slots=True)
class Drop:
    source: int
    destination: int
    kind = QuorumStepKind.DROP


@dataclass(frozen=True, slots=True)
class QuorumFetch:
    server: int
    to: int | None = None
    max_records: int | None = None
    kind = QuorumStepKind.FETCH


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    server: int
    to: int
    kind = QuorumStepKind.BEGIN_QUORUM_EPOCH


@dataclass(frozen=True, slots=True)
class Resign:
    server: int
    epoch: int | None = None
    kind = QuorumStepKind.RESIGN


@dataclass(frozen=True, slots=True)
class Append:
    value: str
    server: int | None = None
    kind = QuorumStepKind.APPEND


@dataclass(frozen=True, slots=True)
class AddVoter:
    voter: int
    server: int | None = None
    kind = QuorumStepKind.ADD_VOTER


@dataclass(frozen=True, slots=True)
class RemoveVoter:
    voter: int
    server: int | None = None
    kind = QuorumStepKind.REMOVE_VOTER


@dataclass(frozen=True, slots=True)
class QuorumCrash:
    server: int
    mode: CrashMode | str = CrashMode.PROCESS  # a str becomes the member (__post_init__)
    kind = QuorumStepKind.CRASH

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", CrashMode(self.mode))


@dataclass(frozen=True, slots=True)
class QuorumRestart:
    server: int
    kind = QuorumStepKind.RESTART


@dataclass(frozen=True, slots=True)
class LoseDisk:
    server: int
    kind = QuorumStepKind.LOSE_DISK


@dataclass(frozen=True, slots=True)
class CheckQuorum:
    server: int
    kind = QuorumStepKind.CHECK_QUORUM


@dataclass(frozen=True, slots=True)
class Shutdown:
    server: int
    kind = QuorumStepKind.SHUTDOWN


@dataclass(frozen=True, slots=True)
class ShutdownTimeout:
    server: int
    kind = QuorumStepKind.SHUTDOWN_TIMEOUT


@dataclass(frozen=True, slots=True)
class UpdateVoter:
    server: int
    kind = QuorumStepKind.UPDATE_VOTER


@dataclass(frozen=True, slots=True)
class ChangeListeners:
    server: int
    kind = QuorumStepKind.CHANGE_LISTENERS


QuorumStep = Union[ElectionTimeout, Deliver, Drop, QuorumFetch, BeginQuorumEpoch, Resign, Append, AddVoter, RemoveVoter,
                   QuorumCrash, QuorumRestart, LoseDisk, CheckQuorum, Shutdown, ShutdownTimeout, UpdateVoter,
                   ChangeListeners]

_SERVER = Arg("server", ArgType.REPLICA, required=True, doc="the server the step happens on")
_LEADER = Arg("server", ArgType.REPLICA, doc="the server the admin client sends to (default: the live leader of the "
              "highest epoch)")
_LINK = (Arg("source", ArgType.REPLICA, required=True, doc="the sender of the message"),
         Arg("destination", ArgType.REPLICA, required=True, doc="its receiver"))

QUORUM_STEP_TABLE: StepTable[QuorumStepKind, QuorumStep] = StepTable(QuorumStepKind, (
    StepSpec(QuorumStepKind.ELECTION_TIMEOUT, ElectionTimeout, (_SERVER,),
             "A voter's election (or fetch) timeout fires: it (a resigned leader too) becomes candidate in epoch + 1, "
             "votes for itself and sends Vote to every other voter. pre_vote: an unattached, follower or candidate "
             "voter becomes prospective in its epoch and sends Vote with PreVote=true; a prospective goes back to "
             "following the leader it knows, else unattached; a resigned leader goes unattached in epoch + 1. "
             "Refused on a leader, an observer or a stopped server."),
    StepSpec(QuorumStepKind.DELIVER, Deliver, _LINK,
             "The oldest message in flight from source to destination arrives; a request is answered at once (the "
             "response is put in flight back). Refused when nothing is in flight on that link."),
    StepSpec(QuorumStepKind.DROP, Drop, _LINK, "The oldest message in flight from source to destination is lost."),
    StepSpec(QuorumStepKind.FETCH, QuorumFetch, (
        _SERVER,
        Arg("to", ArgType.REPLICA, doc="where the Fetch goes (default: the leader the server knows; required when "
            "it knows none, like an observer's fetch to a bootstrap server)"),
        Arg("max_records", ArgType.COUNT, doc="at most this many records in the response"),
    ), "A follower or observer sends Fetch (fetch offset = its LEO, last fetched epoch = its last epoch)."),
    StepSpec(QuorumStepKind.BEGIN_QUORUM_EPOCH, BeginQuorumEpoch, (
        _SERVER, Arg("to", ArgType.REPLICA, required=True, doc="the voter it is sent to"),
    ), "The leader sends BeginQuorumEpoch again (its beginQuorumEpochTimer): a new leader sends one to every "
       "voter by itself."),
    StepSpec(QuorumStepKind.RESIGN, Resign, (
        _SERVER,
        Arg("epoch", ArgType.EPOCH, doc="RaftClient.resign(epoch): an older epoch is ignored, a newer one or a "
            "server that does not lead this epoch is refused; the leader resigns at the end of the step"),
    ), "The leader resigns (graceful shutdown, or RaftClient.resign of its epoch): it becomes resigned in its epoch "
       "and sends EndQuorumEpoch to every other voter, its preferred successors ordered by fetched offset."),
    StepSpec(QuorumStepKind.APPEND, Append, (
        Arg("value", ArgType.STRING, required=True, doc="the record"), _LEADER,
    ), "A client write: the leader appends the record in its epoch and flushes; a non-leader answers "
       "NOT_LEADER_OR_FOLLOWER."),
    StepSpec(QuorumStepKind.ADD_VOTER, AddVoter, (
        Arg("voter", ArgType.REPLICA, required=True, doc="the observer to add (with its current directory id)"), _LEADER,
    ), "AddRaftVoter (KIP-853): the leader checks and appends a VotersRecord with the new voter, answering NONE "
       "once it is committed; errors as Kafka's AddVoterHandler answers them."),
    StepSpec(QuorumStepKind.REMOVE_VOTER, RemoveVoter, (
        Arg("voter", ArgType.REPLICA, required=True, doc="the voter to remove (with its current directory id)"), _LEADER,
    ), "RemoveRaftVoter (KIP-853): the leader appends a VotersRecord without the voter, answering NONE once it is "
       "committed (a leader that removed itself then resigns)."),
    StepSpec(QuorumStepKind.CRASH, QuorumCrash, (
        _SERVER,
        Arg("mode", ArgType.CHOICE, default=CrashMode.PROCESS, choices=tuple(m.value for m in CrashMode),
            doc="power: also lose the records not flushed"),
    ), "The server stops; every message to or from it is lost; the quorum-state file and the flushed log survive."),
    StepSpec(QuorumStepKind.RESTART, QuorumRestart, (_SERVER,),
             "The server starts from its quorum-state file and its log (QuorumState.initialize); HW unknown (0)."),
    StepSpec(QuorumStepKind.CHECK_QUORUM, CheckQuorum, (_SERVER,),
             "The leader's check-quorum interval ends (controller.quorum.fetch.timeout.ms x 1.5): unless a majority "
             "of its voters (itself counted when it is one) fetched since the previous check or its election, it "
             "resigns (LeaderState.timeUntilCheckQuorumExpires, pollLeader). Refused on a non-leader and on the "
             "leader of a one-voter quorum (its timer never expires)."),
    StepSpec(QuorumStepKind.SHUTDOWN, Shutdown, (_SERVER,),
             "A graceful shutdown begins (KafkaRaftClient.shutdown): at each step's end (its poll) the shutdown "
             "completes -- the server stops -- when it is an observer, the only voter or follows another leader; "
             "a leader resigns first (EndQuorumEpoch to the voters) and a resigned, unattached or candidate voter "
             "waits for the next leader (no election timeout meanwhile; it still grants votes). Refused on a "
             "stopped server or one already shutting down."),
    StepSpec(QuorumStepKind.SHUTDOWN_TIMEOUT, ShutdownTimeout, (_SERVER,),
             "The graceful shutdown's timer expires before it completed: the server stops and the shutdown answers "
             "TimeoutException (GracefulShutdown.failWithTimeout). Refused unless the server is shutting down."),
    StepSpec(QuorumStepKind.UPDATE_VOTER, UpdateVoter, (_SERVER,),
             "A follower voter's update-voter period ends (FollowerState.hasUpdateVoterPeriodExpired, "
             "pollFollowerAsVoter): under kraft.version 1 (dynamic voters), when its own node in its last voter set "
             "holds other listeners than its configuration's (VoterSet.voterNodeNeedsUpdate) it sends UpdateRaftVoter "
             "to its leader, else Fetch as usual. The leader appends a VotersRecord with the voter's new listeners and "
             "answers NONE at once; errors as Kafka's UpdateVoterHandler answers them. Refused unless the server is a "
             "running follower, a voter, not shutting down."),
    StepSpec(QuorumStepKind.CHANGE_LISTENERS, ChangeListeners, (_SERVER,),
             "A stopped server is configured with new listeners (a listener added, a port moved: the old address keeps "
             "working, messages are not routed by address) and starts; the voter sets keep its old endpoints until an "
             "UpdateRaftVoter, or its own epoch-start VotersRecord as leader, writes the new ones."),
    StepSpec(QuorumStepKind.LOSE_DISK, LoseDisk, (_SERVER,),
             "A stopped server's disk is replaced: log and quorum-state file are gone, it is formatted again with a new "
             "directory id (without initial voters when voters are dynamic) and starts."),
), "quorum step type", "Metadata-quorum scenarios (a file that names `voters`; docs/quorum.md)")




def all_steps_markdown() -> str:
    """``docs/steps.md``: both step tables (``replemu steps``)."""
    return steps_markdown() + "\n" + QUORUM_STEP_TABLE.markdown()
