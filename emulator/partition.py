"""One topic-partition as a deterministic state machine: the controller and its replicas.

``Partition.apply(step)`` replays one scenario step under a ``ProtocolVariant`` and returns a
``StepOutcome``: Kafka's error answers (recorded, never raised), the events a broker would log,
and the effects the checker observes.  The partition never reads or calls the checker.

The rules live where a Kafka engineer looks for them; this class only holds the state and
dispatches over the one table of step kinds (``emulator.steps.STEP_TABLE``):

=====================  ==================================================================
``controller.py``      elections, ISR removal by the controller, LeaderAndIsr delivery
``replica_manager.py`` a broker processing LeaderAndIsr: become leader / follower
``leader.py``          ``Partition.scala``: writes, HW advance, ISR expand / shrink, acks
``follower.py``        ``AbstractFetcherThread``: truncation rounds, the fetch round trip
``recovery.py``        crash modes, restart, HW checkpoint and flush
``log.py``             the log and its one write path (append, truncate)
=====================  ==================================================================
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable

from . import controller, follower, kraft, leader, recovery, replica_manager
from ._build import mypyc_attr
from .config import Config
from .controller import Controller
from .effects import Effect
from .replica import Replica
from .steps import STEP_TABLE, Step, StepKind
from .variants import ProtocolVariant

HANDLERS: dict[StepKind, Callable[["Partition", Any], None]] = {  # each takes its kind's step
    StepKind.ELECT: controller.elect,
    StepKind.CONTROLLER_REMOVE: controller.controller_remove,
    StepKind.LEADER_AND_ISR: replica_manager.leader_and_isr,
    StepKind.PRODUCE: leader.produce,
    StepKind.SHRINK_ISR: leader.shrink_isr,
    StepKind.TICK: leader.tick,
    StepKind.FETCH: follower.fetch,
    StepKind.CHECKPOINT_HW: recovery.checkpoint_hw,
    StepKind.FLUSH: recovery.flush,
    StepKind.CRASH: recovery.crash,
    StepKind.RESTART: kraft.restart,
    StepKind.SHUTDOWN: kraft.shutdown,
    StepKind.FENCE: kraft.fence,
    StepKind.UNFENCE: kraft.unfence,
    StepKind.ALTER_PARTITION: kraft.alter_partition,
    StepKind.LOG_INFO: kraft.log_info,
    StepKind.LAG_METADATA: kraft.lag_metadata,
    StepKind.REASSIGN: kraft.reassign,
}
assert set(HANDLERS) == set(STEP_TABLE), "every step kind of STEP_TABLE needs a handler"


def prefix_digest(previous: str, records: list[tuple[int, str]]) -> str:
    """SHA-256 chained over compacted records: ``sha256(previous || json(records))``."""
    h = hashlib.sha256(previous.encode("ascii"))
    h.update(json.dumps(records, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return "sha256:" + h.hexdigest()


@dataclass(slots=True)
class StepOutcome:
    step: int
    errors: list[dict]
    events: list[dict]
    effects: list[Effect]
    kind: StepKind


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class Partition:
    """The controller and replicas of one partition, stepped by scenario steps."""

    __slots__ = ("assignment", "config", "variant", "controller", "replicas", "now_ms", "step_number", "generation",
                 "errors", "_events", "_effects", "compacted_offset", "prefix_digest")

    def __init__(self, assignment: tuple[int, ...], config: Config, variant: ProtocolVariant,
                 brokers: tuple[int, ...] = ()) -> None:
        """``assignment``: the partition's replicas; ``brokers``: the other brokers of the cluster
        a reassignment may move it to (``replicas`` holds every broker, these last, holding no
        copy of the partition until a reassignment adds them)."""
        self.assignment = tuple(assignment)
        self.config = config
        self.variant = variant
        self.controller = Controller(assignment=self.assignment, isr=tuple(sorted(self.assignment)))
        every = self.assignment + tuple(b for b in brokers if b not in self.assignment)
        self.replicas: dict[int, Replica] = {r: Replica(r, variant.cache_semantics) for r in every}
        self.now_ms = 0  # the lag clock; only tick moves it
        self.step_number = 0
        self.generation = 0  # counts leaderships (a new LeaderState each time)
        self.errors: list[dict] = []
        self._events: list[dict] = []
        self._effects: list[Effect] = []
        # Offsets below ``compacted_offset`` were compacted away on every replica (long runs);
        # ``prefix_digest`` is the SHA-256 chain over those records.
        self.compacted_offset = 0
        self.prefix_digest = ""
        if variant.metadata == "kraft":
            kraft.register_all(self)

    def apply(self, step: Step) -> StepOutcome:
        """Replay one step, then checkpoint and flush (every_step configs)."""
        self.step_number += 1
        first_error = len(self.errors)
        self._events, self._effects = [], []
        HANDLERS[step.kind](self, step)
        if self.config.alter_partition == "every_step" and self.variant.metadata == "kraft":
            kraft.answer_in_flight(self)
        recovery.end_of_step(self)
        return StepOutcome(self.step_number, self.errors[first_error:], self._events, self._effects, step.kind)

    def copy(self) -> "Partition":
        """An independent copy of the partition (assignment, config and variant shared)."""
        q = Partition.__new__(Partition)
        q.assignment, q.config, q.variant = self.assignment, self.config, self.variant
        q.controller = self.controller.copy()
        q.replicas = {rid: r.copy() for rid, r in self.replicas.items()}
        q.now_ms, q.step_number, q.generation = self.now_ms, self.step_number, self.generation
        q.errors, q._events, q._effects = list(self.errors), list(self._events), list(self._effects)
        q.compacted_offset, q.prefix_digest = self.compacted_offset, self.prefix_digest
        return q

    def take_effects(self) -> list[Effect]:
        """Effects reported outside a step (seeding replicas from files), handed over once."""
        effects, self._effects = self._effects, []
        return effects

    # -- what handlers report --------------------------------------------------------------

    def error(self, error: str, step: int | None = None) -> None:
        self.errors.append({"step": self.step_number if step is None else step, "error": error})

    def event(self, name: str, **fields) -> None:
        self._events.append({"event": name, **fields})

    def effect(self, effect: Effect) -> None:
        self._effects.append(effect)

    # -- compaction of the unchangeable prefix ---------------------------------------------------

    def compact(self, upto: int) -> tuple[list[tuple[int, str]], dict[int, list[tuple[int, int]]]]:
        """Compact every replica below ``upto`` (a bound no step can reach below: the checker's
        ``compactable_offset``, or a caller's own): the records, into the prefix digest, and the
        epoch-cache entries no future step can consult.  Returns the records dropped and, per
        replica, the cache entries dropped."""
        records = self.compact_logs(upto)
        cold: dict[int, list[tuple[int, int]]] = {}
        floor = self.lowest_future_epoch()
        for rid in sorted(self.replicas):
            dropped = self.replicas[rid].cache.drop_cold_entries(upto, floor)
            if dropped:
                cold[rid] = dropped
        return records, cold

    def settled_offset(self) -> int:
        """Below every replica's recovery point, HW, HW checkpoint and LEO (dead replicas
        included) and below the first record of every parked acks=all produce (it still reads
        its records when answered): the bound every compaction starts from."""
        k = min(min(r.recovery_point, r.hw, r.hw_checkpoint, r.leo) for r in self.replicas.values())
        for r in self.replicas.values():
            if r.leadership is not None:
                for ack in r.leadership.pending_acks:
                    k = min(k, ack.first_offset)
        return k

    def lowest_future_epoch(self) -> int:
        """The lowest leader epoch any future step can write or ask about: the controller's
        epoch, the epoch of every replica presuming leadership, and every epoch still in a log
        above the compacted prefix (a follower copies those; a zombie writes its own)."""
        epochs = [self.controller.leader_epoch] + [r.leader_epoch for r in self.replicas.values() if r.presumes_leadership]
        for r in self.replicas.values():
            epochs += [e for _, (e, _v) in r.log.items()]
        return min(epochs)

    def compact_logs(self, upto: int) -> list[tuple[int, str]]:
        """Drop every replica's records below ``upto`` into the prefix digest; returns them
        (identical on every replica)."""
        if upto <= self.compacted_offset:
            return []
        dropped: list[tuple[int, str]] | None = None
        for rid in sorted(self.replicas):
            removed = self.replicas[rid].log.compact(upto)
            dropped = removed if dropped is None else dropped
        assert dropped is not None  # a partition has at least one replica
        self.prefix_digest = prefix_digest(self.prefix_digest, dropped)
        self.compacted_offset = upto
        return dropped
