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
every state.

Two reductions keep every verdict (``Reduction``, ``--reduce``): sleep sets over steps that
commute (``independent``; only transitions are saved: every state is still reached at its depth
by its smallest path) and, under ZooKeeper, symmetry over renamings of the replicas
(``symmetric_form``: the visited set holds one key per class; the frontier keeps real states, so
every path is real).  ``search_local`` keeps its levels in a work directory when given one
(``emulator.levels``): it resumes after the last whole level, and with a memory budget its
visited set lives on disk.
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple

from . import kraft
from ._build import rebuilt
from .checker import AckInfo
from .config import Config
from .epoch_cache import LeaderEpochCache
from .invariants import REGISTRY
from .levels import LevelStore, VisitedSet
from .log import Log
from .replica import (
    AlterPartitionRequest,
    FetchState,
    LeaderAndIsrRequest,
    LeaderState,
    PendingAck,
    Role,
)
from .replica_manager import newer_requests
from .run import Replay
from .state import clone
from .steps import (
    AlterPartition,
    CheckpointHw,
    ControllerRemove,
    Crash,
    CrashMode,
    Elect,
    Fence,
    Fetch,
    FetchResponse,
    Flush,
    LagMetadata,
    LeaderAndIsr,
    LogInfo,
    Produce,
    Reassign,
    Restart,
    ShrinkIsr,
    Shutdown,
    Step,
    StepKind,
    Tick,
    Unfence,
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
    StepKind.UNFENCE: "N", StepKind.LAG_METADATA: "M", StepKind.REASSIGN: "Y",
}
KIND_OF_CODE: dict[str, StepKind] = {letter: kind for kind, letter in CODE_OF_KIND.items()}
assert set(CODE_OF_KIND) == set(StepKind) and len(KIND_OF_CODE) == len(StepKind), "one distinct code letter per step kind"


def step_code(kind: StepKind, replica: int | None = None, flag: str = "") -> str:
    return CODE_OF_KIND[kind] + ("" if replica is None else str(replica)) + flag


# Step kinds searched when --steps is not given: everything but tick (lag expiry grows the clock
# without bound, so it is opt-in), lag_metadata (KRaft brokers apply the metadata log at once
# unless it is asked for) and reassign (the replica order is fixed unless it is asked for);
# checkpoint_hw and flush only count when the config makes them explicit (with every_step they
# happen at the end of every step anyway).
DEFAULT_ALPHABET: tuple[StepKind, ...] = tuple(k for k in StepKind
                                               if k not in (StepKind.TICK, StepKind.LAG_METADATA, StepKind.REASSIGN))


def check_bounds(bounds: Any) -> None:
    """Every field of a search's bounds (a dataclass) is an int >= 0, else ``ExploreError``."""
    for f in fields(bounds):
        value = getattr(bounds, f.name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ExploreError(f"bound {f.name} must be an int >= 0, got {value!r}")


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
        check_bounds(self)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # pickled as its fields (compiled, the default would set them through __setattr__)


REDUCTIONS: tuple[str, ...] = ("sleep", "symmetry")  # the names ``--reduce`` takes (``none``, ``all``: none or both)


@dataclass(frozen=True, slots=True)
class Reduction:
    """The reductions a search applies; each keeps every verdict (docs/explore.md "Reductions").

    ``sleep``: sleep sets (Godefroid) over steps that commute (``independent``): a step is not
    taken from a state when the same successor is reached at the same depth by the two steps in
    the other order.  Every state is still reached at its depth, by its smallest path: only
    transitions are saved.  ``symmetry``: states that differ by a renaming of the replicas are
    one state (ZooKeeper variants: the search's controller may elect any ISR member, so no rule
    reads the assignment order; under KRaft the controller elects in assignment order and no
    renaming is sound).  Counts are then of classes of states; violations and their paths are
    the same.
    """

    sleep: bool = False
    symmetry: bool = False

    @classmethod
    def parse(cls, text: str) -> "Reduction":
        """``none``, ``all`` or a comma list of ``REDUCTIONS`` (ExploreError names a wrong one)."""
        names = [t.strip() for t in text.split(",") if t.strip()]
        if names == ["none"]:
            return cls()
        if names == ["all"]:
            return cls(True, True)
        unknown = [n for n in names if n not in REDUCTIONS]
        if unknown or not names:
            raise ExploreError(f"--reduce: unknown reduction {', '.join(unknown) or repr(text)} "
                               f"(known: none, all, {', '.join(REDUCTIONS)})")
        return cls(sleep="sleep" in names, symmetry="symmetry" in names)

    @property
    def names(self) -> list[str]:
        return [n for n in REDUCTIONS if getattr(self, n)]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)


@dataclass(frozen=True)
class Space:
    """What is searched: the partition (replicas, config, variant), the bounds, the alphabet and
    the reductions."""

    replicas: tuple[int, ...]
    config: Config
    variant: ProtocolVariant
    bounds: Bounds
    alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET
    reduce: Reduction = Reduction()

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
    def symmetric(self) -> bool:
        """Whether states are merged up to a renaming of the replicas (``Reduction.symmetry``,
        where it is sound: ZooKeeper variants, replicas numbered 1..n)."""
        return (self.reduce.symmetry and self.variant.metadata != "kraft" and len(self.replicas) > 1
                and self.replicas == tuple(range(1, len(self.replicas) + 1)))

    @property
    def reductions(self) -> list[str]:
        """The reductions this search applies: symmetry only where it is sound, sleep sets only
        where a pair of steps can commute (not under KRaft: ``independent``)."""
        kraft_ = self.variant.metadata == "kraft"
        return [n for n in self.reduce.names if (n == "symmetry" and self.symmetric) or (n == "sleep" and not kraft_)]

    def key(self, t: tuple) -> bytes:
        """The visited-set key of a canonical tuple: its digest, or with symmetry the digest of
        the smallest encoding among its renamings (``symmetric_form``)."""
        if self.symmetric:
            return digest(marshal.dumps(symmetric_form(t), MARSHAL_VERSION))
        return digest(marshal.dumps(t, MARSHAL_VERSION))

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
    # The replicas in their current order, then (after a reassignment removed some) the other
    # brokers in id order; ``reassigned`` below says how many are replicas.
    others = sorted([r for r in p.replicas if r not in p.assignment])
    reps = [p.replicas[r] for r in p.assignment] + [p.replicas[r] for r in others]
    rank = _partition_epoch_ranks(c.partition_epoch, reps)
    brank = _broker_epoch_ranks(c, reps)
    # Per-follower dicts are built in assignment order (become_leader) or in sorted order
    # (restore); with a sorted assignment both are replica order already (a reassignment may add
    # a follower last: then sorted).
    reassigned = bool(others or c.adding or c.removing)
    ordered = _is_sorted(p.assignment) and not reassigned
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
            tuple([(q.leader, q.leader_epoch, q.isr, rank[q.partition_epoch]) + ((q.replicas,) if q.replicas else ())
                   for q in r.pending_requests]),
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
         tuple(sorted(c.log_info.items())), c.shutting_down, c.lagging)
        + ((c.adding, c.removing, len(p.assignment)) if reassigned else ()),
        tuple(replicas), checker, (counters.records, counters.crashes, counters.power_crashes),
    )


def _in_flight(q: AlterPartitionRequest | None, rank: dict[int, int], brank: dict[int, int]) -> tuple | None:
    if q is None:
        return None
    return (q.leader, q.leader_epoch, rank.get(q.partition_epoch, -2), q.isr,
            tuple([(f, brank.get(e, -2)) for f, e in q.added_broker_epochs]), q.why, q.rejected)


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
     c.next_broker_epoch, log_info, c.shutting_down, c.lagging) = ctl[:13]
    c.broker_epochs, c.log_info = dict(broker_epochs), dict(log_info)
    if p.variant.metadata == "kraft":  # canonical lists the replicas in the current order (KRaft's reassign)
        count = len(replicas)
        if len(ctl) > 13:  # a reassignment: adding, removing, how many of the listed are replicas
            c.adding, c.removing, count = ctl[13], ctl[14], ctl[15]
        p.assignment = tuple([r[0] for r in replicas[:count]])
        c.replicas = () if p.assignment == c.assignment else p.assignment
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


# -- symmetry: the same state up to a renaming of the replicas --------------------------------------


def _signature(r: tuple) -> tuple:
    """What a replica's canonical tuple says about it without naming any replica (its id, its
    believed leader, its requests' and leadership's replica sets left out): equal under every
    renaming, so ordering replicas by it is the same in every state of one class."""
    ls = r[19]
    return (r[1:11], r[12:17], len(r[17]), r[18], None if ls is None else (len(ls[0]), ls[1:3], ls[7:9]), r[20:22])


def renamed(t: tuple, m: dict[int, int]) -> tuple:
    """The canonical tuple ``t`` with every replica id ``r`` renamed ``m[r]``: sets of replicas
    and items keyed by replica re-sorted, the replicas re-ordered by their new ids."""
    now_ms, compacted_offset, prefix, ctl, replicas, checker, counters = t

    def one(r):
        return None if r is None else m[r]

    def ids(rs):
        return tuple(sorted([m[r] for r in rs]))

    def keyed(items):
        return tuple(sorted([(m[k], v) for k, v in items]))

    leader, epoch, isr, pe, highest, elr, last_elr, fenced, broker_epochs, next_be, log_info, shutting_down, lagging = ctl
    ctl2 = (one(leader), epoch, ids(isr), pe, highest, ids(elr), ids(last_elr), ids(fenced), keyed(broker_epochs), next_be,
            keyed(log_info), ids(shutting_down), ids(lagging))
    out: list[Any] = [None] * len(replicas)
    for r in replicas:
        (rid, log, start, before, hw, hwc, rp, cache, alive, halted, role, believed, lepoch, rpe, fresh, processed, fetch_state,
         pending, last_hw, ls, be, cse) = r
        if ls is not None:
            lisr, lpe, eso, remote_leo, caught_up, fetch_leo, fetch_ms, acks, highest_hw, remote_be, in_flight = ls
            if in_flight is not None:
                q_leader, q_epoch, q_pe, q_isr, added, why, rejected = in_flight
                in_flight = (m[q_leader], q_epoch, q_pe, ids(q_isr), keyed(added), why, rejected)
            ls = (ids(lisr), lpe, eso, keyed(remote_leo), keyed(caught_up), keyed(fetch_leo), keyed(fetch_ms), acks, highest_hw,
                  keyed(remote_be), in_flight)
        pending2 = tuple([(one(q[0]), q[1], ids(q[2]), q[3]) for q in pending])
        out[m[rid] - 1] = (m[rid], log, start, before, hw, hwc, rp, cache, alive, halted, role, one(believed), lepoch, rpe,
                           fresh, processed, fetch_state, pending2, last_hw, ls, be, cse)
    (committed, cstart, cbefore, twice, acked, unclean, faultless, pair_mismatch, committed_mismatch, covered, suspects,
     lossy) = checker
    pairs = tuple(sorted([((min(m[a], m[b]), max(m[a], m[b])), v) for (a, b), v in pair_mismatch]))
    checker2 = (committed, cstart, cbefore, twice, tuple(sorted([(o, rec, ids(h), lost) for o, rec, h, lost in acked])),
                unclean, faultless, pairs, keyed(committed_mismatch), keyed(covered), ids(suspects), lossy)
    return (now_ms, compacted_offset, prefix, ctl2, tuple(out), checker2, counters)


def symmetric_form(t: tuple) -> tuple:
    """The representative of ``t``'s class under renamings of the replicas: replicas ordered by
    ``_signature`` (ties tried in every order), the smallest encoding wins.  Two states that
    differ by a renaming get the same form."""
    import itertools

    replicas = t[4]
    sigs = sorted([(marshal.dumps(_signature(r), MARSHAL_VERSION), r[0]) for r in replicas])
    groups: list[list[int]] = []
    previous = None
    for sig, rid in sigs:
        if groups and sig == previous:
            groups[-1].append(rid)
        else:
            groups.append([rid])
        previous = sig
    if len(groups) == len(replicas) and all(g[0] == i + 1 for i, g in enumerate(groups)):
        return t  # one order, and it renames nothing (a form that is not the class's smallest merges less, never wrongly)
    best: tuple | None = None
    best_bytes = b""
    for orders in itertools.product(*[itertools.permutations(g) for g in groups]):
        m = {rid: i + 1 for i, rid in enumerate(itertools.chain.from_iterable(orders))}
        form = renamed(t, m)
        encoded = marshal.dumps(form, MARSHAL_VERSION)
        if best is None or encoded < best_bytes:
            best, best_bytes = form, encoded
    assert best is not None
    return best


# -- sleep sets: steps that commute ---------------------------------------------------------------

# Steps that touch only their own replica (ZooKeeper variants): a process crash (its log stays),
# a restart (reads the controller's current request), an explicit HW checkpoint or flush.
_LOCAL = frozenset("CRHU")
# What a step on another replica may be for a local step to commute with it.
_BESIDE_LOCAL = frozenset("CRHUFPL")


def independent(space: Space, replay: Replay, t: str, a: str) -> bool:
    """Whether steps ``t`` and ``a``, both enabled in this state, commute here: each stays
    enabled after the other and both orders reach the same state (the sleep sets'
    independence).  Conservative: only a *local* step (``_LOCAL``, not a power loss) of a
    replica that nobody follows, leads or is told about, beside a step of another replica that
    does not read it; never under KRaft (a restart or shutdown is a controller write there).
    ``tests/test_explore_reduce.py`` checks every pair declared here on every reachable state
    of the small spaces: the two orders give the same canonical state."""
    p = replay.partition
    if p.variant.metadata == "kraft":
        return False
    suspects = replay.checker.suspects
    return _commutes(p, suspects, t, a) or _commutes(p, suspects, a, t)


def _commutes(p, suspects: set[int], t: str, a: str) -> bool:
    """``t`` local on its replica, ``a`` a step of another replica that cannot see it."""
    kt, ka = t[0], a[0]
    if kt not in _LOCAL or ka not in _BESIDE_LOCAL or t.endswith("p") or a.endswith("p"):
        return False
    r, q = int(t[1]), int(a[1])
    if r == q or (kt == "C" and ka == "C") or r in suspects:  # two crashes share one budget; a suspect's
        return False  # clearing reads the leader's HW
    if kt == "R" and ka not in "CRHUP":  # a fetch can write the ISR, and a restart reads the controller's request
        return False
    c, reps = p.controller, p.replicas
    if c.leader == r or c.leader == q and ka == "C":
        return False  # a crash of the controller's leader is a controller change (ZooKeeper: no leader)
    for x in reps.values():
        if x.presumes_leadership and x.id in (r, q) and (ka == "C" or x.id == r):
            return False
        if x.believed_leader == r or any(req.leader == r for req in x.pending_requests):
            return False
    return True


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
        candidates = _kraft_elections(p) if on_kraft else _clean_candidates(p)
        if not candidates and not on_kraft and p.config.unclean_leader_election:
            candidates = [r for r in order if reps[r].alive]
        for r in candidates:
            # to every live replica (leader first), to the leader only, to nobody yet
            codes += [step_code(StepKind.ELECT, r, flag) for flag in ("", "o", "n")]
    if space.has(StepKind.LEADER_AND_ISR):
        for r in order:
            rep = reps[r]
            if not rep.alive:
                continue
            newer = newer_requests(p, rep)
            epochs = sorted({q.leader_epoch for q in newer if q.leader_epoch > rep.leader_epoch})
            for e in epochs:
                codes.append(step_code(StepKind.LEADER_AND_ISR, r, "" if e == epochs[-1] else f"e{e}"))
            if newer and not epochs:
                codes.append(step_code(StepKind.LEADER_AND_ISR, r))  # an ISR-only change a lagging broker has not applied
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
    if kind is StepKind.REASSIGN:  # the target list, one digit per broker; ``Yc``: cancel
        if code[1:] == "c":
            return Reassign(cancel=True), counters
        return Reassign(tuple([int(ch) for ch in code[1:]])), counters
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
        to = {"": None, "o": (r,), "n": ()}[flag]
        if p.variant.metadata == "kraft":  # ElectLeaders: PREFERRED, else the UNCLEAN election that elects r
            preferred, _, error = kraft.election_outcome(p, False)
            return Elect(unclean=None if error is None and preferred == r else True, to=to), counters
        leader = None if r == _controller_choice(p) else r
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
    StepKind.ALTER_PARTITION: AlterPartition, StepKind.LOG_INFO: LogInfo, StepKind.LAG_METADATA: LagMetadata,
}


def _kraft_elections(p) -> list[int]:
    """The leaders an ``elect`` can write under KRaft: ElectLeaders PREFERRED's, and UNCLEAN's when
    the topic allows unclean elections (the ZooKeeper search's rule), when they write a change."""
    leaders: list[int] = []
    for unclean in (False, True) if p.config.unclean_leader_election else (False,):
        leader, _, error = kraft.election_outcome(p, unclean)
        if error is None and leader is not None and leader not in leaders:
            leaders.append(leader)
    return leaders


def _controller_choice(p) -> int | None:
    """Who ``elect`` without a leader would choose under ZooKeeper (Kafka's OfflinePartitionLeaderSelector)."""
    c = p.controller
    live_isr = [r for r in p.assignment if r in c.isr and p.replicas[r].alive]
    if live_isr:
        return live_isr[0]
    live = [r for r in p.assignment if p.replicas[r].alive]
    return live[0] if live and p.config.unclean_leader_election else None


def _clean_candidates(p) -> list[int]:
    """Who a clean election may choose under ZooKeeper: the live ISR."""
    return [r for r in p.assignment if r in p.controller.isr and p.replicas[r].alive]


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
                  if reps[r].presumes_leadership and reps[r].leadership is not None and reps[r].leadership.awaiting_answer]
    if space.has(StepKind.REASSIGN):  # opt-in (--steps)
        y = CODE_OF_KIND[StepKind.REASSIGN]
        # a replica moves to the front (the preferred leader)
        codes += [step_code(StepKind.REASSIGN, r, "".join([str(x) for x in order if x != r])) for r in order[1:]]
        # A removal and a cancel bump the leader epoch (a replica leaves the list): within --epochs.
        bump_ok = c.leader_epoch + 1 <= b.epochs
        if c.adding or c.removing:  # cancel the reassignment in progress
            if bump_ok:
                codes.append(y + "c")
        else:  # remove one replica (complete at once), or add back a broker a removal left out
            if len(order) > 1 and bump_ok:
                codes += [y + "".join([str(x) for x in order if x != r]) for r in order]
            codes += [y + "".join([str(x) for x in order]) + str(x) for x in sorted(reps) if x not in order]
    if space.has(StepKind.LAG_METADATA):  # opt-in (--steps): a broker stops applying the metadata log
        codes += [step_code(StepKind.LAG_METADATA, r) for r in order if reps[r].alive and r not in c.lagging]
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
    sleep: str = ""  # with sleep sets: the steps not to take from this successor, codes joined by spaces


INVARIANT_ORDER = {inv.name: i for i, inv in enumerate(REGISTRY)}


def expand(space: Space, packed: bytes, template: Replay | None = None, sleep: str = "") -> list[Successor]:
    """Every successor of one (packed) state, in code order, with the invariants each step
    broke.  ``template``: ``space.template``, built once by a caller that expands many states.
    ``sleep``: with sleep sets (``space.reduce.sleep``), the state's sleep set (codes joined by
    spaces): those steps are not taken, and each successor carries its own."""
    replay, counters = decode(space.template if template is None else template, packed)
    codes = enabled_codes(space, replay, counters)
    asleep = frozenset(sleep.split(SEPARATOR)) if sleep else frozenset()
    reduce_sleep = "sleep" in space.reductions  # not under KRaft, where no pair commutes (``independent``)
    out = []
    for i, code in enumerate(codes):
        if code in asleep:
            continue
        child = clone(replay)
        step, after = step_of(space, child, counters, code)
        report = child.apply(step)
        broken = {v["invariant"] for v in report.violations}
        final = child.checker.final_findings(child.partition)
        if final:
            broken.update(f["invariant"] for f in final)
        t = canonical(child, after)
        encoded = marshal.dumps(t, MARSHAL_VERSION)
        key = digest(encoded) if not space.symmetric else space.key(t)
        child_sleep = ""
        if reduce_sleep:
            # Godefroid: the steps tried before this one here, and those this state sleeps on,
            # that commute with it, need not be tried after it.
            child_sleep = SEPARATOR.join([x for j, x in enumerate(codes) if (j < i or x in asleep) and x != code
                                          and independent(space, replay, x, code)])
        out.append(Successor(code, encoded, key,
                             tuple(sorted(broken, key=INVARIANT_ORDER.__getitem__)) if broken else (), child_sleep))
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

    @property
    def diameter(self) -> int | None:
        """Of an exhausted space: the deepest level with a new state (every state is reached
        within this many steps); None when the search did not exhaust it."""
        if not self.exhausted:
            return None
        return max(d for d, n in enumerate(self.states_per_depth) if n)


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


def identity(space: Space) -> dict[str, Any]:
    """What a work directory records of its search: everything but the depth (a deeper search
    continues a shallower one)."""
    reduce = {"reduce": space.reductions} if space.reductions else {}  # as before reductions existed, without any
    return {"replicas": list(space.replicas), "protocol": space.variant.name, "knobs": space.variant.knobs(),
            "config": repr(space.config), "alphabet": [k.value for k in space.alphabet], "encoding": STATE_ENCODING,
            **reduce, **{k: v for k, v in space.bounds.as_dict().items() if k != "depth"}}


class MemoryLevel:
    """A level's new states kept in memory (a search without a work directory)."""

    def __init__(self) -> None:
        self.states: list[tuple[str, bytes, str]] = []

    def __len__(self) -> int:
        return len(self.states)

    def append(self, path: str, packed: bytes, sleep: str, _key: bytes, _arrival: int) -> None:
        self.states.append((path, packed, sleep))


def _expand_range(bounds: tuple[int, int]) -> tuple[int, list[tuple[int, str, bytes, bytes | None, tuple[str, ...], str]]]:
    """A worker's part of a level: the states ``frontier[lo:hi]`` expanded.  Returns the number
    of transitions and, in order, every successor that is a candidate new state (not visited
    before the level, not earlier in this range: ``packed`` set) or broke an invariant
    (``(parent, code, key, packed or None, broken, sleep)``).  What it leaves out, the calling
    process would have found visited."""
    lo, hi = bounds
    space, frontier, visited = _LEVEL["space"], _LEVEL["frontier"], _LEVEL["visited"]
    template = space.template
    seen: set[bytes] = set()
    out = []
    transitions = 0
    for i in range(lo, hi):
        _path, state, sleep = frontier[i]
        for s in expand(space, state, template, sleep):
            transitions += 1
            fresh = s.key not in visited and s.key not in seen
            if fresh:
                seen.add(s.key)
            if fresh or s.broken:
                out.append((i, s.code, s.key, pack(s.state) if fresh else None, s.broken, s.sleep))
    return transitions, out


def _parallel_level(space: Space, frontier, visited: VisitedSet, nxt, violations: dict[str, tuple[int, str]], depth: int,
                    workers: int, on_state: Callable[[int, int, int], None],
                    should_stop: Callable[[int], str | None], distinct: int) -> tuple[str | None, int]:
    """One level expanded by ``workers`` forked processes, merged here in frontier order (what
    the one-process loop does, transition for transition).  Returns why it stopped (None when
    the level is whole) and the transitions merged."""
    import multiprocessing

    chunk = max(64, min(2048, len(frontier) // (workers * 16)))
    ranges = [(lo, min(lo + chunk, len(frontier))) for lo in range(0, len(frontier), chunk)]
    _LEVEL.update(space=space, frontier=frontier, visited=visited.hot)
    transitions = 0
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet_worker) as pool:
            for (lo, _hi), (n, successors) in zip(ranges, pool.imap(_expand_range, ranges)):
                on_state(depth, lo, len(frontier))
                reason = should_stop(distinct + len(nxt))
                if reason:
                    pool.terminate()
                    return reason, transitions
                transitions += n
                parent, path = -1, ""
                for i, code, key, packed, broken, sleep in successors:
                    if i != parent:  # successors come grouped by parent: read its path once
                        parent, path = i, frontier[i][0]
                    child_path = path + SEPARATOR + code if path else code
                    if broken:
                        note_violations(violations, depth, child_path, broken)
                    if packed is not None and key not in visited:
                        arrival = len(visited.runs)
                        visited.add(key)
                        nxt.append(child_path, packed, sleep, key, arrival)
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
                 until: frozenset[str] = frozenset(), workers: int = 1, work: Path | None = None,
                 memory: int | None = None, visited_out: list[VisitedSet] | None = None) -> Outcome:
    """Breadth-first search in this process; the visited set holds 16-byte keys.

    ``on_level`` hears each finished depth; ``should_stop(distinct_states)`` may end the search
    between states (a state limit, a time limit, an interrupt) with its reason.  ``clock`` only
    times the levels for ``on_level``; nothing the search decides depends on it.  ``found``: the
    dict the violations are kept in as they are found (a caller's progress reads it).
    ``on_state(depth, expanded, frontier)`` hears every 1,024th state of a level (a heartbeat).
    ``until``: stop after the first level where one of these invariants broke.
    ``workers``: processes that expand a level's states (forked per level, each a contiguous
    range of the frontier); this process merges their successors in frontier order, so the
    counts, violations and paths are those of one process.
    ``work``: a work directory (``emulator.levels``): every whole level is kept there and the
    same call resumes after the last one.  ``memory``: keys the visited set may hold in memory
    (the rest on disk; needs ``work``).  ``visited_out`` receives the visited set (its ``peak``).
    """
    if memory is not None and work is None:
        raise ExploreError("a memory budget needs a work directory")
    store = None if work is None else LevelStore(Path(work), identity(space))
    visited = VisitedSet(None if work is None else Path(work), memory)
    if visited_out is not None:
        visited_out.append(visited)
    template = space.template
    violations: dict[str, tuple[int, str]] = {} if found is None else found
    frontier: Any
    if store is not None and store.whole_levels:
        levels = store.progress["levels"]
        violations.update({k: (v[0], v[1]) for k, v in store.progress["violations"].items()})
        per_depth = [lv["new_states"] for lv in levels]
        transitions = sum(lv["transitions"] for lv in levels)
        store.load_visited(visited)
        frontier = store.frontier(len(per_depth) - 1)
        if len(per_depth) > 1:
            on_level(Level(len(per_depth) - 1, per_depth[-1], levels[-1]["transitions"], 0.0, sum(per_depth), resumed=True))
    else:
        replay, counters, _steps, broken = root(space)
        t = canonical(replay, counters)
        key = space.key(t)
        note_violations(violations, 0, "", broken)
        per_depth, transitions = [1], 0
        first: Any = MemoryLevel() if store is None else store.begin(0, visited)
        visited.add(key)
        first.append("", pack(marshal.dumps(t, MARSHAL_VERSION)), "", key, 0)
        if store is None:
            frontier = first.states
        else:
            store.commit(first, visited, {"depth": 0, "transitions": 0}, violations)
            frontier = store.frontier(0)
    try:
        for depth in range(len(per_depth), space.bounds.depth + 1):
            if per_depth[-1] == 0:
                return Outcome(per_depth, transitions, True, True, violations)
            reason = reached(until, violations)
            if reason:
                return Outcome(per_depth, transitions, False, False, violations, reason)
            began = clock()
            level_transitions = 0
            nxt: Any = MemoryLevel() if store is None else store.begin(depth, visited)
            distinct = sum(per_depth)
            if workers > 1 and len(frontier) >= PARALLEL_FROM:
                reason, level_transitions = _parallel_level(space, frontier, visited, nxt, violations, depth, workers,
                                                            on_state, should_stop, distinct)
            else:
                reason = None
                for done in range(len(frontier)):
                    if not done & 1023:
                        on_state(depth, done, len(frontier))
                    reason = should_stop(distinct + len(nxt))
                    if reason:
                        break
                    path, state, sleep = frontier[done]
                    for s in expand(space, state, template, sleep):
                        level_transitions += 1
                        child_path = path + SEPARATOR + s.code if path else s.code
                        if s.broken:
                            note_violations(violations, depth, child_path, s.broken)
                        if s.key not in visited:
                            arrival = len(visited.runs)
                            visited.add(s.key)
                            nxt.append(child_path, pack(s.state), s.sleep, s.key, arrival)
            if reason:
                if store is not None:
                    nxt.discard()
                return Outcome(per_depth, transitions, False, False, violations, reason)
            seconds = clock() - began
            if store is None:
                new_states = len(nxt)
                frontier = nxt.states
            else:
                # no seconds in the work directory: its files are the same bytes on every run
                new_states, _dropped = store.commit(nxt, visited, {"depth": depth, "transitions": level_transitions},
                                                    violations)
                frontier.close()
                frontier = store.frontier(depth)
            transitions += level_transitions
            per_depth.append(new_states)
            on_level(Level(depth, new_states, level_transitions, seconds, sum(per_depth)))
        # states at the last depth are found and judged but not expanded
        return Outcome(per_depth, transitions, True, per_depth[-1] == 0, violations)
    finally:
        if store is not None:
            frontier.close()
