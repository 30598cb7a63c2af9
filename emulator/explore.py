"""Exhaustive bounded search: every interleaving of contract steps, breadth-first, each state once.

The TLA+ model of Kafka replication is checked by breadth-first search over its actions; this
module does the same over replemu's own partition, at the level of detail the core models (the
HW's round-trip lag, lost responses, process and power crashes with recovery points, HW
checkpoints, the controller).  It is the engine-neutral part of ``replemu explore``:

* ``Bounds`` and the step alphabet (``STEP_CODES``): what an edge may be, and how far to go;
* ``root``: the initial partition after its first election (depth 0);
* ``expand``: one state's successors, each with the invariants its step broke;
* the canonical encoding of a state (``encode`` / ``decode`` / ``digest``): everything that can
  change a future step or verdict, nothing that only records history;
* ``search_local``: the one-process engine.  ``streaming.explore`` runs the same ``expand`` level
  by level on Spark and gives the same counts and the same violations.

Edges are named by short *step codes* (``F2``, ``E3o``, ``C1p`` ...).  A path is its codes
joined by a space, which sorts below every code character, so comparing two joined paths
compares them step by step.  Every engine keeps, for each state, the smallest path that reaches
it at its depth, and for each invariant the smallest violating path at the smallest depth: the
local engine gets this from its visiting order (parents in path order, each parent's steps in
code order), the Spark engine by taking minima.  A violation's path is therefore one of the
shortest, and the same on every engine.

Verdicts are judged per state, as a run ending there would be: the checker's "already reported"
sets are not part of a state (so a violation is reported at every state that has it, and the
first one found is the shortest), and the final tier (``EventualConvergence``) is judged in
every state.  No symmetry reduction is done: replicas are never interchangeable here, because
the controller chooses in assignment order.
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, NamedTuple

from . import kraft
from ._build import rebuilt
from .checker import AckInfo
from .config import Config
from .epoch_cache import LeaderEpochCache
from .invariants import REGISTRY
from .log import Log
from .replica import AlterPartitionRequest, FetchState, LeaderAndIsrRequest, LeaderState, PendingAck, Role
from .run import Replay
from .state import clone
from .steps import (
    AlterPartition, CheckpointHw, ControllerRemove, Crash, CrashMode, Elect, Fence, Fetch, FetchResponse, Flush,
    LeaderAndIsr, LogInfo, Produce, Restart, Shutdown, ShrinkIsr, Step, StepKind, Tick, Unfence,
)
from .variants import ProtocolVariant

SEPARATOR = " "  # joins step codes into a path; sorts below every code character
MARSHAL_VERSION = 2  # no back-references: the bytes depend only on the value


class ExploreError(ValueError):
    """Bounds or a step alphabet that cannot be searched (the message says which and why)."""


# The one table of step codes: a code is this letter, the replica, then a flag (``F2x``).
# Codes compare as strings, so the letters fix the order in which a state's steps are tried.
CODE_OF_KIND: dict[StepKind, str] = {
    StepKind.CRASH: "C", StepKind.ELECT: "E", StepKind.FETCH: "F", StepKind.CHECKPOINT_HW: "H",
    StepKind.LEADER_AND_ISR: "L", StepKind.PRODUCE: "P", StepKind.RESTART: "R", StepKind.SHRINK_ISR: "S",
    StepKind.TICK: "T", StepKind.FLUSH: "U", StepKind.CONTROLLER_REMOVE: "X",
    StepKind.ALTER_PARTITION: "A", StepKind.SHUTDOWN: "D", StepKind.LOG_INFO: "G", StepKind.FENCE: "K",
    StepKind.UNFENCE: "N",
}
KIND_OF_CODE: dict[str, StepKind] = {letter: kind for kind, letter in CODE_OF_KIND.items()}
assert set(CODE_OF_KIND) == set(StepKind) and len(KIND_OF_CODE) == len(StepKind), "one distinct code letter per step kind"


def step_code(kind: StepKind, replica: int | None = None, flag: str = "") -> str:
    return CODE_OF_KIND[kind] + ("" if replica is None else str(replica)) + flag


# Step kinds searched when --steps is not given: everything but tick (lag expiry grows the clock
# without bound, so it is opt-in); checkpoint_hw and flush only count when the config makes
# them explicit (with every_step they happen at the end of every step anyway).
DEFAULT_ALPHABET: tuple[StepKind, ...] = tuple(k for k in StepKind if k is not StepKind.TICK)


@dataclass(frozen=True, slots=True)
class Bounds:
    """How far the search goes.

    ``depth``: steps after the first election.  ``records``: records produced in all (each
    produce writes one, named v1, v2, ...).  ``epochs``: the highest leader epoch the controller
    may write (the first election writes 0).  ``crashes`` / ``power_crashes``: process crashes
    and power losses in all.
    """

    depth: int
    records: int = 2
    epochs: int = 2
    crashes: int = 1
    power_crashes: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ExploreError(f"bound {f.name} must be an int >= 0, got {value!r}")

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # pickled as its fields (compiled, the default would set them through __setattr__)


@dataclass(frozen=True)
class Space:
    """What is searched: the partition (replicas, config, variant), the bounds and the alphabet."""

    replicas: tuple[int, ...]
    config: Config
    variant: ProtocolVariant
    bounds: Bounds
    alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET

    def __post_init__(self) -> None:
        if len(self.replicas) < 1:
            raise ExploreError("a partition needs at least one replica")
        unknown = [k for k in self.alphabet if not isinstance(k, StepKind)]
        if unknown:
            raise ExploreError(f"unknown step kinds {unknown}")

    @property
    def template(self) -> Replay:
        """A replay of this partition: what every decoded state takes its assignment, config and
        variant from (they are not encoded per state)."""
        return Replay(self.replicas, self.config, self.variant)

    def has(self, kind: StepKind) -> bool:
        return kind in self.alphabet

    @property
    def explicit_checkpoints(self) -> bool:
        return self.config.hw_checkpoint == "explicit"

    @property
    def explicit_flushes(self) -> bool:
        return self.config.log_flush == "explicit"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # pickled as its fields (compiled, the default would set them through __setattr__)


@dataclass(frozen=True, slots=True)
class Counters:
    """What the bounds count along a path (part of a state: two paths that used different
    budgets can take different futures)."""

    records: int = 0
    crashes: int = 0
    power_crashes: int = 0


# -- canonical encoding -------------------------------------------------------------------------

# The layout of the canonical tuple (``canonical``); a work directory records it, so a search
# resumes only from levels written in the same encoding.
STATE_ENCODING = 3  # 1: the state document as a dict; 2: flat tuples built from the objects; 3: + KRaft state

ROLE_CODES: tuple[Role, ...] = tuple(Role)
FETCH_STATE_CODES: tuple[FetchState | None, ...] = (None,) + tuple(FetchState)
ROLE_INDEX: dict[Role, int] = {role: i for i, role in enumerate(ROLE_CODES)}
FETCH_STATE_INDEX: dict[FetchState | None, int] = {state: i for i, state in enumerate(FETCH_STATE_CODES)}


def canonical(replay: Replay, counters: Counters) -> tuple:
    """The state as nested tuples, without history: what ``state.state_document`` holds but for
    step numbers, leadership generations, produce steps of pending and acknowledged writes and
    what the checker already reported (none of which changes a future step or verdict), with
    partition epochs (zkVersions) replaced by their ranks (``_partition_epoch_ranks``), and dict
    items in replica order.  Equal states give equal tuples in any process."""
    p, g = replay.partition, replay.checker
    c = p.controller
    reps = [p.replicas[r] for r in p.assignment]
    rank = _partition_epoch_ranks(c.partition_epoch, reps)
    brank = _broker_epoch_ranks(c, reps)
    # Per-follower dicts are built in assignment order (become_leader) or in sorted order
    # (restore); with a sorted assignment both are replica order already.
    ordered = _is_sorted(p.assignment)
    replicas = []
    for r in reps:
        ls = r.leadership
        if ls is None:
            leadership = None
        elif ordered:
            leadership = (
                ls.isr, rank[ls.partition_epoch], ls.epoch_start_offset, tuple(ls.remote_leo.items()),
                tuple(ls.last_caught_up_ms.items()), tuple(ls.last_fetch_leader_leo.items()),
                tuple(ls.last_fetch_ms.items()), tuple([(a.first_offset, a.last_offset) for a in ls.pending_acks]),
                ls.highest_hw, tuple([(f, brank[e]) for f, e in ls.remote_broker_epoch.items()]),
                _in_flight(ls.in_flight, rank, brank),
            )
        else:
            leadership = (
                ls.isr, rank[ls.partition_epoch], ls.epoch_start_offset, tuple(sorted(ls.remote_leo.items())),
                tuple(sorted(ls.last_caught_up_ms.items())), tuple(sorted(ls.last_fetch_leader_leo.items())),
                tuple(sorted(ls.last_fetch_ms.items())), tuple([(a.first_offset, a.last_offset) for a in ls.pending_acks]),
                ls.highest_hw, tuple(sorted([(f, brank[e]) for f, e in ls.remote_broker_epoch.items()])),
                _in_flight(ls.in_flight, rank, brank),
            )
        log = r.log
        replicas.append((
            r.id, log.records_tuple(), log.start, log.before, r.hw, r.hw_checkpoint, r.recovery_point,
            r.cache.as_tuple(), r.alive, r.halted, ROLE_INDEX[r.role],
            r.believed_leader, r.leader_epoch, rank[r.partition_epoch], r.fresh_after_restart,
            r.processed_leader_and_isr, FETCH_STATE_INDEX[r.fetch_state],
            tuple([(q.leader, q.leader_epoch, q.isr, rank[q.partition_epoch]) for q in r.pending_requests]),
            r.last_response_hw, leadership, brank[r.broker_epoch],
            None if r.clean_shutdown_epoch is None else brank.get(r.clean_shutdown_epoch, -2),
        ))
    committed = g.committed
    acked = g.acked
    checker = (
        committed.records_tuple(), committed.start, committed.before,
        tuple(sorted(g.committed_twice)) if g.committed_twice else (),
        tuple(sorted([(off, record, tuple(sorted(a.holders)), a.lost_by_power) for (off, record), a in acked.items()]))
        if acked else (),
        g.unclean_election, g.faultless, tuple(g.pair_mismatch.items()),  # both built in replica order, never re-keyed
        tuple(g.committed_mismatch_of.items()), tuple(sorted(g.presumer_covered.items())), tuple(sorted(g.suspects)),
        g.lossy_shutdowns,
    )
    return (
        p.now_ms, p.compacted_offset, p.prefix_digest,
        (c.leader, c.leader_epoch, c.isr, rank[c.partition_epoch], c.highest_epoch, c.elr, c.last_known_elr, c.fenced,
         tuple(sorted([(b, brank[e]) for b, e in c.broker_epochs.items()])), brank[c.next_broker_epoch],
         tuple(sorted(c.log_info.items()))),
        tuple(replicas), checker, (counters.records, counters.crashes, counters.power_crashes),
    )


def _in_flight(q: AlterPartitionRequest | None, rank: dict[int, int], brank: dict[int, int]) -> tuple | None:
    if q is None:
        return None
    return (q.leader, q.leader_epoch, rank.get(q.partition_epoch, -2), q.isr,
            tuple([(f, brank.get(e, -2)) for f, e in q.added_broker_epochs]), q.why)


def _broker_epoch_ranks(c, replicas) -> dict[int, int]:
    """Every broker epoch present mapped to its rank (-1, "none", stays -1): the rules only
    compare broker epochs for equality and hand out ``next_broker_epoch``, the largest."""
    present = {c.next_broker_epoch}
    present.update(c.broker_epochs.values())
    for r in replicas:
        present.add(r.broker_epoch)
        if r.clean_shutdown_epoch is not None:
            present.add(r.clean_shutdown_epoch)
        ls = r.leadership
        if ls is not None:
            present.update(ls.remote_broker_epoch.values())
            if ls.in_flight is not None:
                present.update(e for _f, e in ls.in_flight.added_broker_epochs)
    present.discard(-1)
    rank = {v: i for i, v in enumerate(sorted(present))}
    rank[-1] = -1
    return rank


def _is_sorted(ids: tuple[int, ...]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))


def _partition_epoch_ranks(controller_epoch: int, replicas) -> dict[int, int]:
    """Every partition epoch present mapped to its rank among them (-1, "none", stays -1).

    Sound because the rules only compare partition epochs (CAS equality, ``>``, ``max``) and the
    controller's, the largest, is the only one ever incremented: the rank map commutes with
    every step.  Two paths that bumped the zkVersion a different number of times then meet.
    """
    present = {controller_epoch}
    for r in replicas:
        present.add(r.partition_epoch)
        for q in r.pending_requests:
            present.add(q.partition_epoch)
        if r.leadership is not None:
            present.add(r.leadership.partition_epoch)
            if r.leadership.in_flight is not None:
                present.add(r.leadership.in_flight.partition_epoch)
    present.discard(-1)
    rank = {v: i for i, v in enumerate(sorted(present))}
    rank[-1] = -1
    return rank


def restore(template: Replay, t: tuple) -> tuple[Replay, Counters]:
    """The replay and counters of a canonical tuple (history zeroed: step 0, generation 0)."""
    now_ms, compacted_offset, prefix_digest, ctl, replicas, checker, counters = t
    replay = Replay(template.partition.assignment, template.partition.config, template.partition.variant,
                    template.checker.judging)
    p, g = replay.partition, replay.checker
    p.now_ms, p.compacted_offset, p.prefix_digest = now_ms, compacted_offset, prefix_digest
    c = p.controller
    (c.leader, c.leader_epoch, c.isr, c.partition_epoch, c.highest_epoch, c.elr, c.last_known_elr, c.fenced, broker_epochs,
     c.next_broker_epoch, log_info) = ctl
    c.broker_epochs, c.log_info = dict(broker_epochs), dict(log_info)
    semantics = p.variant.cache_semantics
    for (rid, log, log_start, log_before, hw, hw_checkpoint, recovery_point, cache, alive, halted, role, believed_leader,
         leader_epoch, partition_epoch, fresh, processed, fetch_state, pending, last_response_hw, ls, broker_epoch,
         clean_shutdown_epoch) in replicas:
        r = p.replicas[rid]
        r.log = Log(log, log_start, log_before)
        r.hw, r.hw_checkpoint, r.recovery_point = hw, hw_checkpoint, recovery_point
        r.cache = LeaderEpochCache(semantics, cache)
        r.alive, r.halted, r.role = alive, halted, ROLE_CODES[role]
        r.believed_leader, r.leader_epoch, r.partition_epoch = believed_leader, leader_epoch, partition_epoch
        r.fresh_after_restart, r.processed_leader_and_isr = fresh, processed
        r.fetch_state = FETCH_STATE_CODES[fetch_state]
        r.pending_requests = [LeaderAndIsrRequest(*q) for q in pending]
        r.last_response_hw = last_response_hw
        r.broker_epoch, r.clean_shutdown_epoch = broker_epoch, clean_shutdown_epoch
        if ls is not None:
            isr, pe, start, remote_leo, caught_up, fetch_leo, fetch_ms, acks, highest_hw, remote_broker_epoch, in_flight = ls
            r.leadership = LeaderState(0, isr, pe, start, dict(remote_leo), dict(caught_up), dict(fetch_leo),
                                       dict(fetch_ms), [PendingAck(0, a, b) for a, b in acks], highest_hw,
                                       dict(remote_broker_epoch),
                                       None if in_flight is None else AlterPartitionRequest(*in_flight))
    (committed, committed_start, committed_before, twice, acked, unclean, faultless, pair_mismatch, committed_mismatch,
     covered, suspects, lossy_shutdowns) = checker
    g.committed = Log(committed, committed_start, committed_before)
    g.committed_twice = list(twice)
    g.committed_twice_set = set(twice)
    g.acked = {(off, record): AckInfo(0, frozenset(holders), lost) for off, record, holders, lost in acked}
    g.unclean_election, g.faultless = unclean, faultless
    g.pair_mismatch, g.committed_mismatch_of, g.presumer_covered = dict(pair_mismatch), dict(committed_mismatch), dict(covered)
    g.suspects, g.lossy_shutdowns = set(suspects), lossy_shutdowns
    return replay, Counters(*counters)


def encode(replay: Replay, counters: Counters) -> bytes:
    """The canonical bytes of a state (equal states, equal bytes, in any process)."""
    return marshal.dumps(canonical(replay, counters), MARSHAL_VERSION)


def digest(state: bytes) -> bytes:
    """The 16-byte key the visited set holds (of the canonical bytes, not of their packing)."""
    return hashlib.blake2b(state, digest_size=16).digest()


def pack(state: bytes) -> bytes:
    """A state as a frontier holds it: its canonical bytes compressed (about a third)."""
    return zlib.compress(state, 1)


def decode(template: Replay, packed: bytes) -> tuple[Replay, Counters]:
    """The replay and counters of a packed state."""
    return restore(template, marshal.loads(zlib.decompress(packed)))


# -- the step alphabet ----------------------------------------------------------------------------


def enabled_codes(space: Space, replay: Replay, counters: Counters) -> list[str]:
    """The codes of every step that can change this state, sorted (the order paths compare in).

    A step that would only be refused (a produce to a replica that does not lead, a restart of
    a live broker) is not offered: it changes nothing.
    """
    p, b = replay.partition, space.bounds
    c = p.controller
    reps = p.replicas
    order = p.assignment
    codes: list[str] = []
    if space.has(StepKind.PRODUCE) and counters.records < b.records:
        for r in order:
            if reps[r].presumes_leadership:
                codes += [step_code(StepKind.PRODUCE, r, "a"), step_code(StepKind.PRODUCE, r, "1")]  # acks=all, acks=1
    if space.has(StepKind.FETCH):
        for r in order:
            rep = reps[r]
            if not rep.alive or rep.role is not Role.FOLLOWER:
                continue
            codes += [step_code(StepKind.FETCH, r), step_code(StepKind.FETCH, r, "x")]  # delivered (everything the leader has), lost
            leader = reps.get(rep.believed_leader) if rep.believed_leader is not None else None
            if leader is not None and leader.presumes_leadership and leader.leo - rep.leo >= 2:
                codes.append(step_code(StepKind.FETCH, r, "m"))  # delivered, one record only
    if space.has(StepKind.CRASH):
        for r in order:
            rep = reps[r]
            if not rep.alive:
                continue
            if counters.crashes < b.crashes:
                codes.append(step_code(StepKind.CRASH, r))
            if counters.power_crashes < b.power_crashes and rep.recovery_point < rep.leo:
                codes.append(step_code(StepKind.CRASH, r, "p"))  # differs from a process crash only with unflushed records
    if space.has(StepKind.RESTART):
        codes += [step_code(StepKind.RESTART, r) for r in order if not reps[r].alive]
    on_kraft = p.variant.metadata == "kraft"
    next_epoch = c.leader_epoch + 1
    if on_kraft:
        _kraft_codes(space, p, counters, codes)
    if space.has(StepKind.ELECT) and next_epoch <= b.epochs:
        candidates = _clean_candidates(p)
        if not candidates:
            recovered = _recovery_choice(p)
            if recovered is not None:
                candidates = [recovered]
            elif p.config.unclean_leader_election:
                candidates = [r for r in order if (reps[r].alive or on_kraft) and r not in c.fenced]
        for r in candidates:
            # to every live replica (leader first), to the leader only, to nobody yet
            codes += [step_code(StepKind.ELECT, r, flag) for flag in ("", "o", "n")]
    if space.has(StepKind.LEADER_AND_ISR):
        for r in order:
            rep = reps[r]
            if not rep.alive:
                continue
            epochs = sorted({q.leader_epoch for q in rep.pending_requests if q.leader_epoch > rep.leader_epoch})
            for e in epochs:
                codes.append(step_code(StepKind.LEADER_AND_ISR, r, "" if e == epochs[-1] else f"e{e}"))
    # KRaft's controller removes a broker from the ISR only when it fences it (K) or the broker
    # shuts down (D): the ZooKeeper-era removal of a live broker is not searched there.
    if space.has(StepKind.CONTROLLER_REMOVE) and not on_kraft and (next_epoch <= b.epochs or not p.variant.controller_isr_change_bumps_epoch):
        codes += [step_code(StepKind.CONTROLLER_REMOVE, r) for r in order if r in c.isr]
    if space.has(StepKind.SHRINK_ISR) and c.leader is not None and reps[c.leader].presumes_leadership:
        ls = reps[c.leader].leadership
        assert ls is not None
        # Under KRaft 3.5 an accepted shrink bumps the leader epoch: it needs the epoch budget.
        if ls.in_flight is None and (not (on_kraft and p.variant.controller_isr_change_bumps_epoch) or next_epoch <= b.epochs):
            codes += [step_code(StepKind.SHRINK_ISR, r) for r in order if r in ls.isr and r != c.leader]
    if space.has(StepKind.CHECKPOINT_HW) and space.explicit_checkpoints:
        codes += [step_code(StepKind.CHECKPOINT_HW, r) for r in order if reps[r].alive and reps[r].hw != reps[r].hw_checkpoint]
    if space.has(StepKind.FLUSH) and space.explicit_flushes:
        codes += [step_code(StepKind.FLUSH, r) for r in order if reps[r].alive and reps[r].recovery_point < reps[r].leo]
    if space.has(StepKind.TICK):
        codes.append(step_code(StepKind.TICK))
    return sorted(codes)


def step_of(space: Space, replay: Replay, counters: Counters, code: str) -> tuple[Step, Counters]:
    """The contract step a code names in this state, and the counters after it."""
    kind = KIND_OF_CODE[code[0]]
    p = replay.partition
    if kind is StepKind.TICK:
        return Tick(ms=p.config.replica_lag_time_max_ms + 1), counters
    r, flag = int(code[1]), code[2:]
    if kind is StepKind.PRODUCE:
        value = f"v{counters.records + 1}"
        acks = None if (flag == "a") == (p.config.acks == "all") else ("all" if flag == "a" else "1")
        target = None if r == p.controller.leader else r
        return Produce(values=(value,), acks=acks, replica=target), replace(counters, records=counters.records + 1)
    if kind is StepKind.FETCH:
        if flag == "x":
            return Fetch(r, response=FetchResponse.LOST), counters
        return Fetch(r, max_records=1 if flag == "m" else None), counters
    if kind is StepKind.CRASH:
        if flag == "p":
            return Crash(r, CrashMode.POWER), replace(counters, power_crashes=counters.power_crashes + 1)
        return Crash(r), replace(counters, crashes=counters.crashes + 1)
    if kind is StepKind.ELECT:
        leader = None if r == _controller_choice(p) else r
        to = {"": None, "o": (r,), "n": ()}[flag]
        return Elect(leader=leader, to=to), counters
    if kind is StepKind.LEADER_AND_ISR:
        return LeaderAndIsr(r, epoch=int(flag[1:]) if flag else None), counters
    if kind is StepKind.SHUTDOWN:
        return Shutdown(r), replace(counters, crashes=counters.crashes + 1)
    return REPLICA_STEPS[kind](r), counters


# The step kinds whose code names only a replica.
REPLICA_STEPS: dict[StepKind, Callable[[int], Step]] = {
    StepKind.RESTART: Restart, StepKind.CONTROLLER_REMOVE: ControllerRemove, StepKind.SHRINK_ISR: ShrinkIsr,
    StepKind.CHECKPOINT_HW: CheckpointHw, StepKind.FLUSH: Flush, StepKind.FENCE: Fence, StepKind.UNFENCE: Unfence,
    StepKind.ALTER_PARTITION: AlterPartition, StepKind.LOG_INFO: LogInfo,
}


def _controller_choice(p) -> int | None:
    """Who ``elect`` without a leader would choose (Kafka's OfflinePartitionLeaderSelector)."""
    c = p.controller
    if p.variant.metadata == "kraft":
        clean = _clean_candidates(p)
        if clean:
            return clean[0]
        recovered = _recovery_choice(p)
        if recovered is not None:
            return recovered
        unfenced = [r for r in p.assignment if r not in c.fenced]
        return unfenced[0] if unfenced and p.config.unclean_leader_election else None
    live_isr = [r for r in p.assignment if r in c.isr and p.replicas[r].alive]
    if live_isr:
        return live_isr[0]
    live = [r for r in p.assignment if p.replicas[r].alive]
    return live[0] if live and p.config.unclean_leader_election else None


def _clean_candidates(p) -> list[int]:
    """Who a clean election may choose: the live ISR (ZooKeeper); the live unfenced ISR, or ELR
    when the ISR is empty (KRaft)."""
    if p.variant.metadata != "kraft":
        return [r for r in p.assignment if r in p.controller.isr and p.replicas[r].alive]
    return kraft.clean_candidates(p)  # the controller cannot see a crash, only a fence


def _recovery_choice(p) -> int | None:
    if p.variant.metadata != "kraft":
        return None
    return kraft.recovery_choice(p, p.controller.isr, p.controller.elr)


def _kraft_codes(space: Space, p, counters: Counters, codes: list[str]) -> None:
    """The KRaft steps a search takes: a clean shutdown of a live broker (it counts as a crash),
    the fencing of a dead broker the controller still trusts (its session timing out), an
    AlterPartition answer (config alter_partition: explicit), and GetReplicaLogInfo answers
    during unclean recovery.  A restart registers and unfences at once (no unfence step)."""
    c, reps, order, b = p.controller, p.replicas, p.assignment, space.bounds
    if space.has(StepKind.SHUTDOWN) and counters.crashes < b.crashes:
        codes += [step_code(StepKind.SHUTDOWN, r) for r in order if reps[r].alive]
    if space.has(StepKind.FENCE):
        codes += [step_code(StepKind.FENCE, r) for r in order if not reps[r].alive and r not in c.fenced]
    if space.has(StepKind.ALTER_PARTITION) and p.config.alter_partition == "explicit":
        codes += [step_code(StepKind.ALTER_PARTITION, r) for r in order
                  if reps[r].presumes_leadership and reps[r].leadership is not None and reps[r].leadership.in_flight is not None]
    if space.has(StepKind.LOG_INFO) and p.variant.unclean_recovery in ("balanced", "proactive"):
        if c.leader is None or c.leader in c.fenced:
            codes += [step_code(StepKind.LOG_INFO, r) for r in order
                      if reps[r].alive and r not in c.fenced and r not in c.log_info]


# -- states and their successors ----------------------------------------------------------------


def root(space: Space) -> tuple[Replay, Counters, list[Step], list[str]]:
    """The initial partition after its first election (the controller's choice, every replica
    told at once): depth 0.  Returns the replay, its counters, the steps taken and the invariants
    they broke (none, for any sound variant)."""
    replay = Replay(space.replicas, space.config, space.variant)
    first = Elect()
    report = replay.apply(first)
    broken = sorted({v["invariant"] for v in report.violations} | _final_broken(replay))
    return replay, Counters(), [first], broken


def _final_broken(replay: Replay) -> set[str]:
    return {f["invariant"] for f in replay.checker.final_findings(replay.partition)}


class Successor(NamedTuple):
    code: str
    state: bytes  # canonical bytes, not packed (most successors were seen before: pack only new ones)
    key: bytes
    broken: tuple[str, ...]  # invariants this step broke, in registry order


INVARIANT_ORDER = {inv.name: i for i, inv in enumerate(REGISTRY)}


def expand(space: Space, packed: bytes, template: Replay | None = None) -> list[Successor]:
    """Every successor of one (packed) state, in code order, with the invariants each step
    broke.  ``template``: ``space.template``, built once by a caller that expands many states."""
    replay, counters = decode(space.template if template is None else template, packed)
    out = []
    for code in enabled_codes(space, replay, counters):
        child = clone(replay)
        step, after = step_of(space, child, counters, code)
        report = child.apply(step)
        broken = {v["invariant"] for v in report.violations}
        final = child.checker.final_findings(child.partition)
        if final:
            broken.update(f["invariant"] for f in final)
        encoded = encode(child, after)
        out.append(Successor(code, encoded, digest(encoded),
                             tuple(sorted(broken, key=INVARIANT_ORDER.__getitem__)) if broken else ()))
    return out


def replay_path(space: Space, path: str) -> list[Step]:
    """The contract steps of a path (its first election included), replayed from the root."""
    replay, counters, steps, _ = root(space)
    for code in path.split(SEPARATOR) if path else []:
        if code not in enabled_codes(space, replay, counters):
            raise ExploreError(f"step code {code!r} is not enabled after {len(steps)} steps of path {path!r}")
        step, counters = step_of(space, replay, counters, code)
        replay.apply(step)
        steps.append(step)
    return steps


# -- the local engine -----------------------------------------------------------------------------


@dataclass
class Level:
    """What one depth gave: its new states, the transitions out of the level before, and time."""

    depth: int
    new_states: int
    transitions: int
    seconds: float
    distinct_states: int
    resumed: bool = False  # found by an earlier run of the same search (a resumed Spark search)


@dataclass
class Outcome:
    """A search's result, engine-neutral: ``states_per_depth[d]`` counts the states first reached
    at depth ``d`` (``[1, ...]`` for the root); ``violations`` maps an invariant to its depth and
    shortest path."""

    states_per_depth: list[int]
    transitions: int
    complete: bool
    exhausted: bool
    violations: dict[str, tuple[int, str]]
    stopped: str | None = None  # why an incomplete search stopped

    @property
    def distinct_states(self) -> int:
        return sum(self.states_per_depth)

    @property
    def depth(self) -> int:
        """The deepest level reached (every state up to it was found)."""
        return len(self.states_per_depth) - 1


def reached(until: frozenset[str], violations: dict[str, tuple[int, str]]) -> str | None:
    """Why a search with ``until`` stops after this level (None: it goes on)."""
    hit = sorted(until & set(violations))
    return f"{', '.join(hit)} broken (--until)" if hit else None


def note_violations(found: dict[str, tuple[int, str]], depth: int, path: str, broken) -> None:
    """Keep, per invariant, the smallest depth and then the smallest path."""
    for name in broken:
        old = found.get(name)
        if old is None or (depth, path) < old:
            found[name] = (depth, path)


# Levels smaller than this are expanded in the calling process even when workers are asked for.
PARALLEL_FROM = 2048
# What a forked worker reads: the level being expanded (set just before the pool forks).
_LEVEL: dict[str, Any] = {}


def _expand_range(bounds: tuple[int, int]) -> tuple[int, list[tuple[int, str, bytes, bytes | None, tuple[str, ...]]]]:
    """A worker's part of a level: the states ``frontier[lo:hi]`` expanded.  Returns the number
    of transitions and, in order, every successor that is a candidate new state (not visited
    before the level, not earlier in this range: ``packed`` set) or broke an invariant
    (``(parent, code, key, packed or None, broken)``).  What it leaves out, the calling process
    would have found visited."""
    lo, hi = bounds
    space, frontier, visited = _LEVEL["space"], _LEVEL["frontier"], _LEVEL["visited"]
    template = space.template
    seen: set[bytes] = set()
    out = []
    transitions = 0
    for i in range(lo, hi):
        for s in expand(space, frontier[i][1], template):
            transitions += 1
            fresh = s.key not in visited and s.key not in seen
            if fresh:
                seen.add(s.key)
            if fresh or s.broken:
                out.append((i, s.code, s.key, pack(s.state) if fresh else None, s.broken))
    return transitions, out


def _parallel_level(space: Space, frontier: list[tuple[str, bytes]], visited: set[bytes], nxt: list[tuple[str, bytes]],
                    violations: dict[str, tuple[int, str]], depth: int, workers: int,
                    on_state: Callable[[int, int, int], None], should_stop: Callable[[int], str | None]) -> tuple[str | None, int]:
    """One level expanded by ``workers`` forked processes, merged here in frontier order (what
    the one-process loop does, transition for transition).  Returns why it stopped (None when
    the level is whole) and the transitions merged."""
    import multiprocessing

    chunk = max(64, min(2048, len(frontier) // (workers * 16)))
    ranges = [(lo, min(lo + chunk, len(frontier))) for lo in range(0, len(frontier), chunk)]
    _LEVEL.update(space=space, frontier=frontier, visited=visited)
    transitions = 0
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet_worker) as pool:
            for (lo, _hi), (n, successors) in zip(ranges, pool.imap(_expand_range, ranges)):
                on_state(depth, lo, len(frontier))
                reason = should_stop(len(visited))
                if reason:
                    pool.terminate()
                    return reason, transitions
                transitions += n
                for i, code, key, packed, broken in successors:
                    path = frontier[i][0]
                    child_path = path + SEPARATOR + code if path else code
                    if broken:
                        note_violations(violations, depth, child_path, broken)
                    if packed is not None and key not in visited:
                        visited.add(key)
                        nxt.append((child_path, packed))
    finally:
        _LEVEL.clear()
    return None, transitions


def _quiet_worker() -> None:
    """Workers leave Ctrl-C to the calling process, which stops them."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def search_local(space: Space, on_level: Callable[[Level], None] = lambda _level: None,
                 should_stop: Callable[[int], str | None] = lambda _states: None,
                 clock: Callable[[], float] = lambda: 0.0, found: dict[str, tuple[int, str]] | None = None,
                 on_state: Callable[[int, int, int], None] = lambda _d, _done, _n: None,
                 until: frozenset[str] = frozenset(), workers: int = 1) -> Outcome:
    """Breadth-first search in this process; the visited set holds 16-byte digests.

    ``on_level`` hears each finished depth; ``should_stop(distinct_states)`` may end the search
    between states (a state limit, a time limit, an interrupt) with its reason.  ``clock`` only
    times the levels for ``on_level``; nothing the search decides depends on it.  ``found``: the
    dict the violations are kept in as they are found (a caller's progress reads it).
    ``on_state(depth, expanded, frontier)`` hears every 1,024th state of a level (a heartbeat).
    ``until``: stop after the first level where one of these invariants broke.
    ``workers``: processes that expand a level's states (forked per level, each a contiguous
    range of the frontier); this process merges their successors in frontier order, so the
    counts, violations and paths are those of one process.
    """
    replay, counters, _steps, broken = root(space)
    template = space.template
    start = encode(replay, counters)
    visited = {digest(start)}
    violations: dict[str, tuple[int, str]] = {} if found is None else found
    note_violations(violations, 0, "", broken)
    frontier: list[tuple[str, bytes]] = [("", pack(start))]
    per_depth = [1]
    transitions = 0
    for depth in range(1, space.bounds.depth + 1):
        if not frontier:
            return Outcome(per_depth, transitions, True, True, violations)
        began = clock()
        level_transitions = 0
        nxt: list[tuple[str, bytes]] = []
        if workers > 1 and len(frontier) >= PARALLEL_FROM:
            reason, level_transitions = _parallel_level(space, frontier, visited, nxt, violations, depth, workers,
                                                        on_state, should_stop)
            if reason:
                return Outcome(per_depth, transitions + level_transitions, False, False, violations, reason)
        else:
            for done, (path, state) in enumerate(frontier):
                if not done & 1023:
                    on_state(depth, done, len(frontier))
                reason = should_stop(len(visited))
                if reason:
                    return Outcome(per_depth, transitions + level_transitions, False, False, violations, reason)
                for s in expand(space, state, template):
                    level_transitions += 1
                    child_path = path + SEPARATOR + s.code if path else s.code
                    if s.broken:
                        note_violations(violations, depth, child_path, s.broken)
                    if s.key not in visited:
                        visited.add(s.key)
                        nxt.append((child_path, pack(s.state)))
        transitions += level_transitions
        per_depth.append(len(nxt))
        frontier = nxt
        on_level(Level(depth, len(nxt), level_transitions, clock() - began, len(visited)))
        reason = reached(until, violations)
        if reason and depth < space.bounds.depth:
            return Outcome(per_depth, transitions, False, False, violations, reason)
    # states at the last depth are found and judged but not expanded
    return Outcome(per_depth, transitions, True, not frontier, violations)

