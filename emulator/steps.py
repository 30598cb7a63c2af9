"""The steps of a partition scenario: one frozen dataclass per step kind, and the one table of step kinds.

``STEP_TABLE`` (a ``StepTable`` of ``emulator.step_table``, the mechanism the metadata quorum's steps
share) is the single description of the step vocabulary: the scenario loader validates arguments
with it, the stream's event rows carry its kinds and arguments, the partition dispatches on its
kinds, and ``docs/steps.md`` is generated from it (``replemu steps``).

Adding a step kind: add a member to ``StepKind``, a frozen dataclass below, one ``StepSpec``
row in ``STEP_TABLE`` (its arguments and its meaning), and its handler in
``emulator.partition.HANDLERS``; ``tests/test_layout.py`` fails until all four exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Union

from .step_table import Arg, ArgType, CrashMode, StepError, StepSpec, StepTable, is_text  # noqa: F401 (is_text: read from here too)


class StepKind(str, Enum):
    ELECT = "elect"
    LEADER_AND_ISR = "leader_and_isr"
    PRODUCE = "produce"
    FETCH = "fetch"
    SHRINK_ISR = "shrink_isr"
    CONTROLLER_REMOVE = "controller_remove"
    CHECKPOINT_HW = "checkpoint_hw"
    FLUSH = "flush"
    CRASH = "crash"
    RESTART = "restart"
    TICK = "tick"
    SHUTDOWN = "shutdown"
    FENCE = "fence"
    UNFENCE = "unfence"
    ALTER_PARTITION = "alter_partition"
    LOG_INFO = "log_info"
    LAG_METADATA = "lag_metadata"
    REASSIGN = "reassign"

    def __str__(self) -> str:
        return self.value


class FetchResponse(str, Enum):
    DELIVERED = "delivered"
    LOST = "lost"


# -- the steps ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elect:
    leader: int | None = None
    epoch: int | None = None
    isr: tuple[int, ...] | None = None
    to: tuple[int, ...] | None = None
    unclean: bool | None = None
    kind = StepKind.ELECT


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    replica: int
    epoch: int | None = None
    kind = StepKind.LEADER_AND_ISR


@dataclass(frozen=True, slots=True)
class Produce:
    values: tuple[str, ...]
    acks: str | None = None  # "all" | "1" | "0"
    replica: int | None = None
    kind = StepKind.PRODUCE


@dataclass(frozen=True, slots=True)
class Fetch:
    replica: int
    max_records: int | None = None
    response: FetchResponse | str = FetchResponse.DELIVERED  # a str becomes the member (__post_init__)
    broker_epoch: int | None = None  # KIP-903: the broker epoch the fetch carries (default: the follower's own)
    kind = StepKind.FETCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "response", FetchResponse(self.response))


@dataclass(frozen=True, slots=True)
class ShrinkIsr:
    replica: int
    kind = StepKind.SHRINK_ISR


@dataclass(frozen=True, slots=True)
class ControllerRemove:
    replica: int
    kind = StepKind.CONTROLLER_REMOVE


@dataclass(frozen=True, slots=True)
class CheckpointHw:
    replica: int | None = None
    kind = StepKind.CHECKPOINT_HW


@dataclass(frozen=True, slots=True)
class Flush:
    replica: int
    offset: int | None = None
    kind = StepKind.FLUSH


@dataclass(frozen=True, slots=True)
class Crash:
    replica: int
    mode: CrashMode | str = CrashMode.PROCESS  # a str becomes the member (__post_init__)
    kind = StepKind.CRASH

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", CrashMode(self.mode))


@dataclass(frozen=True, slots=True)
class Restart:
    replica: int
    fenced: bool = False  # KRaft: stay fenced after registering (an unfence step follows)
    kind = StepKind.RESTART


class ShutdownPhase(str, Enum):
    ALL = "all"
    REQUEST = "request"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Shutdown:
    replica: int
    phase: ShutdownPhase | str = ShutdownPhase.ALL  # a str becomes the member (__post_init__)
    kind = StepKind.SHUTDOWN

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", ShutdownPhase(self.phase))


@dataclass(frozen=True, slots=True)
class Fence:
    replica: int
    kind = StepKind.FENCE


@dataclass(frozen=True, slots=True)
class Unfence:
    replica: int
    kind = StepKind.UNFENCE


@dataclass(frozen=True, slots=True)
class AlterPartition:
    replica: int
    kind = StepKind.ALTER_PARTITION


@dataclass(frozen=True, slots=True)
class LogInfo:
    replica: int
    kind = StepKind.LOG_INFO


@dataclass(frozen=True, slots=True)
class LagMetadata:
    replica: int
    kind = StepKind.LAG_METADATA


@dataclass(frozen=True, slots=True)
class Reassign:
    replicas: tuple[int, ...] | None = None  # the target replica list; None with cancel
    cancel: bool = False  # AlterPartitionReassignments with a null target: revert the one in progress
    kind = StepKind.REASSIGN


@dataclass(frozen=True, slots=True)
class Tick:
    ms: int
    kind = StepKind.TICK


Step = Union[Elect, LeaderAndIsr, Produce, Fetch, ShrinkIsr, ControllerRemove, CheckpointHw, Flush, Crash, Restart, Tick,
             Shutdown, Fence, Unfence, AlterPartition, LogInfo, LagMetadata, Reassign]


def _check_elect(a: dict[str, Any]) -> None:
    if a.get("isr") is not None and not a["isr"]:
        raise StepError("isr must not be empty")
    if a.get("isr") is not None and a.get("leader") is not None and a["leader"] not in a["isr"]:
        raise StepError(f"isr {list(a['isr'])} does not contain the leader {a['leader']}")


def _check_reassign(a: dict[str, Any]) -> None:
    if (a.get("replicas") is None) == (not a.get("cancel")):
        raise StepError("give exactly one of 'replicas' (the target replica list) or 'cancel: true'")
    if a.get("replicas") is not None and not a["replicas"]:
        raise StepError("'replicas' must not be empty")


def _check_produce(a: dict[str, Any]) -> None:
    if (a.get("value") is None) == (a.get("values") is None):
        raise StepError("give exactly one of 'value' (a string) or 'values' (a list of strings)")
    if a.get("values") is not None and not a["values"]:
        raise StepError("'values' must not be empty")


def _build_produce(a: dict[str, Any]) -> dict[str, Any]:
    """``value`` is the one record of ``values``."""
    values = dict(a)
    value = values.pop("value", None)
    values["values"] = (value,) if value is not None else values["values"]
    return values


def _produce_args(step: Produce) -> dict[str, Any]:
    """A produce of one record writes ``value``, of more ``values``; ``acks`` as a YAML file
    gives it (``all``, or an int)."""
    args: dict[str, Any] = {"value": step.values[0]} if len(step.values) == 1 else {"values": list(step.values)}
    if step.acks is not None:
        args["acks"] = step.acks if step.acks == "all" else int(step.acks)
    if step.replica is not None:
        args["replica"] = step.replica
    return args


def _build_elect(a: dict[str, Any]) -> dict[str, Any]:
    """The ISR is a set: kept sorted."""
    return a if a.get("isr") is None else {**a, "isr": tuple(sorted(a["isr"]))}


def _describe_parts(step: Step, args: dict[str, Any]) -> list[str]:
    """The partition's short form: the replica (or leader) first, ``e``+epoch, records and the
    fetch response as they are, other arguments as ``name=value``."""
    parts: list[str] = []
    for key, value in args.items():
        if key in ("replica", "leader"):
            parts.insert(0, str(value))
        elif key == "epoch":
            parts.append(f"e{value}")
        elif key == "value":
            parts.append(str(value))
        elif key == "values":
            parts.append(",".join(value))
        elif key == "response":
            parts.append(value)
        elif isinstance(value, list):
            parts.append(f"{key}=[{','.join(map(str, value))}]")
        else:
            parts.append(f"{key}={value}")
    return parts


_REPLICA = Arg("replica", ArgType.REPLICA, required=True, doc="the broker the step happens on")

STEP_TABLE: StepTable[StepKind, Step] = StepTable(StepKind, (
    StepSpec(StepKind.ELECT, Elect, (
        Arg("leader", ArgType.REPLICA, doc="the new leader (default: the controller's choice); KRaft: after the "
            "partition's creation only the one ElectLeaders elects"),
        Arg("epoch", ArgType.EPOCH, doc="the leader epoch (default: controller epoch + 1); KRaft: only at the partition's creation"),
        Arg("isr", ArgType.REPLICA_LIST, doc="the new ISR (default: the live ISR plus the leader); KRaft: only at the partition's creation"),
        Arg("to", ArgType.REPLICA_LIST, doc="who processes the LeaderAndIsr now (default: every live replica, leader first)"),
        Arg("unclean", ArgType.BOOL, doc="overrides the topic's unclean_leader_election for this election; KRaft: "
            "true asks ElectLeaders for an UNCLEAN election (default PREFERRED)"),
    ), "The controller writes (leader, epoch, ISR) and sends LeaderAndIsr. Without `leader` it chooses as "
       "Kafka does: the first live ISR member in assignment order, else (unclean allowed) the first live "
       "replica, else the partition goes offline. KRaft: the first elect creates the partition; a later one is "
       "the admin's ElectLeaders, which writes nothing and answers ELECTION_NOT_NEEDED, "
       "PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE when it elects nobody new; a step "
       "asking for more is refused (docs/protocol.md 10.3).", _check_elect, build=_build_elect),
    StepSpec(StepKind.LEADER_AND_ISR, LeaderAndIsr, (
        _REPLICA,
        Arg("epoch", ArgType.EPOCH, doc="process the pending request of this epoch (default: the newest)"),
    ), "The replica processes a LeaderAndIsr it missed; a follower runs its variant's truncation phase."),
    StepSpec(StepKind.PRODUCE, Produce, (
        Arg("value", ArgType.STRING, doc="one record"),
        Arg("values", ArgType.STRING_LIST, doc="several records (give value or values)"),
        Arg("acks", ArgType.ACKS, doc="overrides the config's acks"),
        Arg("replica", ArgType.REPLICA, doc="the broker the client sends to (default: the controller's leader)"),
    ), "A client sends records; a replica that does not presume leadership answers NOT_LEADER.", _check_produce,
        build=_build_produce, written=_produce_args),
    StepSpec(StepKind.FETCH, Fetch, (
        _REPLICA,
        Arg("max_records", ArgType.COUNT, doc="at most this many records in the response"),
        Arg("response", ArgType.CHOICE, default=FetchResponse.DELIVERED, choices=tuple(m.value for m in FetchResponse),
            doc="lost: the leader-side effects happen, the follower never sees the response"),
        Arg("broker_epoch", ArgType.BROKER_EPOCH, doc="KRaft (KIP-903): the broker epoch the fetch carries (default: the "
            "follower's registered one); another one makes the follower ineligible for the ISR until a fetch carries the right one"),
    ), "One fetch round trip from the follower to the leader it believes in."),
    StepSpec(StepKind.SHRINK_ISR, ShrinkIsr, (_REPLICA,), "The leader drops the replica from the ISR (no epoch bump)."),
    StepSpec(StepKind.CONTROLLER_REMOVE, ControllerRemove, (_REPLICA,),
             "The controller drops a dead broker from the ISR and bumps the leader epoch."),
    StepSpec(StepKind.CHECKPOINT_HW, CheckpointHw, (
        Arg("replica", ArgType.REPLICA, doc="default: every live replica"),
    ), "The replica writes its HW to its checkpoint file."),
    StepSpec(StepKind.FLUSH, Flush, (
        _REPLICA,
        Arg("offset", ArgType.OFFSET, doc="the new recovery point (default: the LEO)"),
    ), "The replica's recovery point moves (records below it survive a power loss)."),
    StepSpec(StepKind.CRASH, Crash, (
        _REPLICA,
        Arg("mode", ArgType.CHOICE, default=CrashMode.PROCESS, choices=tuple(m.value for m in CrashMode),
            doc="power: also lose every record at or above the recovery point"),
    ), "An unclean shutdown: the broker stops without flushing and writes no clean-shutdown file. process: the "
       "operating system keeps the page cache, nothing is lost; power: a lossy unclean shutdown."),
    StepSpec(StepKind.RESTART, Restart, (
        _REPLICA,
        Arg("fenced", ArgType.BOOL, default=False, doc="KRaft: the broker stays fenced after registering until an unfence step"),
    ), "The broker starts again: HW = min(checkpointed HW, LEO), no known leader. KRaft: the controller fences its "
       "old registration if it had not (it leaves the ISR), it registers with a new broker epoch, clean only if its "
       "last stop was a shutdown step (else it leaves every ISR and ELR), and is unfenced at once unless `fenced`."),
    StepSpec(StepKind.TICK, Tick, (
        Arg("ms", ArgType.MILLIS, required=True, doc="how much emulated time passes"),
    ), "Emulated time passes; leaders shrink the ISR of followers that lagged too long."),
    StepSpec(StepKind.SHUTDOWN, Shutdown, (
        _REPLICA,
        Arg("phase", ArgType.CHOICE, default=ShutdownPhase.ALL, choices=tuple(m.value for m in ShutdownPhase),
            doc="KRaft: request = the broker asks and stays registered in controlled shutdown; stop = it stops; all = both"),
    ), "A clean (controlled) shutdown: KRaft moves leadership away and removes the broker from the ISR first (the broker "
       "stays registered, in controlled shutdown: not a leader candidate, not eligible for the ISR, its AlterPartition "
       "entries refused, its fetcher stopped once it is outside the ISR); the broker flushes its log, checkpoints its HW, writes its broker epoch to the clean-shutdown "
       "file and stops (fenced). A fenced broker is told to stop at once (SHUTDOWN_NOW)."),
    StepSpec(StepKind.FENCE, Fence, (_REPLICA,),
             "KRaft: the controller fences the broker (missed heartbeats). It leaves the ISR (the last member stays "
             "without ELR; with ELR it may move into the ELR) and, if it led, a new leader is elected at once."),
    StepSpec(StepKind.UNFENCE, Unfence, (_REPLICA,),
             "KRaft: the controller unfences a live, registered broker (it caught up with the metadata log); it "
             "processes the current partition state, and a leaderless partition elects."),
    StepSpec(StepKind.ALTER_PARTITION, AlterPartition, (_REPLICA,),
             "The controller answers the AlterPartition in flight from this leader (config alter_partition: explicit; "
             "otherwise it is answered in the step that sent it): accepted, the ISR is written; rejected, an error "
             "and the reason."),
    StepSpec(StepKind.LOG_INFO, LogInfo, (_REPLICA,),
             "KRaft unclean recovery: the replica answers the controller's GetReplicaLogInfo with its last epoch and "
             "LEO; once the strategy has its answers the controller elects the best."),
    StepSpec(StepKind.LAG_METADATA, LagMetadata, (_REPLICA,),
             "KRaft: the broker stops applying the metadata log. The partition changes written from now on reach it "
             "only by a leader_and_isr step (one delivery each, as LeaderAndIsr under ZooKeeper); until then it acts on "
             "the state it has applied. The lag ends when a delivery brings it to the newest change, when it is "
             "unfenced or when it registers again."),
    StepSpec(StepKind.REASSIGN, Reassign, (
        Arg("replicas", ArgType.REPLICA_LIST,
            doc="the target replica list, in its order: brokers of the scenario (replicas or brokers), each once"),
        Arg("cancel", ArgType.BOOL, default=False,
            doc="true: cancel the reassignment in progress (AlterPartitionReassignments with no target)"),
    ), "KRaft: AlterPartitionReassignments, as the controller runs it. A target that adds replicas writes the "
       "replicas (target, then removing) with adding/removing replicas and waits: the added brokers start as followers "
       "with an empty log, fetch and join the ISR; the change that puts every target replica in the ISR completes it "
       "(the removed replicas leave the replica list and the ISR, a leader-epoch bump, a new leader if the leader was "
       "removed) and the removed brokers delete their copy. A target that only removes or rearranges completes at "
       "once. cancel reverts: the replicas and ISR without the adding ones. The first replica is the preferred leader "
       "(a later elect elects it).", _check_reassign),
), "step type", "Partition scenarios", _describe_parts)

STEP_KINDS: tuple[str, ...] = STEP_TABLE.kinds



HEADER = ("# Step kinds\n\nGenerated from `emulator/steps.py` (`STEP_TABLE`) and `emulator/quorum/steps.py` "
          "(`QUORUM_STEP_TABLE`) by `replemu steps`; do not edit by hand.\n\n")


def steps_markdown() -> str:
    """The partition's part of ``docs/steps.md`` (``replemu steps`` adds the metadata quorum's:
    ``emulator.quorum.steps.all_steps_markdown``), written from ``STEP_TABLE``."""
    return HEADER + STEP_TABLE.markdown()
