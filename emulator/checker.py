"""The checker: ghost state built from what steps did, and the invariants judged on it.

Auxiliary variables for verifying invariants, not part of the protocol (as in
Vanlightly/kafka-tlaplus); the replicas never read them and the partition never calls them:
the checker *observes* each step's effects (``emulator.effects``) and the partition's state.

* ``committed`` — C(t) of protocol.md §C: every (offset, record) that was ever below the HW
  of a replica presuming leadership.  Kept as the first record committed at each offset plus
  a list of *other* records committed later at an offset that already had one ("committed
  twice").
* ``acked`` — A(t): every (offset, record) acknowledged to an ``acks=all`` producer, with the
  replicas that held it at ack time and how many of them later lost it in a power failure.
* ``faultless`` — Faultless(t): no unclean election and no power failure that destroyed
  committed data no other live ISR member still held (§E.15).
* Per pair of replicas, the first offset where their logs differ; per replica, the first
  offset where its log differs from ``committed``.  Both are updated from what a step
  appended or truncated, so a step's checking work does not grow with the length of the logs.

``violations`` lists each invariant of the registry the first time it breaks; ``losses`` every
committed or acked record the leader no longer holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable

from ._build import mypyc_attr
from .bugs import UndeclaredChange as UndeclaredChange  # defined where it is never compiled
from .effects import (
    Acked,
    Appended,
    CacheChanged,
    Effect,
    EpochReused,
    IsrWritten,
    LeaderHw,
    LeadershipEnded,
    MetadataChanged,
    PowerLoss,
    RoleChanged,
    Truncated,
    UncleanElection,
)
from .invariants import (
    EFFECT_CHANGE_MASKS,
    INPUT_BITS,
    REGISTRY,
    STEP_CHANGE_MASKS,
    Input,
    Invariant,
    Tier,
    mask,
)
from .log import Log
from .replica import FetchState, Role

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition, StepOutcome

Record = tuple[int, str]  # (epoch, value)


class Judging(str, Enum):
    """How the per-step invariants are judged (the same findings in every mode)."""

    INCREMENTAL = "incremental"  # only those whose declared inputs the step changed
    FULL = "full"  # every invariant after every step
    VERIFY = "verify"  # incremental, then full, and the inputs compared before and after: any disagreement raises


def _logs(p: "Partition") -> Any:
    return tuple((r.log.start, r.log.end, tuple(r.log.retained())) for r in p.replicas.values())


def _hws(p: "Partition") -> Any:
    return tuple((r.hw, None if r.leadership is None else r.leadership.highest_hw) for r in p.replicas.values())


def _roles(p: "Partition") -> Any:
    return tuple(
        (r.alive, r.role, r.believed_leader, r.leader_epoch, r.partition_epoch, r.fetch_state, r.processed_leader_and_isr,
         None if r.leadership is None else r.leadership.isr)
        for r in p.replicas.values()
    )


def _controller(p: "Partition") -> Any:
    c = p.controller
    return c.leader, c.leader_epoch, c.isr, c.elr, c.last_known_elr, c.fenced, c.shutting_down


# The value of each input, for ``Judging.VERIFY`` (FINDINGS is the checker's own: not compared).
INPUTS: dict[Input, Callable[["Partition"], Any]] = {
    Input.LOGS: _logs,
    Input.HWS: _hws,
    Input.RESPONSES: lambda p: tuple(r.last_response_hw for r in p.replicas.values()),
    Input.CACHES: lambda p: tuple(tuple(r.cache.entries) for r in p.replicas.values()),
    Input.ROLES: _roles,
    Input.CONTROLLER: lambda p: _controller(p),
}
assert set(INPUTS) | {Input.FINDINGS} == set(Input)

FINDINGS_BIT = INPUT_BITS[Input.FINDINGS]
STEP_TIER: tuple[tuple[int, Invariant], ...] = tuple((mask(i.reads), i) for i in REGISTRY if i.tier is Tier.STEP)
FINAL_TIER: tuple[Invariant, ...] = tuple(i for i in REGISTRY if i.tier is Tier.FINAL)
# The per-step invariants that read an input of a mask, in registry order (built as masks occur).
_JUDGED_FOR: dict[int, tuple[Invariant, ...]] = {}


def judged_for(changed: int) -> tuple[Invariant, ...]:
    found = _JUDGED_FOR.get(changed)
    if found is None:
        found = _JUDGED_FOR[changed] = tuple(inv for reads, inv in STEP_TIER if reads & changed)
    return found


def input_values(p: "Partition") -> dict[Input, Any]:
    return {inp: read(p) for inp, read in INPUTS.items()}


@dataclass(slots=True)
class AckInfo:
    """One acknowledged record: where, when, and who held it."""

    step: int
    holders: frozenset[int]
    lost_by_power: int = 0


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class Checker:
    """The checker's ghost state and findings for one partition (see the module docstring)."""

    __slots__ = ("judging", "committed", "committed_twice", "committed_twice_set", "acked", "unclean_election",
                 "faultless", "pair_mismatch", "committed_mismatch_of", "presumer_covered", "losses", "reported_losses",
                 "loss_cursor", "findings", "dirty_caches", "unjudged_caches", "violations", "violated", "suspects",
                 "lossy_shutdowns")

    def __init__(self, assignment: tuple[int, ...], judging: Judging = Judging.INCREMENTAL) -> None:
        self.judging = judging
        self.committed = Log()
        self.committed_twice: list[tuple[int, Record]] = []
        self.committed_twice_set: set[tuple[int, Record]] = set()
        self.acked: dict[tuple[int, Record], AckInfo] = {}
        self.unclean_election = False
        self.faultless = True
        ids = sorted(assignment)
        self.pair_mismatch: dict[tuple[int, int], int | None] = {
            (a, b): None for i, a in enumerate(ids) for b in ids[i + 1:]
        }
        self.committed_mismatch_of: dict[int, int | None] = {r: None for r in ids}
        # HW already folded into ``committed`` for a replica's current leadership.
        self.presumer_covered: dict[int, int] = {}
        self.losses: list[dict] = []
        self.reported_losses: set[tuple[int, Record]] = set()
        self.loss_cursor: tuple[tuple[int, int, int], int, int] | None = None
        # Per-step findings of the event-driven invariants: name -> first detail.
        self.findings: dict[str, str] = {}
        # Replicas whose epoch cache must be re-checked against their log, and from which
        # offset: what a cache change reports (``CacheChanged.from_offset``), the append's base
        # offset after a plain append.
        self.dirty_caches: dict[int, int] = {}
        # Replicas started from files whose cache no step has judged yet (their first append does).
        self.unjudged_caches: set[int] = set()
        self.violations: list[dict] = []
        self.violated: set[str] = set()
        # Replicas that lost records in a power failure and have not caught up with a leader since
        # (UncleanExclusion): a delivered fetch reaching the leader's HW clears them.
        self.suspects: set[int] = set()
        self.lossy_shutdowns = 0  # power failures that destroyed a committed record

    # -- observing a step -------------------------------------------------------------------

    def observe(self, p: "Partition", outcome: "StepOutcome", before: dict[Input, Any] | None = None) -> list[dict]:
        """Fold one step's effects into the ghost state, look for losses, judge the per-step
        invariants whose inputs the step changed; returns the violations first found at this step."""
        self.findings, self.dirty_caches = {}, {}
        changed = STEP_CHANGE_MASKS[outcome.kind] | self.observe_effects(p, outcome.effects)
        self.scan_losses(p, outcome.step)
        if self.suspects:
            self.clear_caught_up(p)
        if self.findings:
            changed |= FINDINGS_BIT
        if self.judging is Judging.INCREMENTAL:
            return self.judge_changed(p, changed, outcome.step)
        if self.judging is Judging.FULL:
            self.dirty_caches = dict.fromkeys(p.replicas, 0)  # every cache entry, every step
            return self.judge(p, Tier.STEP, outcome.step)
        return self._verify(p, changed, outcome, before)

    def judge_changed(self, p: "Partition", changed: int, step: int) -> list[dict]:
        """Judge the per-step invariants that read an input in ``changed`` (a mask of ``Input`` bits)."""
        fired: list[dict] = []
        violated = self.violated
        for inv in judged_for(changed):
            if inv.name not in violated:
                detail = inv.check(p, self)
                if detail is not None:
                    violated.add(inv.name)
                    v = {"invariant": inv.name, "step": step, "detail": detail}
                    self.violations.append(v)
                    fired.append(v)
        return fired

    def _verify(self, p: "Partition", changed: int, outcome: "StepOutcome", before: dict[Input, Any] | None) -> list[dict]:
        """``Judging.VERIFY``: the inputs the step changed (``before`` it: ``input_values``) are
        declared, and full judging agrees."""
        if before is not None:
            after = input_values(p)
            undeclared = [inp.value for inp, value in after.items() if value != before[inp] and not changed & INPUT_BITS[inp]]
            if undeclared:
                raise UndeclaredChange(f"step {outcome.step} ({outcome.kind.value}) changed {undeclared}, which it does not declare")
        fired = self.judge_changed(p, changed, outcome.step)
        self.dirty_caches = dict.fromkeys(p.replicas, 0)  # full judging checks every cache entry
        missed = [inv.name for _reads, inv in STEP_TIER if inv.name not in self.violated and inv.check(p, self) is not None]
        if missed:
            raise UndeclaredChange(f"step {outcome.step} ({outcome.kind.value}): {missed} broken but not judged (their inputs were not declared changed)")
        return fired

    def finish(self, p: "Partition") -> list[dict]:
        """Judge the final-tier invariants (EventualConvergence) at the end of a run."""
        return self.judge(p, Tier.FINAL, p.step_number)

    def final_findings(self, p: "Partition") -> list[dict]:
        """What the final tier would report if the run ended now (recorded nowhere)."""
        return [
            {"invariant": inv.name, "step": p.step_number, "detail": detail}
            for inv in FINAL_TIER
            if inv.name not in self.violated and (detail := inv.check(p, self)) is not None
        ]

    def judge(self, p: "Partition", tier: Tier, step: int) -> list[dict]:
        fired = []
        for inv in REGISTRY:
            if inv.tier is not tier or inv.name in self.violated:
                continue
            detail = inv.check(p, self)
            if detail is not None:
                self.violated.add(inv.name)
                v = {"invariant": inv.name, "step": step, "detail": detail}
                self.violations.append(v)
                fired.append(v)
        return fired

    def observe_effects(self, p: "Partition", effects: list[Effect]) -> int:
        """Fold effects into the ghost state; returns the ``Input`` bits they add to their step's changes."""
        widened = 0
        for e in effects:
            if isinstance(e, Appended):
                self._appended(p, e)
            elif isinstance(e, LeaderHw):
                self._leader_hw(p, e)
            elif isinstance(e, Truncated):
                self._truncated(e)
            elif isinstance(e, CacheChanged):
                rid = e.replica
                if rid in self.unjudged_caches:  # started from files: judged whole once
                    self.unjudged_caches.discard(rid)
                    self.dirty_caches[rid] = 0
                else:
                    self.dirty_caches[rid] = min(self.dirty_caches.get(rid, e.from_offset), e.from_offset)
            elif isinstance(e, Acked):
                self._acked(p, e)
            elif isinstance(e, LeadershipEnded):
                self.presumer_covered.pop(e.replica, None)
            elif isinstance(e, UncleanElection):
                self.unclean_election = True
                self.faultless = False
            elif isinstance(e, PowerLoss):
                self._power_loss(p, e)
            elif isinstance(e, EpochReused):
                self.find("UniqueLeaderPerEpoch", e.detail)
            elif isinstance(e, (IsrWritten, RoleChanged, MetadataChanged)):
                widened |= EFFECT_CHANGE_MASKS[type(e)]
        return widened

    # -- reading ------------------------------------------------------------------------

    def copy(self) -> "Checker":
        """An independent copy: every container a step mutates is copied, immutable values shared."""
        h = Checker.__new__(Checker)
        h.judging, h.unclean_election, h.faultless, h.loss_cursor = self.judging, self.unclean_election, self.faultless, self.loss_cursor
        h.committed = self.committed.copy()
        h.committed_twice, h.committed_twice_set = list(self.committed_twice), set(self.committed_twice_set)
        h.acked = {k: AckInfo(a.step, a.holders, a.lost_by_power) for k, a in self.acked.items()}
        h.pair_mismatch, h.committed_mismatch_of = dict(self.pair_mismatch), dict(self.committed_mismatch_of)
        h.presumer_covered, h.losses, h.reported_losses = dict(self.presumer_covered), list(self.losses), set(self.reported_losses)
        h.findings, h.dirty_caches, h.unjudged_caches = dict(self.findings), dict(self.dirty_caches), set(self.unjudged_caches)
        h.violations, h.violated = list(self.violations), set(self.violated)
        h.suspects, h.lossy_shutdowns = set(self.suspects), self.lossy_shutdowns
        return h

    def clear_caught_up(self, p: "Partition") -> None:
        """A suspect (UncleanExclusion) is trusted again once it is a settled follower of the
        controller's leader in its epoch (its truncation phase done) and holds every committed
        record: it has provably caught up."""
        c = p.controller
        end = len(self.committed)
        for r in sorted(self.suspects):
            rep = p.replicas[r]
            if (rep.alive and rep.role is Role.FOLLOWER and rep.fetch_state is FetchState.FETCHING
                    and rep.believed_leader == c.leader and rep.leader_epoch == c.leader_epoch
                    and self.committed_mismatch_of[r] is None and rep.log.end >= end):
                self.suspects.discard(r)

    def mismatch(self, a: int, b: int) -> int | None:
        """First offset below both LEOs where replicas ``a`` and ``b`` hold different records."""
        if a == b:
            return None
        return self.pair_mismatch[(a, b) if a < b else (b, a)]

    def committed_mismatch(self, r: int) -> int | None:
        """First offset where replica ``r``'s log holds a record other than the first committed one."""
        return self.committed_mismatch_of[r]

    def find(self, name: str, detail: str) -> None:
        self.findings.setdefault(name, detail)

    # -- log changes --------------------------------------------------------------------

    def _appended(self, p: "Partition", e: Appended) -> None:
        rep = p.replicas[e.replica]
        base, end, log = e.base, e.end, rep.log
        rid = rep.id
        if base != e.previous_leo:
            self.find("OffsetMonotonicity", f"replica {rid} appended at offset {base} but its LEO was {e.previous_leo}")
        if end > log.end:
            # A reassignment deleted the copy later in the same step (a removing replica whose fetch
            # completed it): only what is left is judged; its Truncated effect follows.
            end = log.end
            if end <= base:
                return
        new = log[base:end]
        previous = log[base - 1][0] if base > 0 else None
        for o, (epoch, _value) in enumerate(new, start=base):
            if previous is not None and epoch < previous:
                self.find("EpochMonotonicity", f"replica {rid}: epoch {epoch} at offset {o} follows epoch {previous}")
                break
            previous = epoch
        pair_mismatch = self.pair_mismatch
        for other in p.replicas.values():
            if other is rep:
                continue
            oid = other.id
            key = (rid, oid) if rid < oid else (oid, rid)
            common_end = min(end, other.log.end)
            if common_end <= base:
                continue
            mm = pair_mismatch[key]
            theirs = other.log[base:common_end]
            if mm is None and new[:common_end - base] == theirs:
                continue  # the common case: the same records
            for o, mine, their in zip(range(base, common_end), new, theirs):
                if mm is None and mine != their:
                    mm = o
                if mm is not None and mine[0] == their[0]:
                    self.find(
                        "LogMatching",
                        f"replicas {rid} and {oid} both hold epoch {mine[0]} at offset {o} but differ at offset {mm}",
                    )
            pair_mismatch[key] = mm
        if self.committed_mismatch_of[rid] is None:
            committed = self.committed
            upto = min(end, committed.end)
            if upto > base:
                for o, mine, first in zip(range(base, upto), new, committed[base:upto]):
                    if mine != first:
                        self.committed_mismatch_of[rid] = o
                        break
        # A plain append can only invalidate cache entries that start at or above its base (an
        # entry assigned at election, ahead of the log); a cache change marks the whole cache.
        if rep.cache.latest_start() >= base or rid in self.unjudged_caches:
            dirty = self.dirty_caches
            dirty[rid] = min(dirty.get(rid, base), base)

    def _truncated(self, e: Truncated) -> None:
        for key, mm in self.pair_mismatch.items():
            if e.replica in key and mm is not None and mm >= e.to:
                self.pair_mismatch[key] = None
        cm = self.committed_mismatch_of[e.replica]
        if cm is not None and cm >= e.to:
            self.committed_mismatch_of[e.replica] = None

    # -- committed and acked ------------------------------------------------------------

    def _leader_hw(self, p: "Partition", e: LeaderHw) -> None:
        """A replica that presumes leadership has HW ``e.hw``: fold ``[0, hw)`` of its log into C.

        Observed when a replica becomes leader (its HW may be stale) and whenever a leader's HW
        rises.  Offsets below the replica's committed mismatch already agree with C.
        """
        rep = p.replicas[e.replica]
        covered = self.presumer_covered.get(rep.id)
        # A leader whose copy a reassignment deleted later in the same step (KRaft: the change that
        # removed it) no longer holds what it committed: only what is left is folded here; the new
        # leader's HW brings the rest (every ISR member holds the records below a leader's HW).
        hw = min(e.hw, rep.log.end)
        if covered is None:
            cm = self.committed_mismatch_of[rep.id]
            covered = min(len(self.committed), hw if cm is None else cm)
        if hw <= covered:
            self.presumer_covered[rep.id] = max(covered, 0)
            return
        committed, log = self.committed, rep.log
        first_new = len(committed)
        for o in range(covered, hw):
            record = log[o]
            if o < len(committed):
                if committed[o] != record and (o, record) not in self.committed_twice_set:
                    self.committed_twice_set.add((o, record))
                    self.committed_twice.append((o, record))
            else:
                committed.append(record)
        self.presumer_covered[rep.id] = hw
        if len(committed) > first_new:
            self._committed_extended(p, first_new)

    def _committed_extended(self, p: "Partition", first_new: int) -> None:
        committed = self.committed
        for rep in p.replicas.values():
            if self.committed_mismatch_of[rep.id] is not None:
                continue
            log = rep.log
            for o in range(first_new, min(len(committed), rep.leo)):
                if log[o] != committed[o]:
                    self.committed_mismatch_of[rep.id] = o
                    break

    def _acked(self, p: "Partition", e: Acked) -> None:
        min_isr = p.config.min_insync_replicas
        if len(e.isr) < min_isr:
            self.find("AckedImpliesMinIsr", f"offsets {e.first}..{e.last} acked with ISR {list(e.isr)} below min.insync.replicas {min_isr}")
        if e.short:
            self.find("AckedImpliesMinIsr", f"offset {e.last} acked while ISR members {list(e.short)} did not have it")
        for o, record, holders in zip(range(e.first, e.last + 1), e.records, e.holders):
            self.acked.setdefault((o, record), AckInfo(step=e.produce_step, holders=holders))

    def _power_loss(self, p: "Partition", e: PowerLoss) -> None:
        """Replica ``e.replica`` lost ``e.records`` in a power failure.

        The run stops being Faultless when a committed record it destroyed is held by no other
        live controller-ISR member, and either no replica holds it any more or this is at least
        the min.insync.replicas-th lossy unclean shutdown of committed data (KIP-966: up to
        min ISR - 1 of them lose nothing).  With min.insync.replicas 1 that is the first rule alone.
        """
        self.suspects.add(e.replica)
        destroyed = []
        for o, record in enumerate(e.records, start=e.first):
            info = self.acked.get((o, record))
            if info is not None and e.replica in info.holders:
                info.lost_by_power += 1
            if (o < len(self.committed) and self.committed[o] == record) or (o, record) in self.committed_twice_set:
                destroyed.append((o, record))
        if not destroyed:
            return
        self.lossy_shutdowns += 1
        if not self.faultless:
            return
        isr = p.controller.isr
        tolerated = self.lossy_shutdowns < p.config.min_insync_replicas
        for o, record in destroyed:
            holders = [q for q in p.replicas.values() if q.id != e.replica and q.leo > o and q.log[o] == record]
            if any(q.alive and q.id in isr for q in holders):
                continue
            if not holders or not tolerated:
                self.faultless = False
                return

    def compactable_offset(self, p: "Partition") -> int:
        """The end of the prefix no step can change any more.

        Below every replica's recovery point, HW, HW checkpoint and LEO (dead replicas
        included), below the first record of every parked acks=all produce, below the committed
        ledger's end, and identical on every replica and in the ledger: truncation (to a HW, to an
        epoch boundary, to a recovery point) never reaches below it, and no answer reads it.
        """
        k = min(len(self.committed), p.settled_offset())
        for r in p.replicas.values():
            cm = self.committed_mismatch_of[r.id]
            if cm is not None:
                k = min(k, cm)
        for mm in self.pair_mismatch.values():
            if mm is not None:
                k = min(k, mm)
        return max(k, p.compacted_offset)

    def compact(self, upto: int) -> None:
        """Forget the ghost state of offsets below ``upto`` (identical everywhere, never truncated)."""
        self.committed.compact(upto)
        self.committed_twice = [(o, r) for o, r in self.committed_twice if o >= upto]
        self.committed_twice_set = set(self.committed_twice)
        self.acked = {k: v for k, v in self.acked.items() if k[0] >= upto}
        self.reported_losses = {k for k in self.reported_losses if k[0] >= upto}

    # -- losses ---------------------------------------------------------------------------

    def scan_losses(self, p: "Partition", step: int) -> None:
        """Report committed records the controller's leader no longer holds (§C.1, C.1a, C.1b).

        Runs once the controller's leader is alive and has processed the current LeaderAndIsr.
        Each (offset, record) is reported the first time; a record that returns is not withdrawn.
        """
        c = p.controller
        if c.leader is None:
            return
        leader = p.replicas[c.leader]
        if not leader.alive or leader.role is not Role.LEADER or leader.leader_epoch != c.leader_epoch:
            return
        ls = leader.leadership
        assert ls is not None
        key = (leader.id, c.leader_epoch, ls.generation)
        if self.loss_cursor is None or self.loss_cursor[0] != key:
            cm = self.committed_mismatch_of[leader.id]
            start = leader.leo if cm is None else min(cm, leader.leo)
            main, alt = start, 0
        else:
            _, main, alt = self.loss_cursor
        log, leo, committed = leader.log, leader.leo, self.committed
        min_isr = p.config.min_insync_replicas
        for o in range(main, len(committed)):
            if o >= leo or log[o] != committed[o]:
                self._report_loss(p, o, committed[o], step, min_isr)
        for o, record in self.committed_twice[alt:]:
            if o >= leo or log[o] != record:
                self._report_loss(p, o, record, step, min_isr)
        self.loss_cursor = (key, max(main, len(committed)), len(self.committed_twice))

    def _report_loss(self, p: "Partition", offset: int, record: Record, step: int, min_isr: int) -> None:
        if (offset, record) in self.reported_losses:
            return
        self.reported_losses.add((offset, record))
        info = self.acked.get((offset, record))
        allowed = not self.faultless
        self.losses.append({"offset": offset, "value": record[1], "acked": info is not None, "allowed": allowed, "step": step})
        what = f"{'acked' if info else 'committed'} record {record[1]!r} (epoch {record[0]}) at offset {offset}"
        leader = p.controller.leader
        if not allowed:
            self.find("NoCommittedDataLoss", f"leader {leader} no longer holds {what}")
            if info is not None:
                self.find("NoAckedDataLoss", f"leader {leader} no longer holds {what}")
        if info is not None and not self.unclean_election and info.lost_by_power < min_isr:
            self.find(
                "MinIsrDurability",
                f"leader {leader} no longer holds {what}; only {info.lost_by_power} of its holders {sorted(info.holders)} lost it in a power failure",
            )
