"""Ghost ("oracle") state: what the checker knows and the replicas never read.

Auxiliary variables for verifying invariants, not part of the protocol (as in
Vanlightly/kafka-tlaplus):

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .log import Log

if TYPE_CHECKING:  # pragma: no cover
    from .partition import Partition, Replica

Record = tuple[int, str]  # (epoch, value)


@dataclass(slots=True)
class AckInfo:
    """One acknowledged record: where, when, and who held it."""

    step: int
    holders: frozenset[int]
    lost_by_power: int = 0


class Oracle:
    """The checker's ghost state for one partition (see the module docstring)."""

    def __init__(self, partition: "Partition") -> None:
        self.partition = partition
        self.committed = Log()
        self.committed_twice: list[tuple[int, Record]] = []
        self._committed_twice_set: set[tuple[int, Record]] = set()
        self.acked: dict[tuple[int, Record], AckInfo] = {}
        self.unclean_election = False
        self.faultless = True
        ids = sorted(partition.assignment)
        self._pair_mismatch: dict[tuple[int, int], int | None] = {
            (a, b): None for i, a in enumerate(ids) for b in ids[i + 1:]
        }
        self._committed_mismatch: dict[int, int | None] = {r: None for r in ids}
        # HW already folded into ``committed`` for a replica's current leadership.
        self._presumer_covered: dict[int, int] = {}
        self.losses: list[dict] = []
        self._reported_losses: set[tuple[int, Record]] = set()
        self._loss_cursor: tuple[tuple[int, int, int], int, int] | None = None
        # Per-step findings of the event-driven invariants: name -> first detail.
        self.findings: dict[str, str] = {}
        # Replicas whose epoch cache must be re-checked against their log, and from which
        # offset: 0 after a cache change, the append's base offset after a plain append.
        self.dirty_caches: dict[int, int] = {}

    # -- reading ------------------------------------------------------------------------

    def mismatch(self, a: int, b: int) -> int | None:
        """First offset below both LEOs where replicas ``a`` and ``b`` hold different records."""
        if a == b:
            return None
        return self._pair_mismatch[(a, b) if a < b else (b, a)]

    def committed_mismatch(self, r: int) -> int | None:
        """First offset where replica ``r``'s log holds a record other than the first committed one."""
        return self._committed_mismatch[r]

    def find(self, name: str, detail: str) -> None:
        self.findings.setdefault(name, detail)

    def begin_step(self) -> None:
        self.findings = {}
        self.dirty_caches = {}

    # -- log changes --------------------------------------------------------------------

    def on_append(self, rep: "Replica", base: int, previous_leo: int) -> None:
        """``rep`` appended records at ``[base, rep.leo)``; its LEO before was ``previous_leo``."""
        p = self.partition
        end = rep.leo
        log = rep.log
        if base != previous_leo:
            self.find("OffsetMonotonicity", f"replica {rep.id} appended at offset {base} but its LEO was {previous_leo}")
        for o in range(max(base, 1), end):
            if log[o][0] < log[o - 1][0]:
                self.find("EpochMonotonicity", f"replica {rep.id}: epoch {log[o][0]} at offset {o} follows epoch {log[o - 1][0]}")
                break
        for other in p.replicas.values():
            if other is rep:
                continue
            key = (rep.id, other.id) if rep.id < other.id else (other.id, rep.id)
            common_end = min(end, other.leo)
            olog = other.log
            mm = self._pair_mismatch[key]
            for o in range(base, common_end):
                if mm is None and log[o] != olog[o]:
                    mm = o
                if mm is not None and log[o][0] == olog[o][0]:
                    self.find(
                        "LogMatching",
                        f"replicas {rep.id} and {other.id} both hold epoch {log[o][0]} at offset {o} but differ at offset {mm}",
                    )
            self._pair_mismatch[key] = mm
        if self._committed_mismatch[rep.id] is None:
            committed = self.committed
            for o in range(base, min(end, len(committed))):
                if log[o] != committed[o]:
                    self._committed_mismatch[rep.id] = o
                    break
        self.dirty_caches[rep.id] = min(self.dirty_caches.get(rep.id, base), base)

    def on_truncate(self, rep: "Replica") -> None:
        """``rep``'s log was cut to ``rep.leo`` records."""
        new_leo = rep.leo
        for key, mm in self._pair_mismatch.items():
            if rep.id in key and mm is not None and mm >= new_leo:
                self._pair_mismatch[key] = None
        cm = self._committed_mismatch[rep.id]
        if cm is not None and cm >= new_leo:
            self._committed_mismatch[rep.id] = None

    def on_cache_changed(self, rep: "Replica") -> None:
        self.dirty_caches[rep.id] = 0

    # -- committed and acked ------------------------------------------------------------

    def on_presumer_hw(self, rep: "Replica") -> None:
        """A replica that presumes leadership has HW ``rep.hw``: fold ``[0, hw)`` of its log into C.

        Called when a replica becomes leader (its HW may be stale) and whenever a leader's HW
        rises.  Offsets below the replica's committed mismatch already agree with C.
        """
        covered = self._presumer_covered.get(rep.id)
        if covered is None:
            cm = self._committed_mismatch[rep.id]
            covered = min(len(self.committed), rep.hw if cm is None else cm)
        hw = rep.hw
        if hw <= covered:
            self._presumer_covered[rep.id] = max(covered, 0)
            return
        committed, log = self.committed, rep.log
        first_new = len(committed)
        for o in range(covered, hw):
            record = log[o]
            if o < len(committed):
                if committed[o] != record and (o, record) not in self._committed_twice_set:
                    self._committed_twice_set.add((o, record))
                    self.committed_twice.append((o, record))
            else:
                committed.append(record)
        self._presumer_covered[rep.id] = hw
        if len(committed) > first_new:
            self._on_committed_extended(first_new)

    def on_presumer_ended(self, rep: "Replica") -> None:
        self._presumer_covered.pop(rep.id, None)

    def _on_committed_extended(self, first_new: int) -> None:
        committed = self.committed
        for rep in self.partition.replicas.values():
            if self._committed_mismatch[rep.id] is not None:
                continue
            log = rep.log
            for o in range(first_new, min(len(committed), rep.leo)):
                if log[o] != committed[o]:
                    self._committed_mismatch[rep.id] = o
                    break

    def on_ack(self, leader: "Replica", first: int, last: int, step: int, local_isr: tuple[int, ...], min_isr: int) -> None:
        """Records ``[first, last]`` of ``leader`` were acknowledged to an acks=all producer."""
        p = self.partition
        if len(local_isr) < min_isr:
            self.find("AckedImpliesMinIsr", f"offsets {first}..{last} acked with ISR {list(local_isr)} below min.insync.replicas {min_isr}")
        short = [r for r in local_isr if p.replicas[r].leo <= last]
        if short:
            self.find("AckedImpliesMinIsr", f"offset {last} acked while ISR members {short} did not have it")
        for o in range(first, last + 1):
            record = leader.log[o]
            holders = frozenset(r.id for r in p.replicas.values() if r.leo > o and r.log[o] == record)
            self.acked.setdefault((o, record), AckInfo(step=step, holders=holders))

    def on_unclean_election(self) -> None:
        self.unclean_election = True
        self.faultless = False

    def on_power_loss(self, rep: "Replica", from_offset: int) -> None:
        """``rep`` is about to lose ``[from_offset, LEO)`` in a power failure."""
        p = self.partition
        isr = p.controller.isr
        for o in range(from_offset, rep.leo):
            record = rep.log[o]
            info = self.acked.get((o, record))
            if info is not None and rep.id in info.holders:
                info.lost_by_power += 1
            was_committed = (o < len(self.committed) and self.committed[o] == record) or (o, record) in self._committed_twice_set
            if was_committed and self.faultless:
                still_held = any(
                    q.alive and q.id in isr and q.id != rep.id and q.leo > o and q.log[o] == record
                    for q in p.replicas.values()
                )
                if not still_held:
                    self.faultless = False

    def compact(self, upto: int) -> None:
        """Forget the ghost state of offsets below ``upto`` (identical everywhere, never truncated)."""
        self.committed.compact(upto)
        self.committed_twice = [(o, r) for o, r in self.committed_twice if o >= upto]
        self._committed_twice_set = set(self.committed_twice)
        self.acked = {k: v for k, v in self.acked.items() if k[0] >= upto}
        self._reported_losses = {k for k in self._reported_losses if k[0] >= upto}

    # -- losses ---------------------------------------------------------------------------

    def scan_losses(self, step: int, min_isr: int) -> None:
        """Report committed records the controller's leader no longer holds (§C.1, C.1a, C.1b).

        Runs once the controller's leader is alive and has processed the current LeaderAndIsr.
        Each (offset, record) is reported the first time; a record that returns is not withdrawn.
        """
        p = self.partition
        c = p.controller
        if c.leader is None:
            return
        leader = p.replicas[c.leader]
        if not leader.alive or leader.role != "leader" or leader.leader_epoch != c.leader_epoch:
            return
        key = (leader.id, c.leader_epoch, leader.leadership.generation)
        if self._loss_cursor is None or self._loss_cursor[0] != key:
            cm = self._committed_mismatch[leader.id]
            start = leader.leo if cm is None else min(cm, leader.leo)
            main, alt = start, 0
        else:
            _, main, alt = self._loss_cursor
        log, leo, committed = leader.log, leader.leo, self.committed
        for o in range(main, len(committed)):
            if o >= leo or log[o] != committed[o]:
                self._report_loss(o, committed[o], step, min_isr)
        for o, record in self.committed_twice[alt:]:
            if o >= leo or log[o] != record:
                self._report_loss(o, record, step, min_isr)
        self._loss_cursor = (key, max(main, len(committed)), len(self.committed_twice))

    def _report_loss(self, offset: int, record: Record, step: int, min_isr: int) -> None:
        if (offset, record) in self._reported_losses:
            return
        self._reported_losses.add((offset, record))
        info = self.acked.get((offset, record))
        allowed = not self.faultless
        self.losses.append({"offset": offset, "value": record[1], "acked": info is not None, "allowed": allowed, "step": step})
        what = f"{'acked' if info else 'committed'} record {record[1]!r} (epoch {record[0]}) at offset {offset}"
        leader = self.partition.controller.leader
        if not allowed:
            self.find("NoCommittedDataLoss", f"leader {leader} no longer holds {what}")
            if info is not None:
                self.find("NoAckedDataLoss", f"leader {leader} no longer holds {what}")
        if info is not None and not self.unclean_election and info.lost_by_power < min_isr:
            self.find(
                "MinIsrDurability",
                f"leader {leader} no longer holds {what}; only {info.lost_by_power} of its holders {sorted(info.holders)} lost it in a power failure",
            )
