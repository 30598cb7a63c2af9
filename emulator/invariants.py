"""The invariant registry (docs/protocol.md §C): one small named function per invariant.

Each check reads the partition's state and the checker's ghost state (``g``) and returns a
detail string when the invariant is broken, else ``None``.  Its ``tier`` says when it is
judged: ``STEP`` after every step, ``FINAL`` once at the end of a run (a stream judges the final
tier "as of now" in every summary).  The names are the exact result names of §C; the
expectation suites are generated from this registry.

Event-driven invariants (LogMatching, OffsetMonotonicity, AckedImpliesMinIsr, the loss
invariants) are detected by the checker where the step changed something, and only reported
here, so no check walks a whole log.

Adding an invariant: one function below and one ``Invariant`` row in ``REGISTRY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Callable

from .replica import FetchState, Role

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .checker import Checker
    from .partition import Partition


class Tier(str, Enum):
    STEP = "step"  # judged after every step
    FINAL = "final"  # judged at the end of a run


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    ref: str  # the id in §C
    statement: str
    tier: Tier
    check: Callable[["Partition", "Checker"], str | None]


def _presumers(p: "Partition"):
    return [r for r in p.replicas.values() if r.presumes_leadership]


def no_committed_data_loss(p: "Partition", g: "Checker") -> str | None:
    """C.1 Faultless ∧ the leader finished becoming leader ⇒ it holds every committed record."""
    return g.findings.get("NoCommittedDataLoss")


def no_acked_data_loss(p: "Partition", g: "Checker") -> str | None:
    """C.1a As C.1, for records acknowledged to an acks=all producer."""
    return g.findings.get("NoAckedDataLoss")


def min_isr_durability(p: "Partition", g: "Checker") -> str | None:
    """C.1b An acked record survives while fewer than min.insync.replicas of its holders lost it."""
    return g.findings.get("MinIsrDurability")


def _isr_agreement(p: "Partition", g: "Checker", local: bool) -> str | None:
    for leader in _presumers(p):
        hw = leader.hw
        if hw <= 0:
            continue
        members = leader.leadership.isr if local else p.controller.isr
        for member in members:
            if member == leader.id:
                continue
            other = p.replicas[member]
            mm = g.mismatch(leader.id, member)
            first_bad = min(x for x in (mm, other.leo) if x is not None)
            if first_bad < hw:
                which = "its ISR" if local else "the controller's ISR"
                return (
                    f"leader {leader.id} (epoch {leader.leader_epoch}, HW {hw}) and {which} member {member} "
                    f"disagree at offset {first_bad}"
                )
    return None


def strong_isr(p: "Partition", g: "Checker") -> str | None:
    """C.2 Every replica presuming leadership agrees below its HW with every controller-ISR member."""
    return _isr_agreement(p, g, local=False)


def weak_isr(p: "Partition", g: "Checker") -> str | None:
    """C.3 As StrongIsr, over the leader's own (presumed) ISR."""
    return _isr_agreement(p, g, local=True)


def committed_prefix_agreement(p: "Partition", g: "Checker") -> str | None:
    """C.4 Settled live replicas agree below the smaller of their HWs, even mid-protocol."""
    settled = [
        r for r in p.replicas.values()
        if r.alive and r.processed_leader_and_isr and r.fetch_state is not FetchState.TRUNCATING
    ]
    for i, a in enumerate(settled):
        for b in settled[i + 1:]:
            mm = g.mismatch(a.id, b.id)
            if mm is not None and mm < min(a.hw, b.hw):
                return f"replicas {a.id} (HW {a.hw}) and {b.id} (HW {b.hw}) differ at offset {mm}"
    return None


def eventual_convergence(p: "Partition", g: "Checker") -> str | None:
    """C.5 At the end, every settled live follower of the controller's leader matches its log.

    A follower that is only behind (or ahead with a matching prefix) converges by fetching;
    a difference below both LEOs never does.
    """
    c = p.controller
    if c.leader is None or not p.replicas[c.leader].alive:
        return None
    for f in p.replicas.values():
        if (
            f.id != c.leader and f.alive and f.role is Role.FOLLOWER and f.believed_leader == c.leader
            and f.leader_epoch == c.leader_epoch and f.fetch_state is FetchState.FETCHING
        ):
            mm = g.mismatch(f.id, c.leader)
            if mm is not None:
                return f"follower {f.id} diverges from leader {c.leader} at offset {mm}"
    return None


def log_matching(p: "Partition", g: "Checker") -> str | None:
    """C.6 Two logs holding the same epoch at an offset are identical up to that offset."""
    return g.findings.get("LogMatching")


def epoch_monotonicity(p: "Partition", g: "Checker") -> str | None:
    """C.7 Epochs never decrease along a log; cache entries increase and match the log."""
    found = g.findings.get("EpochMonotonicity")
    if found:
        return found
    for rid, from_offset in sorted(g.dirty_caches.items()):
        r = p.replicas[rid]
        entries = r.cache.entries
        # Only the entries a step can have invalidated: all of them after a cache change,
        # those at or above the appended offsets after a plain append.
        first = len(entries)
        while first > 0 and entries[first - 1].start_offset >= from_offset:
            first -= 1
        first = max(first - 1, 0)
        for prev, cur in zip(entries[first:], entries[first + 1:]):
            if not (cur.epoch > prev.epoch and cur.start_offset > prev.start_offset):
                return f"replica {rid}: cache entries {prev} and {cur} do not strictly increase"
        for e in entries[first:]:
            s = e.start_offset
            if s < r.log.start:
                continue  # checked before its records were compacted
            if s < r.leo and (r.log[s][0] != e.epoch or (s > 0 and r.log[s - 1][0] >= e.epoch)):
                return f"replica {rid}: cache entry (epoch {e.epoch}, start {s}) does not match its log"
    return None


def high_watermark_sanity(p: "Partition", g: "Checker") -> str | None:
    """C.8 HW <= LEO; a leader's HW never decreases; a follower's HW <= the HW it was sent."""
    for r in p.replicas.values():
        if not r.alive:
            continue
        if r.hw > r.leo:
            return f"replica {r.id} has HW {r.hw} above its LEO {r.leo}"
        if r.role is Role.LEADER and r.hw < r.leadership.highest_hw:
            return f"leader {r.id} lowered its HW from {r.leadership.highest_hw} to {r.hw}"
        if r.role is Role.FOLLOWER and r.last_response_hw is not None and r.hw > r.last_response_hw:
            return f"follower {r.id} has HW {r.hw} above the leader's HW {r.last_response_hw} in the last response"
    return None


def offset_monotonicity(p: "Partition", g: "Checker") -> str | None:
    """C.9 Offsets are strictly increasing and contiguous in every log."""
    return g.findings.get("OffsetMonotonicity")


def leader_in_isr(p: "Partition", g: "Checker") -> str | None:
    """C.10 The controller's leader, when there is one, is in the controller's ISR."""
    c = p.controller
    if c.leader is not None and c.leader not in c.isr:
        return f"leader {c.leader} is not in the ISR {list(c.isr)}"
    return None


def unique_leader_per_epoch(p: "Partition", g: "Checker") -> str | None:
    """C.11 The controller never reuses an epoch; at most one replica leads in each epoch."""
    found = g.findings.get("UniqueLeaderPerEpoch")
    if found:
        return found
    seen: dict[int, int] = {}
    for r in _presumers(p):
        if r.leader_epoch in seen:
            return f"replicas {seen[r.leader_epoch]} and {r.id} both lead in epoch {r.leader_epoch}"
        seen[r.leader_epoch] = r.id
    return None


def acked_implies_min_isr(p: "Partition", g: "Checker") -> str | None:
    """C.12 An ack is sent only with ISR >= min.insync.replicas, every ISR member holding it."""
    return g.findings.get("AckedImpliesMinIsr")


REGISTRY: tuple[Invariant, ...] = (
    Invariant("NoCommittedDataLoss", "C.1", "a committed record is never missing from the leader's log while Faultless", Tier.STEP, no_committed_data_loss),
    Invariant("NoAckedDataLoss", "C.1a", "an acked record is never missing from the leader's log while Faultless", Tier.STEP, no_acked_data_loss),
    Invariant("MinIsrDurability", "C.1b", "an acked record survives unless min.insync.replicas of its holders lost it", Tier.STEP, min_isr_durability),
    Invariant("StrongIsr", "C.2", "every controller-ISR member matches each presumed leader below its HW", Tier.STEP, strong_isr),
    Invariant("WeakIsr", "C.3", "every member of a leader's own ISR matches it below its HW", Tier.STEP, weak_isr),
    Invariant("CommittedPrefixAgreement", "C.4", "settled live replicas agree below min(HW_a, HW_b)", Tier.STEP, committed_prefix_agreement),
    Invariant("EventualConvergence", "C.5", "settled followers of the leader hold its log at the end", Tier.FINAL, eventual_convergence),
    Invariant("LogMatching", "C.6", "same epoch at an offset implies identical prefixes", Tier.STEP, log_matching),
    Invariant("EpochMonotonicity", "C.7", "epochs non-decreasing along logs; caches strictly increasing and true to the log", Tier.STEP, epoch_monotonicity),
    Invariant("HighWatermarkSanity", "C.8", "HW <= LEO, a leader's HW never decreases, a follower's HW <= the last HW sent", Tier.STEP, high_watermark_sanity),
    Invariant("OffsetMonotonicity", "C.9", "offsets strictly increasing and contiguous", Tier.STEP, offset_monotonicity),
    Invariant("LeaderInIsr", "C.10", "leader != none implies leader in ISR", Tier.STEP, leader_in_isr),
    Invariant("UniqueLeaderPerEpoch", "C.11", "no epoch reused; one presumed leader per epoch", Tier.STEP, unique_leader_per_epoch),
    Invariant("AckedImpliesMinIsr", "C.12", "acks only with ISR >= min.isr and every ISR member holding the record", Tier.STEP, acked_implies_min_isr),
)

INVARIANT_NAMES: tuple[str, ...] = tuple(i.name for i in REGISTRY)
INVARIANTS: dict[str, Invariant] = {i.name: i for i in REGISTRY}

# The verdict invariants of protocol.md §B (LOSS, SISR, DIV): an ``expect`` block's
# ``violations`` list is exact over these, and "at least" for any other name it lists.
VERDICT_INVARIANTS: tuple[str, ...] = ("NoCommittedDataLoss", "StrongIsr", "EventualConvergence")
