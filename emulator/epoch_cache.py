"""The leader-epoch cache (Kafka's ``LeaderEpochFileCache``, file ``leader-epoch-checkpoint``).

Represents a cache of (LeaderEpoch => Offset) mappings for one replica.

    Leader Epoch = epoch assigned to each leader by the controller.
    Offset       = offset of the first message in each epoch, in *this replica's* log.

Entries are kept strictly increasing in both fields.  Two generations of semantics exist
(protocol.md §A.7, §A.9):

* ``v0`` (0.11 – 2.0): ``assign`` appends only an epoch larger than the latest one at an
  offset not below the latest start; anything else is ignored (Kafka logged a warning).
* ``v2`` (2.1+): ``assign`` enforces monotonicity by removing every entry that conflicts
  with the new one, so the newest assignment always wins.

``end_offset_for`` answers OffsetsForLeaderEpoch in three versions: ``v0`` returns only an end
offset, ``v1`` (KIP-279, 2.0) adds the largest epoch <= the requested one, ``v2`` (2.1+)
answers a request below the first cached epoch with ``(requested, first start)``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable, Sequence

from ._build import mypyc_attr

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

CACHE_SEMANTICS = ("v0", "v2")


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """The first offset ``start_offset`` of leader epoch ``epoch`` in one replica's log."""

    epoch: int
    start_offset: int


def _epoch(entry: "EpochEntry") -> int:
    return entry.epoch


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class LeaderEpochCache:
    """A replica's list of ``EpochEntry``, strictly increasing in epoch and start offset."""

    __slots__ = ("semantics", "_entries", "_ordered")

    def __init__(self, semantics: str, entries: Iterable[Sequence[int]] = ()) -> None:
        if semantics not in CACHE_SEMANTICS:
            raise ValueError(f"unknown epoch-cache semantics {semantics!r}")
        self.semantics = semantics
        self._entries: list[EpochEntry] = [EpochEntry(e, s) for e, s in entries]
        # Every write keeps epochs strictly increasing and starts non-decreasing (v0 may append
        # a new epoch at the latest start); a cache built that way answers from its end and by
        # bisection, in time independent of its length. One read from a file that is not ordered
        # is served by full scans, exactly as written.
        self._ordered = all(a.epoch < b.epoch and a.start_offset <= b.start_offset
                            for a, b in zip(self._entries, self._entries[1:]))

    def copy(self) -> "LeaderEpochCache":
        """An independent copy (entries are immutable, shared)."""
        new = LeaderEpochCache.__new__(LeaderEpochCache)
        new.semantics, new._entries, new._ordered = self.semantics, list(self._entries), self._ordered
        return new

    # -- reading ------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    def as_tuple(self) -> tuple[tuple[int, int], ...]:
        """``((epoch, start_offset), ...)``."""
        return tuple([(e.epoch, e.start_offset) for e in self._entries])

    def as_pairs(self) -> list[list[int]]:
        """The contract's JSON form: ``[[epoch, start_offset], ...]``."""
        return [[e.epoch, e.start_offset] for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def changed_from(self, index: int) -> int:
        """For ``CacheChanged``, when the entries before ``index`` are as they were before a
        write (an ordered cache's writes pop a suffix and append): the start offset of entry
        ``index`` (past the last entry when there is none); 0 for an unordered cache, whose
        writes may remove any entry."""
        if not self._ordered:
            return 0
        return self._entries[index].start_offset if index < len(self._entries) else self.latest_start() + 1

    def latest_start(self) -> int:
        """The last entry's start offset, or -1 when the cache is empty."""
        return self._entries[-1].start_offset if self._entries else -1

    def latest_epoch(self) -> int:
        """The last entry's epoch, or ``UNDEFINED_EPOCH`` (-1) when the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    # -- the single write path ----------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if the cache changed.

        v0: appended only if ``epoch`` is above the latest epoch and ``start_offset`` is not
        below the latest start (out-of-order epochs are ignored, as 0.11 – 2.0 did).
        v2: a no-op when the latest entry already has ``epoch`` at or below ``start_offset``
        (an epoch's start is never moved forward); otherwise every entry with an epoch
        ``>= epoch`` or a start ``>= start_offset`` is removed before appending, so
        ``assign(2, 6); assign(3, 5)`` leaves ``[(3, 5)]``.
        """
        latest = self._entries[-1] if self._entries else None
        if self.semantics == "v0":
            if latest is None or (epoch > latest.epoch and start_offset >= latest.start_offset):
                self._entries.append(EpochEntry(epoch, start_offset))
                return True
            return False
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        if self._ordered:  # the entries kept are a prefix
            entries = self._entries
            while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
                entries.pop()
        else:
            self._entries = [
                e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
            ]
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every entry whose start is ``>= end_offset`` (Kafka's ``clearAndFlushLatest``).

        Exclusive of ``end_offset``: ``[(2,6),(3,8),(4,11)]`` truncated from the end at 8 keeps
        ``[(2,6)]``; at 9 it keeps ``[(2,6),(3,8)]``.  Returns True if anything was dropped.
        """
        if self._ordered:  # the entries kept are a prefix
            entries, before = self._entries, len(self._entries)
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            return len(entries) != before
        kept = [e for e in self._entries if e.start_offset < end_offset]
        changed = len(kept) != len(self._entries)
        self._entries = kept
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries below a new log start offset (Kafka's ``clearAndFlushEarliest``).

        The epoch in force at ``start_offset`` is kept, re-based to ``start_offset``: this method
        retains an entry at ``start_offset``, so ``[(2,6),(3,8),(4,11)]`` truncated from the start
        at 8 keeps ``[(3,8),(4,11)]`` and at 9 gives ``[(3,9),(4,11)]``.
        """
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return False
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset)] + kept
        return True

    def drop_cold_entries(self, upto: int, lowest_future_epoch: int) -> list[tuple[int, int]]:
        """Drop the oldest entries no future lookup or assignment can touch; returns them.

        Entry ``i`` goes when the next entry starts below ``upto - 1`` (so ``i`` does not cover
        the last stable record) and the next entry's epoch is below ``lowest_future_epoch`` (so
        ``i`` is not the largest epoch below any epoch still written or asked about).  Every
        answer of ``end_offset_for`` for an epoch >= ``lowest_future_epoch`` and every later
        ``assign`` / ``truncate_from_end`` at offsets >= ``upto`` is then what it was; the dropped
        entries never change again.
        """
        k = 0
        while (k + 1 < len(self._entries) and self._entries[k + 1].start_offset <= upto - 1
               and self._entries[k + 1].epoch < lowest_future_epoch):
            k += 1
        dropped, self._entries = self._entries[:k], self._entries[k:]
        return [(e.epoch, e.start_offset) for e in dropped]

    # -- OffsetsForLeaderEpoch ----------------------------------------------------------

    def end_offset_for(self, requested_epoch: int, log_end_offset: int, version: str) -> tuple[int, int]:
        """Answer OffsetsForLeaderEpoch(``requested_epoch``) as ``(epoch, end_offset)``.

        The epoch returned is the largest epoch ``<=`` the requested one; the end offset is the
        start offset of the first epoch larger than the requested one, or ``log_end_offset`` if
        the latest epoch was requested.  ``v0`` has no epoch in its response: its answer is
        returned as ``(UNDEFINED_EPOCH, end_offset)``.
        """
        if version == "v0":
            return UNDEFINED_EPOCH, self._end_offset_v0(requested_epoch, log_end_offset)
        if version == "v1":
            return self._end_offset_v1(requested_epoch, log_end_offset)
        if version == "v2":
            return self._end_offset_v2(requested_epoch, log_end_offset)
        raise ValueError(f"unknown OffsetsForLeaderEpoch version {version!r}")

    def _end_offset_v0(self, requested: int, log_end_offset: int) -> int:
        # 0.11 LeaderEpochFileCache.endOffsetFor.  With an empty cache and requested == -1
        # this answers the LEO: the hole KIP-279 closed.
        if requested == self.latest_epoch():
            return log_end_offset
        _, higher = self._around(requested)
        if higher is None or requested < self._entries[0].epoch:
            return UNDEFINED_EPOCH_OFFSET
        return higher.start_offset

    def _end_offset_v1(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        # KIP-279 (commit 9679c44): the follower iterates on the epoch it is given back.
        if requested == UNDEFINED_EPOCH:
            # A bootstrapping follower with an empty cache asks for the undefined epoch.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self.latest_epoch():
            return requested, log_end_offset
        floor, higher = self._around(requested)
        if higher is None or floor is None or requested < self._entries[0].epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return floor.epoch, higher.start_offset

    def _end_offset_v2(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        # 2.1+ / HEAD LeaderEpochFileCache.endOffsetFor.
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and requested == self._entries[-1].epoch:
            return requested, log_end_offset
        floor, higher = self._around(requested)
        if higher is None:
            # The requested epoch is above every epoch this replica knows.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if floor is None:
            # The requested epoch is older than anything cached (e.g. after log-start truncation).
            return requested, higher.start_offset
        return floor.epoch, higher.start_offset

    def _around(self, requested: int) -> tuple[EpochEntry | None, EpochEntry | None]:
        """The last entry with epoch ``<= requested`` and the first with epoch ``> requested``."""
        if self._ordered:
            i = bisect_right(self._entries, requested, key=_epoch)
            return (self._entries[i - 1] if i else None), (self._entries[i] if i < len(self._entries) else None)
        floor = [e for e in self._entries if e.epoch <= requested]
        higher = next((e for e in self._entries if e.epoch > requested), None)
        return (floor[-1] if floor else None), higher
