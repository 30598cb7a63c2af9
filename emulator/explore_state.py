"""The canonical encoding of a partition search's state (``replemu explore`` of the partition
family, ``emulator.explore``): a ``Replay`` and its ``Counters`` as nested tuples, and back.

``canonical`` keeps everything that can change a future step or verdict and nothing that only
records history, so two paths that reach the same state meet in the visited set
(``emulator.search``): step numbers, leadership generations, produce steps of pending and
acknowledged writes and what the checker already reported are left out, partition epochs
(zkVersions) and broker epochs are replaced by their ranks, and dict items are listed in replica
order.  ``restore`` rebuilds a replay from a tuple (history zeroed); ``STATE_ENCODING`` names the
layout, which a work directory records.
"""

from __future__ import annotations

import marshal
import zlib

from .checker import AckInfo
from .epoch_cache import LeaderEpochCache
from .log import Log
from .replica import (
    AlterPartitionRequest,
    FetchState,
    LeaderAndIsrRequest,
    LeaderState,
    PendingAck,
    Role,
)
from .run import Replay
from .search import MARSHAL_VERSION, Counters

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
        tuple(replicas), checker, counters.spent,
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
    return replay, Counters(counters)


def encode(replay: Replay, counters: Counters) -> bytes:
    """The canonical bytes of a state (equal states, equal bytes, in any process)."""
    return marshal.dumps(canonical(replay, counters), MARSHAL_VERSION)


def decode(template: Replay, packed: bytes) -> tuple[Replay, Counters]:
    """The replay and counters of a packed state."""
    return restore(template, marshal.loads(zlib.decompress(packed)))

