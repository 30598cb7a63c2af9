"""The invariant registry (docs/protocol.md §C): one small named function per invariant.

Each check reads the partition's state and the checker's ghost state (``g``) and returns a
detail string when the invariant is broken, else ``None``.  Its ``tier`` says when it is
judged: ``STEP`` after every step, ``FINAL`` once at the end of a run (a stream judges the final
tier "as of now" in every summary).  The names are the exact result names of §C; the
expectation suites are generated from this registry.

Event-driven invariants (LogMatching, OffsetMonotonicity, AckedImpliesMinIsr, the loss
invariants) are detected by the checker where the step changed something, and only reported
here, so no check walks a whole log.

**What a verdict depends on.**  Each invariant declares the ``Input``s it reads; each step kind
declares the inputs it can change (``STEP_CHANGES``), and the rare effects that widen that for
one step (``EFFECT_CHANGES``: a fetch that wrote the ISR or ended a truncation phase).  After a
step the checker judges only the invariants whose inputs the step changed (``Judging.INCREMENTAL``);
``Judging.FULL`` judges every invariant after every step, and ``Judging.VERIFY`` does both and
also compares each input's value before and after the step (``INPUTS``), so a step that changes
an input its declaration misses fails loudly instead of hiding a violation.

Adding an invariant: one function below and one ``Invariant`` row in ``REGISTRY`` with the
inputs it reads.  Adding a step kind: its row in ``STEP_CHANGES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Callable

from .effects import IsrWritten, MetadataChanged, RoleChanged
from .replica import FetchState, Role
from .steps import StepKind

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .checker import Checker
    from .partition import Partition


class Tier(str, Enum):
    STEP = "step"  # judged after every step
    FINAL = "final"  # judged at the end of a run


class Input(str, Enum):
    """What a verdict can depend on, and what a step can change (one bit each in a mask)."""

    LOGS = "logs"  # any replica's records: LEOs, pair and committed mismatches, epochs along a log
    HWS = "hws"  # any replica's HW, a leader's highest HW
    RESPONSES = "responses"  # a follower's HW of the last fetch response
    CACHES = "caches"  # the epoch caches
    ROLES = "roles"  # alive, role, believed leader, leader and partition epochs, fetch state, LeaderAndIsr processed, a leader's own ISR
    CONTROLLER = "controller"  # the controller's leader, leader epoch, ISR, ELR, LastKnownELR, fenced brokers
    FINDINGS = "findings"  # what the checker detected in this step's effects (losses, log matching, acks ...)

    @property
    def bit(self) -> int:
        return INPUT_BITS[self]


INPUT_BITS: dict[Input, int] = {inp: 1 << i for i, inp in enumerate(Input)}
ALL_INPUTS: frozenset[Input] = frozenset(Input)


def mask(inputs: frozenset[Input]) -> int:
    m = 0
    for inp in inputs:
        m |= INPUT_BITS[inp]
    return m


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    ref: str  # the id in §C
    statement: str
    tier: Tier
    check: Callable[["Partition", "Checker"], str | None]
    reads: frozenset[Input]  # what the verdict depends on


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
    reps = p.replicas
    pair_mismatch = g.pair_mismatch
    for leader in reps.values():
        if not leader.alive or leader.role is not Role.LEADER:
            continue
        hw = leader.hw
        if hw <= 0:
            continue
        lid = leader.id
        ls = leader.leadership
        assert ls is not None  # a live leader has its leader state
        members = ls.isr if local else p.controller.isr
        for member in members:
            if member == lid:
                continue
            first_bad = reps[member].log.end
            mm = pair_mismatch[(lid, member) if lid < member else (member, lid)]
            if mm is not None and mm < first_bad:
                first_bad = mm
            if first_bad < hw:
                which = "its ISR" if local else "the controller's ISR"
                return (
                    f"leader {lid} (epoch {leader.leader_epoch}, HW {hw}) and {which} member {member} "
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
    pair_mismatch = g.pair_mismatch
    if all(mm is None for mm in pair_mismatch.values()):
        return None
    settled = [
        r for r in p.replicas.values()
        if r.alive and r.processed_leader_and_isr and r.fetch_state is not FetchState.TRUNCATING
    ]
    for i, a in enumerate(settled):
        for b in settled[i + 1:]:
            mm = pair_mismatch[(a.id, b.id) if a.id < b.id else (b.id, a.id)]
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
        if r.hw > r.log.end:
            return f"replica {r.id} has HW {r.hw} above its LEO {r.leo}"
        ls = r.leadership
        if r.role is Role.LEADER and ls is not None and r.hw < ls.highest_hw:
            return f"leader {r.id} lowered its HW from {ls.highest_hw} to {r.hw}"
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
    for r in p.replicas.values():
        if not r.presumes_leadership:
            continue
        if r.leader_epoch in seen:
            return f"replicas {seen[r.leader_epoch]} and {r.id} both lead in epoch {r.leader_epoch}"
        seen[r.leader_epoch] = r.id
    return None


def acked_implies_min_isr(p: "Partition", g: "Checker") -> str | None:
    """C.12 An ack is sent only with ISR >= min.insync.replicas, every ISR member holding it."""
    return g.findings.get("AckedImpliesMinIsr")


def leader_candidate_completeness(p: "Partition", g: "Checker") -> str | None:
    """C.13 Every live member of the controller's ISR and ELR holds every committed record
    (while Faultless and no unclean election: the TLA+ LeaderCandidateCompleteness)."""
    if not g.faultless or g.unclean_election:
        return None
    c = p.controller
    end = len(g.committed)
    for r in sorted(set(c.isr) | set(c.elr)):
        rep = p.replicas[r]
        if not rep.alive:
            continue
        cm = g.committed_mismatch_of[r]
        if cm is not None or rep.log.end < end:
            first = cm if cm is not None else rep.log.end
            where = "ISR" if r in c.isr else "ELR"
            return f"{where} member {r} lacks committed offset {first} (committed end {end}, its LEO {rep.log.end})"
    return None


def unclean_exclusion(p: "Partition", g: "Checker") -> str | None:
    """C.14 A replica back from a lossy unclean shutdown is neither leader nor in the ISR or ELR
    until it follows the leader and holds every committed record again."""
    if g.unclean_election:
        return None  # an unclean election (or recovery) chose knowingly
    c = p.controller
    for r in sorted(g.suspects):
        if not p.replicas[r].alive:
            continue
        if c.leader == r:
            return f"replica {r} lost data in an unclean shutdown and leads before catching up"
        if r in c.isr or r in c.elr:
            where = "ISR" if r in c.isr else "ELR"
            return f"replica {r} lost data in an unclean shutdown and is in the {where} {list(c.isr if r in c.isr else c.elr)} before catching up"
    return None


def min_isr_recovery_quorum(p: "Partition", g: "Checker") -> str | None:
    """C.15 With ELR and balanced recovery, when the ISR and ELR are both empty, the
    LastKnownELR (the recovery quorum) has at least min.insync.replicas members."""
    c = p.controller
    if not p.variant.elr or p.variant.unclean_recovery != "balanced" or c.isr or c.elr:
        return None
    need = min(p.config.min_insync_replicas, len(p.assignment))
    if len(c.last_known_elr) < need:
        return f"ISR and ELR are empty and the LastKnownELR {list(c.last_known_elr)} has fewer than {need} members"
    return None


L, H, R, C, O, K, F = Input.LOGS, Input.HWS, Input.RESPONSES, Input.CACHES, Input.ROLES, Input.CONTROLLER, Input.FINDINGS

REGISTRY: tuple[Invariant, ...] = (
    Invariant("NoCommittedDataLoss", "C.1", "a committed record is never missing from the leader's log while Faultless", Tier.STEP, no_committed_data_loss, frozenset({F})),
    Invariant("NoAckedDataLoss", "C.1a", "an acked record is never missing from the leader's log while Faultless", Tier.STEP, no_acked_data_loss, frozenset({F})),
    Invariant("MinIsrDurability", "C.1b", "an acked record survives unless min.insync.replicas of its holders lost it", Tier.STEP, min_isr_durability, frozenset({F})),
    Invariant("StrongIsr", "C.2", "every controller-ISR member matches each presumed leader below its HW", Tier.STEP, strong_isr, frozenset({L, H, O, K})),
    Invariant("WeakIsr", "C.3", "every member of a leader's own ISR matches it below its HW", Tier.STEP, weak_isr, frozenset({L, H, O})),
    Invariant("CommittedPrefixAgreement", "C.4", "settled live replicas agree below min(HW_a, HW_b)", Tier.STEP, committed_prefix_agreement, frozenset({L, H, O})),
    Invariant("EventualConvergence", "C.5", "settled followers of the leader hold its log at the end", Tier.FINAL, eventual_convergence, frozenset({L, O, K})),
    Invariant("LogMatching", "C.6", "same epoch at an offset implies identical prefixes", Tier.STEP, log_matching, frozenset({F})),
    Invariant("EpochMonotonicity", "C.7", "epochs non-decreasing along logs; caches strictly increasing and true to the log", Tier.STEP, epoch_monotonicity, frozenset({L, C, F})),
    Invariant("HighWatermarkSanity", "C.8", "HW <= LEO, a leader's HW never decreases, a follower's HW <= the last HW sent", Tier.STEP, high_watermark_sanity, frozenset({L, H, R, O})),
    Invariant("OffsetMonotonicity", "C.9", "offsets strictly increasing and contiguous", Tier.STEP, offset_monotonicity, frozenset({F})),
    Invariant("LeaderInIsr", "C.10", "leader != none implies leader in ISR", Tier.STEP, leader_in_isr, frozenset({K})),
    Invariant("UniqueLeaderPerEpoch", "C.11", "no epoch reused; one presumed leader per epoch", Tier.STEP, unique_leader_per_epoch, frozenset({O, F})),
    Invariant("AckedImpliesMinIsr", "C.12", "acks only with ISR >= min.isr and every ISR member holding the record", Tier.STEP, acked_implies_min_isr, frozenset({F})),
    Invariant("LeaderCandidateCompleteness", "C.13", "every live ISR and ELR member holds every committed record (Faultless)", Tier.STEP, leader_candidate_completeness, frozenset({L, H, O, K})),
    Invariant("UncleanExclusion", "C.14", "a replica back from a lossy unclean shutdown is not leader, ISR or ELR until caught up (no unclean election)", Tier.STEP, unclean_exclusion, frozenset({L, R, O, K})),
    Invariant("MinIsrRecoveryQuorum", "C.15", "ISR and ELR empty implies a LastKnownELR of at least min.insync.replicas (ELR, balanced)", Tier.STEP, min_isr_recovery_quorum, frozenset({K})),
)

# What each step kind can change (its handler, the end-of-step checkpoint and flush included).
# A produce writes the leader's log and may raise its HW; a fetch writes the follower's log, HW
# and last response HW and may raise the leader's HW; the control plane (roles, ISRs, the
# controller) is changed by the other kinds, and by a fetch only as its effects say.  HW
# checkpoints and recovery points are no invariant's input.
STEP_CHANGES: dict[StepKind, frozenset[Input]] = {
    StepKind.ELECT: ALL_INPUTS,
    StepKind.CONTROLLER_REMOVE: ALL_INPUTS,
    StepKind.LEADER_AND_ISR: ALL_INPUTS,
    StepKind.PRODUCE: frozenset({L, H, C}),
    StepKind.FETCH: frozenset({L, H, R, C}),
    StepKind.SHRINK_ISR: frozenset({H, O, K}),
    StepKind.TICK: frozenset({H, O, K}),
    StepKind.CHECKPOINT_HW: frozenset(),
    StepKind.FLUSH: frozenset(),
    StepKind.CRASH: frozenset({L, H, R, O, K}),
    StepKind.RESTART: frozenset({H, C, O, K}),  # K: a KRaft registration ends a controlled shutdown (and registers, fences)
    StepKind.SHUTDOWN: ALL_INPUTS,
    StepKind.FENCE: ALL_INPUTS,
    StepKind.UNFENCE: ALL_INPUTS,
    StepKind.ALTER_PARTITION: ALL_INPUTS,
    StepKind.LOG_INFO: ALL_INPUTS,
    StepKind.LAG_METADATA: frozenset({K}),  # only which brokers lag the metadata log
    StepKind.REASSIGN: ALL_INPUTS,  # a partition change (a leaderless partition may elect)
}
assert set(STEP_CHANGES) == set(StepKind), "every step kind declares what it can change"

# Effects that widen one step's changes beyond its kind's row.
EFFECT_CHANGES: dict[type, frozenset[Input]] = {
    IsrWritten: frozenset({O, K}),  # a leader wrote an ISR change (a fetch expanding the ISR)
    RoleChanged: frozenset({O, L, H, C, R}),  # a fetch ended a truncation phase or halted its follower
    MetadataChanged: frozenset({O, K}),  # KRaft: the controller wrote a partition change (a restart's registration)
}
del L, H, R, C, O, K, F

STEP_CHANGE_MASKS: dict[StepKind, int] = {kind: mask(inputs) for kind, inputs in STEP_CHANGES.items()}
EFFECT_CHANGE_MASKS: dict[type, int] = {kind: mask(inputs) for kind, inputs in EFFECT_CHANGES.items()}

INPUT_MEANING: dict[Input, str] = {
    Input.LOGS: "any replica's records (LEOs, pair and committed mismatches)",
    Input.HWS: "any replica's HW, a leader's highest HW",
    Input.RESPONSES: "a follower's HW of its last fetch response",
    Input.CACHES: "the epoch caches",
    Input.ROLES: "alive, role, believed leader, leader and partition epochs, fetch state, a leader's own ISR",
    Input.CONTROLLER: "the controller's leader, leader epoch, ISR, ELR, LastKnownELR and fenced brokers",
    Input.FINDINGS: "what the checker found in the step's effects (losses, log matching, offsets, acks, epoch reuse)",
}
assert set(INPUT_MEANING) == set(Input)


def inputs_markdown() -> str:
    """The tables of docs/protocol.md §7.1: what each invariant reads, what each step kind changes."""
    def names(inputs: frozenset[Input]) -> str:
        return ", ".join(f"`{i.value}`" for i in Input if i in inputs) or "nothing"

    lines = ["| input | what it is |", "|---|---|"]
    lines += [f"| `{i.value}` | {INPUT_MEANING[i]} |" for i in Input]
    lines += ["", "| invariant | reads |", "|---|---|"]
    lines += [f"| `{inv.name}` | {names(inv.reads)} |" for inv in REGISTRY]
    lines += ["", "| step kind | can change |", "|---|---|"]
    lines += [f"| `{kind.value}` | {names(STEP_CHANGES[kind])} |" for kind in StepKind]
    lines += ["", "| effect (within a fetch) | adds |", "|---|---|"]
    lines += [f"| `{effect.__name__}` | {names(inputs)} |" for effect, inputs in EFFECT_CHANGES.items()]
    return "\n".join(lines) + "\n"


INVARIANT_NAMES: tuple[str, ...] = tuple(i.name for i in REGISTRY)
INVARIANTS: dict[str, Invariant] = {i.name: i for i in REGISTRY}

# The verdict invariants of protocol.md §B (LOSS, SISR, DIV): an ``expect`` block's
# ``violations`` list is exact over these, and "at least" for any other name it lists.
VERDICT_INVARIANTS: tuple[str, ...] = ("NoCommittedDataLoss", "StrongIsr", "EventualConvergence")
